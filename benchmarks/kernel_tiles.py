"""Tile search for the generated attention kernel, on the GPU machine (Triton JIT there).

    python3 benchmarks/kernel_tiles.py OUT.md

For each shape, times every (block_m, block_n, warps, stages) of a small space with the
same kernel source fusion-kernel-attention compiles ahead of time, next to torch SDPA
flash and cuDNN in the same process (CUDA events, median of 20 after warm-up), and
writes a Markdown table; the best row per head dim goes into SCHEDULES in
passes/kernel_attention.py.
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
import statistics
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fusion_compiler.kernels.attention import Spec, _pow2, source_of  # noqa: E402

SHAPES = [  # (B, H, N, D, causal)
    (1, 16, 4096, 128, False),
    (1, 16, 4096, 128, True),
    (1, 16, 16384, 128, False),
    (1, 32, 4096, 64, False),
    (1, 32, 4096, 64, True),
]
SPACE = list(itertools.product((64, 128), (64, 128), (4, 8), (2, 3)))
REPEATS = 20


def _ms(fn) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _kernel(spec: Spec):
    path = Path(tempfile.mkdtemp()) / "kernel.py"
    path.write_text(source_of(spec))
    module_spec = importlib.util.spec_from_file_location("tile_kernel", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.attention


def _peer(backend, q, k, v, causal):
    from torch.nn.attention import sdpa_kernel

    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=causal)


def _ours(spec: Spec, q, k, v, out, causal: bool):
    """A call of the kernel ``spec`` describes, with every constexpr it was built with."""
    kernel = _kernel(spec)
    d = spec.d

    def call():
        kernel[spec.grid](
            q,
            k,
            v,
            q,
            out,
            QK_SCALE=spec.qk_scale,
            N_Q=spec.n_q,
            N_K=spec.n_k,
            D=d,
            D_PAD=_pow2(d),
            DV=d,
            DV_PAD=_pow2(d),
            K_TRANSPOSED=False,
            CAUSAL=causal,
            CAUSAL_OFFSET=0,
            HAS_MASK=False,
            KV_GROUP=1,
            BLOCK_M=spec.block_m,
            BLOCK_N=spec.block_n,
            num_warps=spec.num_warps,
            num_stages=spec.num_stages,
        )

    return call


def main(out: Path) -> None:
    from torch.nn.attention import SDPBackend

    lines = ["| shape | system | tiles (m, n, warps, stages) | ms | TFLOP/s | rel. error |"]
    lines.append("|---|---|---|---|---|---|")
    for b, h, n, d, causal in SHAPES:
        shape = f"B{b} H{h} N{n} D{d} {'causal' if causal else 'full'} fp16"
        q, k, v = (torch.randn(b * h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
        flops = 4 * b * h * n * n * d / (2 if causal else 1)
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        for name, backend in (
            ("sdpa_flash", SDPBackend.FLASH_ATTENTION),
            ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION),
        ):
            try:
                ms = _ms(functools.partial(_peer, backend, q, k, v, causal))
                lines.append(f"| {shape} | {name} | | {ms:.3f} | {flops / ms / 1e9:.0f} | |")
            except Exception as exc:
                lines.append(f"| {shape} | {name} | | failed: {str(exc)[:60]} | | |")
        best = None
        for bm, bn, warps, stages in SPACE:
            spec = Spec(
                "f16",
                None,
                b * h,
                n,
                n,
                d,
                d,
                False,
                0 if causal else None,
                d**-0.5 * 1.4426950408889634,
                "x",
                bm,
                bn,
                warps,
                stages,
            )
            result = torch.empty_like(q)
            tiles = f"{bm}, {bn}, {warps}, {stages}"
            try:
                call = _ours(spec, q, k, v, result, causal)
                call()
                error = ((result.float() - ref).norm() / ref.norm()).item()
                ms = _ms(call)
            except Exception as exc:
                why = str(exc).splitlines()[0][:60] if str(exc) else type(exc).__name__
                lines.append(f"| {shape} | ours | {tiles} | failed: {why} | | |")
                continue
            tf = flops / ms / 1e9
            lines.append(f"| {shape} | ours | {tiles} | {ms:.3f} | {tf:.0f} | {error:.1e} |")
            if best is None or tf > best[0]:
                best = (tf, tiles)
        print(shape, "best", best, flush=True)
        if best:
            lines.append(f"| {shape} | **ours best** | {best[1]} | | {best[0]:.0f} | |")
        out.write_text("\n".join(lines) + "\n")
    print("\n".join(line for line in lines if "best" in line or "sdpa" in line))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
