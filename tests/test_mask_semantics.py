"""Every mask value gives PyTorch's answer on every row, with each lowering of attention.

Rows with no allowed key are the edge: a finite fill (HF's ``finfo.min``, ``-1e9``,
``-1e4``) gives PyTorch's softmax over equal values; a row whose keys are all ``-inf``
(an additive mask or SDPA's boolean one) gives 0, as ``F.scaled_dot_product_attention``
and FlashAttention do (softmax written out gives NaN there).
"""

from __future__ import annotations

import shutil

import iree.runtime as rt
import pytest
import torch
import torch.nn.functional as F
from conftest import ANY_VULKAN, rel_error

import fusion_compiler as fc
from fusion_compiler import targets

# compiles many models: left out of the edit loop (-m 'not slow'), run in CI
pytestmark = pytest.mark.slow

B, H, N, D, PAD = 2, 2, 40, 64, 7


def _vulkan() -> bool:
    try:
        found = bool(rt.get_driver("vulkan").query_available_devices())
    except Exception:  # no loader, no driver: no device
        return False
    return found and shutil.which("glslangValidator") is not None


# (target, attention): each lowering of a fused attention; Vulkan's generated kernel where
# glslangValidator and a Vulkan device (llvmpipe on a CPU machine) are present. On the
# CPU "auto" is online-softmax's pipeline (test_cpu_auto_is_the_online_softmax_pipeline).
LOWERINGS = [
    ("cpu", "iree"),
    ("cpu", "online-softmax"),
    pytest.param(
        ("vulkan", "auto"),
        marks=pytest.mark.skipif(not _vulkan(), reason="no glslangValidator or Vulkan device"),
    ),
]


def _padding_and_causal() -> torch.Tensor:
    """(B, 1, N, N) bool: causal, the second sequence left-padded by PAD keys, so its
    first PAD query rows see no key at all."""
    keep = torch.ones(N, N, dtype=torch.bool).tril().expand(B, 1, N, N).clone()
    keep[1, :, :, :PAD] = False
    return keep


class Eager(torch.nn.Module):
    """softmax(QKᵀ/√D + mask)·V with an additive mask of ``fill`` where not kept."""

    def __init__(self, fill: float):
        super().__init__()
        self.fill = fill

    def forward(self, q, k, v, keep):
        mask = torch.zeros(keep.shape, dtype=q.dtype).masked_fill(~keep, self.fill)
        scores = q @ k.transpose(-1, -2) / D**0.5 + mask
        return torch.softmax(scores, dim=-1) @ v


class Sdpa(torch.nn.Module):
    def __init__(self, boolean: bool):
        super().__init__()
        self.boolean = boolean

    def forward(self, q, k, v, keep):
        mask = torch.zeros(keep.shape, dtype=q.dtype).masked_fill(~keep, -torch.inf)
        mask = keep if self.boolean else mask
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.fixture(params=LOWERINGS, ids=lambda p: "-".join(p))
def lowering(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param


def _run(
    model: torch.nn.Module, lowering: tuple[str, str], dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    target, attention = lowering
    keep = _padding_and_causal()
    example = tuple(torch.randn(B, H, N, D, dtype=dtype) for _ in range(3)) + (keep,)
    options = {"vulkan_target": ANY_VULKAN} if target == "vulkan" else {}
    module = fc.compile(model, example_args=example, target=target, attention=attention, **options)
    assert module.stats["attention_ops"] == 1, module.remarks
    assert module.stats["softmax_ops"] == 0
    fresh = tuple(torch.randn(B, H, N, D, dtype=dtype) for _ in range(3)) + (keep,)
    # PyTorch in the model's own f32: with a fill like -1e9 the scores' digits are lost in
    # f32 (ulp(1e9) = 64), so a row of nothing but fills gets equal weights there, not
    # the float64 softmax of the scores
    with torch.no_grad():
        want = model(*fresh)
    device = "vulkan" if target == "vulkan" else "local-task"
    return fc.load(module, device=device)(*fresh), want


# On a row of nothing but -1e4 fills the logits keep about 3 digits in f32 (ulp(1e4) is
# 1e-3), computed in a different order here (exp2 domain) than in PyTorch: the bound is
# that rounding's, not our usual 1e-4.
FILLS = [(torch.finfo(torch.float32).min, 1e-4), (-1e9, 1e-4), (-1e4, 1e-3)]


@pytest.mark.parametrize(("fill", "bound"), FILLS, ids=["finfo.min", "-1e9", "-1e4"])
def test_finite_fill_matches_pytorch_on_rows_with_no_allowed_key(fill, bound, lowering) -> None:
    got, want = _run(Eager(fill), lowering)
    assert torch.isfinite(want).all()
    assert rel_error(got, want) < bound


def test_half_finfo_min_fill_swamps_the_scores_as_in_pytorch(lowering) -> None:
    """In fp16, s + finfo(fp16).min rounds to the fill itself: a row of nothing but fills
    gets equal weights, not the softmax of its scores."""
    got, want = _run(Eager(torch.finfo(torch.float16).min), lowering, torch.float16)
    assert rel_error(got[1, :, :PAD], want[1, :, :PAD]) < 1e-3  # the rows of fills alone
    assert rel_error(got, want) < 3e-3


class SdpaHalfFill(torch.nn.Module):
    """SDPA with an fp16 ``attn_mask`` of ``finfo(f16).min`` where not kept."""

    def forward(self, q, k, v, keep):
        fill = torch.finfo(q.dtype).min
        mask = torch.zeros(keep.shape, dtype=q.dtype).masked_fill(~keep, fill)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("head_dim", [64, 160])
def test_sdpa_fp16_fill_keeps_the_scores_as_in_pytorch(head_dim: int, lowering) -> None:
    """PyTorch's SDPA adds an fp16 attn_mask to f32 scores: -65504 keeps their digits, so
    a row of nothing but fills is weighed by its scores (written out in fp16 the same
    fill swamps them: test_half_finfo_min_fill_swamps_the_scores_as_in_pytorch). Head
    dim 160 is decomposed on the CPU (fusion-decompose-attention). Was: equal weights,
    rel. error 0.2 on those rows."""
    target, attention = lowering
    keep = _padding_and_causal()
    torch.manual_seed(0)
    qkv = [torch.randn(B, H, N, head_dim).half() for _ in range(3)]
    options = {"vulkan_target": ANY_VULKAN} if target == "vulkan" else {}
    module = fc.compile(SdpaHalfFill(), (*qkv, keep), target=target, attention=attention, **options)
    fresh = [torch.randn(B, H, N, head_dim).half() for _ in range(3)]
    with torch.no_grad():
        want = SdpaHalfFill()(*fresh, keep)
    device = "vulkan" if target == "vulkan" else "local-task"
    got = fc.load(module, device=device)(*fresh, keep)
    # the rows of fills alone: their logits sit at -65504, where f32 keeps 3 decimals of
    # the score (ulp 0.004), rounded in another order (exp2 domain) than PyTorch's; equal
    # weights (the old answer) were 0.2 to 1 away
    assert rel_error(got[1, :, :PAD], want[1, :, :PAD]) < 2e-2
    assert rel_error(got, want) < 1e-2


@pytest.mark.parametrize("boolean", [True, False], ids=["bool", "minus-inf"])
def test_rows_with_every_key_minus_inf_give_zero(boolean, lowering) -> None:
    got, want = _run(Sdpa(boolean), lowering)
    assert (want[1, :, :PAD] == 0).all()  # PyTorch's own answer there
    assert rel_error(got, want) < 1e-4


class HalfFill(torch.nn.Module):
    """transformers' eager fp16 attention: ``finfo(f16).min`` added to the fp16 scores,
    softmax upcast to f32 (Gemma 2, and every eager model run in fp16)."""

    def forward(self, q, k, v, keep):
        s = q @ k.transpose(-1, -2) / D**0.5
        fill = torch.zeros_like(s).masked_fill(~keep, torch.finfo(s.dtype).min)
        return torch.softmax(s + fill, dim=-1, dtype=torch.float32).to(q.dtype) @ v


def test_cpu_auto_is_the_online_softmax_pipeline() -> None:
    """What lets the tests of the CPU's lowerings leave "auto" out."""
    assert targets.pipeline("cpu", "auto") == targets.pipeline("cpu", "online-softmax")


@pytest.mark.parametrize("attention", ["online-softmax"])
def test_fp16_fill_swamps_the_score_as_in_pytorch(attention: str) -> None:
    """In fp16, ``s + finfo(f16).min`` rounds to the fill: a row with no key gets equal
    weights in PyTorch. The fused attention adds in f32, so it must drop the score there."""
    keep = _padding_and_causal()
    example = tuple(torch.randn(B, H, N, D).half() for _ in range(3)) + (keep,)
    module = fc.compile(HalfFill(), example_args=example, attention=attention)
    assert module.stats["attention_ops"] == 1, module.remarks
    fresh = tuple(torch.randn(B, H, N, D).half() for _ in range(3)) + (keep,)
    want = HalfFill()(*fresh)
    assert rel_error(fc.load(module)(*fresh), want) < 3e-3


class Selected(torch.nn.Module):
    """GPT-2's eager attention: ``where(keep, s, finfo.min)`` (or ``masked_fill``), a fill
    that swamps any f32 score, so it equals the additive mask on every row."""

    def __init__(self, spelling: str):
        super().__init__()
        self.spelling = spelling

    def forward(self, q, k, v, keep):
        s = q @ k.transpose(-1, -2) / D**0.5
        fill = torch.finfo(s.dtype).min
        s = torch.where(keep, s, fill) if self.spelling == "where" else s.masked_fill(~keep, fill)
        return torch.softmax(s, dim=-1) @ v


@pytest.mark.parametrize("spelling", ["where", "masked_fill"])
def test_selected_finfo_min_is_fused_and_matches_on_every_row(spelling, lowering) -> None:
    got, want = _run(Selected(spelling), lowering)
    assert torch.isfinite(want).all()
    assert rel_error(got, want) < 1e-4


class Clamped(torch.nn.Module):
    """XGLM's eager attention: the masked scores clamped, ``max(s + mask, finfo.min)``, so
    a -inf mask becomes the finite fill and a row of nothing but fills gets equal weights."""

    def __init__(self, fill: float):
        super().__init__()
        self.fill = fill

    def forward(self, q, k, v, keep):
        mask = torch.zeros(keep.shape, dtype=q.dtype).masked_fill(~keep, self.fill)
        s = q @ k.transpose(-1, -2) / D**0.5 + mask
        s = torch.max(s, torch.tensor(torch.finfo(s.dtype).min))
        return torch.softmax(s, dim=-1) @ v


@pytest.mark.parametrize("fill", [-torch.inf, torch.finfo(torch.float32).min], ids=str)
def test_clamped_scores_are_fused_and_match_on_every_row(fill, lowering) -> None:
    got, want = _run(Clamped(fill), lowering)
    assert torch.isfinite(want).all()
    assert rel_error(got, want) < 1e-4


@pytest.mark.parametrize("lengths", [(1, 300), (130, 257), (300, 300), (40, 40)], ids=str)
def test_kept_keys_found_per_call_bound_the_cpu_loop_exactly(lengths) -> None:
    """A padding mask input, -inf past each sequence's length: the CPU loop visits only
    the key blocks up to the longest sequence's last kept key (found per call, the
    example's padding another), one sequence of a single key among them."""
    from variants import PaddingMaskAttention

    model = PaddingMaskAttention().eval()

    def inputs(kept: tuple[int, ...]) -> tuple:
        qkv = tuple(torch.randn(len(kept), H, 300, D) for _ in range(3))
        return (*qkv, torch.arange(300)[None, :] < torch.tensor(kept)[:, None])

    module = fc.compile(model, example_args=inputs((300, 200)), target="cpu")
    said = "key blocks outside each query block's kept keys skipped per call"
    assert any(said in r.message for r in module.remarks), module.remarks
    fresh = inputs(lengths)
    with torch.no_grad():
        want = model(*(x.double() if x.is_floating_point() else x for x in fresh))
    got = torch.as_tensor(fc.load(module, device="local-task")(*fresh))
    assert rel_error(got, want) < 1e-5


class CausalWithBias(torch.nn.Module):
    """A causal -inf band beside a bias input: the input decides no -inf."""

    def forward(self, q, k, v, bias):
        n = q.shape[-2]
        future = torch.ones(n, n, dtype=torch.bool).triu(1)
        s = (q @ k.transpose(-1, -2)) / D**0.5 + bias
        return torch.softmax(s.masked_fill(future, float("-inf")), dim=-1) @ v


def test_kept_keys_are_not_sought_per_call_where_no_input_decides_a_minus_inf() -> None:
    """The causal bound already skips what the band masks; a reduction and a host read
    per query block would find nothing more."""
    x = tuple(torch.randn(B, H, N, D) for _ in range(3)) + (torch.randn(B, H, N, N),)
    module = fc.compile(CausalWithBias(), example_args=x, target="cpu")
    said = [r.message for r in module.remarks if "online softmax" in r.message]
    assert said and "per call" not in said[0] and "diagonal" in said[0], said
    with torch.no_grad():
        want = CausalWithBias()(*(t.double() for t in x))
    assert rel_error(torch.as_tensor(fc.load(module)(*x)), want) < 1e-5
