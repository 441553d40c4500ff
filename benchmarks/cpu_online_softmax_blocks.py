"""Block sizes of the CPU's online-softmax loop nest, timed side by side.

    .venv/bin/python benchmarks/cpu_online_softmax_blocks.py B,H,D N[,N...] QxK[,QxK...]

Compiles unfused attention (matmul, scale, arange/compare causal mask, softmax, matmul;
fp32, (B, H, N, D)) for the CPU once per block size (``fusion-online-softmax{block-q=Q
block-k=K}``) and times every module and torch SDPA interleaved, call after call (this
machine's load changes from minute to minute; interleaving keeps the comparison fair):
median of 30 blocking calls, three input sets rotated, torch on this machine's threads
(set to 2). Prints a Markdown row per case with each time and its speed against the
first block size.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from attention_peers import Unfused  # noqa: E402
from fusion_compiler.passes import online_softmax_pipeline  # noqa: E402

import fusion_compiler as fc  # noqa: E402

_CALLS = 30


def _pipeline(block_q: int, block_k: int) -> str:
    return f"builtin.module({','.join(online_softmax_pipeline(block_q, block_k))})"


def main(shape: str, lengths: str, sizes: str) -> None:
    torch.set_num_threads(2)
    b, h, d = map(int, shape.split(","))
    blocks = [tuple(map(int, s.split("x"))) for s in sizes.split(",")]
    names = [f"{q}x{k}" for q, k in blocks]
    print(f"| B{b} H{h} D{d} | " + " | ".join(names) + " | torch SDPA |")
    print("|---" * (len(names) + 2) + "|")
    for n in map(int, lengths.split(",")):
        for causal in (False, True):
            inputs = [tuple(torch.randn(b, h, n, d) for _ in range(3)) for _ in range(3)]
            model = Unfused(causal).eval()
            with torch.no_grad():
                want = model(*inputs[0])
            systems = {}
            for name, (q, k) in zip(names, blocks, strict=True):
                module = fc.compile(
                    model, example_args=inputs[0], target="cpu", pipeline=_pipeline(q, k)
                )
                systems[name] = fc.load(module)
                error = ((systems[name](*inputs[0]) - want).norm() / want.norm()).item()
                assert error < 1e-5, f"{name}: rel. error {error:.1e}"

            def sdpa(q, k, v, causal=causal):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

            systems["torch SDPA"] = sdpa
            times: dict[str, list[float]] = {name: [] for name in systems}
            with torch.no_grad():
                for call in systems.values():  # warm-up
                    for args in inputs:
                        call(*args)
                for i in range(_CALLS):
                    for name, call in systems.items():
                        start = time.perf_counter()
                        call(*inputs[i % len(inputs)])
                        times[name].append((time.perf_counter() - start) * 1e3)
            median = {name: statistics.median(t) for name, t in times.items()}
            first = median[names[0]]
            cells = [f"{ms:.1f} ms ({first / ms:.2f}x)" for ms in median.values()]
            case = f"N{n} {'causal' if causal else 'full'}"
            print(f"| {case} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
