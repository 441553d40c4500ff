"""The two-consumer attention kernel (``kernels/two_consumers.py``) against the compiler's
producer-warp kernel (``warp_specialized.py``, launched with the constants the compiler
gives it) and torch SDPA with cuDNN, fp16 D128, full and causal, every system timed by
``harness.measure`` in one run. Kernel-level: Gluon JIT on the GPU machine, no IREE.

On the GPU machine:  python3 benchmarks/two_consumers_gpu.py OUT [VARIANT ...]
(a variant: bn64s3, bn128s2, bn128s2pp, bn128s3n128, bn128s2n128ps: key block, stages,
``n128`` the score product's wgmma N (64 by default), ``pp`` ping-pong, ``ps`` P through
shared memory)
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import harness
import torch
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.kernels import two_consumers  # noqa: E402
from fusion_compiler.backends.triton import warp_specialized  # noqa: E402

LOG2E = 1.4426950408889634
# (B, H, N, causal)
CASES = [(4, 16, 2048, False), (1, 16, 8192, False), (1, 16, 16384, True)]


def _sdpa(backend, heads: int, causal: bool):
    """SDPA on the (B·H, N, D) operands viewed as (B, H, N, D): its fused kernels take 4-d."""

    def call(q, k, v):
        q, k, v = (x.unflatten(0, (-1, heads)) for x in (q, k, v))
        with sdpa_kernel([backend]):
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return out.flatten(0, 1)

    return call


def _producer_warp(batch: int, n: int, d: int, causal: bool, programs: int):
    """warp_specialized.attention as the compiler launches it: 64x64 tiles, 3 stages."""
    tiles = batch * n // 64

    def call(q, k, v):
        out = torch.empty_like(q)
        grid = (min(tiles, programs),)
        warp_specialized.attention[grid](
            q, k, v, None, None, None, None, None, None, None, out,
            QK_SCALE=LOG2E / math.sqrt(d), N=n, D=d, BATCH=batch, KV_GROUP=1, BLOCK=64,
            STAGES=3, TILES=tiles, CAUSAL=causal, WINDOW=False, WINDOW_START=0,
            DESYNC=causal and n <= 2048, BLOCK_MAP=False, HAS_MASK=0, MAP_GROUP=1,
            MAP_ROWS=False, KEY_BLOCKS=0, num_warps=4, maxnreg=120,
        )  # fmt: skip
        return out

    return call


def _two_consumers(batch: int, n: int, d: int, causal: bool, variant: str, programs: int):
    """``variant``: bn{key block}s{stages}[n{score wgmma N}][pp: ping-pong][ps: P in smem]."""
    parts = re.fullmatch(r"bn(\d+)s(\d)(?:n(\d+))?(pp)?(ps)?", variant)
    if parts is None:
        raise SystemExit(f"variant {variant!r}: bn<keys>s<stages>[n<score N>][pp][ps]")
    block_n, stages, score_n = int(parts[1]), int(parts[2]), int(parts[3] or 64)
    tiles = batch * n // 128

    def call(q, k, v):
        out = torch.empty_like(q)
        two_consumers.attention2[(min(tiles, programs),)](
            q, k, v, out, QK_SCALE=LOG2E / math.sqrt(d), N=n, D=d, BATCH=batch, KV_GROUP=1,
            BLOCK_M=64, BLOCK_N=block_n, STAGES=stages, TILES=tiles, CAUSAL=causal,
            DESYNC=causal and n <= 2048, PINGPONG=bool(parts[4]), CONSUMER_REGS=240,
            SCORE_N=score_n, P_SMEM=bool(parts[5]), num_warps=4,
        )  # fmt: skip
        return out

    return call


def _where_wrong(name: str, call, inputs: tuple, reference: torch.Tensor, sms: int) -> None:
    """Relative error by 64-row half of each 128-row tile, and by the tiles of the first
    round of the persistent programs against the rest: where a wrong kernel goes wrong."""
    with torch.no_grad():
        got = call(*inputs).float()
    tiles = got.numel() // got.shape[-1] // 128
    got, want = (x.reshape(tiles, 2, 64, -1) for x in (got, reference))

    def error(a, b):
        return f"{((a - b).norm() / b.norm()).item():.1e}"

    halves = [error(got[:, h], want[:, h]) for h in (0, 1)]
    first = min(sms, tiles)
    rounds = [error(got[:first], want[:first]), error(got[first:], want[first:])]
    print(f"{name}: halves {halves}, first round/after {rounds}", flush=True)


def main(out: Path, variants: list[str]) -> None:
    triton.set_allocator(
        lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda")
    )
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    records = []
    for b, h, n, causal in CASES:
        d = 128
        inputs = [
            tuple(torch.randn(b * h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
            for _ in range(3)
        ]
        q, k, v = (x.float() for x in inputs[0])
        reference = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        flops = harness.attention_flops(b, h, n, n, d, causal)
        case = {"case": f"{'causal' if causal else 'full'} B{b} H{h} N{n} D{d}"}
        systems = {
            "cudnn": _sdpa(SDPBackend.CUDNN_ATTENTION, h, causal),
            "producer warp (now)": _producer_warp(b * h, n, d, causal, 2 * sms),
        }
        for variant in variants:
            systems[f"two consumers {variant}"] = _two_consumers(b * h, n, d, causal, variant, sms)
        for name, call in systems.items():
            records.append(harness.measure(case, name, call, inputs, reference, flops, True))
            _where_wrong(name, call, inputs[0], reference, sms)
    harness.write(records, out, "two_consumers")
    print(harness.table(records))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:] or ["bn64s3", "bn128s2", "bn128s2pp"])
