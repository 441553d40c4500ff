"""Block maps: a mask computed in the sm_90 kernel that can empty whole tiles (padding
from an input, packed documents, chunks) gets a ``block_map`` kernel that lists, per call
and per row block, the key blocks the attention must visit (those with no mask work
first); the attention visits only those.

No GPU here: each model is compiled for sm_90 to the fused stage and both kernels run
under Triton's interpreter; the map is checked against the one the mask implies and the
output against PyTorch.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from conftest import rel_error
from test_kernel_attention import BOUND, F16, _dispatch_inputs, _HalfFillPadding
from variants import PaddingMaskAttention

import fusion_compiler as fc
from fusion_compiler.backends.triton.kernel import compile_kernel, kernel_source, run_interpreted
from fusion_compiler.backends.triton.spec import WS_MASK_INPUTS, gluon_expression

pytestmark = pytest.mark.slow  # compiles for sm_90 and runs kernels under the interpreter

TILE = 32  # rows and keys per block in these cases: several blocks over short sequences


class Documents(torch.nn.Module):
    """Packed documents: a query sees the keys of its own document up to itself (SDPA's
    boolean mask from document ids given as an input)."""

    def forward(self, q, k, v, doc):
        rows = torch.arange(q.shape[-2])[:, None]
        cols = torch.arange(k.shape[-2])[None, :]
        same = doc[:, None, :, None] == doc[:, None, None, :]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=same & (cols <= rows))


class IndexedPadding(torch.nn.Module):
    """transformers' way (masking_utils): the padding input indexed at (batch, key) by
    arange tensors (a gather: tensor.extract in Linalg), and-ed with causality."""

    def forward(self, q, k, v, keep):
        batch = torch.arange(q.shape[0])[:, None, None, None]
        rows = torch.arange(q.shape[2])[None, None, :, None]
        keys = torch.arange(k.shape[2])[None, None, None, :]
        allowed = keep[batch, keys] & (keys <= rows)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)


class DocumentsFull(torch.nn.Module):
    """Packed documents, each attending to all of itself (masked_fill of -inf)."""

    def forward(self, q, k, v, doc):
        s = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
        same = doc[:, None, :, None] == doc[:, None, None, :]
        return torch.softmax(s.masked_fill(~same, float("-inf")), -1) @ v


class Chunked(torch.nn.Module):
    """Chunked local attention: causal within chunks of 40 keys (no input: indices only)."""

    def forward(self, q, k, v):
        s = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
        rows = torch.arange(q.shape[-2])[:, None]
        cols = torch.arange(k.shape[-2])[None, :]
        keep = (cols // 40 == rows // 40) & (cols <= rows)
        return torch.softmax(s.masked_fill(~keep, float("-inf")).float(), -1).to(v.dtype) @ v


def _run(model, shape, *extra, **overrides):
    """Compiles ``model`` for sm_90, runs its block map and kernel (TILE x TILE blocks,
    the spec's fields in ``overrides`` replaced) under the interpreter; (spec, output,
    block map, PyTorch's output in float64)."""
    b, h, nq, nk, d = shape
    q = torch.randn(b, h, nq, d).to(F16)
    k, v = (torch.randn(b, h, nk, d).to(F16) for _ in range(2))
    fused = fc.compile(
        model, example_args=(q, k, v, *extra), target="cuda", cuda_arch="sm_90",
        compile_to="fused",
    )  # fmt: skip
    spec, shapes = _dispatch_inputs(fused)
    assert spec.block_map, fused.remarks
    spec = dataclasses.replace(spec, block_m=TILE, block_n=TILE, persistent=0, **overrides)
    # the tensors the mask reads: the model's inputs, by shape (one may be read twice)
    by_shape = {tuple(x.shape): x for x in extra}
    leaves = [by_shape[tuple(shape)] for shape in shapes[3 : 3 + len(spec.mask_inputs)]]
    got, block_map = run_interpreted(
        spec, *(x.reshape(b * h, -1, d) for x in (q, k, v)), mask=leaves, with_map=True
    )
    with torch.no_grad():
        want = model(q.double(), k.double(), v.double(), *extra)
    return spec, got.reshape(want.shape), block_map, want


def _listed(block_map: torch.Tensor, spec) -> dict[tuple[int, int], tuple[set, set]]:
    """(map batch, row block) -> (key blocks with no mask work, key blocks with some)."""
    row_blocks, batches, _ = spec.map_grid
    key_blocks = -(-spec.n_k // TILE)
    entries = block_map.reshape(batches, row_blocks, 2 + key_blocks)
    found = {}
    for batch in range(batches):
        for m in range(row_blocks):
            entry = entries[batch, m].tolist()
            unmasked, masked = entry[0], entry[1]
            tail = entry[2 + key_blocks - masked :] if masked else []
            found[batch, m] = (set(entry[2 : 2 + unmasked]), set(tail))
    return found


def _expected(keep: torch.Tensor, spec, heads: int) -> dict[tuple[int, int], tuple[set, set]]:
    """The map ``keep`` (sequences, n_q, n_k; True: the key is seen) implies: blocks seen
    everywhere need no mask work, blocks seen nowhere are not listed."""
    row_blocks, batches, _ = spec.map_grid
    expected = {}
    for batch in range(batches):
        for m in range(row_blocks):
            plain, some = set(), set()
            sequence = min(batch * spec.map_group // heads, keep.shape[0] - 1)
            rows = keep[sequence, m * TILE : (m + 1) * TILE]
            for j in range(-(-spec.n_k // TILE)):
                tile = rows[:, j * TILE : (j + 1) * TILE]
                if tile.all() and (j + 1) * TILE <= spec.n_k:
                    plain.add(j)
                elif tile.any():
                    some.add(j)
            expected[batch, m] = (plain, some)
    return expected


def test_padding_from_an_input_lists_only_the_blocks_with_keys() -> None:
    torch.manual_seed(0)
    keep = torch.zeros(2, 300, dtype=torch.bool)
    keep[0, :70] = True
    keep[1, :40] = True
    keep[1, 200:260] = True
    spec, got, block_map, want = _run(PaddingMaskAttention(), (2, 2, 100, 300, 16), keep)
    assert rel_error(got, want) < BOUND[F16]
    # one entry per sequence (the heads share it), one for all rows
    assert (spec.map_group, spec.map_rows) == (2, False)
    listed = _listed(block_map, spec)
    assert listed == _expected(keep[:, None, :].expand(2, 100, 300), spec, heads=2)
    # sequence 0 (keys 0-69): blocks 0 and 1 need no mask, block 2 does, 3-9 are skipped
    assert listed[0, 0] == ({0, 1}, {2})


def test_packed_documents_visit_only_their_own_document() -> None:
    torch.manual_seed(0)
    doc = torch.tensor([[0] * 50 + [1] * 90 + [2] * 60, [0] * 130 + [1] * 70])
    spec, got, block_map, want = _run(Documents(), (2, 2, 200, 200, 16), doc)
    assert rel_error(got, want) < BOUND[F16]
    rows, cols = torch.arange(200)[:, None], torch.arange(200)[None, :]
    keep = (doc[:, :, None] == doc[:, None, :]) & (cols <= rows)
    assert (spec.map_group, spec.map_rows) == (2, True)
    # the classes from the mask's bounds over each tile (the ids' least and most per
    # block), not from every (row, key): the same map
    assert spec.map_constants()["BOUNDS"]
    assert _listed(block_map, spec) == _expected(keep, spec, heads=2)


def test_a_masked_fill_of_minus_inf_is_bounded_as_an_added_mask() -> None:
    """masked_fill(-inf) replaces the score (a NaN score is dropped there) but its fill
    is -inf, not a finite one that rows of nothing but fills weigh: its map comes from
    the bounds as an added mask's does (H100, packed documents over N 32768: 2.94 ms
    with the map at every (row, key), 2.31 as SDPA's boolean mask)."""
    torch.manual_seed(0)
    doc = torch.tensor([[0] * 50 + [1] * 90 + [2] * 60, [0] * 130 + [1] * 70])
    spec, got, block_map, want = _run(DocumentsFull(), (2, 2, 200, 200, 16), doc)
    assert rel_error(got, want) < BOUND[F16]
    assert spec.mask_replaces and spec.mask_swamps is None
    assert spec.map_constants()["BOUNDS"] and not spec.map_constants()["FINITE_FILL"]
    keep = doc[:, :, None] == doc[:, None, :]
    assert _listed(block_map, spec) == _expected(keep, spec, heads=2)


class DocumentsInAWindow(torch.nn.Module):
    """Packed documents, padding and a window of 48 keys with an ALiBi-like distance term:
    a mask whose bounds over a tile are wider than what it holds (the window's and the
    documents' edges cross inside tiles), so some blocks are listed that keep nothing."""

    def forward(self, q, k, v, doc, keep):
        rows = torch.arange(q.shape[-2])[:, None]
        cols = torch.arange(k.shape[-2])[None, :]
        allowed = (doc[:, None, :, None] == doc[:, None, None, :]) & (rows - cols < 48)
        allowed = allowed & (cols <= rows) & keep[:, None]  # keep: (B, 1, N)
        distance = (cols - rows).to(q.dtype) * 0.25
        bias = torch.where(allowed, distance, float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)


def test_a_map_from_bounds_lists_every_block_that_keeps_a_key() -> None:
    torch.manual_seed(0)
    doc = torch.tensor([[0] * 70 + [1] * 90 + [2] * 40, [0] * 30 + [1] * 170])
    keep = torch.rand(2, 200) > 0.2
    keep[1, 100:164] = False
    model = DocumentsInAWindow()
    spec, got, block_map, want = _run(model, (2, 2, 200, 200, 16), doc, keep[:, None])
    assert rel_error(got, want) < BOUND[F16]
    assert spec.map_constants()["BOUNDS"]
    rows, cols = torch.arange(200)[:, None], torch.arange(200)[None, :]
    kept = (doc[:, :, None] == doc[:, None, :]) & (rows - cols < 48) & (cols <= rows)
    kept = kept & keep[:, None, :]
    listed, expected = _listed(block_map, spec), _expected(kept, spec, heads=2)
    for entry, (plain, some) in listed.items():
        # no mask work only where there is none (the distance term: nowhere), and
        # every block that keeps a key visited
        assert not plain
        assert expected[entry][0] | expected[entry][1] <= some, entry
    # the bounds skip the other documents' blocks and the padded ones
    assert sum(len(some) for _, some in listed.values()) < len(listed) * 7 // 2


@pytest.mark.parametrize(
    "model, shape, extra",
    [
        (PaddingMaskAttention(), (2, 16, 1024), torch.arange(1024) < torch.tensor([[600], [64]])),
        (Documents(), (1, 8, 4096), torch.arange(4096)[None, :] // 1000),
    ],
    ids=["padding", "causal_documents"],
)  # fmt: skip
def test_a_block_mapped_mask_over_many_tiles_takes_the_producer_warp_kernel(
    model, shape, extra
) -> None:
    """D128 attention over more 64-row tiles than the GPU holds, with a mask that empties
    whole tiles: the producer-warp kernel visits the key blocks the map lists and adds the
    mask, printed in Gluon's names, on those that need it. Compiled here (Gluon does not
    run under the interpreter); its results are checked against PyTorch on the GPU
    (benchmarks/mask_forms_gpu.py; benchmarks/results/mask_forms_ws_map_h100.md)."""
    b, h, n = shape
    q, k, v = (torch.randn(b, h, n, 128).to(F16) for _ in range(3))
    fused = fc.compile(
        model, example_args=(q, k, v, extra), target="cuda", cuda_arch="sm_90",
        compile_to="fused", remarks=True,
    )  # fmt: skip
    spec, _ = _dispatch_inputs(fused)
    assert spec.block_map and spec.warp_specialized, fused.remarks
    assert spec.ws_mask is not None and "tl." not in spec.ws_mask
    assert f"return {spec.ws_mask}" in kernel_source(spec)
    kernel = compile_kernel(spec)
    assert kernel.threads == 256 and kernel.shared_bytes <= 232448 // 2 - 1024
    assert any("a producer warp, a block map" in r.message for r in fused.remarks)
    # the remark names the input the map is built from, as the model names it
    source = "input 3 `keep`" if isinstance(model, PaddingMaskAttention) else "input 3 `doc`"
    assert any(f"per call, from {source}" in r.message for r in fused.remarks), fused.remarks


def test_a_mask_gluon_cannot_print_keeps_the_template_kernel() -> None:
    """The producer-warp kernel takes a computed mask only in Gluon's names and with at
    most WS_MASK_INPUTS inputs: others stay with the template's kernel."""
    printed = "tl.where(tl.math.exp2(L0) > 1, tl.abs(L1).to(tl.float32), 0.0)"
    assert gluon_expression(printed) == "gl.where(gl.exp2(L0) > 1, gl.abs(L1).to(gl.float32), 0.0)"
    assert gluon_expression("tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)") is None
    assert gluon_expression("tl.sigmoid(L0)") is None
    b, h, n = 2, 16, 1024
    q, k, v = (torch.randn(b, h, n, 128).to(F16) for _ in range(3))
    keep = torch.ones(b, n, dtype=torch.bool)
    fused = fc.compile(
        PaddingMaskAttention(), example_args=(q, k, v, keep), target="cuda",
        cuda_arch="sm_90", compile_to="fused",
    )  # fmt: skip
    spec, _ = _dispatch_inputs(fused)
    assert spec.warp_specialized
    many = dataclasses.replace(spec, mask_inputs=spec.mask_inputs * (WS_MASK_INPUTS + 1))
    assert not many.warp_specialized
    unknown = dataclasses.replace(spec, mask_expr=f"tl.sigmoid({spec.mask_expr})")
    assert not unknown.warp_specialized


def test_chunks_from_indices_alone() -> None:
    torch.manual_seed(0)
    spec, got, block_map, want = _run(Chunked(), (1, 2, 160, 160, 16))
    assert rel_error(got, want) < BOUND[F16]
    rows, cols = torch.arange(160)[:, None], torch.arange(160)[None, :]
    keep = ((cols // 40 == rows // 40) & (cols <= rows))[None]
    assert spec.map_group == spec.batch  # every batch sees the one mask
    assert _listed(block_map, spec) == _expected(keep, spec, heads=2)


def test_a_finite_fill_is_skipped_only_where_every_row_keeps_a_key() -> None:
    """finfo(f16).min: a sequence with no key left weighs every key equally in PyTorch,
    so none of its blocks is skipped; the other sequence's padded blocks are."""
    torch.manual_seed(0)
    keep = torch.zeros(2, 300, dtype=torch.bool)
    keep[1, :45] = True
    q_shape = (2, 2, 50, 300, 16)
    spec, got, block_map, want = _run(_HalfFillPadding(), q_shape, keep)
    assert spec.mask_swamps is not None
    listed = _listed(block_map, spec)
    assert listed[0, 0] == (set(), set(range(10)))  # no key: every block, with the mask
    assert listed[1, 0] == ({0}, {1})  # sequence 1: keys 0-44
    b, h, nq, nk, d = q_shape
    torch.manual_seed(0)  # the same inputs as _run drew
    torch.randn(b, h, nq, d)
    v = [torch.randn(b, h, nk, d).to(F16) for _ in range(2)][1]
    want[0] = v[0].double().mean(dim=1, keepdim=True)  # PyTorch fp16: equal weights
    assert rel_error(got, want) < BOUND[F16]


def test_a_kernel_that_needs_too_much_shared_memory_gets_fewer_stages() -> None:
    """Full attention at D128 with a mask computed per tile: the schedule's 3 stages of
    128x128 tiles took 245760 bytes of shared memory with the mask's tiles, more than an
    sm_90 block may have (the module did not load on the H200); the pass compiles it
    with fewer stages."""
    doc = (torch.arange(2048) // 512).expand(1, 2048).contiguous()
    q, k, v = (torch.randn(1, 2, 2048, 128).to(F16) for _ in range(3))
    fused = fc.compile(
        DocumentsFull(), example_args=(q, k, v, doc), target="cuda", cuda_arch="sm_90",
        compile_to="fused",
    )  # fmt: skip
    spec, _ = _dispatch_inputs(fused)
    assert compile_kernel(spec).shared_bytes <= 227 * 1024


def test_the_remark_says_what_a_static_map_skips() -> None:
    """Chunks of 40 with causality inside, 1024 rows in 64x64 tiles: the remark gives the
    shares the kernel's map will find (computed at compile time from the indices)."""
    q, k, v = (torch.randn(4, 8, 1024, 64).to(F16) for _ in range(3))
    fused = fc.compile(
        Chunked(), example_args=(q, k, v), target="cuda", cuda_arch="sm_90", compile_to="fused"
    )
    spec, _ = _dispatch_inputs(fused)
    rows, cols = torch.arange(1024)[:, None], torch.arange(1024)[None, :]
    keep = (cols // 40 == rows // 40) & (cols <= rows)
    tiles = keep.reshape(1024 // spec.block_m, spec.block_m, 1024 // spec.block_n, spec.block_n)
    kept = tiles.any(dim=3).any(dim=1)
    skipped = round(100 * (1 - kept.float().mean().item()))
    said = [r.message for r in fused.remarks if "block map" in r.message]
    assert said and f"a block map: {skipped}% of tiles skipped" in said[0], said


def test_split_kv_programs_share_the_listed_blocks() -> None:
    """Few query rows over many keys: split-KV, each program of a row block takes every
    SPLITS-th block the map lists; the combine kernel merges them."""
    torch.manual_seed(0)
    keep = torch.zeros(2, 700, dtype=torch.bool)
    keep[0, :300] = True
    keep[1, 100:650] = True
    spec, got, block_map, want = _run(PaddingMaskAttention(), (2, 2, 8, 700, 16), keep, splits=3)
    assert rel_error(got, want) < BOUND[F16]
    assert _listed(block_map, spec) == _expected(keep[:, None, :].expand(2, 8, 700), spec, 2)


class PaddedGQADecode(torch.nn.Module):
    """One query per head over a padded cache, 4 query heads per K/V head."""

    def forward(self, q, k, v, keep):
        k, v = (x.repeat_interleave(4, dim=1) for x in (k, v))
        s = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
        s = s.masked_fill(~keep[:, None, None, :], float("-inf"))
        return torch.softmax(s.float(), -1).to(v.dtype) @ v


def test_packed_gqa_heads_share_their_sequence_map() -> None:
    torch.manual_seed(0)
    q = torch.randn(2, 8, 1, 32).to(F16)
    k, v = (torch.randn(2, 2, 500, 32).to(F16) for _ in range(2))
    keep = torch.zeros(2, 500, dtype=torch.bool)
    keep[0, :90] = True
    keep[1, :470] = True
    model = PaddedGQADecode()
    fused = fc.compile(
        model, example_args=(q, k, v, keep), target="cuda", cuda_arch="sm_90",
        compile_to="fused",
    )  # fmt: skip
    spec, _ = _dispatch_inputs(fused)
    assert spec.pack_gqa and spec.block_map and (spec.map_group, spec.map_rows) == (8, False)
    got = run_interpreted(
        spec, q.reshape(16, 1, 32), k.reshape(4, 500, 32), v.reshape(4, 500, 32), mask=[keep]
    )
    with torch.no_grad():
        want = model(q.double(), k.double(), v.double(), keep)
    assert rel_error(got.reshape(want.shape), want) < BOUND[F16]


def test_a_padding_input_indexed_as_transformers_does_is_computed_in_the_kernel() -> None:
    """keep[batch, keys] (a gather, tensor.extract in the mask's payload) is read where
    the kernel needs it, not materialised as a (B, 1, Nq, Nk) mask, and mapped."""
    torch.manual_seed(0)
    keep = torch.ones(2, 200, dtype=torch.bool)
    keep[1, :70] = False  # left padding, as decoders have it
    spec, got, block_map, want = _run(IndexedPadding(), (2, 2, 200, 200, 16), keep)
    assert spec.mask_expr is not None and spec.causal_offset == 0
    rows, cols = torch.arange(200)[:, None], torch.arange(200)[None, :]
    allowed = keep[:, None, :] & (cols <= rows)[None]
    # rows with no key: NaN in PyTorch, 0 here by design
    good = allowed.any(-1)[:, None].expand(got.shape[:3])
    assert rel_error(got[good], want[good]) < BOUND[F16]
    assert _listed(block_map, spec) == _expected(allowed, spec, heads=2)


class SequenceSwitch(torch.nn.Module):
    """A mask of one value per sequence (SDPA's boolean attn_mask of shape (B, 1, 1, 1)):
    the map's tile evaluates an expression that reads neither rows nor keys."""

    def forward(self, q, k, v, on):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=on[:, None, None, None])


def test_a_mask_of_one_value_per_sequence_maps_whole_rows() -> None:
    torch.manual_seed(0)
    on = torch.ones(2, dtype=torch.bool)
    spec, got, block_map, want = _run(SequenceSwitch(), (2, 2, 64, 300, 16), on)
    keep = on[:, None, None].expand(2, 64, 300)
    assert _listed(block_map, spec) == _expected(keep, spec, heads=2)
    assert rel_error(got, want) < BOUND[F16]


class ChunkedBy(torch.nn.Module):
    """Chunked local attention over chunks of ``chunk`` keys, causal within each."""

    def __init__(self, chunk: int) -> None:
        super().__init__()
        self.chunk = chunk

    def forward(self, q, k, v):
        s = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
        rows = torch.arange(q.shape[-2])[:, None]
        cols = torch.arange(k.shape[-2])[None, :]
        keep = (cols // self.chunk == rows // self.chunk) & (cols <= rows)
        return torch.softmax(s.masked_fill(~keep, float("-inf")), -1) @ v


class PrefixLM(torch.nn.Module):
    """Every query sees the first 100 keys and, after them, the keys up to its own."""

    def forward(self, q, k, v):
        rows = torch.arange(q.shape[-2])[:, None]
        cols = torch.arange(k.shape[-2])[None, :]
        keep = (cols <= rows) | (cols < 100)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)


@pytest.mark.parametrize(
    "model, skipped",
    [(ChunkedBy(256), "50%"), (PrefixLM(), "33%")],
    ids=["chunked", "prefix-lm"],
)
def test_online_softmax_visits_the_key_blocks_a_static_mask_keeps(model, skipped) -> None:
    """On the CPU the mask's values, computed at compile time, bound each row block's key
    loop to the blocks it keeps (256x256 blocks over 768 keys: chunks of 256 keep one key
    block per row block, half of the causal bound's; the prefix-LM mask, unproven causal,
    the blocks up to the diagonal)."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 768, 32) for _ in range(3))
    module = fc.compile(model, example_args=(q, k, v), target="cpu", remarks=True)
    found = [r.message for r in module.remarks if "online softmax" in r.message]
    assert f"{skipped} of key blocks skipped by the mask's values" in found[0], found
    with torch.no_grad():
        want = model(q.double(), k.double(), v.double())
    assert rel_error(torch.as_tensor(fc.load(module)(q, k, v)), want) < 1e-5


class DocumentsOfABuffer(torch.nn.Module):
    """Packed documents whose ids the model holds (a buffer, not an input): the block map
    is computed from constants alone."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.register_buffer("doc", torch.stack([torch.arange(n) // 64, torch.arange(n) // 32]))

    def forward(self, q, k, v):
        return DocumentsFull()(q, k, v, self.doc)


_COMPILE_TO_VMFB = """
import sys, torch
sys.path.insert(0, {tests!r})
from test_block_map import DocumentsOfABuffer
import fusion_compiler as fc
q = torch.randn(2, 2, 256, 16).to(torch.float16)
module = fc.compile(DocumentsOfABuffer(256).eval(), (q, q, q), target="cuda", cuda_arch="sm_90")
print(module.stats["dispatches"], any("block map" in r.message for r in module.remarks))
"""


def test_a_block_map_of_constants_alone_compiles() -> None:
    """IREE's const-eval computes a dispatch of constants alone at compile time, for the
    host: on the block map's GPU kernel it crashed (segfault, IREE 3.13). The map's
    inputs pass through an optimization barrier; it is computed per call. (In a
    subprocess: the crash would take the test run with it.)"""
    import subprocess
    import sys
    from pathlib import Path

    script = _COMPILE_TO_VMFB.format(tests=str(Path(__file__).parent))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["3", "True"]  # the map (classes, lists), the attention
