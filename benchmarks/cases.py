"""Input specifications, error bounds and helpers shared by the GPU check scripts."""

from __future__ import annotations

import subprocess

import torch

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
# rel. L2 error against float64 PyTorch that each input dtype must meet
BOUND = {F32: 1e-4, F16: 3e-3, BF16: 2e-2}

Spec = tuple[tuple[int, ...], torch.dtype]


def qkv(b: int, h: int, hkv: int, nq: int, nk: int, d: int, dtype: torch.dtype) -> list[Spec]:
    """Q (b, h, nq, d), K and V (b, hkv, nk, d)."""
    return [((b, h, nq, d), dtype), ((b, hkv, nk, d), dtype), ((b, hkv, nk, d), dtype)]


def example(specs: list[Spec]) -> tuple[torch.Tensor, ...]:
    """Fresh random tensors of the given shapes and dtypes, on the CPU."""
    return tuple(torch.randn(shape).to(dtype) for shape, dtype in specs)


def used_mib() -> int:
    """The GPU's used memory (nvidia-smi), MiB: what every process and allocator holds."""
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(out.split()[0])
