"""Dispatches per call of an attention block (projections, attention, output projection).

    .venv/bin/python benchmarks/dispatch_counts.py

Compiles the same fp16 block (fp32 on the CPU) to IREE's flow stage for the CPU, CUDA and
Vulkan, each way its pipelines lower attention, and prints a Markdown table of
``mod.stats["dispatches"]`` (launches per call;
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
# IREE's attention op without fusion-tile-and-fuse (the default pipeline less the pass)
_NO_TILE_AND_FUSE = dict(
    pipeline="builtin.module(fusion-detect-attention,resolve-ranked-shaped-type-result-dims,"
    "canonicalize,cse,fusion-decompose-attention{above-head-dim=128},fusion-find-softmax)"
)
# (target, label, compile options)
WAYS = [
    ("cpu", "IREE alone (no attention fusion)", _IREE_ALONE),
    ("cpu", "ours, IREE's attention op, before fusion-tile-and-fuse", _NO_TILE_AND_FUSE),
    ("cpu", "ours, IREE's attention op (attention='iree')", dict(attention="iree")),
    ("cpu", "ours, online softmax (the CPU default)", dict()),
    ("cuda", "IREE alone (no attention fusion)", _IREE_ALONE),
    ("cuda", "ours, IREE's attention op (sm_80), before fusion-tile-and-fuse", _NO_TILE_AND_FUSE),
    ("cuda", "ours, IREE's attention op (sm_80)", dict()),
    ("cuda", "ours, online softmax", dict(attention="online-softmax")),
    ("cuda", "ours, generated kernel (sm_90)", dict(cuda_arch="sm_90")),
    ("vulkan", "IREE alone (no attention fusion)", _IREE_ALONE),
    ("vulkan", "ours, IREE's op decomposed (attention='iree')", dict(attention="iree")),
    ("vulkan", "ours, generated SPIR-V kernel", dict()),
]


def main() -> None:
    model = ExplicitAttentionBlock(dim=1024, heads=8).eval()
    print(
        "| attention block dim 1024, 8 heads, N 2048 (CPU: fp32, else fp16) | target | dispatches |"
    )
    print("|---|---|---|")
    for target, label, options in WAYS:
        dtype = torch.float32 if target == "cpu" else torch.float16
        example = (torch.randn(1, 2048, 1024, dtype=dtype),)
        model = model.to(dtype)
        module = fc.compile(
            model, example_args=example, target=target, compile_to="flow", **options
        )
        print(f"| {label} | {target} | {module.stats['dispatches']} |", flush=True)


if __name__ == "__main__":
    main()
