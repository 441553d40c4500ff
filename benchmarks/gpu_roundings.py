"""Roundings to bf16 on the GPU: each module's result against PyTorch's on the same GPU.

``fusion-bf16-via-f32`` rounds every f32 -> bf16 truncation in integer ops because IREE's
CPU and CUDA code dropped a truncation to bf16 that is extended again in one dispatch
(``h.bfloat16().float()`` of fp16 ``h`` kept fp16's digits). Checked on the CPU in
``tests/test_frontend.py``; this runs the CUDA modules where a GPU is.

On the CPU machine:  .venv/bin/python benchmarks/gpu_roundings.py prepare build/roundings
On the GPU machine:  python3 benchmarks/gpu_roundings.py run build/roundings OUT.md
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import fusion_compiler as fc  # noqa: E402


class HalfToBf16(torch.nn.Module):
    def forward(self, h):
        return h.bfloat16().float()


class F32ToBf16(torch.nn.Module):
    def forward(self, x):
        return x.bfloat16().float() * 3.0


class RMSNormBf16(torch.nn.Module):
    """Llama's RMSNorm on bf16: computed in f32, rounded to bf16, times the weight."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(256).bfloat16())

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * h.to(torch.bfloat16)


# name -> (model, example input)
CASES = {
    "half_to_bf16": (HalfToBf16, lambda: (torch.randn(64, 300).half(),)),
    "f32_to_bf16": (F32ToBf16, lambda: (torch.randn(64, 300),)),
    "rmsnorm_bf16": (RMSNormBf16, lambda: (torch.randn(8, 128, 256).bfloat16(),)),
}


def prepare(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, (make, example) in CASES.items():
        torch.manual_seed(0)
        model = make().eval()
        module = fc.compile(model, example(), target="cuda", cuda_arch="sm_90")
        module.save(folder / f"{name}.vmfb")
        torch.save(model.state_dict(), folder / f"{name}.pt")
        print(name, "compiled", flush=True)


def run(folder: Path, report: Path) -> None:
    rows = [
        "| case | equal to PyTorch on the GPU | elements differing | max abs diff |",
        "|---|---|---|---|",
    ]
    for name, (make, example) in CASES.items():
        model = make().eval()
        model.load_state_dict(torch.load(folder / f"{name}.pt"))
        model = model.cuda()
        torch.manual_seed(1)  # fresh inputs, not the example's
        args = tuple(a.cuda() for a in example())
        got = fc.load(folder / f"{name}.vmfb", device="cuda")(*args)
        with torch.no_grad():
            want = model(*args)
        diff = (got.float() - want.float()).abs()
        rows.append(
            f"| {name} | {'yes' if torch.equal(got, want) else 'NO'} | "
            f"{int((diff > 0).sum())} of {diff.numel()} | {diff.max().item():.3e} |"
        )
    table = "\n".join(rows)
    print(table)
    report.write_text(table + "\n")


if __name__ == "__main__":
    mode, *paths = sys.argv[1:]
    if mode == "prepare":
        prepare(Path(paths[0]))
    else:
        run(Path(paths[0]), Path(paths[1]))
