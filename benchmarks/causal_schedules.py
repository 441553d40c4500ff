"""Causal attention's program schedules, timed side by side on the GPU (Triton JIT).

    python3 benchmarks/causal_schedules.py [OUT.md [N1024 D128]]   # on the GPU machine

For each causal case of the CUDA grid (fp16), times the generated kernel with one
program per row block (longest first per head) and with persistent programs (as many
as the GPU holds at once) that take the (row block, head) tiles of all heads longest
first in snake order, next to full attention with its tuned tiles, and next to full
attention over N/2 keys: the work of causal attention spread evenly over the row
blocks, a reference for what a causal schedule of these tiles can reach (causal
attention also computes the masked half of each diagonal block). At N <= 4096
also with other pipeline depths. Kernel time as CUPTI records it (torch's profiler,
as attention_peers.py times IREE's modules): 100 launches back to back, three input
sets rotated, median of 5; every output checked against PyTorch. Prints (and writes) a
Markdown table.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fusion_compiler.kernels import schedules  # noqa: E402
from fusion_compiler.kernels.attention import load_source  # noqa: E402
from fusion_compiler.tools.autotune import kernel_ms, use_torch_scratch  # noqa: E402

# (B·H, K/V heads per query head group, N, D): the grid's causal cases
CASES = [
    (64, 1, 1024, 128),
    (16, 1, 4096, 128),
    (16, 1, 16384, 128),
    (32, 1, 4096, 64),
    (8, 1, 65536, 128),
    (32, 4, 8192, 128),
]
_SETS = 3
_LAUNCHES = 100


def _persistent(tiles: schedules.Tiles, d: int) -> schedules.Tiles:
    """``tiles`` run by as many persistent programs as the GPU holds at once."""
    return dataclasses.replace(tiles, persistent=schedules.resident_programs(tiles, d, "sm_90"))


def _schedules(n: int, d: int) -> list[tuple[str, bool, schedules.Tiles]]:
    """(label, causal, tiles) to time for one case; "full" with "N/2 keys" in its label
    attends to the first half of the keys."""
    full, _ = schedules.choose(schedules.ShapeClass.of("sm_90", "f16", d, False, n))
    causal, _ = schedules.choose(schedules.ShapeClass.of("sm_90", "f16", d, True, n))
    # (label, tiles, also with a program per row block)
    variants = [("tuned tiles", causal, True)]
    if n <= 1024:  # the shortest tiles: taller or narrower ones too
        for tiles in (schedules.Tiles(128, 64, 8, 2), schedules.Tiles(64, 32, 4, 4)):
            label = f"{tiles.block_m}x{tiles.block_n}, {tiles.num_warps} warps, "
            variants.append((label + f"{tiles.num_stages} stages", tiles, False))
    if n <= 4096:
        for stages in (2, 4):
            tiles = dataclasses.replace(causal, num_stages=stages)
            variants.append((f"{stages} stages", tiles, True))
    found = [("full, tuned tiles", False, full), ("full over N/2 keys, tuned tiles", False, full)]
    for label, tiles, per_row_block in variants:
        if per_row_block:
            found.append((f"causal, {label}, a program per row block", True, tiles))
        persistent = _persistent(tiles, d)
        found.append((f"causal, {label}, persistent x{persistent.persistent}", True, persistent))
    return found


def _launch_next(launch, sets, out) -> None:
    """One launch on the next input set (no mask; sizes static: Q is bound for both)."""
    q, k, v = next(sets)
    launch(q, k, v, q, q, out)


def _kernel_ms(call) -> float:
    """Median over 5 rounds of the mean kernel time of ``_LAUNCHES`` calls."""
    import statistics

    import torch

    def back_to_back() -> None:
        for _ in range(_LAUNCHES):
            call()
        torch.cuda.synchronize()

    for _ in range(5):
        call()
    torch.cuda.synchronize()
    return statistics.median(kernel_ms(back_to_back, _LAUNCHES) for _ in range(5))


def main(out_path: Path | None, only: str = "") -> None:
    import torch
    import torch.nn.functional as F

    use_torch_scratch()
    lines = [
        "| case | schedule | ms | TFLOP/s | / full | rel. err |",
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
        for label, causal, tiles in _schedules(n, d):
            n_k = n // 2 if "N/2 keys" in label else n
            spec = schedules.plain_spec(tiles, batch, n, d, causal, kv_group=group, n_k=n_k)
            case_sets = [[q, k[:, :n_k].contiguous(), v[:, :n_k].contiguous()] for q, k, v in sets]
            q, k, v = case_sets[0]
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
                launch = functools.partial(
                    kernel[spec.grid],
                    num_warps=spec.num_warps,
                    num_stages=spec.num_stages,
                    **spec.constants(),
                )
                rotation = functools.partial(_launch_next, launch, itertools.cycle(case_sets), out)
                try:
                    ms = _kernel_ms(rotation)
                except Exception as exc:  # out of resources: a result
                    lines.append(f"| {name} | {label} | failed: {str(exc)[:60]} |")
                    continue
                launch(q, k, v, q, q, out)  # the first set, checked
            error = ((out.float() - want).norm() / want.norm()).item()
            # causal attention's FLOPs, as full attention over half the keys
            tflops = 4 * batch * n * n_k * d / (2 if causal else 1) / ms / 1e9
            if not causal and n_k == n:
                full_tflops, ratio = tflops, ""
            else:
                ratio = f"{tflops / full_tflops:.2f}"
            lines.append(f"| {name} | {label} | {ms:.3f} | {tflops:.0f} | {ratio} | {error:.1e} |")
            print(lines[-1], flush=True)
            if out_path:
                out_path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else None, *sys.argv[2:3])
