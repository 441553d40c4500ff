"""What the ops between QKᵀ and the softmax do to the score ``s``, read off their payloads.

Each op's payload is read as an expression tree (``dialects.expr``); every subtree gets
a term. A float cast of a constant keeps the constant's value: PyTorch multiplies a half
tensor by a Python number in float, the number unrounded, where torch-mlir's lowering
casts the number to the tensor's type first.

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

from fusion_compiler.dialects import expr
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


_ABOVE = ("ogt", "oge", "ugt", "uge")
_BELOW = ("olt", "ole", "ult", "ule")


def _clamp(e: expr.Op) -> Term | None:
    """``max(x, C)`` of the score x, ``select(x < C, C, x)`` (XGLM's ``torch.max(s + mask,
    finfo.min)`` as the front end decomposes it, a NaN kept) or ``select(x > C, x, C)``, C
    at or below the fill that swamps any score of the type: x itself where it is a score
    (above C), the mask that reached it clamped to C (a -inf becomes that finite fill), as
    the mask replayed through it says (``attention._mask``: f(0) = max(mask, C)), in either
    operand order. Any other clamp of the score to a constant (``clamp``, ``min``, a max
    above the fill) is Unsupported; None where ``e`` clamps no score."""
    if e.name != "arith.select":
        return None
    cond, chosen, other = e.operands
    compare = isinstance(cond, expr.Op) and cond.name == "arith.cmpf"
    if not compare or set(cond.operands) != {chosen, other}:
        return None
    score, bound, swamps = _term(chosen), _term(other), SWAMPS.get(e.type)
    if isinstance(score, Const) and isinstance(bound, Affine):
        score, bound = bound, score
    if not (isinstance(score, Affine) and isinstance(bound, Const)):
        return None
    # the chosen operand is the larger: chosen > other, or other < chosen
    larger = tuple(cond.operands) == (chosen, other) and cond.predicate in _ABOVE
    larger |= tuple(cond.operands) == (other, chosen) and cond.predicate in _BELOW
    if larger and swamps is not None and bound.value <= swamps:
        return score
    # any other clamp of the score to a constant (``clamp``, ``torch.max``, ``min``)
    return Unsupported(f"the score is clamped at {bound.value:g}")


def _term(e: expr.Expr) -> Term:
    if isinstance(e, expr.Arg):
        return Affine(1.0, False)
    if isinstance(e, expr.Const):
        return Const(float(e.value))
    if not isinstance(e, expr.Op):
        return SIDE  # an input, a value from outside, an index: not the score
    clamped = _clamp(e)
    if clamped is not None:
        return clamped
    operands = [_term(o) for o in e.operands]
    unsupported = [t for t in operands if isinstance(t, Unsupported)]
    if unsupported:
        return unsupported[0]
    if operands and all(isinstance(t, Const) for t in operands) and e.name in RULES:
        return RULES[e.name](*operands)  # a cast of a constant: its value unrounded
    if not any(isinstance(t, Affine) for t in operands):
        return SIDE
    if e.name == "arith.select":
        return _select(*operands, element=e.type)
    if e.name in RULES:
        return RULES[e.name](*operands)
    return Unsupported(f"the score goes through {e.name}")


def evaluate(op: ir.Operation, score_input: int) -> Term:
    """The term of a single-result elementwise generic's output, input ``score_input`` = s."""
    try:
        return _term(expr.of_payload(op, score_input, fold_casts=False).expr)
    except expr.Unsupported as why:
        return Unsupported(str(why))
