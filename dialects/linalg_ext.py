"""iree_linalg_ext.attention: its IREE 3.13 semantics, its score region, its decomposition."""

from __future__ import annotations

import math
from dataclasses import dataclass

from fusion_compiler.dialects import causal, linalg
from fusion_compiler.dialects.builders import (
    Extent,
    affine_map,
    axes,
    dims,
    empty,
    erase_dead,
    filled,
    generic,
    inline_body,
    times,
    to_f32,
)
from fusion_compiler.dialects.expr import SWAMPS

from fusion_compiler.ir import dialects, ir

ATTENTION = "iree_linalg_ext.attention"
# The same computation from a given running state (accumulator, max, sum), unnormalised:
# an attention with a sink starts from the sink's key (``dialects.attention``).
ONLINE_ATTENTION = "iree_linalg_ext.online_attention"

# IREE 3.13 hands the score region x = scale·log2(e)·s and reads its result in the same
# base-2 domain (it computes exp2); measured on llvm-cpu, where
# softmax(cap·tanh(scale·s/cap) + mask) came out to 2e-7.
LOG2E = 1.4426950408889634


LOWEST_F32 = -3.4028234663852886e38  # finfo(f32).min


# A unit attribute on an attention whose mask the model added to scores of the mask's own
# type (attention written out, found by fusion-detect-attention): there a fill at the
# bottom of an fp16 mask (``finfo(f16).min``) swamps the score, as PyTorch's fp16 sum
# rounds it. Without it the mask is SDPA's ``attn_mask``, which PyTorch's kernels add to
# f32 scores: -65504 keeps the score's digits, and a row of such fills is weighed by its
# scores.
MASK_IN_SCORE_TYPE = "fusion.mask_in_score_type"


def swamp_threshold(op: ir.Operation) -> float | None:
    """``SWAMPS`` of the type ``op``'s mask is added in: its own where the model added it
    (``MASK_IN_SCORE_TYPE``), f32 for SDPA's. None without a mask."""
    if len(op.attributes["indexing_maps"]) - len(op.results) != 5:  # Q, K, V, scale, mask
        return None
    element = str(ir.RankedTensorType(op.operands[4].type).element_type)
    return SWAMPS.get(element if MASK_IN_SCORE_TYPE in op.attributes else "f32")


def swamping_fill(mask: ir.Value, depth: int = 32, threshold: float | None = None) -> float | None:
    """``threshold`` (``SWAMPS`` of the mask's type by default) if a constant among the
    mask's producers (up to ``depth`` ops up) is at or below it (transformers'
    ``finfo(dtype).min``), else None. A mask read from an input is assumed to hold none."""
    if threshold is None:
        threshold = SWAMPS.get(str(ir.RankedTensorType(mask.type).element_type))
    if threshold is None:
        return None
    fills: list[float] = []
    left: dict = {}  # op -> the most depth left it was visited with

    def visit(value: ir.Value, depth: int) -> None:
        fills.append(linalg.constant_value(value))
        op = linalg.producer(value)
        if op is None or depth == 0 or left.get(op, -1) >= depth:
            return
        left[op] = depth
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:  # constants made inside or captured
                    values = [*inner.results, *inner.operands]
                    fills.extend(linalg.constant_value(r) for r in values)
        for operand in op.operands:
            visit(operand, depth - 1)

    visit(mask, depth)
    swamped = any(isinstance(c, float) and -math.inf < c <= threshold for c in fills)
    return threshold if swamped else None


# A unit attribute on an attention whose mask replaces the score where it is -inf, as
# ``masked_fill(m, -inf)`` / ``where(m, s, -inf)`` do, instead of being added to it: a
# NaN or inf score at a masked key (garbage past a cache's length) is dropped there.
# Elsewhere the mask adds, as IREE's op and PyTorch's SDPA add theirs.
MASK_REPLACES = "fusion.mask_replaces"


def mask_replaces(op: ir.Operation) -> bool:
    return MASK_REPLACES in op.attributes


def find_all(module: ir.Operation, name: str = ATTENTION) -> list[ir.Operation]:
    """Every iree_linalg_ext.attention (or op ``name``) in ``module``, in order."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == name:
            found.append(op.operation)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return found


def normaliser(op: ir.Operation) -> ir.Operation | None:
    """The one user of an online_attention's results, if it is ``acc / sum`` (then cast,
    or not) over (batch, rows, cols) and the running max is not read: what an attention
    with a sink is (``dialects.attention``)."""
    acc, row_max, total = op.results
    users = [use.owner.operation for r in (acc, total) for use in r.uses]
    if len(users) != 2 or users[0] != users[1] or any(True for _ in row_max.uses):
        return None
    user = users[0]
    if not linalg.is_generic(user) or list(linalg.inputs(user)) != [acc, total]:
        return None
    if [dims(m) for m in linalg.indexing_maps(user)] != [[0, 1, 2], [0, 1], [0, 1, 2]]:
        return None
    block = user.regions[0].blocks[0]
    divide, *cast, done = [o.operation for o in block.operations]
    if divide.name != "arith.divf" or list(divide.operands) != list(block.arguments)[:2]:
        return None  # acc / sum, in that order
    if cast and (
        len(cast) > 1 or cast[0].name != "arith.truncf" or cast[0].operands[0] != divide.results[0]
    ):
        return None
    last = cast[0] if cast else divide
    return user if list(done.operands) == [last.results[0]] else None


def sink_start(op: ir.Operation) -> ir.Value | None:
    """The running max an online_attention starts from, where it starts from nothing
    else: accumulator 0 and sum 1 (an attention with a sink, ``dialects.attention``)."""
    acc, row_max, total = list(op.operands)[-3:]
    return row_max if _filled(acc) == 0.0 and _filled(total) == 1.0 else None


def _filled(value: ir.Value) -> float | None:
    op = linalg.producer(value)
    if op is None or op.name != "linalg.fill":
        return None
    found = linalg.constant_value(op.operands[0])
    return float(found) if isinstance(found, (int, float)) else None


def plain_attention(op: ir.Operation, normalising: ir.Operation) -> ir.Operation:
    """An iree_linalg_ext.attention over the online_attention ``op``'s inputs, its
    result type ``normalising``'s (the division of ``op``'s accumulator by its sum), put
    before that division and taking its uses: the attention without the running values
    ``op`` starts from, which a lowering that adds them itself (a sink) replaces."""
    maps = list(op.attributes["indexing_maps"])[: -len(op.results) + 1]  # the output's last
    inputs = list(op.operands)[: -len(op.results)]
    result_type = normalising.results[0].type
    with ir.InsertionPoint(normalising), op.location:
        init = empty(axes(normalising.results[0]), ir.RankedTensorType(result_type).element_type)
        attributes = {name: op.attributes[name] for name in op.attributes}
        attributes["indexing_maps"] = ir.ArrayAttr.get(maps)
        plain = ir.Operation.create(
            ATTENTION,
            results=[result_type],
            operands=[*inputs, init],
            attributes=attributes,
            regions=1,
        )
        block = plain.regions[0].blocks.append(ir.F32Type.get())
        with ir.InsertionPoint(block):  # the score region, copied
            yielded = inline_body(op, block.arguments[0])
            ir.Operation.create("iree_linalg_ext.yield", operands=[yielded])
    normalising.results[0].replace_all_uses_with(plain.results[0])
    return plain


def softcap_region(block: ir.Block, cap: float) -> None:
    """y = cap·log2(e)·tanh(x / log2(e)), i.e. ``cap·tanh(scale·s)`` in IREE's base 2."""
    f32 = ir.F32Type.get()
    x = block.arguments[0]
    inner = dialects.arith.MulFOp(x, dialects.arith.ConstantOp(f32, 1 / LOG2E).result).result
    capped = dialects.math.TanhOp(inner).result
    outer = dialects.arith.ConstantOp(f32, cap * LOG2E).result
    ir.Operation.create(
        "iree_linalg_ext.yield", operands=[dialects.arith.MulFOp(capped, outer).result]
    )


def has_plain_region(op: ir.Operation) -> bool:
    """The score region only yields its argument (no score modification)."""
    block = op.regions[0].blocks[0]
    body = list(block.operations)
    return len(body) == 1 and body[0].operands[0] == block.arguments[0]


def head_dim(op: ir.Operation) -> int:
    """K1, the QK contraction size, of an iree_linalg_ext.attention."""
    maps = [ir.AffineMapAttr(a).value for a in op.attributes["indexing_maps"]]
    out = len(maps) - len(op.results)  # an online_attention's running max and sum follow
    q_dims, out_dims = dims(maps[0]), dims(maps[out])
    (k1_pos,) = [i for i, d in enumerate(q_dims) if d not in out_dims]
    return ir.RankedTensorType(op.operands[0].type).shape[k1_pos]


def rows_with_a_key(op: ir.Operation, allowed) -> tuple[ir.Value, list[int]]:
    """(whether some key of each mask row is ``allowed``, the row dims of the mask's map)."""
    maps = [ir.AffineMapAttr(a).value for a in op.attributes["indexing_maps"]]
    q_dims, k_dims, mask_dims = (dims(maps[i]) for i in (0, 1, 4))
    (k2,) = [d for d in k_dims if d not in q_dims]
    mask = op.operands[4]
    rank = len(mask_dims)
    row_axes = [i for i, d in enumerate(mask_dims) if d != k2]
    i1 = ir.IntegerType.get_signless(1)
    false = dialects.arith.ConstantOp(i1, 0).result
    rows_init = dialects.linalg.fill(false, outs=[empty([(mask, i) for i in row_axes], i1)])

    def any_key(x: ir.Value, seen: ir.Value) -> ir.Value:
        return dialects.arith.OrIOp(seen, allowed(x)).result

    has_key = generic(
        [mask],
        rows_init,
        [affine_map(rank, list(range(rank))), affine_map(rank, row_axes)],
        ["reduction" if d == k2 else "parallel" for d in mask_dims],
        any_key,
    )
    return has_key, [mask_dims[i] for i in row_axes]


def keep_rows(value: ir.Value, value_dims: list[int], rows: ir.Value, row_dims: list[int]):
    """value where its row's flag is set, else 0 (the flags broadcast over the rest)."""
    value_type = ir.RankedTensorType(value.type)
    rank = value_type.rank
    zero = dialects.arith.ConstantOp(value_type.element_type, 0.0).result

    def keep(v: ir.Value, row: ir.Value, _: ir.Value) -> ir.Value:
        return dialects.arith.SelectOp(row, v, zero).result

    identity = affine_map(rank, list(range(rank)))
    return generic(
        [value, rows],
        empty(axes(value), value_type.element_type),
        [identity, affine_map(rank, [value_dims.index(d) for d in row_dims]), identity],
        ["parallel"] * rank,
        keep,
    )


def operand_dims(op: ir.Operation, index: int) -> list[int]:
    # a list first: an ArrayAttr read at a negative index reads out of bounds
    maps = list(op.attributes["indexing_maps"])
    return dims(ir.AffineMapAttr(maps[index]).value)


def zero_empty_rows(op: ir.Operation, out: ir.Value) -> ir.Value:
    """out -> (some key of the row above -inf ? out : 0), rows read from the mask."""

    def above_minus_inf(x: ir.Value) -> ir.Value:
        minus_inf = dialects.arith.ConstantOp(x.type, -math.inf).result
        return dialects.arith.CmpFOp(dialects.arith.CmpFPredicate.UNE, x, minus_inf).result

    rows, row_dims = rows_with_a_key(op, above_minus_inf)
    return keep_rows(out, operand_dims(op, -1), rows, row_dims)


def _add_mask(score: ir.Value, mask: ir.Value, replaces: bool, swamps: float | None) -> ir.Value:
    """score + mask in f32, as PyTorch's softmax sees it: a fill at or below ``swamps``
    (``swamp_threshold``: it swamps any score in the type the mask is added in) is the
    logit alone, and with ``replaces`` (``masked_fill``, ``where``) so is -inf, whatever
    the score (a NaN or inf score there is dropped)."""
    f32 = ir.F32Type.get()
    bias = to_f32(mask)
    out = dialects.arith.AddFOp(score, bias).result
    if swamps is not None:
        threshold = dialects.arith.ConstantOp(f32, swamps).result
        swamped = dialects.arith.CmpFOp(dialects.arith.CmpFPredicate.OLE, bias, threshold)
        out = dialects.arith.SelectOp(swamped.result, bias, out).result
    if replaces:
        minus_inf = dialects.arith.ConstantOp(f32, -math.inf).result
        dropped = dialects.arith.CmpFOp(dialects.arith.CmpFPredicate.OEQ, bias, minus_inf)
        out = dialects.arith.SelectOp(dropped.result, minus_inf, out).result
    return out


def decompose(op: ir.Operation) -> list[ir.Value]:
    """iree_linalg_ext.attention -> QKᵀ, scale and mask, linalg.softmax, P·V (f32 sums).

    The mask as PyTorch applies it (``_add_mask``), and rows with no key above -inf 0,
    as ``F.scaled_dot_product_attention`` gives them: exact on its own, it needs none of
    fusion-guard-masked-rows' adjustments to IREE's op. An online_attention the same up
    to the softmax, then its running values updated from its start (``_online``).
    Inserted before ``op``; returns the values that replace its results.
    """
    maps = [ir.AffineMapAttr(a).value for a in op.attributes["indexing_maps"]]
    q, k, v, scale = list(op.operands)[:4]
    n_inputs = len(maps) - len(op.results)
    mask = op.operands[4] if n_inputs == 5 else None
    replaces = mask_replaces(op)
    q_map, k_map, v_map, o_map = maps[0], maps[1], maps[2], maps[n_inputs]
    n_dims = q_map.n_dims
    (k1,) = [d for d in dims(q_map) if d not in dims(o_map)]
    (n,) = [d for d in dims(o_map) if d not in dims(q_map)]
    (k2,) = [d for d in dims(k_map) if d not in dims(q_map)]
    sizes: dict[int, Extent] = {}  # loop dim -> where its size is read
    for value, map_ in ((q, q_map), (k, k_map), (v, v_map)):
        sizes.update((d, (value, axis)) for axis, d in enumerate(dims(map_)))
    score_dims = [d for d in dims(o_map) if d != n] + [k2]  # (batch..., m, k2)
    out_type = ir.RankedTensorType(op.results[0].type)

    def within(dims: list[int], drop: int) -> list[int]:
        kept = [d for d in range(n_dims) if d != drop]
        return [kept.index(d) for d in dims]

    with ir.InsertionPoint(op), op.location:
        # S = Q·Kᵀ over k1, in f32
        s_dims = within(score_dims, n)
        scores = generic(
            [q, k],
            filled([sizes[d] for d in score_dims], 0.0),
            [affine_map(n_dims - 1, within(dims(m), n)) for m in (q_map, k_map)]
            + [affine_map(n_dims - 1, s_dims)],
            ["reduction" if d == k1 else "parallel" for d in range(n_dims) if d != n],
            lambda a, b, acc: (
                dialects.arith.AddFOp(
                    acc, dialects.arith.MulFOp(to_f32(a), to_f32(b)).result
                ).result
            ),
        )
        # scale·S (+ mask)
        rank = len(score_dims)
        identity = affine_map(rank, list(range(rank)))
        inputs, in_maps = [scores], [identity]
        if mask is not None:
            inputs.append(mask)
            in_maps.append(affine_map(rank, [score_dims.index(d) for d in dims(maps[4])]))

        def scaled(s, *rest):
            out = dialects.arith.MulFOp(s, to_f32(scale)).result
            if not has_plain_region(op):  # the region works in IREE's base-2 domain
                out = inline_body(op, times(out, LOG2E))
                out = times(out, 1 / LOG2E)
            if mask is not None:
                out = _add_mask(out, rest[0], replaces, swamp_threshold(op))
            return out

        logits = generic(
            inputs,
            filled([sizes[d] for d in score_dims], 0.0),
            [*in_maps, identity],
            ["parallel"] * rank,
            scaled,
        )
        if op.name == ONLINE_ATTENTION:
            pv_maps = [
                affine_map(n_dims - 1, within(d, k1))
                for d in (score_dims, dims(v_map), dims(o_map))
            ]
            start = [(op.operands[n_inputs + i], dims(maps[n_inputs + i])) for i in range(3)]
            return _online(logits, v, start, score_dims, pv_maps, k2)
        destination = empty([sizes[d] for d in score_dims], ir.F32Type.get())
        softmax_op = dialects.linalg.SoftmaxOp([logits.type], logits, destination, rank - 1)
        probs = softmax_op.results[0]
        # O = P·V over k2, in f32, then the output type
        out = generic(
            [probs, v],
            filled([sizes[d] for d in dims(o_map)], 0.0),
            [
                affine_map(n_dims - 1, within(score_dims, k1)),
                affine_map(n_dims - 1, within(dims(v_map), k1)),
                affine_map(n_dims - 1, within(dims(o_map), k1)),
            ],
            ["reduction" if d == k2 else "parallel" for d in range(n_dims) if d != k1],
            lambda p, b, acc: (
                dialects.arith.AddFOp(acc, dialects.arith.MulFOp(p, to_f32(b)).result).result
            ),
        )
        if mask is not None:  # a row with no key above -inf: 0, not softmax's 0/0
            out = zero_empty_rows(op, out)
        if out_type.element_type != ir.F32Type.get():
            init = empty(axes(out), out_type.element_type)
            ident = affine_map(out_type.rank, list(range(out_type.rank)))
            out = generic(
                [out],
                init,
                [ident, ident],
                ["parallel"] * out_type.rank,
                lambda x, _: dialects.arith.TruncFOp(out_type.element_type, x).result,
            )
    return [out]


def _online(
    logits: ir.Value,
    v: ir.Value,
    start: list[tuple[ir.Value, list[int]]],
    score_dims: list[int],
    pv_maps: list[ir.AffineMapAttr],
    k2: int,
) -> list[ir.Value]:
    """An online_attention's results from its scaled, masked ``logits`` (natural log
    domain, over ``score_dims``) and its ``start``: (accumulator, max, sum), each with
    its loop dims. In the op's base 2: x = log2(e)·logits, m = max(m0, rowmax x),
    p = exp2(x - m), sum = sum0·exp2(m0 - m) + rowsum p, acc = acc0·exp2(m0 - m) + p·V."""
    (acc0, acc_dims), (max0, row_dims), (sum0, _) = start
    f32 = ir.F32Type.get()
    rank = len(score_dims)
    scores = affine_map(rank, list(range(rank)))
    rows = affine_map(rank, [score_dims.index(d) for d in row_dims])
    row_only = affine_map(len(row_dims), list(range(len(row_dims))))
    kinds = ["reduction" if d == k2 else "parallel" for d in score_dims]
    extents = axes(max0)

    def rowwise(inputs: list[ir.Value], body) -> ir.Value:
        maps = [row_only] * (len(inputs) + 1)
        return generic(inputs, empty(extents, f32), maps, ["parallel"] * len(extents), body)

    def maximum(a: ir.Value, b: ir.Value) -> ir.Value:
        return dialects.arith.MaximumFOp(a, b).result

    def add(a: ir.Value, b: ir.Value) -> ir.Value:
        return dialects.arith.AddFOp(a, b).result

    def scaled(a: ir.Value, factor: ir.Value, _: ir.Value) -> ir.Value:
        return dialects.arith.MulFOp(to_f32(a), factor).result

    every = ["parallel"] * rank
    x = generic(
        [logits], empty(axes(logits), f32), [scores, scores], every, lambda s, _: times(s, LOG2E)
    )
    row_max = generic([x], rowwise([max0], lambda m, _: to_f32(m)), [scores, rows], kinds, maximum)
    alpha = rowwise([max0, row_max], lambda m0, m, _: exp2_of_difference(to_f32(m0), m))
    p = generic(
        [x, row_max],
        empty(axes(x), f32),
        [scores, rows, scores],
        every,
        lambda a, m, _: exp2_of_difference(a, m),
    )
    total = generic([p], rowwise([sum0, alpha], scaled), [scores, rows], kinds, add)
    acc_rank = len(acc_dims)
    acc_ident = affine_map(acc_rank, list(range(acc_rank)))
    acc_rows = affine_map(acc_rank, [acc_dims.index(d) for d in row_dims])
    acc = generic(
        [acc0, alpha],
        empty(axes(acc0), f32),
        [acc_ident, acc_rows, acc_ident],
        ["parallel"] * acc_rank,
        scaled,
    )
    acc = generic(
        [p, v],
        acc,
        pv_maps,
        ["reduction" if d == k2 else "parallel" for d in sorted({*score_dims, *acc_dims})],
        lambda a, b, c: add(c, dialects.arith.MulFOp(a, to_f32(b)).result),
    )
    return [acc, row_max, total]


def exp2_of_difference(a: ir.Value, b: ir.Value) -> ir.Value:
    """exp2(a - b)."""
    return dialects.math.Exp2Op(dialects.arith.SubFOp(a, b).result).result


# The layout handled: one batch dim; (b, m, k1) x (b, k2, k1) or (b, k1, k2) x (b, k2, n).
_Q, _V, _MASK, _OUT = [0, 1, 3], [0, 4, 2], [0, 1, 4], [0, 1, 2]
_K_ROWS, _K_COLUMNS = [0, 4, 3], [0, 3, 4]  # (b, k2, k1) as IREE's SDPA; (b, k1, k2) as ours


@dataclass(frozen=True)
class Layout:
    k_transposed: bool  # K stored (b, k1, k2)
    has_mask: bool
    causal_offset: int | None = None  # keys > row + c are masked: their blocks are skipped
    window_start: int | None = None  # keys < row + w are masked too (a sliding window)
    band_only: bool = False  # the mask is nothing but those bounds (-inf outside, 0 inside)


def layout(op: ir.Operation, allow_dynamic: bool = False) -> Layout | str:
    """The layout of an attention op, or why it is not one this rewrite handles.

    ``allow_dynamic``: dynamic sizes are fine for the caller (the generated kernel)."""
    maps = [dims(ir.AffineMapAttr(a).value) for a in op.attributes["indexing_maps"]]
    inputs = len(maps) - len(op.results)  # online_attention: also a running max and sum
    has_mask = inputs == 5
    out, *running = maps[inputs:]
    if maps[0] != _Q or maps[2] != _V or out != _OUT or (has_mask and maps[4] != _MASK):
        return "operand layout other than (batch, rows, cols) for Q, V, mask and output"
    if any(r != _OUT[:2] for r in running):
        return "a running max or sum laid out other than (batch, rows)"
    if maps[1] not in (_K_ROWS, _K_COLUMNS):
        return "K layout other than (batch, k2, k1) or (batch, k1, k2)"
    if has_mask and not _is_float(op.operands[4]):
        return "a boolean mask (fusion-additive-mask makes it additive)"
    dynamic = any(not ir.RankedTensorType(v.type).has_static_shape for v in op.operands[:3])
    if dynamic and not allow_dynamic:
        # Measured: with dynamic sizes IREE 3.13 runs this loop nest to wrong results
        # (rel. error > 1 on llvm-cpu, even for a single block); not yet explained.
        return "dynamic shapes (IREE 3.13 computes the loop nest wrongly with them)"
    band = causal.band(op.operands[4], 1, 2) if has_mask else None
    if band is None:
        return Layout(maps[1] == _K_COLUMNS, has_mask)
    return Layout(maps[1] == _K_COLUMNS, has_mask, band.upper, band.lower, band.pure)


def _is_float(value: ir.Value) -> bool:
    return isinstance(ir.RankedTensorType(value.type).element_type, ir.FloatType)


def fold_k_transpose(op: ir.Operation) -> None:
    """attention(K = collapse(transpose(K0))) -> attention(K = collapse(K0)), K map swapped;
    the same for attention(K = transpose(K0)).

    ``q @ k.transpose(-2, -1)`` reaches the op as a transposed copy of K, before the head
    merge or, with ``bmm`` over merged heads, after it; the kernel reads K either way, so
    the copy (a dispatch and a pass over K) is dropped.
    """
    k = op.operands[1]
    collapse = transpose = linalg.producer(k)
    if collapse is not None and collapse.name == "tensor.collapse_shape":
        transpose = linalg.producer(collapse.operands[0])
    else:
        collapse = None
    if transpose is None or transpose.name != "linalg.transpose":
        return
    perm = list(ir.DenseI64ArrayAttr(transpose.attributes["permutation"]))
    rank = len(perm)
    if perm != list(range(rank - 2)) + [rank - 1, rank - 2]:
        return
    plain = transpose.operands[0]
    if collapse is not None:
        shape = ir.RankedTensorType(k.type).shape
        swapped = ir.RankedTensorType.get(
            [*shape[:-2], shape[-1], shape[-2]], ir.RankedTensorType(k.type).element_type
        )
        with ir.InsertionPoint(op), op.location:
            plain = ir.Operation.create(
                "tensor.collapse_shape",
                results=[swapped],
                operands=[plain],
                attributes={"reassociation": collapse.attributes["reassociation"]},
            ).results[0]
    maps = list(op.attributes["indexing_maps"])
    k_map = ir.AffineMapAttr(maps[1]).value
    results = list(k_map.results)
    results[-1], results[-2] = results[-2], results[-1]
    maps[1] = ir.AffineMapAttr.get(ir.AffineMap.get(k_map.n_dims, 0, results))
    op.attributes["indexing_maps"] = ir.ArrayAttr.get(maps)
    op.operands[1] = plain
    erase_dead([collapse or transpose])  # and the transpose, unless something else reads them
