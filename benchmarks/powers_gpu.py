"""Float powers at every special value on CUDA, against PyTorch on the CPU.

On the CPU machine:
    .venv/bin/python benchmarks/powers_gpu.py FOLDER --compile
writes powers_float32.vmfb and powers_float16.vmfb (the model of
``tests/test_frontend.py::test_float_powers_follow_pytorch_at_every_special_value``,
target="cuda"); on the GPU machine
    python3 benchmarks/powers_gpu.py FOLDER
runs them on fresh inputs and prints how many elements differ (value, NaN or sign).
Results: benchmarks/results/gpu_scale_forms_h100.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from test_frontend import _POWERS, _SPECIAL, _Powers  # noqa: E402

import fusion_compiler as fc  # noqa: E402


def main(folder: Path, compile_here: bool) -> None:
    pairs = torch.tensor([(a, b) for a in _SPECIAL for b in _POWERS]).T
    for dtype in (torch.float32, torch.float16):
        model = _Powers(_POWERS + ([1e9] if dtype == torch.float32 else []))
        path = folder / f"powers_{str(dtype)[6:]}.vmfb"
        if compile_here:
            example = tuple(torch.cat([pairs, torch.randn(2, 30)], 1).to(dtype))
            path.write_bytes(fc.compile(model, example, target="cuda", cuda_arch="sm_90").vmfb)
            continue
        fresh = torch.cat([pairs, torch.randn(2, 30) * 3], 1).to(dtype)
        got = fc.load(path.read_bytes(), device="cuda")(*fresh.cuda()).cpu()
        want = model(*fresh)
        rtol = 2e-6 if dtype == torch.float32 else 1e-3
        close = torch.isclose(got.double(), want.double(), rtol=rtol, atol=0, equal_nan=True)
        wrong = ~(close & ((got.signbit() == want.signbit()) | want.isnan()))
        print(f"powers {dtype}: {int(wrong.sum())} of {got.numel()} differ from PyTorch (CPU)")
        for row, column in wrong.nonzero().tolist()[:8]:
            x, y = fresh[0, column].item(), fresh[1, column].item()
            print(f"  row {row} x {x} y {y}: want {want[row, column]}, got {got[row, column]}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), "--compile" in sys.argv)
