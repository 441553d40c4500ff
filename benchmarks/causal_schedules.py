"""Causal attention's program schedules, timed side by side on the GPU (Triton JIT).

    python3 benchmarks/causal_schedules.py [OUT.md [N1024 D128]]   # on the GPU machine

For each causal case of the CUDA grid (fp16), times the generated kernel with one
program per row block (longest first per head) and with persistent programs (as many
as the GPU holds at once) that take the (row block, head) tiles of all heads longest
first in snake order, next to full attention with its tuned tiles; at N <= 4096 also
with other pipeline depths. CUDA
events around 10 back-to-back launches, three input sets rotated, median of 20; every
output checked against PyTorch. Prints (and writes) a Markdown table.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fusion_compiler.kernels import schedules  # noqa: E402
from fusion_compiler.kernels.attention import Spec, contiguous, load_source  # noqa: E402

_LOG2E = 1.4426950408889634
# (B·H, K/V heads per query head group, N, D): the grid's causal cases
CASES = [
    (64, 1, 1024, 128),
    (16, 1, 4096, 128),
    (16, 1, 16384, 128),
    (32, 1, 4096, 64),
    (8, 1, 65536, 128),
    (32, 4, 8192, 128),
]
_LAUNCHES = 10
_SETS = 3


def _schedules(n: int, d: int) -> list[tuple[str, bool, schedules.Tiles, int]]:
    """(label, causal, tiles, persistent programs) to time for one case."""
    full, _ = schedules.choose(schedules.ShapeClass.of("sm_90", "f16", d, False, n))
    causal, _ = schedules.choose(schedules.ShapeClass.of("sm_90", "f16", d, True, n))
    resident = schedules.resident_programs(causal, d, "sm_90")
    found = [
        ("full, tuned tiles", False, full, 0),
        ("causal, tuned tiles, a program per row block", True, causal, 0),
        (f"causal, tuned tiles, persistent x{resident}", True, causal, resident),
    ]
    if n <= 1024:  # the shortest tiles: taller or narrower ones too
        for tiles in (schedules.Tiles(128, 64, 8, 2), schedules.Tiles(64, 32, 4, 4)):
            programs = schedules.resident_programs(tiles, d, "sm_90")
            label = f"causal {tiles.block_m}x{tiles.block_n}, {tiles.num_warps} warps, "
            label += f"{tiles.num_stages} stages, persistent x{programs}"
            found.append((label, True, tiles, programs))
    if n <= 4096:
        for stages in (2, 4):
            tiles = dataclasses.replace(causal, num_stages=stages)
            programs = schedules.resident_programs(tiles, d, "sm_90")
            found.append((f"causal, {stages} stages, a program per row block", True, tiles, 0))
            label = f"causal, {stages} stages, persistent x{programs}"
            found.append((label, True, tiles, programs))
    return found


def _spec(batch: int, group: int, n: int, d: int, causal: bool, tiles, persistent: int) -> Spec:
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
        block_m=tiles.block_m,
        block_n=tiles.block_n,
        num_warps=tiles.num_warps,
        num_stages=tiles.num_stages,
        kv_group=group,
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


def main(out_path: Path | None, only: str = "") -> None:
    import torch
    import torch.nn.functional as F

    lines = [
        "| case | schedule | ms | TFLOP/s | causal / full | rel. err |",
        "|---|---|---|---|---|---|",
    ]
    for batch, group, n, d in CASES:
        if only and f"N{n} D{d}" != only:
            continue
        shapes = [(batch, n, d), (batch // group, n, d), (batch // group, n, d)]
        sets = [
            [torch.randn(s, device="cuda", dtype=torch.float16) for s in shapes]
            for _ in range(_SETS)
        ]
        name = f"B·H {batch}" + (f" (K/V {batch // group})" if group > 1 else "") + f" N{n} D{d}"
        full_tflops = None
        for label, causal, tiles, persistent in _schedules(n, d):
            spec = _spec(batch, group, n, d, causal, tiles, persistent)
            q, k, v = sets[0]
            # the reference in float32, or above 16384 keys (where its N x N scores would
            # not fit) torch's fp16 flash attention
            exact = n <= 16384
            kk, vv = (x.repeat_interleave(group, 0) for x in (k, v))
            qq, kk, vv = (x.float() if exact else x[None] for x in (q, kk, vv))
            want = F.scaled_dot_product_attention(qq, kk, vv, is_causal=causal).float()
            want = want.reshape(q.shape)
            out = torch.empty_like(q)
            with tempfile.TemporaryDirectory() as directory:
                kernel = load_source(spec, Path(directory))
                try:
                    ms = _time(kernel, spec, sets, out)
                except Exception as exc:  # out of resources: a result
                    lines.append(f"| {name} | {label} | failed: {str(exc)[:60]} |")
                    continue
            kernel[spec.grid](q, k, v, q, q, out, num_warps=spec.num_warps,
                              num_stages=spec.num_stages, **spec.constants())  # fmt: skip
            error = ((out.float() - want).norm() / want.norm()).item()
            tflops = 4 * batch * n * n * d / (2 if causal else 1) / ms / 1e9
            if not causal:
                full_tflops = tflops
            ratio = f"{tflops / full_tflops:.2f}" if causal and full_tflops else ""
            lines.append(f"| {name} | {label} | {ms:.3f} | {tflops:.0f} | {ratio} | {error:.1e} |")
            print(lines[-1], flush=True)
            if out_path:
                out_path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else None, *sys.argv[2:3])
