"""The example attention blocks on the CPU: ours (IREE modules) against PyTorch eager and
IREE alone, every system timed the three ways of harness.py (no device time on the CPU).

    .venv/bin/python benchmarks/cpu_blocks.py prepare build/cpu_blocks [--shape B,N,dim]
    .venv/bin/python benchmarks/cpu_blocks.py run build/cpu_blocks OUT [--shape B,N,dim]

Both steps on the CPU (``run`` loads what ``prepare`` compiled, so that the timed
process holds no compiler). Blocks from examples/models.py at width dim with 4 heads,
fp32, input (B, N, dim) (default 4, 256, 256): nn.MultiheadAttention, projections around
SDPA (full and causal), and attention spelled out as matmul/softmax/matmul. Weights come
from a seed in both steps (the modules hold theirs). Systems: ours (attention=
"online-softmax": our FlashAttention-2 loop nest, the CPU default), ours_iree_op
(attention="iree": IREE's attention op), iree_alone (the same export with none of our
passes) and torch_eager. Each output is checked against the block in float64; TFLOP/s
(from loop time) counts the four projections and the attention.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import harness
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
from models import ExplicitAttentionBlock, MultiheadAttentionBlock, SDPABlock  # noqa: E402

import fusion_compiler as fc  # noqa: E402

HEADS = 4
# name -> (the block for a width, causal)
CASES = {
    "nn_multihead_attention": (lambda dim: MultiheadAttentionBlock(dim, HEADS), False),
    "sdpa_block": (lambda dim: SDPABlock(dim, HEADS), False),
    "sdpa_block_causal": (lambda dim: SDPABlock(dim, HEADS, causal=True), True),
    "explicit_matmul_softmax_matmul": (lambda dim: ExplicitAttentionBlock(dim, HEADS), False),
}
# system -> fc.compile options
MODULES = {
    "ours": {"attention": "online-softmax"},
    "ours_iree_op": {"attention": "iree"},
    "iree_alone": {"pipeline": "builtin.module()"},
}
SYSTEMS = [*MODULES, "torch_eager"]


def _shape(args: argparse.Namespace) -> tuple[int, int, int]:
    b, n, dim = (int(v) for v in args.shape.split(","))
    return b, n, dim


def _name(case: str, args: argparse.Namespace) -> str:
    b, n, dim = _shape(args)
    return f"{case}_B{b}_N{n}_d{dim}"


def _block(case: str, dim: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return CASES[case][0](dim).eval()


def _selected(args: argparse.Namespace) -> list[str]:
    return [case for case in CASES if harness.selected(_name(case, args), args.only)]


def prepare(folder: Path, args: argparse.Namespace) -> None:
    b, n, dim = _shape(args)
    example = (torch.randn(b, n, dim),)
    for case in _selected(args):
        model = _block(case, dim)
        for system, options in MODULES.items():
            harness.save_module(
                folder,
                f"{_name(case, args)}.{system}",
                lambda options=options, model=model: fc.compile(
                    model, example_args=example, target="cpu", **options
                ),
            )


def run(folder: Path, out: Path, args: argparse.Namespace) -> list[dict]:
    b, n, dim = _shape(args)
    records = []
    for case in _selected(args):
        model = _block(case, dim)
        inputs = [(torch.randn(b, n, dim),) for _ in range(3)]
        with torch.no_grad():
            reference = copy.deepcopy(model).double()(inputs[0][0].double())
        causal = CASES[case][1]
        flops = 2 * b * n * 4 * dim * dim
        flops += harness.attention_flops(b, HEADS, n, n, dim // HEADS, causal)
        fields = dict(case=_name(case, args), B=b, N=n, dim=dim, H=HEADS, causal=causal)
        fields.update(threads=torch.get_num_threads())
        systems = {
            system: harness.module(folder, f"{_name(case, args)}.{system}", "local-task")
            for system in MODULES
        }
        systems["torch_eager"] = model
        for system, call in systems.items():
            records.append(harness.measure(fields, system, call, inputs, reference, flops, False))
        harness.write(records, out, "cpu_blocks", render)  # so far
    return records


def render(records: list[dict]) -> str:
    """Loop time per system and block, ours against eager and IREE alone, then every
    system's three timings."""
    by_case = harness.by_case(records)
    head = [f"{s} loop ms" for s in SYSTEMS] + ["ours / torch_eager time", "ours / iree_alone"]
    lines = ["| block | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    for case, found in by_case.items():
        ok = {s: r["loop_ms"] for s, r in found.items() if "error" not in r}
        cells = [f"{ok[s]:.2f}" if s in ok else ("failed" if s in found else "-") for s in SYSTEMS]
        for peer in ("torch_eager", "iree_alone"):
            ours, other = ok.get("ours"), ok.get(peer)
            cells.append(f"{ours / other:.2f}x" if ours and other else "-")
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    threads = next(iter(records), {}).get("threads", "?")
    return (
        f"CPU, {threads} torch threads; loop time per call (ms), fp32:\n\n"
        + "\n".join(lines)
        + "\n\nEvery system, the three timings (ms):\n\n"
        + harness.table(records)
    )


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shape", default="4,256,256", help="B,N,dim of the block input")


if __name__ == "__main__":
    sys.exit(harness.main(__doc__.splitlines()[0], prepare, run, options=_options))
