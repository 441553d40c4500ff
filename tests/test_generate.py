"""Greedy decoding with a compiled decode step and a KV cache (examples/generate.py)."""

import torch
from generate import ToyDecoder, generate

import fusion_compiler as fc


def test_compiled_decode_step_generates_the_same_tokens_as_pytorch() -> None:
    torch.manual_seed(0)
    model = ToyDecoder(max_len=32).eval()
    prompt = torch.tensor([[3, 14, 15]])
    example = (prompt[:, :1], torch.tensor([0]), *model.empty_cache(1))
    module = fc.compile(model, example_args=example)
    assert module.stats["attention_ops"] == 2  # Nq = 1 against the whole cache, per layer
    with torch.no_grad():
        want = generate(model, model, prompt, steps=12)
    assert generate(fc.load(module), model, prompt, steps=12) == want
