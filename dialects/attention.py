"""Recognises attention written as separate Linalg ops, and builds the fused op.

The shape the torch front end gives ``softmax(f(Q @ Kᵀ)) @ V``::

    qk  = linalg.batch_matmul(Q3, Kt3)        # (B, M, K2); Kt3 = collapse(transpose(K))
    s   = expand_shape(qk) -> score ops f      # scale, masks, biases, casts (dialects.score)
    p   = softmax(s, last dim) -> casts -> collapse_shape
    out = linalg.batch_matmul(p, V3)          # (B, M, N)   <- the anchor

and the replacement, ``iree_linalg_ext.attention(Q3, Kt3, V3, slope, f(0))``, reads
K through its transposed copy with the map ``(b, m, n, k1, k2) -> (b, k1, k2)``.

A score multiplied or divided by a tensor that does not vary along the keys (Swin-v2's
learned logit scale per head, a temperature per head, a factor per query row) is that
factor applied to Q's rows: ``(t·q)·k = t·(q·k)``. It is folded into Q (``RowFactor``)
where it comes before any mask or softcap, only casts and one reshape of the scores
before it.

An attention with a sink (GPT-OSS) appends one learned logit per row to the scores and
drops its column from the probabilities::

    c = concat(f(Q @ Kᵀ), sink)           # last dim, the sink's of size 1
    p = softmax(c - max(c))[..., :-1]     # the max subtracted or not

The sink is a key whose value row is zero: it only adds exp(sink) to each row's sum. It
becomes ``iree_linalg_ext.online_attention`` started from that key: accumulator 0,
running max the sink (in the op's base-2 domain, log2(e)·sink) and running sum 1, then
accumulator / sum.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from fusion_compiler.dialects import expr, linalg, score, softmax
from fusion_compiler.dialects.builders import (
    affine_map,
    collapse_shape,
    empty,
    filled,
    generic,
    reassociation_attr,
    times,
    to_f32,
    zeros,
)
from fusion_compiler.dialects.linalg_ext import (
    ATTENTION,
    LOG2E,
    MASK_IN_SCORE_TYPE,
    MASK_REPLACES,
    ONLINE_ATTENTION,
    softcap_region,
)

from fusion_compiler.ir import dialects, ir

_RESHAPES = ("tensor.expand_shape", "tensor.collapse_shape")


@dataclass(frozen=True)
class RowFactor:
    """A score op that multiplies (or divides) the score by its input ``operand``, which
    does not vary along the keys: folded into Q."""

    op: ir.Operation
    operand: int
    score_input: int
    divides: bool
    position: int = 0  # in the score ops: how many come before it
    expand: ir.Operation | None = None  # the scores' view where it reads them, if any


@dataclass
class Attention:
    """A matched attention: its matmuls, the score ops between, and what they add up to."""

    qk: ir.Operation
    pv: ir.Operation
    score_ops: list[ir.Operation]  # from qk to the softmax input, in order
    score_inputs: list[int]  # which operand of each score op carries the score
    score: score.Affine  # what the score ops do: slope·g(s) + mask
    ops: list[ir.Operation] = field(default_factory=list)  # everything the fused op replaces
    sink: ir.Value | None = None  # the logit appended to each row (..., M, 1), if any
    row_factor: RowFactor | None = None  # a factor per query row, folded into Q


@dataclass(frozen=True)
class NearMiss:
    op: ir.Operation
    reason: str


def _uses(value: ir.Value) -> list[ir.Operation]:
    return [use.owner.operation for use in value.uses]


_BATCH_MATMUL_MAPS = [
    "affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>",
    "affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>",
    "affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>",
]


def _is_plain_batch_matmul(op: ir.Operation | None) -> bool:
    """A batch_matmul with the default (b, m, k) x (b, k, n) maps."""
    if op is None or op.name != "linalg.batch_matmul":
        return False
    maps = op.attributes["indexing_maps"] if "indexing_maps" in op.attributes else None
    return maps is None or [str(m) for m in maps] == _BATCH_MATMUL_MAPS


def _is_cast(op: ir.Operation) -> bool:
    return any(linalg.is_elementwise_payload(op, name) for name in ("arith.extf", "arith.truncf"))


# torch-mlir lowers a view it cannot prove to be an expand or a collapse (einsum and
# view with dynamic sizes) to tensor.reshape, whose sizes are only known at run time.
_DYNAMIC_RESHAPE = (
    "the scores or probabilities pass through tensor.reshape (a view or einsum with "
    "dynamic sizes), whose shape detection cannot prove; F.scaled_dot_product_attention "
    "or static shapes are fused"
)


_SLICED_PROBABILITIES = (
    "the probabilities are sliced before P·V other than by dropping their last column "
    "(a sink's), or the slice's computed sizes could not be proven to drop exactly it"
)


def _tensors(values) -> list[ir.Value]:
    return [v for v in values if isinstance(v.type, ir.RankedTensorType)]


def _described(op: ir.Operation) -> str:
    """``op``'s name, with the ops of its payload for a generic (``arith.select``: a
    ``masked_fill`` of the probabilities)."""
    if not linalg.is_generic(op):
        return op.name
    body = op.regions[0].blocks[0].operations
    names = sorted({inner.name for inner in body if inner.name != "linalg.yield"})
    return f"{op.name} ({', '.join(names)})" if names else op.name


def _leads_to_softmax(value: ir.Value, depth: int = 6) -> bool:
    """Whether ``value`` is a softmax's result, through casts and reshapes."""
    op = linalg.producer(value)
    if op is None or depth == 0:
        return False
    if isinstance(softmax.match(op), softmax.Softmax):
        return True
    if op.name in (*_RESHAPES, "tensor.reshape") or (linalg.is_generic(op) and _is_cast(op)):
        return _leads_to_softmax(op.operands[0], depth - 1)
    return False


def _after_attention_softmax(value: ir.Value, depth: int = 4) -> bool:
    """Whether ``value`` is computed elementwise (``depth`` generics at most: a masked fill,
    ``nan_to_num``'s selects) from a softmax of scores that come from a matmul."""
    op = linalg.producer(value)
    if op is None or depth == 0:
        return False
    found = softmax.match(op)
    if isinstance(found, softmax.Softmax):
        return _leads_to_matmul(found.input)
    if op.name in (*_RESHAPES, "tensor.reshape"):
        return _after_attention_softmax(op.operands[0], depth - 1)
    if not linalg.is_generic(op) or linalg.reduction_dims(op) or len(op.results) != 1:
        return False
    return any(_after_attention_softmax(v, depth - 1) for v in linalg.inputs(op))


def _leads_to_matmul(value: ir.Value, depth: int = 12) -> bool:
    """Whether ``value`` comes from a batch_matmul through reshapes and elementwise ops."""
    op = linalg.producer(value)
    if op is None or depth == 0:
        return False
    if _is_plain_batch_matmul(op):
        return True
    if op.name in (*_RESHAPES, "tensor.reshape"):
        return _leads_to_matmul(op.operands[0], depth - 1)
    if linalg.is_generic(op) and not linalg.reduction_dims(op):
        return any(_leads_to_matmul(v, depth - 1) for v in linalg.inputs(op))
    return False


def _score_input(op: ir.Operation) -> int | None:
    """The one input of an elementwise generic that carries the score, if exactly one."""
    if not linalg.is_generic(op) or linalg.reduction_dims(op) or len(op.results) != 1:
        return None
    inputs = linalg.inputs(op)
    maps = [str(m) for m in linalg.indexing_maps(op)]
    output_map = maps[len(inputs)]
    candidates = [
        i for i, value in enumerate(inputs) if maps[i] == output_map and _leads_to_matmul(value)
    ]
    return candidates[0] if len(candidates) == 1 else None


def match(pv: ir.Operation) -> Attention | NearMiss | None:
    """An Attention anchored at ``pv`` (the P @ V matmul), a NearMiss with why, or None."""
    if not _is_plain_batch_matmul(pv):
        return None
    probs = pv.operands[0]
    replaced = [pv]
    op = linalg.producer(probs)
    sink_dropped = False  # the probabilities lost their last column (a sink's)
    while op is not None and (
        op.name == "tensor.collapse_shape"
        or (linalg.is_generic(op) and _is_cast(op))
        or (not sink_dropped and linalg.drops_last_column(op))
    ):
        sink_dropped = sink_dropped or op.name == "tensor.extract_slice"
        replaced.append(op)
        op = linalg.producer(op.operands[0])
    if op is not None and op.name == "tensor.reshape" and _leads_to_softmax(op.operands[0]):
        return NearMiss(pv, _DYNAMIC_RESHAPE)
    if (
        op is not None
        and op.name == "tensor.extract_slice"
        and not sink_dropped
        and _leads_to_softmax(op.operands[0])
    ):
        return NearMiss(pv, _SLICED_PROBABILITIES)
    found = softmax.match(op) if op is not None else None
    if not isinstance(found, softmax.Softmax):
        # not a product's or a reduction's input (a router's weights summed over experts)
        changed = op is not None and not op.name.startswith("linalg.batch_matmul")
        changed = changed and not (linalg.is_generic(op) and linalg.reduction_dims(op))
        if changed and any(_after_attention_softmax(v) for v in _tensors(op.operands)):
            return NearMiss(
                pv, f"the probabilities pass through {_described(op)} between the softmax and P·V"
            )
        return None
    # Shaped like attention from here on: every refusal says why.
    rank = ir.RankedTensorType(found.input.type).rank
    if found.dim != rank - 1:
        return NearMiss(pv, f"the softmax is over dimension {found.dim}, not the key dimension")
    if found.form != "decomposed":
        return NearMiss(pv, "only the decomposed softmax is matched so far")
    replaced += found.ops
    value, sink = found.input, None
    if sink_dropped:
        found_sink = _sink(value, rank)
        if isinstance(found_sink, str):
            return NearMiss(pv, found_sink)
        value, sink, sink_ops = found_sink
        replaced += sink_ops

    score_ops, score_inputs, total = [], [], score.Affine(1.0, False)
    row_factor, before_factor = None, score.Affine(1.0, False)  # the ops before it
    factor_at = 0  # how many score ops come after it
    while True:
        op = linalg.producer(value)
        if op is None:
            return NearMiss(pv, "the softmax input does not come from a matmul")
        if _is_plain_batch_matmul(op):
            qk = op
            break
        if op.name == "tensor.reshape":
            return NearMiss(pv, _DYNAMIC_RESHAPE)
        if op.name in _RESHAPES:
            score_ops.append(op)
            score_inputs.append(0)
            value = op.operands[0]
            continue
        index = _score_input(op)
        if index is None:
            return NearMiss(pv, f"cannot tell which operand of {op.name} carries the scores")
        own = score.evaluate(op, index)
        if isinstance(own, score.Unsupported) and row_factor is None:
            row_factor = _row_factor(op, index)
            if row_factor is not None:  # not a score op: Q's
                factor_at = len(score_ops)
                replaced.append(op)
                value = op.operands[index]
                continue
        term = score.compose(total, own) if isinstance(own, score.Affine) else own
        if not isinstance(term, score.Affine):
            reason = term.reason if isinstance(term, score.Unsupported) else "not a score op"
            return NearMiss(pv, reason)
        if row_factor is not None:
            before_factor = score.compose(before_factor, own)
        total = term
        score_ops.append(op)
        score_inputs.append(index)
        value = op.operands[index]
    score_ops.reverse()
    score_inputs.reverse()
    replaced += score_ops + [qk]

    for op in replaced[1:]:  # all but P @ V, whose result the fused op takes over
        for result in op.results:
            for user in _uses(result):
                # a size read from it is read from the operands after detection (_CLEANUP)
                if user.name != "tensor.dim" and not any(user == inner for inner in replaced):
                    return NearMiss(
                        pv,
                        f"an intermediate ({op.name}) is also used by {user.name}, so the "
                        "scores must be materialised",
                    )
    scores_shape = ir.RankedTensorType(qk.results[0].type).shape
    probs_shape = ir.RankedTensorType(pv.operands[0].type).shape
    if scores_shape != probs_shape:
        return NearMiss(
            pv,
            f"the scores {scores_shape} reach P·V reshaped as {probs_shape}: their rows are "
            "not the query rows of one (batch, query) pair",
        )
    expands = _kept_expands([o for o in score_ops if o.name in _RESHAPES])
    if expands is None or len(expands) > 1:
        return NearMiss(pv, "the scores are reshaped more than once")
    if expands and _splits_keys(expands[0]):
        return NearMiss(pv, "the key dim is split before the softmax: it is over part of the keys")
    viewed = [o for o in score_ops if o.name == "tensor.expand_shape"]
    if any(_splits_keys(o) for o in viewed):  # and back: the lowerings' masks take one view
        return NearMiss(pv, "the scores are viewed with the key dim split")
    if sink is not None and not _sink_fits(sink, qk, expands):
        return NearMiss(pv, "the sink logits are not one per (batch, query row) of the scores")
    if row_factor is not None:
        before = score_ops[: len(score_ops) - factor_at]
        if before_factor.offset or before_factor.tanh_of is not None:
            return NearMiss(pv, "the score is multiplied by a tensor after a mask or softcap")
        expanded = _kept_expands([o for o in before if o.name in _RESHAPES])
        if expanded is None or len(expanded) > 1:
            return NearMiss(pv, "the score is multiplied by a tensor in a view of two reshapes")
        expand = expanded[0] if expanded else None
        row_factor = replace(row_factor, position=len(before), expand=expand)
    return Attention(qk, pv, score_ops, score_inputs, total, replaced, sink, row_factor)


def _sink(value: ir.Value, rank: int) -> tuple[ir.Value, ir.Value, list] | str:
    """(the scores, the sink, the ops between) of ``concat(scores, sink) [- max]`` (cast or
    not), the softmax input of an attention whose probabilities drop their last column; or
    why not. Subtracting the row's max changes no softmax: it is dropped."""
    ops: list[ir.Operation] = []
    op = linalg.producer(value)
    while op is not None and (
        linalg.is_elementwise_payload(op, "arith.subf") or (linalg.is_generic(op) and _is_cast(op))
    ):
        if _is_cast(op):  # fp16 logits widened for the softmax, as PyTorch computes it
            ops.append(op)
            op = linalg.producer(op.operands[0])
            continue
        x, row_max = linalg.inputs(op)
        peak, reshapes = linalg.producer_and_reshapes(row_max)
        if (
            peak is None
            or linalg.reduction_payload(peak) != "arith.maximumf"
            or linalg.inputs(peak)[0] != x
            or linalg.reduction_dims(peak) != [rank - 1]
            or not softmax.shifts_each_row(op, rank - 1)
        ):
            return "the scores and the sink are shifted by something other than their row max"
        ops += [op, *reshapes, peak]
        op = linalg.producer(x)
    if op is None or op.name != "tensor.concat" or len(op.operands) != 2:
        return "the softmax's last column is dropped, but it is not a concatenated sink"
    if ir.IntegerAttr(op.attributes["dim"]).value != rank - 1:
        return "the sink is concatenated along a dim other than the keys"
    scores, sink = op.operands
    if ir.RankedTensorType(sink.type).shape[-1] != 1 or _leads_to_matmul(sink):
        return "the dropped column is not one logit per row that the scores do not compute"
    return scores, sink, [*ops, op]


def _sink_fits(sink: ir.Value, qk: ir.Operation, expands: list[ir.Operation]) -> bool:
    """Whether ``sink`` has one logit per row of QK's scores: (B, M, 1) as they are, or
    (B1, B2, M, 1) as their one expand made them (a dynamic dim where theirs is: the
    concatenation with the scores makes them equal)."""
    shape = ir.RankedTensorType(sink.type).shape
    spaces = [qk.results[0], *(e.results[0] for e in expands)]
    rows = [ir.RankedTensorType(v.type).shape[:-1] for v in spaces]
    return any(shape == [*r, 1] for r in rows)


def _sink_rows(found: Attention) -> ir.Value:
    """The sink as (B, M) f32 over QK's rows, times log2(e): the op's base-2 domain."""
    sink = found.sink
    shape = ir.RankedTensorType(sink.type).shape
    rows = ir.RankedTensorType(found.qk.results[0].type).shape[:-1]
    element = ir.RankedTensorType(sink.type).element_type
    groups = [[d] for d in range(len(shape))]
    if shape[:-1] != rows:  # in the space of the scores' expand: its batch dims merged
        (expand,) = _kept_expands([o for o in found.score_ops if o.name in _RESHAPES]) or []
        groups = linalg.reassociation(expand)
    groups = [*groups[:-2], groups[-2] + groups[-1]]  # the row's dims take the unit key dim
    collapsed = dialects.tensor.CollapseShapeOp(
        ir.RankedTensorType.get(rows, element), sink, reassociation_attr(groups)
    ).result
    identity = affine_map(len(rows), list(range(len(rows))))
    return generic(
        [collapsed],
        empty([(collapsed, i) for i in range(len(rows))], ir.F32Type.get()),
        [identity, identity],
        ["parallel"] * len(rows),
        lambda x, _: times(to_f32(x), LOG2E),
    )


def _kept_expands(reshapes: list[ir.Operation]) -> list[ir.Operation] | None:
    """The expands among ``reshapes`` (of the scores, in order) that no later collapse
    undoes, or None where a collapse undoes none: each collapse must take the scores back
    to the shape of the last expand's source not yet undone, with its reassociation. (B·H, M, N)
    viewed as (B, H, M, N) to add a mask and back is the bmm form of BART's and XGLM's
    attention; a second view inside the first, and back, Swin's window mask."""
    kept: list[ir.Operation] = []
    for op in reshapes:
        if op.name == "tensor.expand_shape":
            kept.append(op)
            continue
        if not kept:
            return None
        expand = kept.pop()
        back = ir.RankedTensorType(op.results[0].type).shape  # casts may come between
        if (
            back != ir.RankedTensorType(expand.operands[0].type).shape
            or op.attributes["reassociation"] != expand.attributes["reassociation"]
        ):
            return None
    return kept


def _splits_keys(expand: ir.Operation) -> bool:
    """Whether ``expand`` spreads the key dim (the scores' last) over more than one dim
    of size other than 1: (Nk) -> (1, Nk) keeps every key in the softmax's row, (2, Nk/2)
    does not."""
    *leading, _ = linalg.reassociation(expand)[-1]
    shape = ir.RankedTensorType(expand.results[0].type).shape
    return any(shape[d] != 1 for d in leading)


def _uncast(e: expr.Expr) -> expr.Expr:
    while isinstance(e, expr.Op) and e.name in ("arith.extf", "arith.truncf"):
        e = e.operands[0]
    return e


def _row_factor(op: ir.Operation, score_input: int) -> RowFactor | None:
    """``op`` as a RowFactor: an elementwise generic over the scores (its output map the
    identity) whose payload is ``s·t``, ``t·s`` or ``s/t`` (casts aside) of its other
    input ``t``, read through a map that does not use the key dim (the last)."""
    if linalg.num_inputs(op) != 2:
        return None
    maps = linalg.indexing_maps(op)
    rank = maps[-1].n_dims
    if maps[-1] != ir.AffineMap.get_identity(rank, context=op.context):
        return None
    e = _uncast(expr.of_payload(op, score_input, fold_casts=False).expr)
    if not isinstance(e, expr.Op) or e.name not in ("arith.mulf", "arith.divf"):
        return None
    a, b = (_uncast(o) for o in e.operands)
    if e.name == "arith.mulf" and isinstance(b, expr.Arg):
        a, b = b, a
    if not (isinstance(a, expr.Arg) and isinstance(b, expr.Load)):
        return None
    operand = 1 - score_input
    keys = ir.AffineExpr.get_dim(rank - 1, op.context)
    at_key_zero = maps[operand].replace(keys, ir.AffineExpr.get_constant(0, op.context), rank, 0)
    if at_key_zero != maps[operand]:
        return None  # varies along the keys
    return RowFactor(op, operand, score_input, e.name == "arith.divf")


def _scaled_query(found: Attention) -> ir.Value:
    """Q3 (B', M, K1) times (or over) the row factor: the factor, read per row of the
    scores it multiplied (the key dim dropped), in f32, collapsed to (B', M) where the
    scores were expanded before it; Q's rows scaled in f32 and rounded to Q's type."""
    factor = found.row_factor
    op = factor.op
    maps = linalg.indexing_maps(op)
    rank = maps[-1].n_dims
    f32 = ir.F32Type.get()
    scores = op.operands[factor.score_input]
    row_dims = list(range(rank - 1))
    per_row = ir.AffineMap.get(rank - 1, 0, list(maps[factor.operand].results), op.context)
    rows = generic(
        [op.operands[factor.operand]],
        empty([(scores, d) for d in row_dims], f32),
        [ir.AffineMapAttr.get(per_row), affine_map(rank - 1, row_dims)],
        ["parallel"] * (rank - 1),
        lambda t, _: to_f32(t),
    )
    q = found.qk.operands[0]
    q_type = ir.RankedTensorType(q.type)
    if factor.expand is not None:  # the scores were viewed (B', M, N) -> (..., M, N)
        groups = linalg.reassociation(factor.expand)
        rows = collapse_shape(rows, ir.RankedTensorType.get(q_type.shape[:2], f32), groups[:-1])

    def scaled(q_value: ir.Value, t: ir.Value, _: ir.Value) -> ir.Value:
        apply = dialects.arith.DivFOp if factor.divides else dialects.arith.MulFOp
        value = apply(to_f32(q_value), t).result
        element = q_type.element_type
        return value if element == f32 else dialects.arith.TruncFOp(element, value).result

    return generic(
        [q, rows],
        empty([(q, d) for d in range(3)], q_type.element_type),
        [affine_map(3, [0, 1, 2]), affine_map(3, [0, 1]), affine_map(3, [0, 1, 2])],
        ["parallel"] * 3,
        scaled,
    )


def _mask(found: Attention) -> ir.Value:
    """``f(0)``: the score ops replayed on zeros, collapsed back to the (B, M, K2) space.

    It keeps the element type the model added it in: a bias added in f32 to upcast
    bf16 scores (ALiBi reaches hundreds) loses whole units if rounded to bf16, and a
    fill added in fp16 before the scores are upcast for softmax stays fp16 (the casts
    after the last addition are not replayed), so the lowerings know the type whose
    lowest value swamps the score (``finfo(f16).min``: PyTorch's sum is the fill).
    """
    value = zeros(found.qk.results[0])
    opened: list[ir.Attribute] = []  # the reassociations of the expands not undone
    ops = list(zip(found.score_ops, found.score_inputs, strict=True))
    while ops and _is_upcast(ops[-1][0]):
        ops.pop()
    factor = found.row_factor
    for position, (op, index) in enumerate(ops):
        if factor is not None and position == factor.position:
            # Q's factor: the score ops before it are not offset, so their f(0) is 0
            value = zeros(factor.op.results[0])
        clone = op.clone()
        clone.operands[index] = value
        value = clone.results[0]
        if op.name == "tensor.expand_shape":
            opened.append(op.attributes["reassociation"])
        elif op.name == "tensor.collapse_shape":  # the last expand undone
            opened.pop()
    if factor is not None and factor.position >= len(ops):  # nothing after it but casts
        value = zeros(factor.op.results[0])
    if opened:  # one expand left (``_kept_expands``)
        (collapse_to,) = opened
        source = ir.RankedTensorType(value.type)
        qk_type = ir.RankedTensorType(found.qk.results[0].type)
        result = ir.RankedTensorType.get(qk_type.shape, source.element_type)
        # the expand's output_shape names the sizes: collapsing needs no dynamic operands
        value = dialects.tensor.CollapseShapeOp(result, value, collapse_to).result
    return value


def _is_upcast(op: ir.Operation) -> bool:
    """A generic that only extends its one float input (``arith.extf``)."""
    if op.name != "linalg.generic" or len(op.operands) != 2:
        return False
    body = list(op.regions[0].blocks[0].operations)
    return len(body) == 2 and body[0].name == "arith.extf"


def _maps(has_mask: bool, online: bool = False) -> ir.ArrayAttr:
    # (d0, d1, d2, d3, d4) = (batch, m, n, k1, k2)
    rows = ["(d0, d1, d3)", "(d0, d3, d4)", "(d0, d4, d2)", "()"]
    rows += ["(d0, d1, d4)"] if has_mask else []
    rows += ["(d0, d1, d2)"]
    rows += ["(d0, d1)", "(d0, d1)"] if online else []  # the running max and sum
    return ir.ArrayAttr.get(
        [ir.Attribute.parse(f"affine_map<(d0, d1, d2, d3, d4) -> {r}>") for r in rows]
    )


def build(found: Attention) -> ir.Value:
    """Inserts the fused op before the P @ V matmul; returns its result (same type)."""
    q, k_transposed = found.qk.operands[0], found.qk.operands[1]
    v = found.pv.operands[1]
    result_type = found.pv.results[0].type
    term = found.score
    scale_value = term.slope if term.tanh_of is None else term.tanh_of
    with ir.InsertionPoint(found.pv), found.pv.location:
        if found.row_factor is not None:
            q = _scaled_query(found)
        scale = dialects.arith.ConstantOp(ir.F32Type.get(), scale_value).result
        operands = [q, k_transposed, v, scale]
        if term.offset:
            operands.append(_mask(found))
        out_type = ir.RankedTensorType(result_type)
        probs = found.pv.operands[0]  # (B, M, K2) x (B, K2, N) -> (B, M, N)
        out_axes = [(probs, 0), (probs, 1), (v, 2)]
        if found.sink is None:
            name, results = ATTENTION, [result_type]
            operands.append(empty(out_axes, out_type.element_type))
        else:  # started from the sink: nothing accumulated, its max, a sum of exp2(0) = 1
            name = ONLINE_ATTENTION
            f32 = ir.F32Type.get()
            start = filled(out_axes, 0.0)
            row_max, row_sum = _sink_rows(found), filled(out_axes[:2], 1.0)
            operands += [start, row_max, row_sum]
            results = [start.type, row_max.type, row_sum.type]
        op = ir.Operation.create(
            name,
            results=results,
            operands=operands,
            attributes={"indexing_maps": _maps(term.offset, found.sink is not None)},
            regions=1,
        )
        if term.replaces:
            op.attributes[MASK_REPLACES] = ir.UnitAttr.get()
        if term.offset:  # added to the scores in the model's code: in the mask's type
            op.attributes[MASK_IN_SCORE_TYPE] = ir.UnitAttr.get()
        block = op.regions[0].blocks.append(ir.F32Type.get())
        with ir.InsertionPoint(block):
            if term.tanh_of is None:
                ir.Operation.create("iree_linalg_ext.yield", operands=[block.arguments[0]])
            else:
                softcap_region(block, term.slope)
        if found.sink is None:
            return op.results[0]
        identity, rows = affine_map(3, [0, 1, 2]), affine_map(3, [0, 1])
        element = out_type.element_type

        def normalised(acc: ir.Value, total: ir.Value, _: ir.Value) -> ir.Value:
            value = dialects.arith.DivFOp(acc, total).result
            return value if element == f32 else dialects.arith.TruncFOp(element, value).result

        return generic(
            [op.results[0], op.results[2]],
            empty(out_axes, element),
            [identity, rows, identity],
            ["parallel"] * 3,
            normalised,
        )
