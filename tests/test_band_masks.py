"""Sliding-window masks, however a model writes them, proven a band of keys: on sm_90 the
mask is dropped and the kernel visits only the key blocks inside the window (checked
under Triton's interpreter against PyTorch); the CPU's online softmax keeps the mask and
runs each row block's key loop over the window alone."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import rel_error
from test_kernel_attention import BOUND, F16, _dispatch_inputs

import fusion_compiler as fc
from fusion_compiler.backends.triton.kernel import run_interpreted

# compiles many models: left out of the edit loop (-m 'not slow'), run in CI
pytestmark = pytest.mark.slow

WINDOW = 40  # keys per row: the row's own and the 39 before it
SPELLINGS = ["arange-masked-fill", "finfo-min-where", "buffer", "sdpa-bool", "two-additive"]


class SlidingWindow(torch.nn.Module):
    """Attention over the ``WINDOW`` keys up to each row's, its mask spelled ``spelling``."""

    def __init__(self, spelling: str, n: int) -> None:
        super().__init__()
        self.spelling = spelling
        if spelling == "buffer":  # a registered table, as a model built for a fixed length
            ones = torch.ones(n, n, dtype=torch.bool)
            self.register_buffer("keep", torch.tril(ones) & ~torch.tril(ones, -WINDOW))

    def forward(self, q, k, v):
        n_q, n_k = q.shape[-2], k.shape[-2]
        rows = torch.arange(n_q)[:, None]
        keys = torch.arange(n_k)[None, :]
        keep = (keys <= rows) & (keys > rows - WINDOW)
        if self.spelling == "sdpa-bool":
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        if self.spelling == "arange-masked-fill":
            s = s.masked_fill(~keep, float("-inf"))
        elif self.spelling == "finfo-min-where":
            s = torch.where(keep, s, torch.finfo(s.dtype).min)
        elif self.spelling == "buffer":
            s = s.masked_fill(~self.keep[:n_q, :n_k], float("-inf"))
        else:  # a causal triu(-inf) and the window's own additive mask
            causal = torch.full((n_q, n_k), float("-inf"), dtype=s.dtype).triu(1)
            window = torch.zeros(n_q, n_k, dtype=s.dtype).masked_fill(
                keys <= rows - WINDOW, float("-inf")
            )
            s = s + causal + window
        return torch.softmax(s.float(), dim=-1).to(q.dtype) @ v


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_sliding_window_kernel_visits_the_window_alone(spelling: str) -> None:
    torch.manual_seed(0)
    b, h, n, d = 1, 2, 150, 32
    model = SlidingWindow(spelling, n).eval()
    q, k, v = (torch.randn(b, h, n, d).to(F16) for _ in range(3))
    fused = fc.compile(
        model, example_args=(q, k, v), target="cuda", cuda_arch="sm_90", compile_to="fused"
    )
    spec, _ = _dispatch_inputs(fused)
    assert (spec.causal_offset, spec.window_start) == (0, 1 - WINDOW), spec
    assert spec.mask_expr is None and spec.mask_dtype is None  # the mask is dropped
    assert any(f"sliding window of {WINDOW} keys" in r.message for r in fused.remarks)
    got = run_interpreted(spec, *(x.reshape(b * h, n, d) for x in (q, k, v)))
    with torch.no_grad():
        want = model(q.double(), k.double(), v.double())
    assert rel_error(got.reshape(want.shape), want) < BOUND[F16]


@pytest.mark.parametrize("spelling", ["arange-masked-fill", "buffer"])
def test_sliding_window_on_the_cpu_keeps_its_mask(spelling: str) -> None:
    """The mask stays (evaluated per block), the keys outside the window are not visited,
    the answer is PyTorch's."""
    torch.manual_seed(0)
    n = 300
    model = SlidingWindow(spelling, n).eval()
    q, k, v = (torch.randn(1, 2, n, 32) for _ in range(3))
    module = fc.compile(model, example_args=(q, k, v), target="cpu", remarks=True)
    skipped = f"offset 0) skipped, keys before row{1 - WINDOW:+d} skipped (a sliding window)"
    assert any(skipped in r.message for r in module.remarks), module.remarks
    got = fc.load(module, device="local-task")(q, k, v)
    with torch.no_grad():
        want = model(q.double(), k.double(), v.double())
    assert rel_error(torch.as_tensor(got), want) < 1e-5


class Documents(torch.nn.Module):
    """Packed documents: each query sees the keys of its own document up to itself."""

    def forward(self, q, k, v, doc):
        rows = torch.arange(q.shape[-2])[:, None]
        cols = torch.arange(k.shape[-2])[None, :]
        same = doc[:, None, :, None] == doc[:, None, None, :]
        return torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=same & (cols <= rows)
        )


def test_document_mask_from_its_ids_computed_in_the_kernel() -> None:
    """Document ids as an input (no band): the kernel computes the mask per tile from the
    (B, N) ids, read per row and per key; no (B, N, N) mask exists."""
    torch.manual_seed(0)
    b, h, n, d = 2, 2, 300, 32
    q, k, v = (torch.randn(b, h, n, d).to(F16) for _ in range(3))
    doc = torch.tensor([[0] * 70 + [1] * 130 + [2] * 100, [0] * 10 + [1] * 290])
    fused = fc.compile(
        Documents(), example_args=(q, k, v, doc), target="cuda", cuda_arch="sm_90",
        compile_to="fused",
    )  # fmt: skip
    spec, shapes = _dispatch_inputs(fused)
    assert spec.mask_expr and spec.mask_dtype is None
    assert shapes[3:5] == [[b, n], [b, n]]  # the ids themselves, read per row and per key
    leaves = [doc] * len(spec.mask_inputs)
    got = run_interpreted(spec, *(x.reshape(b * h, n, d) for x in (q, k, v)), mask=leaves)
    with torch.no_grad():
        want = Documents()(q.double(), k.double(), v.double(), doc)
    assert rel_error(got.reshape(want.shape), want) < BOUND[F16]


class PaddedWindow(torch.nn.Module):
    """transformers' mask (``and_masks(causal, sliding_window, padding)``): a window from
    the indices, and-ed with the keys an ``attention_mask`` input keeps."""

    def forward(self, q, k, v, attention_mask):
        rows = torch.arange(q.shape[-2])[:, None]
        keys = torch.arange(k.shape[-2])[None, :]
        keep = (keys <= rows) & (keys > rows - WINDOW) & attention_mask.bool()[:, None, None, :]
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)


def _padding(b: int, n: int) -> torch.Tensor:
    """(b, n) ones, the second row left-padded (its first rows keep no key) and holed."""
    mask = torch.ones(b, n, dtype=torch.long)
    mask[1, :70] = 0
    mask[1, 200:210] = 0
    return mask


def test_window_and_padding_input_bound_the_keys_and_keep_the_mask() -> None:
    """A condition read from an input (the padding) does not void the window's bounds:
    the kernel visits the window's key blocks alone and applies the mask inside them."""
    torch.manual_seed(0)
    b, h, n, d = 2, 2, 300, 32
    q, k, v = (torch.randn(b, h, n, d).to(F16) for _ in range(3))
    pad = _padding(b, n)
    fused = fc.compile(
        PaddedWindow(), example_args=(q, k, v, pad), target="cuda", cuda_arch="sm_90",
        compile_to="fused",
    )  # fmt: skip
    spec, _ = _dispatch_inputs(fused)
    assert (spec.causal_offset, spec.window_start) == (0, 1 - WINDOW), spec
    assert spec.mask_expr  # the padding is still applied, per tile
    got = run_interpreted(
        spec, *(x.reshape(b * h, n, d) for x in (q, k, v)), mask=[pad] * len(spec.mask_inputs)
    )
    with torch.no_grad():
        want = PaddedWindow()(q.double(), k.double(), v.double(), pad)
    assert rel_error(got.reshape(want.shape), want) < BOUND[F16]


def test_window_and_padding_input_on_the_cpu() -> None:
    torch.manual_seed(0)
    b, h, n, d = 2, 2, 300, 32
    q, k, v = (torch.randn(b, h, n, d) for _ in range(3))
    module = fc.compile(PaddedWindow(), example_args=(q, k, v, _padding(b, n)), remarks=True)
    skipped = f"offset 0) skipped, keys before row{1 - WINDOW:+d} skipped (a sliding window)"
    assert any(skipped in r.message for r in module.remarks), module.remarks
    pad = _padding(b, n)[[1, 0]]  # other rows padded than at compile time
    q, k, v = (torch.randn(b, h, n, d) for _ in range(3))
    got = fc.load(module, device="local-task")(q, k, v, pad)
    with torch.no_grad():
        want = PaddedWindow()(q.double(), k.double(), v.double(), pad)
    assert rel_error(torch.as_tensor(got), want) < 1e-5
