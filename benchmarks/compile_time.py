"""Compile time of an attention block on the kernel path, with a cold and a warm kernel cache.

    .venv/bin/python benchmarks/compile_time.py

Compiles an fp16 attention block (projections, attention, output projection; dim 1024,
8 heads, N 2048) and a GQA decode step (32 query heads on 8 KV heads against 32768 keys:
split-KV, two generated kernels) for target="cuda", cuda_arch="sm_90" to a .vmfb, first
with empty kernel caches (ours and Triton's: Triton generates the kernels), then again
(the cubins come from the cache), and prints a Markdown table of wall-clock seconds.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
from models import ExplicitAttentionBlock  # noqa: E402
from variants import Attention  # noqa: E402

import fusion_compiler as fc  # noqa: E402


def _cases():
    block = ExplicitAttentionBlock(dim=1024, heads=8).eval().half()
    yield "attention block, fp16, N 2048", block, (torch.randn(1, 2048, 1024).half(),)
    decode = Attention(32, 1, 32768, 128, gqa="repeat_interleave", kv_heads=8).eval()
    q = torch.empty(1, 32, 1, 128, dtype=torch.float16, device="meta")
    kv = torch.empty(1, 8, 32768, 128, dtype=torch.float16, device="meta")
    yield "GQA decode step, fp16, 32768 keys", decode, (q, kv, kv)


def main() -> None:
    print("| model (target=cuda, cuda_arch=sm_90) | cold cache s | warm cache s | kernels |")
    print("|---|---|---|---|")
    for label, model, example in _cases():
        with tempfile.TemporaryDirectory() as cache:
            os.environ["FUSION_COMPILER_CACHE"] = cache
            os.environ["TRITON_CACHE_DIR"] = str(Path(cache) / "triton")  # Triton's own
            seconds = []
            for _ in range(2):
                start = time.perf_counter()
                module = fc.compile(model, example_args=example, target="cuda", cuda_arch="sm_90")
                seconds.append(time.perf_counter() - start)
            kernels = len(list(Path(cache).glob("kernels/*/kernel.cubin")))
        print(f"| {label} | {seconds[0]:.2f} | {seconds[1]:.2f} | {kernels} |", flush=True)
        assert module.vmfb


if __name__ == "__main__":
    main()
