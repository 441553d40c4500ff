"""Whole transformer blocks (examples/transformer_blocks.py): every attention fused, and
equal to PyTorch, on the CPU; with a dynamic sequence length, one compile serves three."""

from __future__ import annotations

import pytest
import torch
from conftest import rel_error
from transformer_blocks import BLOCKS, CONFIG

import fusion_compiler as fc

# compiles many models: left out of the edit loop (-m 'not slow'), run in CI
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_block_fused_and_matches_pytorch(name: str) -> None:
    factory, shapes, attentions = BLOCKS[name]
    torch.manual_seed(0)
    model = factory(CONFIG).eval()
    module = fc.compile(model, example_args=tuple(torch.randn(s) for s in shapes))
    assert module.stats["attention_ops"] == attentions, module.remarks
    assert module.stats["softmax_ops"] == 0
    run = fc.load(module)
    fresh = tuple(torch.randn(s) for s in shapes)
    with torch.no_grad():
        assert rel_error(run(*fresh), model(*fresh)) < 1e-4


@pytest.mark.parametrize("name", ["gpt2", "llama", "vit"])
def test_dynamic_sequence_length_one_compile_three_lengths(name: str) -> None:
    factory, shapes, attentions = BLOCKS[name]
    torch.manual_seed(0)
    model = factory(CONFIG).eval()
    # the causal buffers are max_len long: slicing them needs n < max_len
    n = torch.export.Dim("n", min=2, max=CONFIG.max_len - 1)
    (shape,) = shapes
    module = fc.compile(model, example_args=(torch.randn(shape),), dynamic_shapes=({1: n},))
    assert module.stats["attention_ops"] == attentions, module.remarks
    run = fc.load(module)
    for length in (7, 64, 201):
        x = torch.randn(shape[0], length, shape[2])
        with torch.no_grad():
            assert rel_error(run(x), model(x)) < 1e-4, f"length {length}"
