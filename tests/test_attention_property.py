"""Property: any combination of fusable variants and shapes is fused and matches PyTorch."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_attention_variants import FUSABLE_MASKS, _check, _inputs
from variants import Attention

# compiles many models: left out of the edit loop (-m 'not slow'), run in CI
pytestmark = pytest.mark.slow

MASKS = [None, *FUSABLE_MASKS]


@st.composite
def cases(draw):
    heads = draw(st.sampled_from([1, 2, 4]))
    kv_heads = draw(st.sampled_from([h for h in (1, 2, 4) if heads % h == 0]))
    mask = draw(st.sampled_from(MASKS))
    nk = draw(st.integers(1, 70))
    # Causal masks and windows (aligned to the last key) with more queries than keys
    # leave rows with nothing to attend to.
    ends_at_the_diagonal = mask is not None and ("causal" in mask or "window" in mask)
    nq = draw(st.integers(1, nk if ends_at_the_diagonal else 70))
    return dict(
        heads=heads,
        kv_heads=kv_heads,
        nq=nq,
        nk=nk,
        head_dim=draw(st.sampled_from([16, 32, 48, 64, 80, 96, 128])),
        scale_on=draw(st.sampled_from(["scores-mul", "scores-div", "q", "k", "none"])),
        mask=mask,
        gqa=draw(st.sampled_from(["repeat_interleave", "repeat_kv"])),
        dtype=draw(st.sampled_from([torch.float32, torch.float16])),
        batch=draw(st.integers(1, 2)),
        attention=draw(st.sampled_from(["iree", "online-softmax"])),
    )


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_random_variants_fuse_and_match(case: dict) -> None:
    model = Attention(
        case["heads"],
        case["nq"],
        case["nk"],
        case["head_dim"],
        scale_on=case["scale_on"],
        mask=case["mask"],
        kv_heads=case["kv_heads"],
        gqa=case["gqa"] if case["kv_heads"] < case["heads"] else None,
        upcast=case["dtype"] != torch.float32,
    )
    example = _inputs(
        case["batch"],
        case["heads"],
        case["kv_heads"],
        case["nq"],
        case["nk"],
        case["head_dim"],
        case["dtype"],
    )
    _check(model, example, fused=1, attention=case["attention"])
