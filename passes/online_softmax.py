"""fusion-online-softmax: rewrites each fused attention as a FlashAttention-2 loop nest
in Linalg and SCF on tensors.

For each block of ``block_q`` query rows, a loop over blocks of ``block_k`` keys keeps a
running max ``m``, a running sum ``l`` and an accumulator ``acc``::

    s     = Q_i · K_jᵀ                          (block_q, block_k), f32
    x     = log2(e)·(scale·s) [-> score region] + log2(e)·mask_ij
    m'    = max(m, rowmax(x))
    p     = exp2(x - m')                        exp2, the scale folded in
    l'    = exp2(m - m')·l + rowsum(p)
    acc'  = exp2(m - m')·acc + p · V_j
    O_i   = acc / l, 0 where l = 0              the one division, after the loop

No tensor larger than a (block_q, block_k) tile of scores is created. The running max
starts at the lowest finite f32, so fully masked blocks contribute exp2(-inf) = 0 rather
than NaN with no special case; a row whose keys are all -inf comes out 0. Masked
logits are clamped at that lowest f32 unless the mask is -inf, so a finite fill such
as ``finfo.min`` stays finite in the exp2 domain (PyTorch's equal weights on a row with
no allowed key).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from fusion_compiler.dialects import causal, expr, hal, linalg, linalg_ext
from fusion_compiler.dialects.builders import (
    Size,
    affine_map,
    empty_of,
    erase_dead,
    extract_slice,
    full,
    generic,
    index,
    inline_body,
    insert_slice,
    own_buffer,
    size_of,
    tile_of,
    tile_size,
    times,
    to_f32,
)
from fusion_compiler.dialects.linalg_ext import (
    LOG2E,
    LOWEST_F32,
    Layout,
    exp2_of_difference,
    has_plain_region,
)

from fusion_compiler import remarks
from fusion_compiler.ir import dialects, ir

NAME = "fusion-online-softmax"


@dataclass(frozen=True)
class Options:
    block_q: int = 64  # 0: sized to the attention's batch (``blocks``)
    block_k: int = 64


# Sized blocks: each step of the loop nest writes the scores of one block for every batch
# and reads them back in the next op, so they should stay in cache. 256x256 blocks where
# those scores take at most this much, else 128x128 (2-core CPU, fp32, D64, interleaved
# A/B, benchmarks/results/cpu_online_softmax_blocks.md: 256x256 1.07x-1.34x faster than
# 128x128 over 8 heads, about 2x slower over 64; 64x64 no faster than 128x128 there).
_SCORES_BYTES = 2 << 20


def blocks(op: ir.Operation, options: Options) -> tuple[int, int]:
    """(block_q, block_k) for ``op``: the options', or sized to its batch where 0."""
    if options.block_q and options.block_k:
        return options.block_q, options.block_k
    batch = ir.RankedTensorType(op.operands[0].type).shape[0]
    side = 256 if 0 < batch * 256 * 256 * 4 <= _SCORES_BYTES else 128
    return options.block_q or side, options.block_k or side


@dataclass(frozen=True)
class Spans:
    """Per query block, the key blocks [first, end) holding every key the mask keeps
    (not -inf in some batch), where they are narrower than the causal and window bounds;
    None on a side they do not narrow. ``skipped``: the share of the bounds' key blocks
    left out."""

    first: tuple[int, ...] | None
    end: tuple[int, ...] | None
    skipped: float


def key_spans(op: ir.Operation, form: Layout, block_q: int, block_k: int) -> Spans | None:
    """The spans of a static mask of indices and constants (chunks, documents of fixed
    ids, a prefix): keys masked -inf in every batch add nothing to a row, so the loop
    need not visit their blocks (exact; finite fills are kept)."""
    if not form.has_mask:
        return None
    kept = causal.kept_keys(op.operands[4], 1, 2)
    if kept is None:
        return None
    n_q, n_k = kept.shape
    key_blocks = -(-n_k // block_k)
    firsts, ends, bounds = [], [], []
    for row in range(0, n_q, block_q):
        lo, hi = 0, key_blocks  # in key blocks, as the loop's bounds give them
        if form.causal_offset is not None:
            keys = min(n_k, max(0, row + min(block_q, n_q - row) + form.causal_offset))
            hi = -(-keys // block_k)
        if form.window_start is not None:
            lo = min(max(row + form.window_start, 0) // block_k, hi)
        found = np.flatnonzero(kept[row : row + block_q].any(axis=0))
        first = max(lo, found[0] // block_k) if found.size else hi
        end = min(hi, found[-1] // block_k + 1) if found.size else hi
        firsts.append(int(first))
        ends.append(int(max(end, first)))
        bounds.append((lo, hi))
    narrower_first = any(f > lo for f, (lo, _) in zip(firsts, bounds, strict=True))
    narrower_end = any(e < hi for e, (_, hi) in zip(ends, bounds, strict=True))
    if not (narrower_first or narrower_end):
        return None
    total = sum(hi - lo for lo, hi in bounds)
    visited = sum(e - f for f, e in zip(firsts, ends, strict=True))
    return Spans(
        tuple(firsts) if narrower_first else None,
        tuple(ends) if narrower_end else None,
        1 - visited / max(total, 1),
    )


# how the loop finds its kept keys per call: for all rows at once, or per query block
ONCE, PER_BLOCK = "once", "per block"


def spans_per_call(op: ir.Operation, form: Layout, spans: Spans | None) -> str | None:
    """Whether the loop should find each query block's kept keys per call (None: no):
    a mask that depends on the model's inputs (padding, document ids) and can hold -inf,
    where no static spans or band bound the keys; ONCE where the mask ignores the row
    (padding), else PER_BLOCK. Keys -inf in every row of the block add nothing, so
    skipping the blocks outside [first kept, last kept] is exact."""
    if not form.has_mask or form.band_only or spans is not None:
        return None
    mask = op.operands[4]
    try:
        tree = expr.of_tensor(mask)
    except expr.Unsupported:
        return None
    if not _masks_by_inputs(tree.expr) or causal.kept_keys(mask, 1, 2) is not None:
        return None
    return PER_BLOCK if expr.reads_coordinate(tree.expr, 1) else ONCE


def _masks_by_inputs(tree: expr.Expr) -> bool:
    """Whether ``tree`` selects -inf by a condition that reads an input (a padding mask,
    document ids), not only by indices (a causal band beside an input bias)."""

    def reads_input(e: expr.Expr) -> bool:
        return any(isinstance(x, expr.Load) for x in expr.walk(e))

    for e in expr.walk(tree):
        if isinstance(e, expr.Op) and e.name == "arith.select":
            condition, *values = e.operands
            minus_inf = any(isinstance(v, expr.Const) and v.value == -math.inf for v in values)
            if minus_inf and reads_input(condition):
                return True
    return False


def _kept_span(mask: ir.Value, i: ir.Value, sizes: list[Size]) -> tuple[ir.Value, ir.Value]:
    """The first kept key and one past the last of the mask's rows ``i`` on (``sizes``:
    batch, rows, keys; kept: not -inf, in some batch and row), as host indices; (keys,
    0) where none is kept.
    Two reductions: over the block's (batch, rows) per key, parallel over the keys (the
    mask's producers re-run on the block), then over the keys."""
    batch, tm, keys = sizes
    tile = tile_of(mask, [0, i, 0], [batch, tm, keys])
    element = ir.RankedTensorType(mask.type).element_type
    i1, i64 = ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(64)

    def constant(type_: ir.Type, value: int) -> ir.Value:
        return dialects.arith.ConstantOp(type_, value).result

    def kept_here(value: ir.Value, kept: ir.Value) -> ir.Value:
        minus_inf = dialects.arith.ConstantOp(element, -math.inf).result
        here = dialects.arith.CmpFOp(dialects.arith.CmpFPredicate.UNE, value, minus_inf)
        return dialects.arith.OrIOp(kept, here.result).result

    nothing = dialects.linalg.fill(constant(i1, 0), outs=[empty_of([keys], i1)])
    per_key = generic(
        [tile], nothing, _maps(3, [0, 1, 2], [2]), ["reduction", "reduction", "parallel"], kept_here
    )
    kinds = [ir.Attribute.parse("#linalg.iterator_type<reduction>")]
    starts = [constant(i64, 0), dialects.arith.IndexCastOp(i64, _as_index(keys)).result]
    span = dialects.linalg.GenericOp(
        [ir.RankedTensorType.get([], i64)] * 2,
        [per_key],
        [dialects.linalg.fill(v, outs=[empty_of([], i64)]) for v in starts[::-1]],
        ir.ArrayAttr.get(_maps(1, [0], [], [])),
        ir.ArrayAttr.get(kinds),
    )
    block = span.regions[0].blocks.append(i1, i64, i64)
    with ir.InsertionPoint(block):
        kept, first, end = block.arguments
        key = dialects.arith.IndexCastOp(i64, dialects.linalg.IndexOp(0).result).result
        after = dialects.arith.AddIOp(key, constant(i64, 1)).result
        dialects.linalg.YieldOp(
            [
                dialects.arith.SelectOp(kept, dialects.arith.MinSIOp(first, key), first).result,
                dialects.arith.SelectOp(kept, dialects.arith.MaxSIOp(end, after), end).result,
            ]
        )
    index_type = ir.IndexType.get()
    return tuple(  # type: ignore[return-value]
        dialects.arith.IndexCastOp(index_type, dialects.tensor.ExtractOp(r, []).result).result
        for r in span.results
    )


def _step_function(i: ir.Value, per_block: tuple[int, ...], block_q: int, block_k: int):
    """per_block[i // block_q] * block_k at row offset ``i``, as host arithmetic: the first
    value plus a select per change (a few per mask: chunks, documents)."""
    value = index(per_block[0] * block_k)
    for b in range(1, len(per_block)):
        step = per_block[b] - per_block[b - 1]
        if step:
            reached = dialects.arith.CmpIOp(
                dialects.arith.CmpIPredicate.sge, i, index(b * block_q)
            ).result
            value = dialects.arith.AddIOp(
                value, dialects.arith.SelectOp(reached, index(step * block_k), index(0)).result
            ).result
    return value


def rewrite_online_softmax(
    op: ir.Operation,
    form: Layout,
    block_q: int,
    block_k: int,
    spans: Spans | None = None,
    per_call: str | None = None,
) -> None:
    """iree_linalg_ext.attention -> scf.for(Q blocks) { scf.for(K blocks) { FA2 step } };
    an online_attention and the division that normalises it (``normaliser``) the same,
    each row's running values started from the op's."""
    normalising = linalg_ext.normaliser(op) if op.name == linalg_ext.ONLINE_ATTENTION else None
    replaced = normalising or op
    result = build(op, form, block_q, block_k, spans, per_call, replaced)
    replaced.results[0].replace_all_uses_with(result)
    # and the mask producers, now re-run per block inside the loop
    erase_dead([replaced, op] if normalising else [op])


def _attentions(module: ir.Operation) -> list[ir.Operation]:
    """The attention ops, and the online_attention ops that a division normalises."""
    online = linalg_ext.find_all(module, linalg_ext.ONLINE_ATTENTION)
    return linalg_ext.find_all(module) + [op for op in online if linalg_ext.normaliser(op)]


def run(module: ir.Operation, options: Options) -> None:
    for op in _attentions(module):
        form = linalg_ext.layout(op)
        if isinstance(form, str):
            remarks.emit(op.location, f"attention left to IREE: {form}")
            continue
        location = op.location
        block_q, block_k = blocks(op, options)
        spans = key_spans(op, form, block_q, block_k)
        per_call = spans_per_call(op, form, spans)
        rewrite_online_softmax(op, form, block_q, block_k, spans, per_call)
        skipping = (
            f", key blocks above the diagonal (offset {form.causal_offset}) skipped"
            if form.causal_offset is not None
            else ""
        )
        if form.window_start is not None:
            skipping += f", keys before row{form.window_start:+d} skipped (a sliding window)"
        if spans is not None:
            skipping += f", {spans.skipped:.0%} of key blocks skipped by the mask's values"
        if per_call:
            skipping += ", key blocks outside each query block's kept keys skipped per call"
        remarks.emit(
            location,
            f"attention rewritten as online softmax (blocks {block_q}x{block_k}{skipping})",
        )


# The running max starts at the lowest finite f32, not -inf: a fully masked block then
# gives exp2(-inf - lowest) = 0 and a rescale of exp2(0) = 1 with no special case, and
# the start value stays distinct from the -inf that seeds each block's row max (the
# two -inf fills were merged by CSE into one tensor that IREE then updated in place).
_LOWEST = LOWEST_F32

# A unit attribute on the outer loop, so the fused attention can still be counted.
MARKER = "fusion.online_softmax"

# Both loops run on the host, and nothing else keeps the VM from enqueueing every step,
# each with its scores allocated, long before the device has run them: peak memory
# O(N²), 3 GB at N=32K (B1 H4 D64 fp32 causal, local-task). So, having enqueued query
# block i, the host waits until block i - lag is done, lag the fewest blocks that hold
# this many key-block steps: the device keeps work queued while the host wakes up (slow
# on a loaded host), and the steps in flight stay linear in N (148 MB at 32K,
# benchmarks/results/cpu_memory.md).
_QUEUED_STEPS = 64


def _maps(n_dims: int, *positions: list[int]) -> list[ir.AffineMapAttr]:
    return [affine_map(n_dims, p) for p in positions]


def _f(value: float) -> ir.Value:
    return dialects.arith.ConstantOp(ir.F32Type.get(), value).result


def _add(a: ir.Value, b: ir.Value) -> ir.Value:
    return dialects.arith.AddFOp(a, b).result


def _mul(a: ir.Value, b: ir.Value) -> ir.Value:
    return dialects.arith.MulFOp(a, b).result


def _is_broadcast(value: ir.Value) -> bool:
    """``value`` (through reshapes) is a broadcast of a tensor of fewer dims."""
    return linalg.is_broadcast(linalg.producer_and_reshapes(value)[0])


def _materialized(value: ir.Value) -> ir.Value:
    """``value`` behind a ``util.optimization_barrier``, so IREE computes it once into a
    buffer instead of fusing its producer into the loop's dispatches."""
    return ir.Operation.create(
        "util.optimization_barrier", results=[value.type], operands=[value]
    ).result


def build(
    op: ir.Operation,
    form: Layout,
    block_q: int,
    block_k: int,
    spans: Spans | None = None,
    per_call: str | None = None,
    replaced: ir.Operation | None = None,
) -> ir.Value:
    """Inserts the loop nest before ``replaced`` (``op``, or the normaliser of an
    online_attention); returns the value replacing its result."""
    q, k, v, scale = list(op.operands)[:4]
    mask = op.operands[4] if form.has_mask else None
    replaced = replaced or op
    out_init = replaced.operands[-1]
    out_type = ir.RankedTensorType(replaced.results[0].type)
    # an online_attention's running accumulator, max and sum to start from
    start = list(op.operands)[-3:] if op.name == linalg_ext.ONLINE_ATTENTION else None
    with ir.InsertionPoint(replaced), op.location:
        # Measured: when K and V reach the loop as broadcasts of one KV head (MQA, batch
        # 1), IREE 3.13 fuses them into the loop's dispatches and llvm-cpu computes
        # garbage once the keys exceed 256 rows (uninitialised reads, changing per run;
        # with only V computed first, still wrong when Q is scaled by hand): each is
        # computed into a buffer first.
        k, v = (_materialized(x) if _is_broadcast(x) else x for x in (k, v))
        batch, rows, depth = (size_of(q, i) for i in range(3))
        keys = size_of(k, 2 if form.k_transposed else 1)
        width = size_of(v, 2)
        log2_scale = times(to_f32(scale), LOG2E)
        lag = _lag(rows, keys, block_q, block_k)
        ring = [hal.null_fence() for _ in range(lag - 1)] if lag else []
        span = None  # a mask that ignores the query row: its kept keys found once per call
        if per_call == ONCE:
            span = _kept_span(mask, index(0), [batch, 1, keys])
        # a buffer of its own: attentions of one shape share the op's tensor.empty
        outer = dialects.scf.ForOp(
            index(0), _as_index(rows), index(block_q), [own_buffer(out_init), *ring]
        )
        outer.operation.attributes[MARKER] = ir.UnitAttr.get()
        with ir.InsertionPoint(outer.body):
            i = outer.induction_variable
            tm = tile_size(i, rows, block_q)
            q_i = extract_slice(q, [0, i, 0], [batch, tm, depth])
            if start is None:
                running = [
                    full([batch, tm], _LOWEST),
                    full([batch, tm], 0.0),
                    full([batch, tm, width], 0.0),
                ]
            else:
                running = _started(start, i, [batch, tm, width])
            keys_bound = _as_index(keys)
            if form.causal_offset is not None:
                # causal tile skipping: rows i .. i+tm-1 see keys up to i + tm - 1 + c
                visible = dialects.arith.AddIOp(
                    dialects.arith.AddIOp(i, _as_index(tm)).result, index(form.causal_offset)
                ).result
                visible = dialects.arith.MaxSIOp(visible, index(0)).result
                keys_bound = dialects.arith.MinSIOp(visible, keys_bound).result
            first_key = index(0)
            if form.window_start is not None:
                # a window: rows i .. i+tm-1 see no key before i + w (the mask, kept, does
                # the rest), from the key block holding it: ``tile_size`` takes tiles to
                # start at multiples of the block (from i + w itself, the last tile read
                # past the keys' end, and about one call in a hundred under load came back
                # with the tail of its output wrong: tests/test_mask_forms.py, 2026-12-05)
                first_key = dialects.arith.AddIOp(i, index(form.window_start)).result
                first_key = dialects.arith.MaxSIOp(first_key, index(0)).result
                first_key = dialects.arith.MulIOp(
                    dialects.arith.DivUIOp(first_key, index(block_k)).result, index(block_k)
                ).result
            if spans is not None and spans.first is not None:
                first_key = dialects.arith.MaxSIOp(
                    first_key, _step_function(i, spans.first, block_q, block_k)
                ).result
            if spans is not None and spans.end is not None:
                keys_bound = dialects.arith.MinSIOp(
                    keys_bound, _step_function(i, spans.end, block_q, block_k)
                ).result
            if per_call:
                first, end = span or _kept_span(mask, i, [batch, tm, keys])
                aligned = dialects.arith.MulIOp(
                    dialects.arith.DivUIOp(first, index(block_k)).result, index(block_k)
                ).result  # a block's start, as ``tile_size`` takes it
                first_key = dialects.arith.MaxSIOp(first_key, aligned).result
                keys_bound = dialects.arith.MinSIOp(keys_bound, end).result
            inner = dialects.scf.ForOp(first_key, keys_bound, index(block_k), running)
            with ir.InsertionPoint(inner.body):
                j = inner.induction_variable
                m, total, acc = inner.inner_iter_args
                tk = tile_size(j, keys, block_k)
                if form.k_transposed:
                    k_j = extract_slice(k, [0, 0, j], [batch, depth, tk])
                else:
                    k_j = extract_slice(k, [0, j, 0], [batch, tk, depth])
                v_j = extract_slice(v, [0, j, 0], [batch, tk, width])
                # the mask's producers re-run on this block: no (N, N) mask is needed
                mask_ij = tile_of(mask, [0, i, j], [batch, tm, tk]) if mask else None
                step = _block_step(
                    op, q_i, k_j, v_j, mask_ij, log2_scale, m, total, acc, [batch, tm, tk], form
                )
                dialects.scf.YieldOp(step)
            _, l_final, acc_final = inner.results
            o_i = generic(
                [acc_final, l_final],
                empty_of([batch, tm, width], out_type.element_type),
                _maps(3, [0, 1, 2], [0, 1], [0, 1, 2]),
                ["parallel"] * 3,
                lambda a, s, _: _cast(_normalised(a, s), out_type.element_type),
            )
            # Written into the barrier's result, the output is updated in place (IREE
            # 3.13 had copied all of it into a new buffer per block). The last lag - 1
            # blocks' fences ride along in the loop; block i waits for block i - lag.
            done_before, fence = hal.signal_when_ready(outer.inner_iter_args[0])
            ring = [*outer.inner_iter_args[1:], fence] if lag else []
            if lag:
                hal.wait(ring[0])
            dialects.scf.YieldOp([insert_slice(o_i, done_before, [0, i, 0]), *ring[1:]])
    return outer.results[0]


def _started(start: list[ir.Value], i: ir.Value, sizes: list[Size]) -> list[ir.Value]:
    """The running max, sum and accumulator of query rows ``i`` read from an
    online_attention's ``start`` (accumulator, max, sum), each in a tensor of its own
    (updated in place, see ``_block_step``). The max is at least the lowest finite f32,
    as ``_LOWEST`` is there for, and the sum is rescaled to it: a start of max -inf (a
    sink of -inf) then weighs nothing, as it does in IREE's op."""
    acc, row_max, total = start
    f32 = ir.F32Type.get()

    def tile(value: ir.Value, sizes: list[Size], body) -> ir.Value:
        rank = len(sizes)
        inputs = [extract_slice(v, [0, i, 0][:rank], sizes) for v in value]
        maps = [affine_map(rank, list(range(rank)))] * (len(inputs) + 1)
        return generic(inputs, empty_of(sizes, f32), maps, ["parallel"] * rank, body)

    def floored(m: ir.Value, _: ir.Value) -> ir.Value:
        return dialects.arith.MaximumFOp(to_f32(m), _f(_LOWEST)).result

    def rescaled(s: ir.Value, m: ir.Value, _: ir.Value) -> ir.Value:
        m = to_f32(m)
        return _mul(
            to_f32(s), exp2_of_difference(m, dialects.arith.MaximumFOp(m, _f(_LOWEST)).result)
        )

    return [
        tile([row_max], sizes[:2], floored),
        tile([total, row_max], sizes[:2], rescaled),
        tile([acc], sizes, lambda a, _: to_f32(a)),
    ]


def _lag(rows: Size, keys: Size, block_q: int, block_k: int) -> int:
    """How many query blocks the host enqueues ahead of the device; 0: no wait at all
    (every block fits in the queue); 1 with dynamic sizes."""
    if not isinstance(rows, int) or not isinstance(keys, int):
        return 1
    lag = max(1, math.ceil(_QUEUED_STEPS / max(1, math.ceil(keys / block_k))))
    return lag if lag < math.ceil(rows / block_q) else 0


def _masked(
    x: ir.Value, mask: ir.Value, replaces: bool = False, saturates: float | None = None
) -> ir.Value:
    """x + log2(e)·mask as PyTorch's softmax sees it, in the exp2 domain.

    A fill at or below ``saturates`` (``linalg_ext.swamp_threshold``: the bottom of the
    type the mask is added in, ``finfo(dtype).min``) swamps the score it is added to
    (fp16: ``s + -65504`` rounds to -65504), so there the logit is the fill alone; it is
    clamped at the lowest finite f32 (``finfo(f32).min`` overflows once scaled), so a
    row of nothing but such fills gets equal weights. -inf stays -inf, and with
    ``replaces`` (``masked_fill``) it is -inf whatever the score was."""
    mask = to_f32(mask)
    shift = _mul(mask, _f(LOG2E))
    value = _add(x, shift)
    if saturates is not None:
        swamped = dialects.arith.CmpFOp(
            dialects.arith.CmpFPredicate.OLE, mask, _f(saturates)
        ).result
        value = dialects.arith.SelectOp(swamped, shift, value).result
    floored = dialects.arith.MaximumFOp(value, _f(_LOWEST)).result
    minus_inf = dialects.arith.CmpFOp(dialects.arith.CmpFPredicate.OEQ, mask, _f(-math.inf)).result
    return dialects.arith.SelectOp(minus_inf, shift if replaces else value, floored).result


def _normalised(acc: ir.Value, total: ir.Value) -> ir.Value:
    """acc / l, and 0 where l is 0: a row whose keys are all -inf gives 0, as
    ``F.scaled_dot_product_attention`` and FlashAttention give (softmax itself, NaN)."""
    empty_row = dialects.arith.CmpFOp(dialects.arith.CmpFPredicate.OEQ, total, _f(0.0)).result
    return dialects.arith.SelectOp(
        empty_row, _f(0.0), dialects.arith.DivFOp(acc, total).result
    ).result


def _as_index(size: Size) -> ir.Value:
    return size if isinstance(size, ir.Value) else index(size)


def _cast(value: ir.Value, element: ir.Type) -> ir.Value:
    if element == ir.F32Type.get():
        return value
    return dialects.arith.TruncFOp(element, value).result


def _block_step(
    op: ir.Operation,
    q_i: ir.Value,
    k_j: ir.Value,
    v_j: ir.Value,
    mask_ij: ir.Value | None,
    log2_scale: ir.Value,
    m: ir.Value,
    total: ir.Value,
    acc: ir.Value,
    score_sizes: list[Size],
    form: Layout,
) -> list[ir.Value]:
    """One key block: the new running max, sum and accumulator."""
    # s = Q_i · K_jᵀ over (b, m, k2, k1)
    k_map = [0, 3, 2] if form.k_transposed else [0, 2, 3]
    s = generic(
        [q_i, k_j],
        full(score_sizes, 0.0),
        _maps(4, [0, 1, 3], k_map, [0, 1, 2]),
        ["parallel", "parallel", "parallel", "reduction"],
        lambda a, b, c: _add(c, _mul(to_f32(a), to_f32(b))),
    )

    def logits(score, *rest):
        x = _mul(score, log2_scale)
        if not has_plain_region(op):
            x = inline_body(op, x)  # IREE's region semantics: base 2 in, base 2 out
        if rest[:-1]:
            x = _masked(x, rest[0], linalg_ext.mask_replaces(op), linalg_ext.swamp_threshold(op))
        return x

    inputs = [s] + ([mask_ij] if mask_ij is not None else [])
    x = generic(
        inputs,
        empty_of(score_sizes, ir.F32Type.get()),
        _maps(3, *([[0, 1, 2]] * (len(inputs) + 1))),
        ["parallel"] * 3,
        logits,
    )
    row = ["parallel", "parallel", "reduction"]
    rows2 = ["parallel", "parallel"]
    f32 = ir.F32Type.get()
    row_max = generic(
        [x],
        full(score_sizes[:2], -math.inf),
        _maps(3, [0, 1, 2], [0, 1]),
        row,
        lambda a, b: dialects.arith.MaximumFOp(a, b).result,
    )
    # Every running value is updated in its own loop-carried tensor (the payload reads
    # ``outs``, the last write comes after the last read), so a dispatch holding the
    # whole loop nest bufferizes each update in place: alpha reads the old max before
    # the max is overwritten.
    alpha = generic(
        [m, row_max],
        empty_of(score_sizes[:2], f32),
        _maps(2, [0, 1], [0, 1], [0, 1]),
        rows2,
        lambda a, b, _: exp2_of_difference(a, dialects.arith.MaximumFOp(a, b).result),
    )
    m_new = generic(
        [row_max],
        m,
        _maps(2, [0, 1], [0, 1]),
        rows2,
        lambda b, old: dialects.arith.MaximumFOp(old, b).result,
    )
    p = generic(
        [x, m_new],
        empty_of(score_sizes, f32),
        _maps(3, [0, 1, 2], [0, 1], [0, 1, 2]),
        ["parallel"] * 3,
        lambda a, b, _: exp2_of_difference(a, b),
    )
    l_scaled = generic([alpha], total, _maps(2, [0, 1], [0, 1]), rows2, lambda a, old: _mul(old, a))
    l_new = generic([p], l_scaled, _maps(3, [0, 1, 2], [0, 1]), row, lambda a, b: _add(a, b))
    acc_scaled = generic(
        [alpha],
        acc,
        _maps(3, [0, 1], [0, 1, 2]),
        ["parallel"] * 3,
        lambda a, old: _mul(old, a),
    )
    acc_new = generic(
        [p, v_j],
        acc_scaled,
        _maps(4, [0, 1, 3], [0, 3, 2], [0, 1, 2]),
        ["parallel", "parallel", "parallel", "reduction"],
        lambda a, b, c: _add(c, _mul(a, to_f32(b))),
    )
    return [m_new, l_new, acc_new]
