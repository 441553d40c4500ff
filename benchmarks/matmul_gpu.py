"""A transformer's matrix products on the GPU: the generated sm_90 kernel against IREE's own
code and cuBLAS, every system timed the three ways of harness.py (device, back-to-back
loop, one blocking call).

On the CPU machine:  .venv/bin/python benchmarks/matmul_gpu.py prepare build/matmul
On the GPU machine:  python3 benchmarks/matmul_gpu.py run build/matmul OUT

Each case is one Linear (PyTorch's (N, K) weight) on (B, M, K) fp16 activations at the
shapes of the models in models_gpu.py: Llama-3.2-1B's projections and MLP at B4 N2048
(8192 rows, no bias), GPT-2 small's at B1 N512, BERT-base's at B8 N512 (4096 rows) and
ViT-B/16's at B32 (6304 rows), those three with their bias (a product with an epilogue),
and a decoding batch of 16 rows. Weights are inputs here (made on the GPU machine from a
seed), so nothing large travels. TFLOP/s: 2·M·K·N over device time.

``prepare --tilings 128x128x64w8s4p132,...`` compiles ours once more per tiling
(BLOCK_MxBLOCK_NxBLOCK_K, then w warps, s stages, p persistent programs, 0 for one tile
per program; fusion-kernel-matmul's options), timed as ours_<tiling> in the same run.

Systems: ours_sm90 (fc.compile, cuda_arch="sm_90": fusion-kernel-matmul's kernel),
iree_sm80 (fc.compile, cuda_arch="sm_80": IREE's code alone), torch (F.linear: cuBLAS)
and torch_compile (torch.compile of the same function, default mode); with --baseline
FOLDER, ours_sm90_baseline: another build's modules, in the same run.
"""

from __future__ import annotations

import argparse
import re
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
    bias: bool = False

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
        Case(512, 2048, 2048, "llama1b512_q_o"),
        Case(512, 2048, 512, "llama1b512_kv"),
        Case(512, 2048, 8192, "llama1b512_gate_up"),
        Case(512, 8192, 2048, "llama1b512_down"),
        Case(512, 768, 2304, "gpt2_qkv"),
        Case(512, 768, 3072, "gpt2_fc"),
        Case(512, 3072, 768, "gpt2_proj"),
        Case(512, 768, 2304, "gpt2_qkv_bias", bias=True),
        Case(512, 768, 3072, "gpt2_fc_bias", bias=True),
        Case(512, 3072, 768, "gpt2_proj_bias", bias=True),
        Case(4096, 768, 2304, "bert_qkv", bias=True),
        Case(4096, 768, 768, "bert_o", bias=True),
        Case(4096, 768, 3072, "bert_fc1", bias=True),
        Case(4096, 3072, 768, "bert_fc2", bias=True),
        Case(6304, 768, 2304, "vit_qkv", bias=True),
        Case(6304, 768, 768, "vit_o", bias=True),
        Case(6304, 768, 3072, "vit_fc1", bias=True),
        Case(6304, 3072, 768, "vit_fc2", bias=True),
        Case(16, 2048, 8192, "decode_b16_gate"),
    )
}
SYSTEMS = {"ours_sm90": "sm_90", "iree_sm80": "sm_80"}


class Linear(torch.nn.Module):
    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias=None) -> torch.Tensor:
        return F.linear(x, weight, bias)


def _inputs(case: Case, device: str) -> tuple[torch.Tensor, ...]:
    x = torch.randn(1, case.rows, case.k, device=device, dtype=torch.float16)
    weight = torch.randn(case.n, case.k, device=device, dtype=torch.float16) / case.k**0.5
    if not case.bias:
        return x, weight
    return x, weight, torch.randn(case.n, device=device, dtype=torch.float16)


def _tiling_pipeline(tiling: str) -> str:
    """The sm_90 pipeline with ``tiling`` (128x128x64w8s4p132) as fusion-kernel-matmul's
    options."""
    match = re.fullmatch(r"(\d+)x(\d+)x(\d+)w(\d+)s(\d+)p(\d+)(?:k(\d+))?", tiling)
    if match is None:
        raise SystemExit(f"--tilings: {tiling!r} is not MxNxKwWARPSsSTAGESpPROGRAMS[kSPLIT]")
    m, n, k, warps, stages, programs, split = match.groups()
    options = (
        f"arch=sm_90 block-m={m} block-n={n} block-k={k} num-warps={warps} "
        f"num-stages={stages} programs={programs} split-k={split or 1}"
    )
    return harness.sm90_pipeline("fusion-kernel-matmul", options)


def _selected(args: argparse.Namespace) -> dict[str, Case]:
    return {name: case for name, case in CASES.items() if harness.selected(name, args.only)}


def prepare(folder: Path, args: argparse.Namespace) -> None:
    tilings = [t for t in args.tilings.split(",") if t]
    for name, case in _selected(args).items():
        builds = {s: dict(cuda_arch=arch) for s, arch in SYSTEMS.items() if s not in args.skip}
        for tiling in tilings:
            builds[f"ours_{tiling}"] = dict(cuda_arch="sm_90", pipeline=_tiling_pipeline(tiling))
        for system, options in builds.items():
            harness.save_module(
                folder,
                f"{name}.{system}",
                lambda case=case, options=options: fc.compile(
                    Linear(), _inputs(case, "cpu"), target="cuda", **options
                ),
            )


def run(folder: Path, out: Path, args: argparse.Namespace) -> list[dict]:
    records = []
    compiled = torch.compile(F.linear)
    for name, case in _selected(args).items():
        inputs = [_inputs(case, "cuda") for _ in range(3)]
        reference = F.linear(*(t.float() for t in inputs[0]))
        fields = dict(case=name, M=case.rows, K=case.k, N=case.n)
        built = sorted(p.name.split(".")[1] for p in folder.glob(f"{name}.ours_*.vmfb"))
        built = [s for s in built if s not in SYSTEMS]  # the tilings
        systems = {
            s: harness.module(folder, f"{name}.{s}", "cuda")
            for s in [*SYSTEMS, *built]
            if s not in args.skip
        }
        if args.baseline:
            systems["ours_sm90_baseline"] = harness.module(
                args.baseline, f"{name}.ours_sm90", "cuda"
            )
        systems["torch"] = F.linear
        if "torch_compile" not in args.skip:
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
    parser.add_argument("--only", default="", help="cases whose name holds one of these (a,b)")
    parser.add_argument(
        "--skip", default="", help="systems neither built nor timed (iree_sm80,torch_compile)"
    )
    parser.add_argument(
        "--baseline", type=Path, help="another build's modules, timed as ours_sm90_baseline"
    )
    parser.add_argument(
        "--tilings",
        default="",
        help="prepare: ours again per tiling, e.g. 64x128x64w4s4p132 (a k2 after it: split-K 2)",
    )
    args = parser.parse_args()
    args.skip = set(args.skip.split(","))
    args.folder.mkdir(parents=True, exist_ok=True)
    if args.command == "prepare":
        prepare(args.folder, args)
    else:
        run(args.folder, args.out or args.folder, args)


if __name__ == "__main__":
    main()
