"""Proves a mask causal: -inf wherever the key index exceeds the query index plus c.

Reads the mask's expression tree (``dialects.expr``: iota arithmetic, comparisons,
selects of -inf, additions, reshapes and broadcasts already turned into coordinates)
and keeps, for each subtree, what it is as a function of the mask's indices:

- ``Linear``: an integer ``Σ coeff[d]·index_d + const`` (iota arithmetic);
- ``Below``: a condition ``Σ coeff[d]·index_d + const > 0``;
- ``Masked``: a float that is -inf wherever its ``Below`` condition holds, or a fill that
  swamps any score in its type (``SWAMPS``: ``finfo.min``, as transformers writes it);
- ``Float``: a float constant.

What cannot be followed is None. Comparisons keep MLIR's semantics: an unsigned one is
read as the signed one only where both sides are sums of indices and non-negative
constants (never negative). ``offset`` turns a ``Masked`` over (batch, rows, keys) into
the c of "keys > rows + c are masked", which lets the kernels and the online softmax
stop each row block's key loop early (causal tile skipping).

A mask whose tree reads constant tensors (a registered ``tril`` buffer) is not followed
symbolically: with static sizes its values are computed (``expr.evaluate``, the
constants' elements from ``linalg.constant_array``) and checked against every offset's
causal pattern instead.

Skipping the keys past the diagonal is exact for -inf in every row; for a finite fill only
where each row keeps a key (c >= 0) and the mask is nothing but causality (elsewhere
PyTorch weighs the fills of a row that keeps none equally).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from fusion_compiler.dialects import expr, linalg
from fusion_compiler.dialects.expr import SWAMPS, Const, Expr, Index, Load, Op

from fusion_compiler.ir import ir


@dataclass(frozen=True)
class Linear:
    coeffs: tuple[tuple[int, int], ...]  # (dim, coefficient), sorted, no zeros
    const: int

    def plus(self, other: Linear, sign: int = 1) -> Linear:
        merged = dict(self.coeffs)
        for d, c in other.coeffs:
            merged[d] = merged.get(d, 0) + sign * c
        coeffs = tuple(sorted((d, c) for d, c in merged.items() if c))
        return Linear(coeffs, self.const + sign * other.const)

    def times(self, factor: int) -> Linear:
        return Linear(tuple((d, c * factor) for d, c in self.coeffs if factor), self.const * factor)

    @property
    def non_negative(self) -> bool:
        """Never negative: indices are not, so neither is a sum of them with c >= 0."""
        return all(c > 0 for _, c in self.coeffs) and self.const >= 0


@dataclass(frozen=True)
class Below:
    """Holds where ``linear > 0``."""

    linear: Linear

    def negated(self) -> Below:
        # not (l > 0)  <=>  -l >= 0  <=>  -l + 1 > 0 (integers)
        return Below(Linear(self.linear.times(-1).coeffs, 1 - self.linear.const))


@dataclass(frozen=True)
class Masked:
    where: Below
    pure: bool = False  # 0 wherever ``where`` does not hold: the mask is causality alone
    finite: bool = False  # masked by a finite fill that swamps the score, not by -inf


@dataclass(frozen=True)
class Float:
    value: float


Fact = Linear | Below | Masked | Float | None

# predicate -> (sign of lhs - rhs, 1 to subtract for the inclusive forms); "u" forms
# only for operands that are never negative
_COMPARE = {"gt": (1, 0), "ge": (1, 1), "lt": (-1, 0), "le": (-1, 1)}
_SIGN_KEEPING = ("arith.index_cast", "arith.extsi")  # keep the value where they widen
_FLOAT_CASTS = ("arith.extf", "arith.truncf")  # keep -inf and 0


def _compare(predicate: str, a: Fact, b: Fact) -> Fact:
    if not (isinstance(a, Linear) and isinstance(b, Linear)) or predicate[1:] not in _COMPARE:
        return None
    if predicate[0] == "u" and not (a.non_negative and b.non_negative):
        return None
    sign, inclusive = _COMPARE[predicate[1:]]
    diff = a.plus(b, -1).times(sign)
    return Below(Linear(diff.coeffs, diff.const + inclusive))


def _fill(fact: Fact, type_: str) -> bool | None:
    """Whether ``fact`` masks a score of ``type_``: False for -inf, True for a finite fill
    that swamps it; None for neither."""
    if not isinstance(fact, Float):
        return None
    if fact.value == -math.inf:
        return False
    swamps = SWAMPS.get(type_)
    return True if swamps is not None and -math.inf < fact.value <= swamps else None


def _select(cond: Fact, true: Fact, false: Fact, type_: str) -> Fact:
    if not isinstance(cond, Below):
        return None
    finite = _fill(true, type_)
    if finite is not None:  # select(c, fill, x): masked where c
        return _masked(cond, false == Float(0.0), finite)
    finite = _fill(false, type_)
    if finite is not None:  # select(c, x, fill): masked where not c
        return _masked(cond.negated(), true == Float(0.0), finite)
    return None


def _masked(where: Below, pure: bool, finite: bool) -> Masked | None:
    # a finite fill with other values beside it is not followed: a row could keep no key
    return Masked(where, pure, finite) if pure or not finite else None


def _add(name: str, a: Fact, b: Fact) -> Fact:
    """-inf plus (or minus) what is not -inf stays -inf, but -inf + inf and -inf + NaN are
    NaN: a constant other operand must be finite. (A tensor read is taken to be finite
    where the mask is -inf: an inf or NaN bias there gives NaN rows in PyTorch, here the
    skipped keys.)"""
    if any(isinstance(f, Float) and not math.isfinite(f.value) for f in (a, b)):
        return None
    if name == "arith.addf" and b == Float(0.0) and isinstance(a, Masked):
        return a
    if name == "arith.addf" and a == Float(0.0) and isinstance(b, Masked):
        return b
    if any(isinstance(f, Masked) and f.finite for f in (a, b)):
        return None  # a finite fill plus something else may no longer swamp
    masked = [f for f in (a, b) if isinstance(f, Masked)]
    if (name == "arith.addf" and len(masked) == 1) or (
        name == "arith.subf" and isinstance(a, Masked) and not isinstance(b, Masked)
    ):
        return Masked(masked[0].where)  # plus something else: no longer pure
    return None


def _scale(name: str, a: Fact, b: Fact) -> Fact:
    """A mask times, or divided by, a positive constant: -inf and 0 stay where they were."""
    pairs = [(a, b), (b, a)] if name == "arith.mulf" else [(a, b)]
    for m, factor in pairs:
        if isinstance(m, Masked) and isinstance(factor, Float) and 0 < factor.value < math.inf:
            # a finite fill stays one only where it grows (or overflows to -inf)
            grows = factor.value >= 1 if name == "arith.mulf" else factor.value <= 1
            return m if grows or not m.finite else None
    return None


def _wide(type_: str) -> bool:
    """An integer type whose sums of indices never wrap (64 bits: any tensor's sizes)."""
    return type_ in ("index", "i64")


def _fact(e: Expr) -> Fact:
    if isinstance(e, Index):
        return Linear(((e.dim, 1),), 0)
    if isinstance(e, Const):
        if isinstance(e.value, float):
            return Float(e.value)
        return Linear((), e.value) if _wide(e.type) else None
    if not isinstance(e, Op):
        return None  # a tensor read, the region's argument: not followed
    name = e.name
    args = [_fact(o) for o in e.operands]
    if name in _SIGN_KEEPING:  # a widening cast of a 64-bit value (index is 64 bits here)
        widens = expr.width(e.type) >= expr.width(e.operands[0].type)
        return args[0] if isinstance(args[0], Linear) and widens and _wide(e.type) else None
    if name in _FLOAT_CASTS:  # -inf and 0 stay; a finite fill must still swamp
        if isinstance(args[0], Masked) and args[0].finite and name == "arith.extf":
            return None  # finfo(f16).min is no fill in f32
        return args[0] if isinstance(args[0], Masked | Float) else None
    if name in ("arith.addi", "arith.subi", "arith.muli") and not _wide(e.type):
        return None  # i8, i16, i32 arithmetic can wrap within the mask's sizes
    if name in ("arith.addi", "arith.subi"):
        a, b = args
        if isinstance(a, Linear) and isinstance(b, Linear):
            return a.plus(b, 1 if name == "arith.addi" else -1)
        return None
    if name == "arith.muli":
        a, b = args
        for x, factor in ((a, e.operands[1]), (b, e.operands[0])):
            if isinstance(x, Linear) and isinstance(factor, Const):
                return x.times(int(factor.value))
        return None
    if name == "arith.cmpi":
        return _compare(e.predicate or "", *args)
    if name == "arith.xori" and isinstance(args[0], Below) and e.operands[1] == Const(True, "i1"):
        return args[0].negated()  # logical not
    if name == "arith.select":
        return _select(*args, e.type)
    if name in ("arith.addf", "arith.subf"):
        return _add(name, *args)
    if name in ("arith.mulf", "arith.divf"):
        return _scale(name, *args)
    return None


def fact_of(value: ir.Value) -> Fact:
    """What ``value`` is, as a function of its own indices (a unit dim's index is 0)."""
    return _fact(expr.of_tensor(value, max_depth=16, opaque=True).expr)


def offset(mask: ir.Value, rows: int, keys: int) -> int | None:
    """c such that mask[..., m, k] = -inf whenever k > m + c (or a swamping fill, when
    every row keeps a key and the mask is nothing else); None if not proven. ``mask``:
    indexed as the attention reads it (its ``rows`` dim is the queries')."""
    proof = _proof(mask, rows, keys)
    return proof[0] if proof is not None else None


def is_pure(mask: ir.Value, rows: int = 1, keys: int = 2) -> bool:
    """The mask is -inf (or a swamping fill) where causality masks and 0 elsewhere:
    nothing but causal."""
    proof = _proof(mask, rows, keys)
    return proof is not None and proof[1]


def _proof(mask: ir.Value, rows: int, keys: int) -> tuple[int, bool] | None:
    """(c, pure) of a causal mask, from its tree or else from its values."""
    fact = fact_of(mask)
    if not isinstance(fact, Masked):
        return _evaluated(mask, rows, keys)
    coeffs = dict(fact.where.linear.coeffs)
    # masked where keys - rows + const > 0, i.e. k > m - const (m is 0 where rows is a
    # unit dim: the decoding step's one query)
    single_row = ir.ShapedType(mask.type).shape[rows] == 1
    if coeffs != {keys: 1, rows: -1} and not (single_row and coeffs == {keys: 1}):
        return None
    c = -fact.where.linear.const
    if fact.finite and c < 0:  # the first rows keep no key: PyTorch weighs the fills
        return None
    return c, fact.pure


# the most elements of a mask's values ``_evaluated`` computes (broadcast dims count once)
_MAX_EVALUATED = 1 << 24


def _evaluated(mask: ir.Value, rows: int, keys: int) -> tuple[int, bool] | None:
    """(c, pure) from the mask's values: static sizes, a tree of index arithmetic and
    constant tensors, -inf or a swamping fill exactly at keys > rows + c."""
    shape = list(ir.RankedTensorType(mask.type).shape)
    if any(ir.ShapedType.is_dynamic_size(n) for n in shape) or 0 in shape:
        return None
    tree = expr.of_tensor(mask, max_depth=24, opaque=True)
    arrays = [linalg.constant_array(v) for v in tree.inputs]
    if not tree.inputs or any(a is None for a in arrays):
        return None  # index arithmetic alone is the symbolic proof's; inputs are unknown
    used = {rows, keys} | _dims(tree.expr)  # the dims the values vary along
    if math.prod(shape[d] for d in used) > _MAX_EVALUATED:
        return None

    def index(dim: int) -> np.ndarray:
        return np.arange(shape[dim]).reshape([-1 if d == dim else 1 for d in range(len(shape))])

    def load(leaf: Load, coords: list[np.ndarray]) -> np.ndarray:
        return arrays[leaf.slot][tuple(coords)] if coords else arrays[leaf.slot]

    try:
        with np.errstate(all="ignore"):
            values = np.asarray(expr.evaluate(tree.expr, index, load))
        if values.dtype != np.float64:  # f16, bf16 (held in f32) and f32 are exact in f32
            values = values.astype(np.float32)
    except (expr.Unsupported, IndexError, ValueError):
        return None
    full = np.broadcast_shapes(
        values.shape, tuple(shape[d] if d in used else 1 for d in range(len(shape)))
    )
    values = np.broadcast_to(values, full)
    swamps = SWAMPS.get(str(ir.RankedTensorType(mask.type).element_type), -math.inf)
    masked = values <= swamps  # -inf included
    finite = bool(np.any(masked & (values > -math.inf)))
    # c from the first row that keeps a key (of the first batch); every row must match
    plane = ~masked[tuple(slice(None) if d in (rows, keys) else 0 for d in range(len(shape)))]
    counts = (plane if rows < keys else plane.T).sum(axis=1)
    keeping = np.flatnonzero(counts)
    if keeping.size == 0:
        return None
    c = int(counts[keeping[0]]) - 1 - int(keeping[0])
    if finite and c < 0:  # the first rows keep no key: PyTorch weighs the fills
        return None
    if not np.array_equal(masked, np.broadcast_to(index(keys) > index(rows) + c, full)):
        return None
    pure = bool(np.all(values[~masked] == 0))
    if finite and not pure:
        return None
    return c, pure


def _dims(tree: Expr) -> set[int]:
    """The coordinates ``tree`` reads."""
    if isinstance(tree, Index):
        return {tree.dim}
    children = tree.operands if isinstance(tree, Op) else getattr(tree, "coords", ())
    return set().union(*(_dims(c) for c in children)) if children else set()
