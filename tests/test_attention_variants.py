"""fusion-detect-attention end to end: every variant fused, and equal to PyTorch."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import rel_error
from variants import (
    FUSABLE_MASKS,
    SCALE_FORMS,
    Attention,
    PaddingMaskAttention,
    ScoresReturned,
)

import fusion_compiler as fc

# compiles many models: left out of the edit loop (-m 'not slow'), run in CI
pytestmark = pytest.mark.slow

BOUND = {torch.float32: 1e-4, torch.float16: 3e-3, torch.bfloat16: 2e-2}


def _inputs(b, h, hkv, nq, nk, d, dtype):
    return (
        torch.randn(b, h, nq, d, dtype=dtype),
        torch.randn(b, hkv, nk, d, dtype=dtype),
        torch.randn(b, hkv, nk, d, dtype=dtype),
    )


@pytest.fixture(params=["iree", "online-softmax"])
def attention(request: pytest.FixtureRequest) -> str:
    """Who lowers the fused attention: IREE's op, or our FlashAttention-2 rewrite."""
    return request.param


def _check(
    model: torch.nn.Module, example: tuple, fused: int, attention: str = "iree"
) -> fc.CompiledModule:
    """Compiles ``model``; checks the fused count and the numerics on fresh inputs."""
    module = fc.compile(model, example_args=example, attention=attention)
    assert module.stats["attention_ops"] == fused, module.remarks
    run = fc.load(module)
    fresh = tuple(torch.randn_like(x) if x.is_floating_point() else x for x in example)
    with torch.no_grad():
        want = model.double()(*(x.double() if x.is_floating_point() else x for x in fresh))
        model.float()
    got = run(*fresh)
    got, want = (got, want) if isinstance(got, torch.Tensor) else (got[0], want[0])
    assert got.dtype == example[0].dtype
    assert rel_error(got, want) < BOUND[example[0].dtype]
    return module


@pytest.mark.parametrize("scale_on", SCALE_FORMS)
def test_scale_forms(scale_on: str, attention: str) -> None:
    model = Attention(4, 77, 77, 32, scale_on=scale_on)
    _check(model, _inputs(2, 4, 4, 77, 77, 32, torch.float32), fused=1, attention=attention)


@pytest.mark.parametrize("mask", FUSABLE_MASKS)
def test_masks_and_biases_cross_attention(mask: str, attention: str) -> None:
    # Nq != Nk, neither a tile multiple: the causal diagonal is aligned to the end.
    model = Attention(2, 77, 333, 32, mask=mask)
    _check(model, _inputs(1, 2, 2, 77, 333, 32, torch.float32), fused=1, attention=attention)


def test_boolean_padding_mask_input(attention: str) -> None:
    q, k, v = _inputs(2, 2, 2, 19, 23, 16, torch.float32)
    keep = torch.ones(2, 23, dtype=torch.bool)
    keep[0, 17:] = False
    keep[1, 5:9] = False
    _check(PaddingMaskAttention(), (q, k, v, keep), fused=1, attention=attention)


@pytest.mark.parametrize("gqa", ["repeat_interleave", "repeat_kv"])
@pytest.mark.parametrize("kv_heads", [1, 2])
def test_grouped_and_multi_query(gqa: str, kv_heads: int, attention: str) -> None:
    model = Attention(4, 33, 33, 32, gqa=gqa, kv_heads=kv_heads, mask="causal-tril")
    _check(model, _inputs(1, 4, kv_heads, 33, 33, 32, torch.float32), fused=1, attention=attention)


@pytest.mark.parametrize("head_dim", [32, 64, 80, 96, 128])
def test_head_dims(head_dim: int, attention: str) -> None:
    model = Attention(2, 40, 50, head_dim)
    _check(model, _inputs(1, 2, 2, 40, 50, head_dim, torch.float32), fused=1, attention=attention)


class _SDPA(torch.nn.Module):
    def forward(self, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)


@pytest.mark.parametrize(
    "model", [Attention(2, 40, 50, 160), Attention(2, 40, 50, 160, mask="softcap-causal"), _SDPA()]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_head_dims_above_128_are_decomposed(model: torch.nn.Module, dtype: torch.dtype) -> None:
    """With attention="iree"; the online-softmax rewrite takes them fused (below)."""
    # IREE 3.13 computes attention wrongly when the QK contraction exceeds 128 (on CPU
    # and CUDA; IREE's own SDPA lowering too): such attention is decomposed instead.
    module = _check(model, _inputs(1, 2, 2, 40, 50, 160, dtype), fused=0, attention="iree")
    assert any("above 128" in r.message for r in module.remarks), module.remarks


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("upcast", [False, True])
def test_half_precision(dtype: torch.dtype, upcast: bool, attention: str) -> None:
    model = Attention(4, 77, 77, 64, mask="causal-tril", upcast=upcast)
    _check(model, _inputs(1, 4, 4, 77, 77, 64, dtype), fused=1, attention=attention)


@pytest.mark.parametrize("head_dim", [160, 256])
def test_head_dims_above_128_fused_by_online_softmax(head_dim: int) -> None:
    model = Attention(2, 40, 50, head_dim, mask="softcap-causal")
    example = _inputs(1, 2, 2, 40, 50, head_dim, torch.float32)
    _check(model, example, fused=1, attention="online-softmax")


def test_unknown_attention_mode() -> None:
    with pytest.raises(ValueError, match="unknown attention mode 'flash'"):
        fc.compile("module {}", attention="flash")


class _ClampedScores(torch.nn.Module):
    """Scores clamped before the softmax: not ``scale·s + mask``, left unfused."""

    def forward(self, q, k, v):
        return (q @ k.transpose(-2, -1)).clamp(-5, 5).softmax(-1) @ v


class _FilledProbabilities(torch.nn.Module):
    """Probabilities changed between the softmax and P·V (DeBERTa's older XSoftmax fills
    its masked keys with 0 again): left unfused."""

    def forward(self, q, k, v):
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        p = (q @ k.transpose(-2, -1)).masked_fill(~keep, float("-inf")).softmax(-1)
        return p.masked_fill(~keep, 0.0) @ v


class _NanToNumProbabilities(torch.nn.Module):
    """``nan_to_num`` after the softmax (three selects): left unfused, with the remark."""

    def forward(self, q, k, v):
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        p = (q @ k.transpose(-2, -1)).masked_fill(~keep, float("-inf")).softmax(-1)
        return torch.nan_to_num(p) @ v


class _FactorAfterTheMask(torch.nn.Module):
    """A temperature per head applied after a -inf mask: not folded into Q (-inf·t)."""

    def __init__(self):
        super().__init__()
        self.temperature = torch.nn.Parameter(torch.rand(1, 2, 1, 1) + 0.5)

    def forward(self, q, k, v):
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        s = (q @ k.transpose(-2, -1)).masked_fill(~keep, float("-inf"))
        return (s * self.temperature).softmax(-1) @ v


class _WindowMask(torch.nn.Module):
    """Swin's shifted windows: (B·nW, H, N, N) scores times a logit scale per head (Swin-v2),
    plus a bias, viewed as (B, nW, H, N, N) to add each window's mask, and viewed back."""

    def __init__(self, windows: int, heads: int, n: int):
        super().__init__()
        self.logit_scale = torch.nn.Parameter(torch.log(10 * torch.rand(heads, 1, 1) + 1))
        self.bias = torch.nn.Parameter(torch.randn(heads, n, n))
        groups = torch.randint(0, 3, (windows, n))  # the regions a shifted window joins
        apart = groups[:, :, None] != groups[:, None, :]
        self.register_buffer("mask", torch.zeros(windows, n, n).masked_fill(apart, -100.0))

    def forward(self, q, k, v):
        s = torch.nn.functional.normalize(q, dim=-1) @ torch.nn.functional.normalize(k, dim=-1).mT
        s = s * torch.clamp(self.logit_scale, max=math.log(100)).exp() + self.bias
        windows, heads, n = self.mask.shape[0], s.shape[1], s.shape[-1]
        s = s.view(-1, windows, heads, n, n) + self.mask[None, :, None]
        return s.view(-1, heads, n, n).softmax(-1) @ v


class _WindowMaskThenSink(torch.nn.Module):
    """The window mask added through a view of the scores, then a sink per head (the
    sink's rows are read through the one view left)."""

    def __init__(self, windows: int, heads: int, n: int):
        super().__init__()
        self.sinks = torch.nn.Parameter(torch.randn(heads))
        self.register_buffer("mask", torch.randn(windows, n, n))

    def forward(self, q, k, v):
        windows, heads, n = self.mask.shape[0], q.shape[1], q.shape[-2]
        s = (q @ k.mT * 0.25).view(-1, windows, heads, n, n) + self.mask[None, :, None]
        sinks = self.sinks.reshape(1, -1, 1, 1).expand(q.shape[0], -1, n, -1)
        logits = torch.cat([s.view(-1, heads, n, n), sinks], dim=-1)
        return torch.softmax(logits, dim=-1)[..., :-1] @ v


class _KeysSplitInAView(torch.nn.Module):
    """The scores viewed with the key dim split to add a mask, and back: left unfused
    (the lowerings take a mask of one view)."""

    def __init__(self, m: int, n: int):
        super().__init__()
        self.register_buffer("mask", torch.randn(m, 2, n // 2))

    def forward(self, q, k, v):
        b, h, m, n = q.shape[0], q.shape[1], q.shape[-2], k.shape[-2]
        s = (q @ k.mT * 0.5).view(b, h, m, 2, n // 2) + self.mask
        return s.view(b, h, m, n).softmax(-1) @ v


def test_a_window_mask_added_through_a_view_of_the_scores(attention: str) -> None:
    """A second view of the scores inside the first and back (Swin's shifted windows)
    is one view: fused, its mask replayed through both."""
    _check(_WindowMask(4, 2, 16), _inputs(8, 2, 2, 16, 16, 32, torch.float32), 1, attention)
    example = _inputs(8, 2, 2, 16, 16, 32, torch.float32)
    _check(_WindowMaskThenSink(4, 2, 16), example, 1, attention)


@pytest.mark.parametrize(
    ("model", "reason"),
    [
        (Attention(2, 16, 16, 32, mask="finite-fill"), "masked with the finite value -1e+09"),
        (_FactorAfterTheMask(), "multiplied by a tensor after a mask or softcap"),
        (_KeysSplitInAView(16, 16), "the scores are viewed with the key dim split"),
        (ScoresReturned(), "is also used by"),
        (_ClampedScores(), "the score is clamped at 5"),
        (_FilledProbabilities(), "the probabilities pass through linalg.generic (arith.select)"),
        (_NanToNumProbabilities(), "the probabilities pass through linalg.generic (arith.select)"),
    ],
)
def test_not_fused_and_says_why(model: torch.nn.Module, reason: str) -> None:
    module = _check(model, _inputs(1, 2, 2, 16, 16, 32, torch.float32), fused=0)
    assert any(
        reason in r.message and r.message.startswith("attention not fused") for r in module.remarks
    ), module.remarks


def test_two_layer_decoder_all_attention_fused(attention: str) -> None:
    # Two RoPE + GQA + causal layers written by hand, and nn.MultiheadAttention over
    # a longer memory: three attentions, all fused.
    from models import TwoLayerDecoder

    model = TwoLayerDecoder().eval()
    module = _check(
        model, (torch.randn(2, 77, 64), torch.randn(2, 133, 64)), fused=3, attention=attention
    )
    assert module.stats["softmax_ops"] == 0


def test_remarks_printed_on_request(capsys: pytest.CaptureFixture[str]) -> None:
    fc.compile(
        ScoresReturned(), example_args=_inputs(1, 2, 2, 8, 8, 16, torch.float32), remarks=True
    )
    err = capsys.readouterr().err
    assert "variants.py:" in err and "remark: attention not fused: an intermediate" in err


def test_fusing_drops_the_dispatch_count() -> None:
    model = Attention(4, 64, 64, 32, mask="causal-tril")
    example = _inputs(1, 4, 4, 64, 64, 32, torch.float32)
    fused = fc.compile(model, example_args=example, attention="iree")
    alone = fc.compile(model, example_args=example, pipeline="builtin.module()")
    assert fused.stats["attention_ops"] == 1 and alone.stats["attention_ops"] == 0
    assert fused.stats["dispatches"] < alone.stats["dispatches"]


def test_dynamic_sequence_length_fused_once_run_at_three_lengths(attention: str) -> None:
    from models import ExplicitAttentionBlock

    model = ExplicitAttentionBlock().eval()
    n = torch.export.Dim("n", min=2, max=512)
    module = fc.compile(
        model, (torch.randn(2, 16, 64),), dynamic_shapes={"x": {1: n}}, attention=attention
    )
    assert module.stats["attention_ops"] == 1 and module.stats["softmax_ops"] == 0
    run = fc.load(module)
    for length in (5, 77, 300):
        x = torch.randn(2, length, 64)
        with torch.no_grad():
            assert rel_error(run(x), model(x)) < 1e-4
    with pytest.raises(fc.ArgumentError, match=r"expected \(2, \?, 64\) float32"):
        run(torch.randn(2, 5, 32))


@pytest.mark.parametrize(("nq", "nk", "offset"), [(96, 96, 0), (40, 150, 110)])
def test_online_softmax_skips_key_blocks_above_a_proven_causal_diagonal(
    nq: int, nk: int, offset: int
) -> None:
    model = Attention(2, nq, nk, 32, mask="causal-iota")
    module = _check(
        model, _inputs(1, 2, 2, nq, nk, 32, torch.float32), fused=1, attention="online-softmax"
    )
    assert any(f"diagonal (offset {offset}) skipped" in r.message for r in module.remarks), (
        module.remarks
    )


CAUSAL_SPELLINGS = [
    "causal-tril",
    "causal-where",
    "causal-additive",
    "causal-finfo-min",
    "causal-sliced",
]


@pytest.mark.parametrize("mask", CAUSAL_SPELLINGS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_causal_masks_held_in_buffers_are_proven_causal(mask: str, dtype: torch.dtype) -> None:
    """A registered tril buffer (masked_fill, where; whole or sliced to the call, as
    GPT-2's), an added -inf buffer and a where with finfo.min: the mask's values prove it
    causal (offset nk - nq), the key blocks
    past the diagonal are skipped, and the output is PyTorch's."""
    model = Attention(2, 40, 150, 32, mask=mask)
    module = _check(
        model, _inputs(1, 2, 2, 40, 150, 32, dtype), fused=1, attention="online-softmax"
    )
    assert any("diagonal (offset 110) skipped" in r.message for r in module.remarks), module.remarks


def test_a_finite_fill_that_leaves_rows_without_a_key_is_not_causal() -> None:
    """finfo.min above the diagonal with the first rows keeping no key (offset -8): PyTorch
    weighs those rows' fills equally, so no key block may be skipped; still PyTorch's."""
    model = Attention(2, 64, 64, 32, mask="causal-finfo-min")
    model.keep = torch.ones(64, 64, dtype=torch.bool).tril(diagonal=-8)
    module = _check(
        model, _inputs(1, 2, 2, 64, 64, 32, torch.float32), fused=1, attention="online-softmax"
    )
    assert not any("diagonal" in r.message for r in module.remarks), module.remarks


def test_online_softmax_with_the_host_waiting_for_earlier_query_blocks() -> None:
    """16 query blocks of up to 16 key steps (256x256 blocks): having enqueued block i, the
    host waits for block i - 4 (``passes/online_softmax.py``), the fences carried in the loop."""
    model = Attention(1, 4096, 4096, 32, mask="causal-iota")
    _check(model, _inputs(1, 1, 1, 4096, 4096, 32, torch.float32), fused=1, attention="auto")


class _SoftmaxByHand(torch.nn.Module):
    """exp(s - max) / sum: PyTorch sums fp16 and bf16 in f32, and the front end keeps
    that (an f32 sum narrowed before the division), which is still a softmax."""

    def forward(self, q, k, v):
        s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
        e = torch.exp(s - s.amax(-1, keepdim=True))
        return (e / e.sum(-1, keepdim=True)) @ v


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_softmax_written_by_hand(dtype: torch.dtype, attention: str) -> None:
    _check(_SoftmaxByHand(), _inputs(1, 2, 2, 64, 80, 32, dtype), 1, attention)
