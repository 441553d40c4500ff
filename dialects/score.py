"""What the ops between QKᵀ and the softmax do to the score ``s``, read off their payloads.

Every payload value gets a term:

- ``Affine(slope, offset, tanh_of)``: ``slope·g(s) + b`` where ``b`` does not depend on
  ``s`` (``offset`` says whether ``b`` may be non-zero; ``-inf`` where a mask removes
  ``s``) and ``g(s)`` is ``s``, or ``tanh(tanh_of·s)`` after a softcap;
- ``Const(value)``: a scalar known at compile time;
- ``SIDE``: anything that does not depend on ``s`` (mask tensors, biases, iota/compare);
- ``Unsupported(reason)``: depends on ``s`` in a way attention's ``scale·s + mask``
  cannot express.

A chain is fusable when every op maps ``Affine`` to ``Affine``: then
``softmax(f(s)) == softmax(slope·g(s) + f(0))``: ``slope`` (or ``tanh_of`` with a
softcap in the score region) becomes the attention scale and ``f(0)`` its additive
mask. The rules are a table, one row per payload op.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from fusion_compiler.dialects import linalg
from fusion_compiler.dialects.linalg_ext import SWAMPS

from fusion_compiler.ir import ir


@dataclass(frozen=True)
class Affine:
    slope: float
    offset: bool
    tanh_of: float | None = None
    # a select dropped the score for -inf where the mask is -inf (``masked_fill``,
    # ``where``): there the logit is -inf even for a NaN or inf score, not s + -inf
    replaces: bool = False


@dataclass(frozen=True)
class Const:
    value: float


@dataclass(frozen=True)
class _Side:
    pass


@dataclass(frozen=True)
class Unsupported:
    reason: str


SIDE = _Side()
Term = Affine | Const | _Side | Unsupported


def _mul(a: Term, b: Term) -> Term:
    if isinstance(b, Affine):
        a, b = b, a
    if isinstance(a, Affine):
        if isinstance(b, Const):
            return replace(a, slope=a.slope * b.value)
        return Unsupported("the score is multiplied by a tensor")
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(a.value * b.value)
    return SIDE


def _div(a: Term, b: Term) -> Term:
    if isinstance(b, Affine):
        return Unsupported("something is divided by the score")
    if isinstance(a, Affine):
        if isinstance(b, Const) and b.value != 0:
            return replace(a, slope=a.slope / b.value)
        return Unsupported("the score is divided by a tensor")
    if isinstance(a, Const) and isinstance(b, Const) and b.value != 0:
        return Const(a.value / b.value)
    return SIDE


def _add(a: Term, b: Term, sign: float = 1.0) -> Term:
    if isinstance(a, Affine) and isinstance(b, Affine):
        return Unsupported("the score is added to itself")
    if isinstance(a, Affine):
        return replace(a, offset=a.offset or b != Const(0.0))
    if isinstance(b, Affine):
        return replace(b, slope=sign * b.slope, offset=b.offset or a != Const(0.0))
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(a.value + sign * b.value)
    return SIDE


def _sub(a: Term, b: Term) -> Term:
    return _add(a, b, -1.0)


def _negate(a: Term) -> Term:
    return _mul(a, Const(-1.0))


def _select(cond: Term, true: Term, false: Term, element: str = "") -> Term:
    """``where(c, s, -inf)`` and ``where(c, -inf, s)`` put a -inf/0 mask on ``s`` that
    replaces it; so does a fill that swamps any score in the select's ``element`` type
    (``finfo(f32).min``: the lowerings take such a fill alone, wherever it is)."""
    if isinstance(cond, Affine):
        return Unsupported("a mask depends on the score")
    for keep, drop in ((true, false), (false, true)):
        if isinstance(keep, Affine):
            swamps = SWAMPS.get(element)
            if drop == Const(-math.inf) or (
                isinstance(drop, Const) and swamps is not None and drop.value <= swamps
            ):
                return replace(keep, offset=True, replaces=True)
            if isinstance(drop, Const):
                return Unsupported(
                    f"masked with the finite value {drop.value:g}, not -inf "
                    "(it differs from an additive mask on fully masked rows)"
                )
            return Unsupported("the masked value is not a constant")
    return SIDE


def _cast(a: Term) -> Term:
    return a


def _compare(a: Term, b: Term) -> Term:
    return Unsupported("a mask depends on the score")


def _tanh(a: Term) -> Term:
    """Softcapping, ``cap·tanh(s/cap)``, starts here."""
    if not isinstance(a, Affine):
        return SIDE
    if a.offset or a.tanh_of is not None:
        return Unsupported("tanh of a masked or already capped score")
    return Affine(1.0, False, a.slope)  # (not offset, so it replaces nothing either)


def compose(outer: Affine, inner: Affine) -> Term:
    """``outer`` applied to the value ``inner`` of the score."""
    replaces = outer.replaces or inner.replaces
    if outer.tanh_of is None:
        offset = outer.offset or inner.offset
        return Affine(outer.slope * inner.slope, offset, inner.tanh_of, replaces)
    if inner.offset or inner.tanh_of is not None:
        return Unsupported("tanh of a masked or already capped score")
    return Affine(outer.slope, outer.offset, outer.tanh_of * inner.slope, replaces)


# payload op -> how it maps its operands' terms to its result's term
RULES: dict[str, Callable[..., Term]] = {
    "arith.mulf": _mul,
    "arith.divf": _div,
    "arith.addf": _add,
    "arith.subf": _sub,
    "arith.negf": _negate,
    "arith.select": _select,
    "arith.extf": _cast,
    "arith.truncf": _cast,
    "arith.cmpf": _compare,
    "math.tanh": _tanh,
}


def _constant(value: ir.Value) -> float | None:
    """The number a value holds, if an arith.constant defines it."""
    constant = linalg.constant_value(value)
    return None if constant is None else float(constant)


def evaluate(op: ir.Operation, score_input: int) -> Term:
    """The term of a single-result elementwise generic's output, input ``score_input`` = s."""
    block = op.regions[0].blocks[0]
    n_inputs = linalg.num_inputs(op)
    terms: dict[ir.Value, Term] = {}
    for i, arg in enumerate(block.arguments):
        if i == score_input:
            terms[arg] = Affine(1.0, False)
        elif i < n_inputs:
            value = _constant(op.operands[i])
            terms[arg] = SIDE if value is None else Const(value)
        else:
            terms[arg] = Unsupported("the payload reads its output")

    def term_of(value: ir.Value) -> Term:
        if value in terms:
            return terms[value]
        constant = _constant(value)  # captured from above, or defined in the body
        return SIDE if constant is None else Const(constant)

    for body_op in linalg.payload(op):
        operands = [term_of(v) for v in body_op.operands]
        if any(isinstance(t, Unsupported) for t in operands):
            result = next(t for t in operands if isinstance(t, Unsupported))
        elif operands and all(isinstance(t, Const) for t in operands) and body_op.name in RULES:
            result = RULES[body_op.name](*operands)  # folds constants: truncf(0.125)...
        elif not any(isinstance(t, Affine) for t in operands):
            result = _constant(body_op.results[0]) if len(body_op.results) == 1 else None
            result = SIDE if result is None else Const(result)
        elif body_op.name == "arith.select":
            result = _select(*operands, element=str(body_op.results[0].type))
        elif body_op.name in RULES:
            result = RULES[body_op.name](*operands)
        else:
            result = Unsupported(f"the score goes through {body_op.name}")
        for r in body_op.results:
            terms[r] = result
    terminator = list(block.operations)[-1]
    return term_of(terminator.operands[0])
