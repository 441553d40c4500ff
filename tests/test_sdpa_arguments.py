"""``F.scaled_dot_product_attention`` with each of its arguments, fused and equal to
PyTorch on the CPU: boolean and float masks (broadcast over batch or heads), ``is_causal``,
``scale``, ``enable_gqa``."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import rel_error

import fusion_compiler as fc

# compiles many models: left out of the edit loop (-m 'not slow'), run in CI
pytestmark = pytest.mark.slow

B, H, HKV, NQ, NK, D = 2, 4, 2, 24, 40, 16


class Sdpa(torch.nn.Module):
    def __init__(self, **kwargs):
        super().__init__()
        self.kwargs = kwargs

    def forward(self, q, k, v, *mask):
        return F.scaled_dot_product_attention(q, k, v, *mask, **self.kwargs)


def _keep(shape: tuple[int, ...]) -> torch.Tensor:
    keep = torch.rand(shape) > 0.3
    keep[..., 0] = True  # a key for every row: PyTorch's softmax is then defined
    return keep


MASKS = {
    "bool-full": lambda: _keep((B, H, NQ, NK)),
    "bool-over-heads": lambda: _keep((B, 1, NQ, NK)),
    "bool-over-batch-and-heads": lambda: _keep((1, 1, NQ, NK)),
    "bool-padding": lambda: _keep((B, 1, 1, NK)),
    "float-over-heads": lambda: torch.randn(B, 1, NQ, NK),
    "float-padding-min": lambda: torch.zeros(B, 1, 1, NK).masked_fill(
        ~_keep((B, 1, 1, NK)), torch.finfo(torch.float32).min
    ),
}


def _check(model: torch.nn.Module, hkv: int, mask: torch.Tensor | None = None) -> None:
    def inputs():
        return (
            torch.randn(B, H, NQ, D),
            torch.randn(B, hkv, NK, D),
            torch.randn(B, hkv, NK, D),
        ) + ((mask,) if mask is not None else ())

    module = fc.compile(model, example_args=inputs())
    assert module.stats["attention_ops"] == 1, module.remarks
    fresh = inputs()
    with torch.no_grad():
        want = model(*fresh)
    assert rel_error(fc.load(module)(*fresh), want) < 1e-4


@pytest.mark.parametrize("mask", sorted(MASKS))
def test_attn_mask(mask: str) -> None:
    _check(Sdpa(), H, MASKS[mask]())


@pytest.mark.parametrize(
    "kwargs",
    [dict(is_causal=True), dict(scale=0.3), dict(is_causal=True, scale=0.05)],
    ids=["is_causal", "scale", "is_causal-scale"],
)
def test_keyword_arguments(kwargs: dict) -> None:
    _check(Sdpa(**kwargs), H)


@pytest.mark.parametrize("is_causal", [False, True])
def test_enable_gqa(is_causal: bool) -> None:
    _check(Sdpa(enable_gqa=True, is_causal=is_causal), HKV)
