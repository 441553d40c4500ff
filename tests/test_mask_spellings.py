"""One mask, spelled the ways models write it, is one kernel. A causal attention gets the same sm_90
kernel spec (the mask dropped, keys past the diagonal never visited) and the same
online-softmax schedule on the CPU, whether the mask is a registered ``tril`` buffer, an
added ``triu(-inf)``, a ``where`` with ``finfo.min``, an ``arange`` compare,
``is_causal``, SDPA's boolean ``attn_mask``, transformers' own SDPA and eager masks, or
(B·H, M, N) scores from ``bmm`` viewed as (B, H, M, N) to add a ``triu`` and back;
and the same with an offset (fewer queries than keys, a chunk after a cache).
transformers' encoders called without an ``attention_mask`` get no mask at all, and
ModernBERT's local layers (a window both ways, ``|q - k| <= w``) a band."""

from __future__ import annotations

import math
import sys

import pytest
import torch
import torch.nn.functional as F
import transformers
from conftest import ANY_VULKAN, ROOT, rel_error
from hf_corpus import ARCHS, IdsOnly, build
from test_spirv_attention import needs_glslang, needs_vulkan

import fusion_compiler as fc
from fusion_compiler.backends.dispatch import specs_in
from fusion_compiler.compiler import new_session
from fusion_compiler.ir import ir

sys.path.insert(0, str(ROOT / "benchmarks"))
from mask_forms_gpu import transformers_eager, transformers_sdpa  # noqa: E402

# compiles many models: left out of the edit loop (-m 'not slow'), run in CI
pytestmark = pytest.mark.slow

B, H, N, D = 2, 4, 256, 16  # transformers' tiny Llama below: 4 heads of 16
F16 = torch.float16


def _scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])


def _attend(s: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.softmax(s.float(), dim=-1).to(v.dtype) @ v


def _keep(nq: int, nk: int) -> torch.Tensor:
    """Row m keeps the keys up to m + nk - nq (bottom-right aligned, as SDPA's is_causal
    is for nq = nk and a chunk after a cache is)."""
    rows = torch.arange(nq)[:, None] + (nk - nq)
    return torch.arange(nk)[None, :] <= rows


class Spelled(torch.nn.Module):
    def __init__(self, spelling: str) -> None:
        super().__init__()
        self.spelling = spelling
        # as GPT-2 registers it, sliced to the call
        self.register_buffer("bias", torch.tril(torch.ones(N, N)).view(1, 1, N, N))

    def forward(self, q, k, v):
        nq, nk = q.shape[-2], k.shape[-2]
        spelling = self.spelling
        if spelling == "sdpa-is-causal":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        if spelling == "sdpa-bool":
            return F.scaled_dot_product_attention(q, k, v, attn_mask=_keep(nq, nk))
        if spelling == "sdpa-tril-diagonal":
            keep = torch.ones(nq, nk, dtype=torch.bool).tril(diagonal=nk - nq)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        if spelling == "bmm-viewed":  # BART's and XGLM's: (B·H, M, N) scores, viewed to add
            b, h, d = q.shape[0], q.shape[1], q.shape[-1]
            s = torch.bmm(q.reshape(b * h, nq, d), k.reshape(b * h, nk, d).transpose(1, 2))
            s = s.view(b, h, nq, nk) / math.sqrt(d) + torch.full((nq, nk), -math.inf).triu(
                nk - nq + 1
            )
            p = torch.softmax(s.view(b * h, nq, nk).float(), dim=-1).to(v.dtype)
            return torch.bmm(p, v.reshape(b * h, nk, d)).view(b, h, nq, d)
        s = _scores(q, k)
        if spelling == "tril-buffer":
            s = s.masked_fill(self.bias[:, :, nk - nq : nk, :nk] == 0, float("-inf"))
        elif spelling == "triu-added":
            s = s + torch.full((nq, nk), float("-inf"), dtype=s.dtype).triu(nk - nq + 1)
        elif spelling == "where-finfo-min":
            s = torch.where(_keep(nq, nk), s, torch.finfo(s.dtype).min)
        elif spelling == "arange-masked-fill":
            s = s.masked_fill(~_keep(nq, nk), float("-inf"))
        return _attend(s, v)


SPELLINGS = [
    "tril-buffer",
    "triu-added",
    "where-finfo-min",
    "arange-masked-fill",
    "sdpa-is-causal",
    "sdpa-bool",
    "sdpa-tril-diagonal",
    "bmm-viewed",
]


def _spec(fused: fc.CompiledModule):
    with new_session().context:
        specs = specs_in(ir.Module.parse(fused.mlir).operation)
    assert len(specs) >= 1, "no attention became a generated kernel"
    assert len(set(specs)) == 1, "the layers' attentions differ"
    return specs[0]


def _schedule(spec) -> tuple:
    """What decides the kernel's work: the mask (none), the bounds, the tiles."""
    return (
        spec.causal_offset,
        spec.window_start,
        spec.mask_expr,
        spec.mask_dtype,
        spec.mask_inputs,
        spec.block_map,
        spec.block_m,
        spec.block_n,
        spec.num_warps,
        spec.num_stages,
        spec.splits,
        spec.persistent,
    )


def _online_softmax_remarks(module: fc.CompiledModule) -> set[str]:
    return {r.message for r in module.remarks if "online softmax" in r.message}


@pytest.mark.parametrize("nq", [N, 64], ids=["square", "offset"])
def test_every_spelling_gets_the_kernel_of_is_causal(nq: int) -> None:
    torch.manual_seed(0)
    q = torch.randn(B, H, nq, D).to(F16)
    k, v = (torch.randn(B, H, N, D).to(F16) for _ in range(2))
    # SDPA's is_causal aligns top-left: with fewer queries than keys it is another mask
    spellings = SPELLINGS if nq == N else [s for s in SPELLINGS if s != "sdpa-is-causal"]
    specs, schedules = {}, {}
    for spelling in spellings:
        model = Spelled(spelling).eval()
        fused = fc.compile(
            model, example_args=(q, k, v), target="cuda", cuda_arch="sm_90", compile_to="fused"
        )
        specs[spelling] = _spec(fused)
        cpu = fc.compile(
            model, example_args=(q.float(), k.float(), v.float()), target="cpu",
            compile_to="fused", remarks=True,
        )  # fmt: skip
        schedules[spelling] = _online_softmax_remarks(cpu)
    first = spellings[-1]
    reference = specs[first]
    assert reference.causal_offset == N - nq and reference.mask_expr is None
    for spelling, spec in specs.items():
        assert spec == reference, spelling
        assert schedules[spelling] == schedules[first], spelling
    assert f"diagonal (offset {N - nq}) skipped" in next(iter(schedules[first]))


@pytest.mark.parametrize("nq", [N, 64], ids=["square", "offset"])
def test_scores_viewed_to_add_the_mask_and_back_give_pytorchs_answer(nq: int) -> None:
    """BART's and XGLM's form (``bmm-viewed``): one attention on the CPU, its mask
    replayed through the view and back, PyTorch's answer."""
    torch.manual_seed(0)
    model = Spelled("bmm-viewed").eval()
    args = (torch.randn(B, H, nq, D), torch.randn(B, H, N, D), torch.randn(B, H, N, D))
    module = fc.compile(model, example_args=args, target="cpu")
    assert module.stats["attention_ops"] == 1 and module.stats["softmax_ops"] == 0
    fresh = (torch.randn(B, H, nq, D), torch.randn(B, H, N, D), torch.randn(B, H, N, D))
    assert rel_error(fc.load(module)(*fresh), model(*fresh)) < 1e-5


def _llama(impl: str) -> torch.nn.Module:
    config = transformers.LlamaConfig(
        **ARCHS["llama"].config, attn_implementation=impl, use_cache=False
    )
    return transformers.LlamaModel(config).eval().to(F16)


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_transformers_causal_mask_gets_the_kernel_of_is_causal(impl: str) -> None:
    """transformers (no ``attention_mask``) and-s its causal mask with packed-sequence ids
    derived from the position ids (a ``cumsum``, computed at compile time) and indexes
    aranges with them (torch's wrap of negative indices, read away): proven causal and
    pure, its kernel is the plain causal one."""
    torch.manual_seed(0)
    ids = torch.randint(2, 128, (B, N))
    fused = fc.compile(
        _llama(impl), example_args=(ids,), target="cuda", cuda_arch="sm_90", compile_to="fused"
    )
    got = _spec(fused)
    q = torch.randn(B, H, N, D).to(F16)
    plain = fc.compile(
        Spelled("sdpa-is-causal").eval(), example_args=(q, q, q), target="cuda",
        cuda_arch="sm_90", compile_to="fused",
    )  # fmt: skip
    assert _schedule(got) == _schedule(_spec(plain))


class TransformersCausal(torch.nn.Module):
    """transformers' causal mask from ``masking_utils`` (as Llama builds it without an
    ``attention_mask``) and its SDPA or eager attention function, on q, k, v."""

    def __init__(self, impl: str) -> None:
        super().__init__()
        self.impl = impl

    def forward(self, q, k, v):
        spelled = transformers_sdpa if self.impl == "sdpa" else transformers_eager
        return spelled(self, q, k, v)


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_transformers_causal_mask_of_a_large_batch_gets_the_kernel_of_is_causal(impl) -> None:
    """Its packed-sequence ids are computed at compile time for the whole batch, every
    row equal: kept as one row broadcast to the batch, the mask's values are one
    (Nq, Nk) plane, not batch x Nq x Nk (8 x 2048 x 2048 here, more than the proof
    evaluates: a block map per call and a kernel reading the ids was the result)."""
    q = torch.randn(8, 1, 2048, 16).to(F16)
    specs = [
        _spec(fc.compile(m, (q, q, q), target="cuda", cuda_arch="sm_90", compile_to="fused"))
        for m in (TransformersCausal(impl), Spelled("sdpa-is-causal"))
    ]
    assert _schedule(specs[0]) == _schedule(specs[1])
    assert specs[0].mask_inputs == () and not specs[0].block_map


class LongTrilBuffer(torch.nn.Module):
    """A bool tril buffer of the context, 8192 x 8192 (2^26 elements, a long-context
    model's): too many to evaluate at once."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.register_buffer("keep", torch.ones(n, n, dtype=torch.bool).tril()[None, None])

    def forward(self, q, k, v):
        s = _scores(q, k).masked_fill(~self.keep[:, :, : q.shape[-2], : k.shape[-2]], -math.inf)
        return _attend(s, v)


def test_a_long_tril_buffer_gets_the_kernel_of_is_causal() -> None:
    """Its values are scanned a block of rows at a time (was: more than 2^24 elements
    were not evaluated, and the kernel read the 64 MB mask per tile)."""
    q = torch.randn(1, 1, 8192, 16).to(F16)
    specs = [
        _spec(fc.compile(m, (q, q, q), target="cuda", cuda_arch="sm_90", compile_to="fused"))
        for m in (LongTrilBuffer(8192).eval(), Spelled("sdpa-is-causal"))
    ]
    assert _schedule(specs[0]) == _schedule(specs[1])


def test_transformers_causal_mask_without_its_reads_gives_pytorchs_answer() -> None:
    """The packed-sequence ids computed at compile time, the mask proven causal and
    dropped: the CPU module's hidden states are PyTorch's."""
    torch.manual_seed(0)
    model = _llama("sdpa").float()
    ids = torch.randint(2, 128, (B, 96))
    module = fc.compile(model, example_args=(ids,), target="cpu", remarks=True)
    assert module.stats["attention_ops"] == 2
    assert any("diagonal (offset 0) skipped" in r.message for r in module.remarks)
    with torch.no_grad():
        want = model(ids).last_hidden_state
    got = fc.load(module)(ids)
    got = got[0] if isinstance(got, (tuple, list)) else got
    assert rel_error(torch.as_tensor(got), want) < 1e-4


ENCODER_SEQ = 64  # the corpus configs' positions


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
@pytest.mark.parametrize("name", ["bert", "distilbert", "modernbert"])
def test_encoders_without_padding_get_no_mask(name: str, impl: str) -> None:
    """transformers writes "every key" as ``q_idx >= 0`` (and an additive 0 or finfo.min
    from it): folded to 0, the mask is dropped; ModernBERT's local layers keep the
    window alone, as bounds of the key loop."""
    model = IdsOnly(build(name, impl)[0].model).eval().to(F16)
    ids = torch.randint(2, 128, (B, ENCODER_SEQ))
    fused = fc.compile(
        model, example_args=(ids,), target="cuda", cuda_arch="sm_90", compile_to="fused"
    )
    with new_session().context:
        specs = specs_in(ir.Module.parse(fused.mlir).operation)
    assert len(specs) == 2
    for spec in specs:
        assert spec.mask_expr is None and spec.mask_dtype is None and not spec.block_map
    bands = sorted(((s.causal_offset, s.window_start) for s in specs), key=str)
    half = ARCHS["modernbert"].config["local_attention"] // 2
    want = [(None, None), (half, -half)] if name == "modernbert" else [(None, None)] * 2
    assert bands == sorted(want, key=str)


@pytest.mark.parametrize(
    "name, target",
    [
        ("bert", "cpu"),
        ("modernbert", "cpu"),
        pytest.param("bert", "vulkan", marks=[needs_glslang, needs_vulkan]),
    ],
)
def test_encoders_without_padding_give_pytorchs_answer(name: str, target: str) -> None:
    """On the CPU and on Vulkan (whose shader reads any mask it keeps: none here)."""
    torch.manual_seed(0)
    model = IdsOnly(build(name, "sdpa")[0].model).eval()
    ids = torch.randint(2, 128, (B, ENCODER_SEQ))
    options = {"vulkan_target": ANY_VULKAN} if target == "vulkan" else {}
    module = fc.compile(model, example_args=(ids,), target=target, remarks=True, **options)
    if target == "vulkan":
        shaders = [r.message for r in module.remarks if "Vulkan" in r.message]
        assert len(shaders) == 2 and not any("mask" in m for m in shaders), shaders
    with torch.no_grad():
        want = model(ids)
    device = "vulkan" if target == "vulkan" else "local-task"
    got = torch.as_tensor(fc.load(module, device=device)(ids))
    assert rel_error(got, want) < 1e-4
