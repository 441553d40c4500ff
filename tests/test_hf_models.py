"""Hugging Face transformers architectures, out of the box: exported with a padding mask,
compiled for the CPU, every attention fused, equal to the model in PyTorch.

The architectures and their tiny configs are ``hf_corpus.ARCHS``; weights are random
(seeded), nothing comes from the hub. ``benchmarks/hf_support.py`` prints the same cases
as the README's support matrix.
"""

from __future__ import annotations

import pytest
import torch
from conftest import ANY_VULKAN, rel_error
from test_spirv_attention import needs_glslang, needs_vulkan

import fusion_compiler as fc

transformers = pytest.importorskip("transformers")
import hf_corpus  # noqa: E402  (needs transformers)

# compiles many models: left out of the edit loop (-m 'not slow'), run in CI
pytestmark = pytest.mark.slow

# transformers has no SDPA path for these: they always run their eager attention.
EAGER_ONLY = {"gemma2", "bloom", "xglm", "gpt_oss", "funnel", "swinv2"}
# Every architecture builds its masks with transformers' masking_utils and runs SDPA
# through its shared sdpa_attention_forward; their eager attentions are copies of one
# function. Each run compiles every architecture once, in one of its two spellings
# (alternating down the list), and both for these; ``-m long`` compiles the rest too.
BOTH_SPELLINGS = {"llama", "bert"}


def _cases() -> list:
    cases, turn = [], 0
    for name in hf_corpus.ARCHS:
        if name in EAGER_ONLY:
            cases.append((name, "eager"))
            continue
        for impl in ("eager", "sdpa"):
            if name in BOTH_SPELLINGS or impl == ("sdpa", "eager")[turn % 2]:
                cases.append((name, impl))
            else:
                cases.append(pytest.param(name, impl, marks=pytest.mark.long))
        turn += name not in BOTH_SPELLINGS
    return cases


CASES = _cases()


def _id(case) -> str:
    name, impl = case.values if hasattr(case, "values") else case
    return f"{name}-{impl}"


@pytest.mark.parametrize(("name", "impl"), CASES, ids=[_id(c) for c in CASES])
def test_architecture_fused_and_matches_pytorch(name: str, impl: str) -> None:
    model, inputs = hf_corpus.build(name, impl)
    program = torch.export.export(model, inputs(), strict=False)
    module = fc.compile(program, target="cpu")
    assert module.stats["attention_ops"] == hf_corpus.ARCHS[name].attentions, module.remarks
    assert module.stats["softmax_ops"] == hf_corpus.ARCHS[name].softmaxes, module.remarks
    fresh = inputs()
    with torch.no_grad():
        want = model(*fresh)
    assert rel_error(fc.load(module)(*fresh), want) < 1e-4


# On Vulkan each attention is the generated shader, its mask computed there from the
# model's own tensors (padding, the causal band, Gemma's soft cap and window, BART's
# cross attention, ModernBERT's local window |row - key| <= w: 32-bit integers only where
# its distance is bounded); the whole corpus passes by hand (benchmarks/hf_support.py;
# T5 aside: IREE's SPIR-V for a target without 64-bit integers cannot take its buckets).
VULKAN_CASES = [
    ("llama", "eager"),
    # BERT runs on Vulkan in every run in test_mask_spellings too
    pytest.param("bert", "sdpa", marks=pytest.mark.long),
    ("gemma2", "eager"),
    # an encoder-decoder: on the CPU in every run (test_architecture_fused_...); here the
    # slowest Vulkan case by far (90 s under llvmpipe), so in the long runs only
    pytest.param("bart", "sdpa", marks=pytest.mark.long),
    ("modernbert", "sdpa"),
]


@needs_glslang
@needs_vulkan
@pytest.mark.parametrize(("name", "impl"), VULKAN_CASES, ids=[_id(c) for c in VULKAN_CASES])
def test_architecture_on_vulkan_matches_pytorch(name: str, impl: str) -> None:
    model, inputs = hf_corpus.build(name, impl)
    program = torch.export.export(model, inputs(), strict=False)
    module = fc.compile(program, target="vulkan", vulkan_target=ANY_VULKAN)
    shaders = [r.message for r in module.remarks if "generated Vulkan kernel" in r.message]
    assert len(shaders) == hf_corpus.ARCHS[name].attentions, module.remarks
    assert not any("read from memory" in m for m in shaders), shaders
    fresh = inputs()
    with torch.no_grad():
        want = model(*fresh)
    assert rel_error(fc.load(module, device="vulkan")(*fresh), want) < 1e-4


# GPT-OSS: attention with a sink (its slice's sizes computed), two MoE layers' top k;
# its sliding window of 8 guards the length to at least 7
@pytest.mark.parametrize(
    ("name", "impl"), [("llama", "sdpa"), ("bert", "sdpa"), ("gpt_oss", "eager")]
)
def test_dynamic_sequence_length_one_compile_three_lengths(name: str, impl: str) -> None:
    model, _ = hf_corpus.build(name, impl)
    kind = hf_corpus.ARCHS[name].kind
    n = torch.export.Dim("n", min=8, max=60)
    example = (torch.randint(2, hf_corpus.VOCAB, (2, 16)), hf_corpus.padding_mask(kind, 16))
    program = torch.export.export(model, example, dynamic_shapes=(({1: n}, {1: n}),), strict=False)
    module = fc.compile(program, target="cpu")
    assert module.stats["attention_ops"] == hf_corpus.ARCHS[name].attentions, module.remarks
    run = fc.load(module)
    for length in (9, 16, 47):
        fresh = torch.randint(2, hf_corpus.VOCAB, (2, length)), hf_corpus.padding_mask(kind, length)
        with torch.no_grad():
            want = model(*fresh)
        assert rel_error(run(*fresh), want) < 1e-4, f"length {length}"


# GPT-OSS: one query row against the cache, its sink appended to it (eager: no SDPA path)
@pytest.mark.parametrize(
    ("name", "impl"), [("llama", "sdpa"), ("qwen3", "sdpa"), ("gpt2", "sdpa"), ("gpt_oss", "eager")]
)
def test_decode_step_with_past_keys_and_values_as_inputs(name: str, impl: str) -> None:
    step, inputs = hf_corpus.decode_step(name, attn_implementation=impl)
    module = fc.compile(torch.export.export(step, inputs(), strict=False), target="cpu")
    assert module.stats["attention_ops"] == hf_corpus.ARCHS[name].attentions, module.remarks
    fresh = inputs()
    with torch.no_grad():
        want = step(*fresh)
    assert rel_error(fc.load(module)(*fresh), want) < 1e-4


def test_mixture_of_experts_says_how_to_export_its_experts_then_matches_pytorch() -> None:
    """Mixtral's experts as transformers runs them by default (grouped_mm: a custom op and
    a histogram of tokens per expert, of data-dependent sizes) are refused with what to do;
    exported as batched matrix products, the model compiles, its attentions fused."""
    config = transformers.MixtralConfig(
        **hf_corpus.TOKENS, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, num_local_experts=2,
        num_experts_per_tok=1, vocab_size=hf_corpus.VOCAB, max_position_embeddings=64,
    )  # fmt: skip
    torch.manual_seed(0)
    mixtral = transformers.MixtralModel(config).eval()
    model = hf_corpus.LastHidden(mixtral, "decoder").eval()

    def inputs() -> tuple:
        ids = torch.randint(2, hf_corpus.VOCAB, (hf_corpus.BATCH, hf_corpus.SEQ))
        return ids, hf_corpus.padding_mask("decoder")

    with pytest.raises(fc.UnsupportedOpError, match=r'set_experts_implementation\("batched_mm"\)'):
        fc.compile(model, example_args=inputs())
    mixtral.set_experts_implementation("batched_mm")
    module = fc.compile(model, example_args=inputs())
    assert module.stats["attention_ops"] == 1
    fresh = inputs()
    with torch.no_grad():
        assert rel_error(fc.load(module)(*fresh), model(*fresh)) < 1e-4
