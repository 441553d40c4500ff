"""Attention with a sink (GPT-OSS): one learned logit per head appended to every row of
scores before the softmax, its column dropped after. Fused into one online attention
started from the sink, on every target, and equal to PyTorch on fresh inputs."""

from __future__ import annotations

import pytest
import torch
from conftest import ANY_VULKAN, rel_error
from test_spirv_attention import needs_glslang, needs_vulkan

import fusion_compiler as fc

B, H, KV, N, D = 2, 4, 2, 32, 16


class SinkAttention(torch.nn.Module):
    """transformers' GPT-OSS eager attention: repeat_kv, scaled scores plus the mask,
    the sinks concatenated, the row max subtracted (or not), softmax, the sink dropped."""

    def __init__(self, shift: bool = True, scale_sinks: float = 1.0):
        super().__init__()
        self.sinks = torch.nn.Parameter(torch.randn(H) * scale_sinks)
        self.shift = shift

    def forward(self, q, k, v, mask=None):
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        scores = torch.matmul(q, k.transpose(2, 3)) * D**-0.5
        if mask is not None:
            scores = scores + mask
        sinks = self.sinks.reshape(1, -1, 1, 1).expand(q.shape[0], -1, q.shape[-2], -1)
        logits = torch.cat([scores, sinks], dim=-1)
        if self.shift:
            logits = logits - logits.max(dim=-1, keepdim=True).values
        probs = torch.softmax(logits, dim=-1, dtype=logits.dtype)[..., :-1]
        return torch.matmul(probs, v)


def _causal(n: int) -> torch.Tensor:
    return torch.full((n, n), float("-inf")).triu(1)[None, None].expand(B, 1, n, n)


def _left_padded(n: int) -> torch.Tensor:
    """Causal, and the second sequence's first 5 keys padded: its first 5 rows see no
    key, and PyTorch gives them the sink's zero value row."""
    mask = _causal(n).clone()
    mask[1, :, :, :5] = float("-inf")
    return mask


def _window(n: int, w: int = 8) -> torch.Tensor:
    rows, keys = torch.arange(n)[:, None], torch.arange(n)[None, :]
    allowed = (keys <= rows) & (keys > rows - w)
    return torch.where(allowed, 0.0, float("-inf"))[None, None].expand(B, 1, n, n)


MASKS = {"none": None, "causal": _causal, "left-padded": _left_padded, "window": _window}


def _inputs(n: int = N):
    return torch.randn(B, H, n, D), torch.randn(B, KV, n, D), torch.randn(B, KV, n, D)


def _compiled(model, mask, **options):
    q, k, v = _inputs()
    args = (q, k, v) if mask is None else (q, k, v, mask(N))
    return fc.compile(torch.export.export(model, args, strict=False), **options)


def _check(module, model, mask, device="local-task", bound=1e-5) -> None:
    run = fc.load(module, device=device)
    q, k, v = _inputs()
    args = (q, k, v) if mask is None else (q, k, v, mask(N))
    with torch.no_grad():
        want = model(*args)
    assert rel_error(run(*args), want) < bound


@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("shift", [True, False], ids=["max-subtracted", "plain"])
def test_sink_attention_is_one_fused_attention_equal_to_pytorch(mask: str, shift: bool) -> None:
    model = SinkAttention(shift).eval()
    module = _compiled(model, MASKS[mask])
    messages = [r.message for r in module.remarks]
    assert module.stats["attention_ops"] == 1, messages
    assert module.stats["softmax_ops"] == 0, messages
    assert any("with a sink" in m for m in messages), messages
    assert any("rewritten as online softmax" in m for m in messages), messages
    _check(module, model, MASKS[mask])


def test_a_sink_far_above_or_below_the_scores() -> None:
    """exp(sink - max) overflows or vanishes in f32 there: the rows come out as PyTorch's
    (about 0, or the plain attention)."""
    for scale in (200.0, -200.0):
        model = SinkAttention(scale_sinks=scale).eval()
        module = _compiled(model, _causal)
        assert module.stats["attention_ops"] == 1
        q, k, v = _inputs()
        with torch.no_grad():
            want = model(q, k, v, _causal(N))
        got = fc.load(module)(q, k, v, _causal(N))
        assert torch.isfinite(got).all()
        assert (got - want).abs().max() < 1e-5


def test_sink_attention_left_to_irees_online_attention_op() -> None:
    """attention="iree": the fused op is IREE's own online attention, started from the
    sink, and IREE lowers it."""
    model = SinkAttention().eval()
    module = _compiled(model, _left_padded, attention="iree")
    assert module.stats["attention_ops"] == 1
    assert module.stats["softmax_ops"] == 0
    _check(module, model, _left_padded)


def test_fused_ir_starts_the_online_attention_from_the_sink() -> None:
    model = SinkAttention().eval()
    fused = _compiled(model, _causal, compile_to="fused", attention="iree")
    assert "iree_linalg_ext.online_attention" in fused.mlir
    assert "tensor.concat" not in fused.mlir  # no (B, H, N, N + 1) logits


@needs_glslang
@needs_vulkan
def test_sink_attention_on_vulkan_matches_pytorch() -> None:
    """Vulkan: decomposed into the scores, a running max and sum started from the sink,
    and P·V (IREE's SPIR-V code generation cannot lower the attention ops)."""
    model = SinkAttention().eval()
    module = _compiled(model, _left_padded, target="vulkan", vulkan_target=ANY_VULKAN)
    assert any("running max and sum" in r.message for r in module.remarks)
    _check(module, model, _left_padded, device="vulkan", bound=1e-4)


class _NotASink(torch.nn.Module):
    """The softmax's last column dropped, but it is a key of the scores, not a sink."""

    def forward(self, q, k, v):
        probs = torch.softmax(q @ k.transpose(-1, -2), dim=-1)[..., :-1]
        return probs @ v[..., :-1, :]


def test_a_dropped_key_that_is_no_sink_is_not_fused_and_says_why() -> None:
    example = tuple(torch.randn(B, H, N, D) for _ in range(3))
    program = torch.export.export(_NotASink(), example, strict=False)
    module = fc.compile(program)
    assert module.stats["attention_ops"] == 0
    assert any("not a concatenated sink" in r.message for r in module.remarks), module.remarks
    run = fc.load(module)
    q, k, v = (torch.randn(B, H, N, D) for _ in range(3))
    assert rel_error(run(q, k, v), _NotASink()(q, k, v)) < 1e-5


def test_fp16_sink_attention_widened_for_its_softmax_is_fused() -> None:
    """In fp16 the logits are widened to f32 for the softmax (as PyTorch computes it) and
    the probabilities narrowed back: the same fused attention, within fp16 of PyTorch's
    float32 answer."""
    model = SinkAttention().eval()
    q, k, v = (x.half() for x in _inputs())
    program = torch.export.export(model.half(), (q, k, v, _causal(N).half()), strict=False)
    module = fc.compile(program)
    assert module.stats["attention_ops"] == 1, module.remarks
    assert module.stats["softmax_ops"] == 0
    q, k, v = (x.half() for x in _inputs())
    with torch.no_grad():
        want = model.float()(q.float(), k.float(), v.float(), _causal(N))
    assert rel_error(fc.load(module)(q, k, v, _causal(N).half()), want) < 2e-3


@pytest.mark.parametrize("window", [0, 24], ids=["causal", "window"])
def test_the_sm90_kernel_adds_the_sink_to_each_rows_sum(window: int) -> None:
    """On CUDA sm_90 the attention is the generated kernel with a sink: its causal (or
    window) blocks skipped as without one, each row's sum taking exp2 of the sink's
    logit at the end. Run under Triton's interpreter against PyTorch."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import sink_attention_gpu as gpt_oss

    from fusion_compiler.backends.dispatch import specs_in
    from fusion_compiler.backends.triton.kernel import run_interpreted
    from fusion_compiler.compiler import new_session
    from fusion_compiler.ir import ir

    torch.manual_seed(0)
    model = gpt_oss.SinkAttention(window).eval().half()
    q, k, v = gpt_oss._inputs((1, 96, window, 96), "cpu")
    fused = fc.compile(model, (q, k, v), target="cuda", cuda_arch="sm_90", compile_to="fused")
    lowered = [r.message for r in fused.remarks if "generated sm_90 kernel" in r.message]
    assert len(lowered) == 1 and "a sink" in lowered[0], fused.remarks
    with new_session().context:
        (spec,) = specs_in(ir.Module.parse(fused.mlir).operation)
    assert spec.sink and (spec.causal_offset == 0)
    heads = gpt_oss.HEADS
    sinks = model.sinks.detach().float() * 1.4426950408889634  # base 2
    rows = sinks[:, None].expand(heads, q.shape[2]).contiguous()
    kv = (x.reshape(-1, x.shape[2], x.shape[3]) for x in (k, v))
    got = run_interpreted(spec, q.reshape(heads, -1, q.shape[3]), *kv, sink=rows)
    with torch.no_grad():
        want = model.float()(q.float(), k.float(), v.float())
    assert rel_error(got.reshape(want.shape), want) < 2e-3


def _sm90_spec_and_rows(model, example, **options):
    """``model`` (variants.Attention with a sink) compiled for sm_90 up to its fused IR:
    its one kernel's spec, and the sink logits a call binds, (B·H, Nq) in base 2."""
    from fusion_compiler.backends.dispatch import specs_in
    from fusion_compiler.compiler import new_session
    from fusion_compiler.ir import ir

    fused = fc.compile(
        model, example, target="cuda", cuda_arch="sm_90", compile_to="fused", **options
    )
    lowered = [r.message for r in fused.remarks if "generated sm_90 kernel" in r.message]
    assert len(lowered) == 1 and "a sink" in lowered[0], fused.remarks
    with new_session().context:
        (spec,) = specs_in(ir.Module.parse(fused.mlir).operation)
    assert spec.sink
    return spec, model.sinks.detach().float() * 1.4426950408889634


@pytest.mark.parametrize("gqa", ["repeat_kv", None], ids=["packed-gqa", "heads"])
def test_the_sm90_split_kv_kernel_takes_the_sink_in_its_first_split(gqa) -> None:
    """A decoding step (one query over many keys): split-KV programs, the GQA heads'
    rows packed; split 0 takes the sink into its online softmax, the combine kernel
    merges the splits as always. Under Triton's interpreter against PyTorch."""
    from variants import Attention

    from fusion_compiler.backends.triton.kernel import run_interpreted

    torch.manual_seed(0)
    b, h, kv, nk, d = 1, 8, 2 if gqa else 8, 3000, 64
    model = Attention(h, 1, nk, d, gqa=gqa, kv_heads=kv, sink=True).eval()
    with torch.no_grad():
        model.sinks[0] = 30.0  # a sink above every score of its rows
        model.sinks[1] = float("-inf")  # and one that weighs nothing
    q, k, v = torch.randn(b, h, 1, d).half(), *(torch.randn(b, kv, nk, d).half() for _ in "kv")
    spec, sinks = _sm90_spec_and_rows(model, (q, k, v))
    assert spec.splits > 1 and bool(spec.pack_gqa) == bool(gqa)
    rows = sinks.repeat(b)[:, None].contiguous()
    got = run_interpreted(spec, q.reshape(b * h, 1, d), k.reshape(-1, nk, d), v, sink=rows)
    with torch.no_grad():
        want = model.double()(q.double(), k.double(), v.double())
    assert rel_error(got.reshape(want.shape), want) < 2e-3


def test_a_sink_at_dynamic_lengths_is_fused_and_equal_to_pytorch() -> None:
    """With a dynamic sequence length torch's ``[..., :-1]`` computes the slice's sizes
    (clamped, normalised); detection proves from them that it drops exactly the sink's
    column, and one compile gives PyTorch's answer at every length."""
    from variants import Attention

    torch.manual_seed(0)
    model = Attention(4, 64, 64, 16, mask="causal-iota", sink=True).eval()
    n = torch.export.Dim("n", min=2, max=512)
    example = tuple(torch.randn(1, 4, 64, 16) for _ in range(3))
    module = fc.compile(model, example, dynamic_shapes=({2: n},) * 3)
    assert module.stats["attention_ops"] == 1, module.remarks
    assert module.stats["softmax_ops"] == 0
    run = fc.load(module)
    for length in (2, 37, 300):
        args = tuple(torch.randn(1, 4, length, 16) for _ in range(3))
        with torch.no_grad():
            assert rel_error(run(*args), model(*args)) < 1e-5, f"length {length}"


def test_the_sm90_kernel_takes_a_sink_at_dynamic_lengths() -> None:
    """Sequence lengths dynamic: the sink's (B·H, n) logits read at the call's length."""
    from variants import Attention

    from fusion_compiler.backends.triton.kernel import run_interpreted

    torch.manual_seed(0)
    model = Attention(4, 128, 128, 64, mask="causal-iota", upcast=True, sink=True).eval()
    n = torch.export.Dim("n", min=2, max=4096)
    example = tuple(torch.randn(1, 4, 128, 64).half() for _ in range(3))
    spec, sinks = _sm90_spec_and_rows(model, example, dynamic_shapes=({2: n},) * 3)
    assert spec.dynamic
    for length in (77, 130):
        q, k, v = (torch.randn(1, 4, length, 64).half() for _ in range(3))
        sizes = torch.tensor([length, length], dtype=torch.int32)
        rows = sinks[:, None].expand(4, length).contiguous()
        got = run_interpreted(spec, q, k, v, sizes=sizes, sink=rows)
        with torch.no_grad():
            want = model.double()(q.double(), k.double(), v.double())
        assert rel_error(got.reshape(want.shape), want) < 2e-3, f"length {length}"


class _FirstColumnDropped(torch.nn.Module):
    """A logit prepended to the scores and its column dropped after: not the sink form
    detection knows (the appended, last column)."""

    def forward(self, q, k, v, first):
        logits = torch.cat([first, q @ k.transpose(-1, -2)], dim=-1)
        return torch.softmax(logits, dim=-1)[..., 1:] @ v


def test_probabilities_sliced_otherwise_are_a_near_miss_that_says_why() -> None:
    q, k, v = _inputs()
    first = torch.randn(B, H, N, 1)
    model = _FirstColumnDropped()
    module = fc.compile(model, (q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), first))
    assert module.stats["attention_ops"] == 0
    assert any("sliced before P·V" in r.message for r in module.remarks), module.remarks
    args = (q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), first)
    assert rel_error(fc.load(module)(*args), model(*args)) < 1e-5


class _ShiftedAlongColumns(torch.nn.Module):
    """The row maxes subtracted along the columns (an (M, 1) max broadcast as (1, M),
    M = N + 1): each entry of a row shifted by another amount, which no softmax ignores."""

    def forward(self, q, k, v, sinks):
        logits = torch.cat([q @ k.transpose(-1, -2), sinks], dim=-1)
        logits = logits - logits.amax(-1).unsqueeze(-2)
        return torch.softmax(logits, dim=-1)[..., :-1] @ v


def test_a_max_subtracted_along_the_columns_is_not_dropped() -> None:
    q = torch.randn(B, H, N + 1, D)
    example = (q, torch.randn(B, H, N, D), torch.randn(B, H, N, D), torch.randn(B, H, N + 1, 1))
    module = fc.compile(torch.export.export(_ShiftedAlongColumns(), example, strict=False))
    assert module.stats["attention_ops"] == 0, module.remarks
    fresh = (torch.randn_like(x) for x in example)
    fresh = tuple(fresh)
    assert rel_error(fc.load(module)(*fresh), _ShiftedAlongColumns()(*fresh)) < 1e-5


def test_a_sink_of_minus_inf_is_no_sink() -> None:
    """A sink of -inf (sinks switched off) weighs nothing, even in rows whose keys are
    all at the lowest finite fill: PyTorch's equal weights over the keys alone."""
    model = SinkAttention().eval()
    with torch.no_grad():
        model.sinks.fill_(float("-inf"))
    fill = torch.finfo(torch.float32).min
    mask = torch.where(_causal(N) == 0, 0.0, fill).clone()
    mask[1, :, :5] = fill  # the first 5 rows of the second sequence: every key filled
    module = _compiled(model, lambda n: mask)
    q, k, v = _inputs()
    with torch.no_grad():
        want = model(q, k, v, mask)
    assert rel_error(fc.load(module)(q, k, v, mask), want) < 1e-5


def test_sink_attention_decomposed_matches_pytorch() -> None:
    """fusion-decompose-attention (Vulkan's path) on the CPU: the scores, a running max
    and sum started from the sink, P·V."""
    model = SinkAttention().eval()
    pipeline = "builtin.module(fusion-detect-attention, canonicalize, fusion-decompose-attention)"
    module = _compiled(model, _left_padded, pipeline=pipeline)
    assert any("running max and sum" in r.message for r in module.remarks), module.remarks
    _check(module, model, _left_padded)
