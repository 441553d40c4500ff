"""fusion-tile-and-fuse end to end: the head split and merge folded into IREE's attention
op (attention="iree"), fewer dispatches, the same numbers as PyTorch."""

from __future__ import annotations

import sys

import pytest
import torch
from conftest import ROOT, rel_error

sys.path.insert(0, str(ROOT / "examples"))
from models import ExplicitAttentionBlock, MultiheadAttentionBlock, SDPABlock  # noqa: E402

import fusion_compiler as fc  # noqa: E402
from fusion_compiler.targets import DEFAULT_PIPELINES  # noqa: E402

# the CPU pipeline for IREE's attention op, less tile-and-fuse and its cleanup
WITHOUT = [p for p in DEFAULT_PIPELINES["cpu"] if p != "fusion-tile-and-fuse"]
WITHOUT = [
    p for i, p in enumerate(WITHOUT) if not (p == "canonicalize" and "canonicalize" in WITHOUT[:i])
]

# model, dispatches per call without tile-and-fuse, with it. SDPA's Q, K and V are slices
# of one transposed fused projection; nn.MultiheadAttention's layout is not folded yet:
# same count, same numbers.
BLOCKS = {
    "explicit": (lambda: ExplicitAttentionBlock(64, 4), 8, 5),
    "sdpa_causal": (lambda: SDPABlock(64, 4, causal=True), 5, 4),
    "multihead": (lambda: MultiheadAttentionBlock(64, 4), 6, 6),
}


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_head_split_and_merge_fused_into_attention(name: str) -> None:
    make, before, after = BLOCKS[name]
    torch.manual_seed(0)
    model = make().eval()
    x = torch.randn(2, 48, 64)
    fused = fc.compile(model, example_args=(x,), target="cpu", attention="iree")
    plain = fc.compile(
        model,
        example_args=(x,),
        target="cpu",
        attention="iree",
        pipeline=f"builtin.module({','.join(WITHOUT)})",
    )
    assert fused.stats["attention_ops"] == plain.stats["attention_ops"] == 1
    assert (plain.stats["dispatches"], fused.stats["dispatches"]) == (before, after)
    x = torch.randn(2, 48, 64)  # fresh inputs
    with torch.no_grad():
        want = model(x)
    assert rel_error(fc.load(fused)(x), want) < 1e-5
