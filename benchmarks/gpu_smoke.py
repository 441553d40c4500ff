"""Runs CUDA modules compiled elsewhere on this machine's GPU and checks them against PyTorch.

On the CPU machine (has the compiler):
    .venv/bin/python benchmarks/gpu_smoke.py prepare build/gpu
On the GPU machine (runtime and torch only):
    python3 benchmarks/gpu_smoke.py check build/gpu

``prepare`` compiles each example block for target="cuda" (sm_80) and saves the module
with the model's weights; ``check`` rebuilds each model from its weights, runs the
module on device "cuda" with fresh inputs, and compares with PyTorch in float64.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
from models import ExplicitAttentionBlock, MultiheadAttentionBlock, SDPABlock  # noqa: E402

import fusion_compiler as fc  # noqa: E402

SHAPE = (2, 128, 64)
CASES = {
    "mha": MultiheadAttentionBlock,
    "sdpa": SDPABlock,
    "sdpa_causal": lambda: SDPABlock(causal=True),
    "explicit": ExplicitAttentionBlock,
}


def prepare(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, factory in CASES.items():
        model = factory().eval()
        module = fc.compile(model, example_args=(torch.randn(SHAPE),), target="cuda")
        module.save(folder / f"{name}.vmfb")
        torch.save(model.state_dict(), folder / f"{name}.pt")
        print(f"{name}: {module.stats}")


def check(folder: Path) -> int:
    print(f"{'case':<12} {'rel. error':>10} {'ms/call':>8}  (device cuda, input {SHAPE})")
    worst = 0.0
    for name, factory in CASES.items():
        model = factory().eval()
        model.load_state_dict(torch.load(folder / f"{name}.pt"))
        run = fc.load(folder / f"{name}.vmfb", device="cuda")
        x = torch.randn(SHAPE)
        with torch.no_grad():
            want = model.double().cuda()(x.double().cuda()).cpu()
        got = run(x.cuda())
        error = ((got.double() - want).norm() / want.norm()).item()
        start = time.perf_counter()
        for _ in range(20):
            run(x)
        ms = (time.perf_counter() - start) / 20 * 1e3
        worst = max(worst, error if error == error else float("inf"))
        print(f"{name:<12} {error:>10.1e} {ms:>8.2f}")
    return 0 if worst < 1e-4 else 1


if __name__ == "__main__":
    command, folder = sys.argv[1], Path(sys.argv[2])
    sys.exit(prepare(folder) if command == "prepare" else check(folder))
