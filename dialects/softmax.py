"""Recognises softmax in Linalg on tensors: ``linalg.softmax`` or the five-op decomposition.

The decomposition the torch front end produces (max, subtract, exp, sum, divide)::

    m = reduce_max(x, d)          # linalg.generic, maximumf (with an argmax output from torch)
    e = exp(x - m)                # two elementwise generics: subf, then math.exp
    s = reduce_sum(e, d)          # linalg.generic, addf (fp16: extf, addf in f32, truncf)
    y = e / s                     # elementwise generic, divf   <- the anchor
"""

from __future__ import annotations

from dataclasses import dataclass

from fusion_compiler.dialects import linalg

from fusion_compiler.ir import ir


@dataclass(frozen=True)
class Softmax:
    """A softmax of ``input`` along ``dim``; ``result`` is the op yielding it."""

    input: ir.Value
    dim: int
    result: ir.Operation
    form: str  # "linalg.softmax" or "decomposed"
    ops: tuple[ir.Operation, ...] = ()  # every op of the decomposition, reshapes included


@dataclass(frozen=True)
class NearMiss:
    """An exp-sum-divide that is not a softmax we can rely on, and why."""

    op: ir.Operation
    reason: str


def match(op: ir.Operation) -> Softmax | NearMiss | None:
    """A Softmax if ``op`` yields one, a NearMiss if it only looks like one, else None."""
    if op.name == "linalg.softmax":
        dim = ir.IntegerAttr(op.attributes["dimension"]).value
        return Softmax(op.operands[0], dim, op, "linalg.softmax", (op,))
    return _match_decomposed(op)


def _match_decomposed(div: ir.Operation) -> Softmax | NearMiss | None:
    if not linalg.is_elementwise_payload(div, "arith.divf"):
        return None
    numerator, denominator = linalg.inputs(div)
    total, total_reshapes = linalg.producer_and_reshapes(denominator)
    if total is not None and linalg.is_elementwise_payload(total, "arith.truncf"):
        # an fp16 sum accumulated in f32, then narrowed (what PyTorch computes)
        narrowed = total
        total, more = linalg.producer_and_reshapes(linalg.inputs(narrowed)[0])
        total_reshapes = [*total_reshapes, narrowed, *more]
    if total is None or linalg.reduction_payload(total) != "arith.addf":
        return None
    # From here on the op is shaped like a softmax: every failure is a near miss.
    (dim,) = linalg.reduction_dims(total)
    exp = linalg.producer(numerator)
    if linalg.producer(linalg.inputs(total)[0]) != exp:
        return NearMiss(div, "the divisor does not sum the numerator")
    if exp is None or not linalg.is_elementwise_payload(exp, "math.exp"):
        return NearMiss(div, "the numerator is not an exp")
    shifted = linalg.producer(linalg.inputs(exp)[0])
    if shifted is None or not linalg.is_elementwise_payload(shifted, "arith.subf"):
        return NearMiss(div, "exp's input is not shifted by the row max (numerically unsafe)")
    x, row_max = linalg.inputs(shifted)
    peak, peak_reshapes = linalg.producer_and_reshapes(row_max)
    if peak is None or linalg.reduction_payload(peak) != "arith.maximumf":
        return NearMiss(div, "exp's input is shifted by something other than a max")
    if linalg.inputs(peak)[0] != x:
        return NearMiss(div, "the max is taken over a different tensor than the exp")
    if linalg.reduction_dims(peak) != [dim]:
        return NearMiss(div, "the max and the sum reduce different dimensions")
    if not shifts_each_row(shifted, dim):
        return NearMiss(div, "exp's input is not shifted by one max per row")
    ops = (div, *total_reshapes, total, exp, shifted, *peak_reshapes, peak)
    return Softmax(x, dim, div, "decomposed", ops)


def shifts_each_row(op: ir.Operation, dim: int) -> bool:
    """Whether ``x - m`` (``op``, a subf generic) reads ``x`` as it is and ``m`` once per
    row along ``dim``: m's map gives every other loop dim in order and, at ``dim``, the
    constant 0 of a kept unit dim or nothing (a loop dim of size 1 may be read either
    way). A max broadcast any other way (along the rows) shifts the entries of a row by
    different amounts: no softmax is shift-free then."""
    x_map, m_map, _ = linalg.indexing_maps(op)
    rank, context = x_map.n_dims, op.context
    if x_map != ir.AffineMap.get_identity(rank, context=context):
        return False
    sizes = ir.RankedTensorType(op.operands[0].type).shape
    zero = ir.AffineConstantExpr.get(0, context=context)

    def reads(expr: ir.AffineExpr, d: int | None) -> bool:
        """``expr`` reads loop dim ``d`` (None: the constant 0 of a unit dim)."""
        if d is None:
            return expr == zero or (
                sizes[dim] == 1 and expr == ir.AffineDimExpr.get(dim, context=context)
            )
        return expr == ir.AffineDimExpr.get(d, context=context) or (sizes[d] == 1 and expr == zero)

    results = list(m_map.results)
    wanted: list[int | None] = [d for d in range(rank) if d != dim]
    if len(results) == rank:
        wanted.insert(dim, None)
    return len(results) == len(wanted) and all(map(reads, results, wanted))


def find_all(module: ir.Operation) -> list[Softmax | NearMiss]:
    found: list[Softmax | NearMiss] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        result = match(op.operation)
        if result is not None:
            found.append(result)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return found
