"""Causal attention's program schedules, timed side by side on the GPU (Triton JIT).

    python3 benchmarks/causal_schedules.py [OUT.md]        # on the GPU machine

For the grid's causal D128 fp16 cases where causal falls furthest behind full attention
(B4 H16 N1024, B1 H16 N4096), times the generated kernel with one program per row block
(longest first per head, as fusion-schedule chose before) and with persistent programs
that take the (row block, head) tiles of all heads longest first in snake order, at
several tile sizes and program counts, next to full attention with its tuned tiles. CUDA
events around 10 back-to-back launches, three input sets rotated, median of 20; every
output checked against PyTorch. Prints (and writes) a Markdown table.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fusion_compiler.kernels.attention import Spec, contiguous, load_source  # noqa: E402

_LOG2E = 1.4426950408889634
CASES = [(64, 1024, 128), (16, 4096, 128)]  # (B·H, N, D)
# (label, causal, (block_m, block_n, warps, stages), persistent programs)
SCHEDULES = [
    ("full, tuned tiles", False, (128, 64, 4, 2), 0),
    ("causal, a program per row block", True, (64, 64, 4, 3), 0),
    ("causal, persistent x132", True, (64, 64, 4, 3), 132),
    ("causal, persistent x264", True, (64, 64, 4, 3), 264),
    ("causal 128x64, a program per row block", True, (128, 64, 4, 2), 0),
    ("causal 128x64, persistent x264", True, (128, 64, 4, 2), 264),
    ("causal 128x64 8 warps, persistent x132", True, (128, 64, 8, 2), 132),
    ("causal 128x128 8 warps, persistent x132", True, (128, 128, 8, 2), 132),
]
_LAUNCHES = 10
_SETS = 3


def _spec(batch: int, n: int, d: int, causal: bool, tiles, persistent: int) -> Spec:
    block_m, block_n, warps, stages = tiles
    return Spec(
        dtype="f16",
        mask_dtype=None,
        batch=batch,
        n_q=n,
        n_k=n,
        d=d,
        dv=d,
        views=(contiguous(n, d),) * 5,
        causal_offset=0 if causal else None,
        qk_scale=d**-0.5 * _LOG2E,
        score="x",
        block_m=block_m,
        block_n=block_n,
        num_warps=warps,
        num_stages=stages,
        persistent=persistent,
    )


def _time(kernel, spec: Spec, sets, out) -> float:
    import torch

    def call(q, k, v) -> None:
        kernel[spec.grid](
            q, k, v, q, q, out, num_warps=spec.num_warps, num_stages=spec.num_stages,
            **spec.constants(),
        )  # fmt: skip

    for q, k, v in sets:
        call(q, k, v)
    torch.cuda.synchronize()
    times = []
    for i in range(20):
        q, k, v = sets[i % len(sets)]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(_LAUNCHES):
            call(q, k, v)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / _LAUNCHES)
    return statistics.median(times)


def main(out_path: Path | None) -> None:
    import torch
    import torch.nn.functional as F

    lines = [
        "| case | schedule | ms | TFLOP/s | causal / full | rel. err |",
        "|---|---|---|---|---|---|",
    ]
    for batch, n, d in CASES:
        sets = [
            [torch.randn(batch, n, d, device="cuda", dtype=torch.float16) for _ in range(3)]
            for _ in range(_SETS)
        ]
        full_tflops = None
        for label, causal, tiles, persistent in SCHEDULES:
            spec = _spec(batch, n, d, causal, tiles, persistent)
            q, k, v = sets[0]
            want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
            out = torch.empty_like(q)
            with tempfile.TemporaryDirectory() as directory:
                kernel = load_source(spec, Path(directory))
                try:
                    ms = _time(kernel, spec, sets, out)
                except Exception as exc:  # out of resources: a result
                    lines.append(f"| B·H {batch} N{n} D{d} | {label} | failed: {str(exc)[:60]} |")
                    continue
            kernel[spec.grid](q, k, v, q, q, out, num_warps=spec.num_warps,
                              num_stages=spec.num_stages, **spec.constants())  # fmt: skip
            error = ((out.float() - want).norm() / want.norm()).item()
            tflops = 4 * batch * n * n * d / (2 if causal else 1) / ms / 1e9
            if not causal:
                full_tflops = tflops
            ratio = f"{tflops / full_tflops:.2f}" if causal and full_tflops else ""
            lines.append(
                f"| B·H {batch} N{n} D{d} | {label} | {ms:.3f} | {tflops:.0f} | {ratio} "
                f"| {error:.1e} |"
            )
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if out_path:
        out_path.write_text(text)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else None)
