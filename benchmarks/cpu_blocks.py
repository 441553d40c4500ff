"""CPU timing of the example attention blocks: ours (IREE module) against PyTorch eager.

    .venv/bin/python benchmarks/cpu_blocks.py [--out benchmarks/results/cpu.md]

Every system runs in the same process on the same fresh inputs; the median of many
timed calls is reported, after warm-up. Correctness is checked in the same run.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from models import ExplicitAttentionBlock, MultiheadAttentionBlock, SDPABlock  # noqa: E402

import fusion_compiler as fc  # noqa: E402

CASES = {  # name -> model for a given width, 4 heads
    "nn.MultiheadAttention": lambda dim: MultiheadAttentionBlock(dim, 4),
    "SDPA block": lambda dim: SDPABlock(dim, 4),
    "SDPA block, causal": lambda dim: SDPABlock(dim, 4, causal=True),
    "explicit matmul/softmax/matmul": lambda dim: ExplicitAttentionBlock(dim, 4),
}


def median_ms(fn, inputs: list[torch.Tensor], repeats: int) -> float:
    for x in inputs:  # warm-up
        fn(x)
    times = []
    for i in range(repeats):
        x = inputs[i % len(inputs)]  # rotate input sets
        start = time.perf_counter()
        fn(x)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="4,256,256", help="B,N,dim of the block input")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--out", help="write the Markdown table here")
    args = parser.parse_args()
    b, n, dim = (int(v) for v in args.shape.split(","))
    threads = torch.get_num_threads()
    rows = []
    for name, factory in CASES.items():
        torch.manual_seed(0)
        model = factory(dim).eval()
        inputs = [torch.randn(b, n, dim) for _ in range(3)]
        run = fc.load(fc.compile(model, example_args=(inputs[0],), attention="iree"))
        # IREE without our passes: the same compile with an empty pipeline of ours.
        iree = fc.load(fc.compile(model, example_args=(inputs[0],), pipeline="builtin.module()"))
        with torch.no_grad():
            error = ((run(inputs[1]) - model(inputs[1])).norm() / model(inputs[1]).norm()).item()
            eager = median_ms(model, inputs, args.repeats)
        ours = median_ms(run, inputs, args.repeats)
        plain = median_ms(iree, inputs, args.repeats)
        online = fc.load(fc.compile(model, example_args=(inputs[0],), attention="online-softmax"))
        with torch.no_grad():
            want = model(inputs[2])
            error = max(error, ((online(inputs[2]) - want).norm() / want.norm()).item())
        flash = median_ms(online, inputs, args.repeats)
        rows.append((name, eager, plain, ours, flash, eager / ours, error))
    lines = [
        f"CPU, {platform.processor() or platform.machine()}, {threads} torch threads, "
        f"input ({b}, {n}, {dim}), fp32, median of {args.repeats}",
        "",
        "| block | torch eager ms | IREE alone ms | ours (IREE op) ms | ours (online softmax) ms "
        "| ours (IREE op) vs eager | rel. error |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r[0]} | {r[1]:.2f} | {r[2]:.2f} | {r[3]:.2f} | {r[4]:.2f} | {r[5]:.2f}x | {r[6]:.1e} |"
        for r in rows
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        command = "`.venv/bin/python benchmarks/cpu_blocks.py`"
        Path(args.out).write_text(f"Command: {command}\n\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
