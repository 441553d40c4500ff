"""Inputs that once gave a wrong answer without an error, each against PyTorch.

Each test names the defect it guards: the shape or spelling that went wrong, on the
lowering where it did.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import ANY_VULKAN, rel_error
from test_mask_semantics import LOWERINGS
from torch.export import Dim, export

import fusion_compiler as fc

# compiles many models: left out of the edit loop (-m 'not slow'), run in CI
pytestmark = pytest.mark.slow


class OneKVHead(torch.nn.Module):
    """Multi-query attention: one K/V head shared by every query head."""

    def __init__(self, spelling: str):
        super().__init__()
        self.spelling = spelling

    def forward(self, q, k, v):
        heads = q.shape[1]
        if self.spelling == "expand":
            k, v = k.expand(-1, heads, -1, -1), v.expand(-1, heads, -1, -1)
        elif self.spelling == "repeat_interleave":
            k, v = k.repeat_interleave(heads, dim=1), v.repeat_interleave(heads, dim=1)
        elif self.spelling == "matmul-broadcast":
            scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
            return torch.softmax(scores, dim=-1) @ v
        return F.scaled_dot_product_attention(q, k, v)


# Batch 1 and more keys than one 256-row block: both broadcasts were fused into the loop's
# dispatches and llvm-cpu read uninitialised memory (rel. error 1 to 1e38, NaN).
@pytest.mark.parametrize("spelling", ["expand", "repeat_interleave", "matmul-broadcast"])
@pytest.mark.parametrize("n", [300, 257])
def test_multi_query_batch_one_past_one_block(spelling: str, n: int) -> None:
    q = torch.randn(1, 4, n, 32)
    k, v = torch.randn(1, 1, n, 32), torch.randn(1, 1, n, 32)
    model = OneKVHead(spelling)
    run = fc.load(fc.compile(model, (q, k, v), target="cpu"))
    q, k, v = torch.randn_like(q), torch.randn_like(k), torch.randn_like(v)
    assert rel_error(run(q, k, v), model(q.double(), k.double(), v.double())) < 1e-5


class Sdpa(torch.nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


# A dynamic sequence is left to IREE's attention op, which computes head dims above 128
# wrongly (rel. error 0.6-0.8): the online-softmax pipeline lacked the decomposition guard.
@pytest.mark.parametrize("head_dim", [160, 256])
def test_dynamic_sequence_with_head_dim_above_128(head_dim: int) -> None:
    example = tuple(torch.randn(1, 2, 40, head_dim) for _ in range(3))
    n = Dim("n", min=2, max=512)
    program = export(Sdpa(), example, dynamic_shapes=({2: n}, {2: n}, {2: n}))
    run = fc.load(fc.compile(program, target="cpu"))
    q, k, v = (torch.randn(1, 2, 77, head_dim) for _ in range(3))
    assert rel_error(run(q, k, v), Sdpa()(q.double(), k.double(), v.double())) < 1e-5


class Written(torch.nn.Module):
    def forward(self, q, k, v):
        return torch.softmax(q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5, dim=-1) @ v


# No keys gave NaN with our loop (0/0) and SIGFPE inside IREE's compiler with its op; a
# batch, head or query extent of 0 stopped the compiler the same way.
@pytest.mark.parametrize("attention", ["auto", "iree"])
@pytest.mark.parametrize("model", [Sdpa(), Written()], ids=["sdpa", "written"])
@pytest.mark.parametrize(
    "q_shape, kv_shape",
    [
        ((1, 2, 8, 16), (1, 2, 0, 16)),
        ((0, 2, 8, 16),) * 2,
        ((1, 0, 8, 16),) * 2,
        ((1, 2, 0, 16), (1, 2, 8, 16)),
    ],
    ids=["no-keys", "no-batch", "no-heads", "no-queries"],
)
def test_attention_with_an_extent_of_zero(q_shape, kv_shape, model, attention: str) -> None:
    q, k, v = torch.randn(q_shape), torch.randn(kv_shape), torch.randn(kv_shape)
    run = fc.load(fc.compile(model, (q, k, v), target="cpu", attention=attention))
    got, want = run(q, k, v), model(q, k, v)
    assert got.shape == want.shape and torch.equal(got, want)


class MaskedFill(torch.nn.Module):
    """A key padding mask applied by ``masked_fill`` or ``where`` with -inf."""

    def __init__(self, spelling: str):
        super().__init__()
        self.spelling = spelling

    def forward(self, q, k, v, keep):
        s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
        if self.spelling == "masked_fill":
            s = s.masked_fill(~keep, float("-inf"))
        else:
            s = torch.where(keep, s, float("-inf"))
        return torch.softmax(s, dim=-1) @ v


# masked_fill was fused as an additive -inf mask: a NaN or inf score at a masked key
# (garbage past a cache's length) made the whole row NaN, where PyTorch drops it.
# IREE's op adds its mask; it is tested below.
@pytest.mark.parametrize("lowering", [x for x in LOWERINGS if x != ("cpu", "iree")])
@pytest.mark.parametrize("spelling", ["masked_fill", "where"])
def test_masked_scores_that_are_nan_or_inf_reach_no_row(lowering, spelling: str) -> None:
    target, attention = lowering
    dtype = torch.float16 if target == "vulkan" else torch.float32
    q, k, v = (torch.randn(2, 2, 24, 16, dtype=dtype) for _ in range(3))
    keep = torch.ones(24, 24, dtype=torch.bool)
    keep[:, 17:] = False
    model = MaskedFill(spelling)
    options = {"vulkan_target": ANY_VULKAN} if target == "vulkan" else {}
    compiled = fc.compile(model, (q, k, v, keep), target=target, attention=attention, **options)
    run = fc.load(compiled, device="vulkan" if target == "vulkan" else "local-task")
    k[:, :, 17:20], k[:, :, 20:] = float("nan"), float("inf")
    want = model(q.double(), k.double(), v.double(), keep)
    assert torch.isfinite(want).all()
    assert rel_error(run(q, k, v, keep), want) < (2e-3 if dtype == torch.float16 else 1e-5)


class HeadsMovedIntoRows(torch.nn.Module):
    """Scores (B·H, N, N) viewed as (B, H, N, N), probabilities as (B, H·N, N) for one V
    per batch: P·V's rows are not QKᵀ's (detection built an op IREE's verifier refused)."""

    def forward(self, q, k, v):
        b, n = v.shape[0], q.shape[1]
        s = torch.bmm(q, k.transpose(1, 2)) * 0.25
        p = torch.softmax(s.view(b, -1, n, n), dim=-1)
        return torch.bmm(p.reshape(b, -1, n), v)


class KeysSplit(torch.nn.Module):
    """A softmax over half the keys: the key dim split in two before it (fused as
    attention over every key: rel. error 0.5)."""

    def forward(self, q, k, v):
        s = torch.bmm(q, k.transpose(1, 2)) * 0.25
        p = torch.softmax(s.view(*s.shape[:2], 2, -1), dim=-1)
        return torch.bmm(p.reshape(s.shape), v)


@pytest.mark.parametrize(
    "model, v_batch", [(HeadsMovedIntoRows(), 2), (KeysSplit(), 6)], ids=["heads", "keys"]
)
def test_scores_reshaped_around_softmax_are_not_attention(model, v_batch: int) -> None:
    q, k, v = torch.randn(6, 10, 16), torch.randn(6, 10, 16), torch.randn(v_batch, 10, 16)
    compiled = fc.compile(model, (q, k, v), target="cpu")
    assert compiled.stats["attention_ops"] == 0
    q, k, v = torch.randn_like(q), torch.randn_like(k), torch.randn_like(v)
    want = model(q.double(), k.double(), v.double())
    assert rel_error(fc.load(compiled)(q, k, v), want) < 1e-5


def test_iree_op_says_it_adds_a_mask_that_masked_fill_replaces() -> None:
    q, k, v = (torch.randn(1, 2, 24, 16) for _ in range(3))
    keep = torch.ones(24, 24, dtype=torch.bool).tril()
    compiled = fc.compile(MaskedFill("masked_fill"), (q, k, v, keep), attention="iree")
    assert compiled.stats["attention_ops"] == 1
    assert any("IREE's op, which adds its mask" in r.message for r in compiled.remarks)


class WrittenOut(torch.nn.Module):
    def __init__(self, spelling: str):
        super().__init__()
        self.spelling = spelling

    def forward(self, q, k, v):
        s = torch.einsum("bhqd,bhkd->bhqk", q, k) * 0.25
        if self.spelling == "einsum":
            return torch.einsum("bhqk,bhkd->bhqd", torch.softmax(s, -1), v)
        return torch.softmax(s, -1) @ v


# With a dynamic sequence these views lower to tensor.reshape, which detection could not
# see through (not fused; a remark said why); fusion-expand-reshapes makes them expands.
@pytest.mark.parametrize("spelling", ["einsum", "einsum-then-matmul"])
def test_dynamic_written_attention_is_fused(spelling: str) -> None:
    model = WrittenOut(spelling)
    example = tuple(torch.randn(1, 2, 40, 16) for _ in range(3))
    n = Dim("n", min=2, max=512)
    program = export(model, example, dynamic_shapes=({2: n}, {2: n}, {2: n}))
    compiled = fc.compile(program, target="cpu")
    assert compiled.stats["attention_ops"] == 1, compiled.remarks
    q, k, v = (torch.randn(1, 2, 77, 16) for _ in range(3))
    assert rel_error(fc.load(compiled)(q, k, v), model(q.double(), k.double(), v.double())) < 1e-5


class WrittenWithBmm(torch.nn.Module):
    def forward(self, q, k, v):
        return torch.bmm(torch.softmax(torch.bmm(q, k.transpose(1, 2)) * 0.25, -1), v)


# Not fused (a softmax over no keys), the ops themselves stopped IREE's compiler (SIGFPE).
@pytest.mark.parametrize("nq, nk", [(1, 0), (0, 3)])
def test_unfused_ops_with_an_extent_of_zero(nq: int, nk: int) -> None:
    q, k, v = torch.randn(2, nq, 8), torch.randn(2, nk, 8), torch.randn(2, nk, 8)
    model = WrittenWithBmm()
    got, want = fc.load(fc.compile(model, (q, k, v), attention="iree"))(q, k, v), model(q, k, v)
    assert got.shape == want.shape and torch.equal(got, want)


class ScoresAlsoReturned(torch.nn.Module):
    def forward(self, q, k, v):
        p = torch.softmax(torch.bmm(q, k.transpose(1, 2)) * 0.25, -1)
        return torch.bmm(p, v), p


# No query rows: IREE's torch lowering stopped with SIGFPE on the empty scores.
def test_empty_intermediates_in_the_torch_program() -> None:
    q, k, v = torch.randn(2, 0, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    model = ScoresAlsoReturned()
    got, want = fc.load(fc.compile(model, (q, k, v)))(q, k, v), model(q, k, v)
    assert [g.shape for g in got] == [w.shape for w in want]


class IntegersToBf16(torch.nn.Module):
    """ALiBi-like: int64 distances cast to bf16, from a computed constant and an input."""

    def forward(self, positions, x):
        distance = torch.arange(17)[None, :] - torch.arange(5)[:, None]
        return x * distance.to(torch.bfloat16) + positions.to(torch.bfloat16)


# int64 -> bf16 failed to link on the CPU (llvm-cpu calls __truncsfbf2, which IREE 3.13's
# linker lacks: found by the fuzzer on a bf16 ALiBi bias); it now rounds through f32 as
# PyTorch does, bit for bit, NaN-free values above 2^24 included.
def test_integers_to_bf16_on_the_cpu() -> None:
    gen = torch.Generator().manual_seed(0)
    positions = torch.randint(-(2**40), 2**40, (5, 17), generator=gen)
    positions[0, :4] = torch.tensor([2**24 + 1, 2**24 + 3, -(2**31) - 1, 0])
    x = torch.randn(5, 17, generator=gen).to(torch.bfloat16)
    model = IntegersToBf16()
    got = fc.load(fc.compile(model, (positions, x)))(positions, x)
    assert torch.equal(got, model(positions, x))


class _SideBySide(torch.nn.Module):
    """Two causal attentions of one shape on inputs of their own, both results returned."""

    def forward(self, q1, k1, v1, q2, k2, v2):
        first = F.scaled_dot_product_attention(q1, k1, v1, is_causal=True)
        return first, F.scaled_dot_product_attention(q2, k2, v2, is_causal=True)


def test_attentions_side_by_side_each_give_their_own_answer() -> None:
    """Each online-softmax loop nest updates its output in place behind a barrier per
    block. Started from the op's tensor.empty, which CSE shares between attentions of
    one shape, IREE 3.13 updated one buffer for both and each returned the second one's
    result (rel. error 1.4); each now starts from a buffer of its own."""
    torch.manual_seed(0)
    args = tuple(torch.randn(1, 2, 300, 32) for _ in range(6))
    module = fc.compile(_SideBySide(), args, target="cpu", attention="online-softmax")
    assert module.stats["attention_ops"] == 2, module.remarks
    fresh = tuple(torch.randn(1, 2, 300, 32) for _ in range(6))
    got = fc.load(module)(*fresh)
    with torch.no_grad():
        want = _SideBySide()(*(x.double() for x in fresh))
    for result, expected in zip(got, want, strict=True):
        assert rel_error(result, expected) < 1e-5


class _Concatenated(torch.nn.Module):
    """Concatenations of slices of one tensor along its last dim: RoPE's rotate_half,
    returned as it is and applied, and a roll by a quarter in three pieces."""

    def forward(self, x, cos, sin):
        half, quarter = x.shape[-1] // 2, x.shape[-1] // 4
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        rolled = torch.cat((x[..., quarter:half], x[..., half:], x[..., :quarter]), dim=-1)
        return rotated, x * cos + rotated * sin, rolled


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("d", [8, 16, 64])
def test_slices_concatenated_read_in_place_give_pytorchs_answer(d: int, dtype) -> None:
    """fusion-gather-slices reads each piece at its own index: selected after adding the
    piece's shift (IREE's CPU vectorizer took index + a selected shift for a contiguous
    read and returned x[0] in every element of a half of 4 or 8: rel. error 0.99)."""
    model = _Concatenated().eval()
    x = torch.randn(2, 4, 16, d).to(dtype)
    cos, sin = (torch.randn(1, 1, 16, d).to(dtype) for _ in range(2))
    module = fc.compile(model, example_args=(x, cos, sin), remarks=True)
    read = [r for r in module.remarks if "slices of one tensor" in r.message]
    assert len(read) == 2, module.remarks
    fresh = (torch.randn(2, 4, 16, d).to(dtype), cos, sin)
    (rotated, applied, rolled), want = fc.load(module)(*fresh), model(*fresh)
    assert torch.equal(rotated, want[0]) and torch.equal(rolled, want[2])  # moved, not computed
    assert rel_error(applied, want[1]) < (1e-6 if dtype == torch.float32 else 1e-3)
