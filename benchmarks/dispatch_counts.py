"""Dispatches per call of an attention block (projections, attention, output projection).

    .venv/bin/python benchmarks/dispatch_counts.py

Compiles the same fp16 block to IREE's flow stage for CUDA (four ways) and Vulkan
(three) and prints a Markdown table of ``mod.stats["dispatches"]`` (launches per call;
for the online-softmax path those in its host loops run once per block). No GPU needed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
from models import ExplicitAttentionBlock  # noqa: E402

import fusion_compiler as fc  # noqa: E402

_IREE_ALONE = dict(pipeline="builtin.module(canonicalize)")
# (target, label, compile options)
WAYS = [
    ("cuda", "IREE alone (no attention fusion)", _IREE_ALONE),
    ("cuda", "ours, IREE's attention op (sm_80)", dict()),
    ("cuda", "ours, online softmax", dict(attention="online-softmax")),
    ("cuda", "ours, generated kernel (sm_90)", dict(cuda_arch="sm_90")),
    ("vulkan", "IREE alone (no attention fusion)", _IREE_ALONE),
    ("vulkan", "ours, IREE's op decomposed (attention='iree')", dict(attention="iree")),
    ("vulkan", "ours, generated SPIR-V kernel", dict()),
]


def main() -> None:
    model = ExplicitAttentionBlock(dim=1024, heads=8).eval().half()
    example = (torch.randn(1, 2048, 1024, dtype=torch.float16),)
    print("| attention block dim 1024, 8 heads, N 2048, fp16 | target | dispatches |")
    print("|---|---|---|")
    for target, label, options in WAYS:
        module = fc.compile(
            model, example_args=example, target=target, compile_to="flow", **options
        )
        print(f"| {label} | {target} | {module.stats['dispatches']} |", flush=True)


if __name__ == "__main__":
    main()
