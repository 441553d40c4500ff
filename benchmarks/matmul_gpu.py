"""A transformer's matrix products on the GPU: the generated sm_90 kernel against IREE's own
code and cuBLAS, every system timed the three ways of harness.py (device, back-to-back
loop, one blocking call).

On the CPU machine:  .venv/bin/python benchmarks/matmul_gpu.py prepare build/matmul
On the GPU machine:  python3 benchmarks/matmul_gpu.py run build/matmul OUT

Each case is one Linear (PyTorch's (N, K) weight, no bias) on (B, M, K) fp16 activations
at the shapes of the models in models_gpu.py: Llama-3.2-1B's projections and MLP at
B4 N2048 (8192 rows), GPT-2 small's at B1 N512, and a decoding batch of 16 rows. Weights
are inputs here (made on the GPU machine from a seed), so nothing large travels.
TFLOP/s: 2·M·K·N over device time.

Systems: ours_sm90 (fc.compile, cuda_arch="sm_90": fusion-kernel-matmul's kernel),
iree_sm80 (fc.compile, cuda_arch="sm_80": IREE's code alone), torch (F.linear: cuBLAS)
and torch_compile (torch.compile of the same function, default mode); with --baseline
FOLDER, ours_sm90_baseline: another build's modules, in the same run.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import harness
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import fusion_compiler as fc  # noqa: E402


@dataclass(frozen=True)
class Case:
    rows: int  # B·M
    k: int
    n: int
    label: str

    @property
    def name(self) -> str:
        return f"{self.label}_M{self.rows}_K{self.k}_N{self.n}"


CASES = {
    c.name: c
    for c in (
        Case(8192, 2048, 2048, "llama1b_q_o"),
        Case(8192, 2048, 512, "llama1b_kv"),
        Case(8192, 2048, 8192, "llama1b_gate_up"),
        Case(8192, 8192, 2048, "llama1b_down"),
        Case(512, 768, 2304, "gpt2_qkv"),
        Case(512, 768, 3072, "gpt2_fc"),
        Case(512, 3072, 768, "gpt2_proj"),
        Case(16, 2048, 8192, "decode_b16_gate"),
    )
}
SYSTEMS = {"ours_sm90": "sm_90", "iree_sm80": "sm_80"}


class Linear(torch.nn.Module):
    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return F.linear(x, weight)


def _inputs(case: Case, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(1, case.rows, case.k, device=device, dtype=torch.float16)
    weight = torch.randn(case.n, case.k, device=device, dtype=torch.float16) / case.k**0.5
    return x, weight


def _selected(args: argparse.Namespace) -> dict[str, Case]:
    return {name: case for name, case in CASES.items() if args.only in name}


def prepare(folder: Path, args: argparse.Namespace) -> None:
    for name, case in _selected(args).items():
        for system, arch in SYSTEMS.items():
            harness.save_module(
                folder,
                f"{name}.{system}",
                lambda case=case, arch=arch: fc.compile(
                    Linear(), _inputs(case, "cpu"), target="cuda", cuda_arch=arch
                ),
            )


def run(folder: Path, out: Path, args: argparse.Namespace) -> list[dict]:
    records = []
    compiled = torch.compile(F.linear)
    for name, case in _selected(args).items():
        inputs = [_inputs(case, "cuda") for _ in range(3)]
        x, weight = inputs[0]
        reference = F.linear(x.float(), weight.float())
        fields = dict(case=name, M=case.rows, K=case.k, N=case.n)
        systems = {s: harness.module(folder, f"{name}.{s}", "cuda") for s in SYSTEMS}
        if args.baseline:
            systems["ours_sm90_baseline"] = harness.module(
                args.baseline, f"{name}.ours_sm90", "cuda"
            )
        systems["torch"] = F.linear
        systems["torch_compile"] = compiled
        flops = 2 * case.rows * case.k * case.n
        for system, call in systems.items():
            records.append(harness.measure(fields, system, call, inputs, reference, flops, True))
        harness.write(records, out, "matmul", harness.table)
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["prepare", "run"])
    parser.add_argument("folder", type=Path)
    parser.add_argument("out", type=Path, nargs="?")
    parser.add_argument("--only", default="", help="cases whose name holds this")
    parser.add_argument(
        "--baseline", type=Path, help="another build's modules, timed as ours_sm90_baseline"
    )
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    if args.command == "prepare":
        prepare(args.folder, args)
    else:
        run(args.folder, args.out or args.folder, args)


if __name__ == "__main__":
    main()
