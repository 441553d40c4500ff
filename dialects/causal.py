"""Proves a mask banded: -inf wherever the key index k leaves [m + lower, m + upper] of
the query index m (causal: only the upper bound c; a sliding window: both).

Reads the mask's expression tree (``dialects.expr``: iota arithmetic, comparisons,
selects of -inf, additions, reshapes and broadcasts already turned into coordinates)
and keeps, for each subtree, what it is as a function of the mask's indices:

- ``Linear``: an integer ``Σ coeff[d]·index_d + const`` (iota arithmetic);
- ``Below``: a condition ``Σ coeff[d]·index_d + const > 0``; ``AnyOf`` and ``AllOf``:
  the union and the intersection of such conditions (``ori``, ``andi``, a negation);
- ``Masked``: a float that is -inf wherever any of its ``Below`` conditions holds, or a
  fill that swamps any score in its type (``SWAMPS``: ``finfo.min``, as transformers
  writes it);
- ``Float``: a float constant.

What cannot be followed is None, but for a condition: one read from a tensor (an
``attention_mask`` input, document ids) is an unknown part of its union or intersection,
so "masked where the keys pass the row, or where the padding says" still bounds the keys
(the mask stays, applied inside the bounds: not pure). Comparisons keep MLIR's
semantics: an unsigned one is read as the signed one only where both sides are sums of
indices and non-negative constants (never negative).

``band`` turns a ``Masked`` over (batch, rows, keys) into the bounds of "keys > rows +
upper or keys < rows + lower are masked", which lets the kernels and the online softmax
start and stop each row block's key loop where its keys are (tile skipping); ``offset``
is the upper bound alone, the causal one.

A mask whose tree reads constant tensors (a registered ``tril`` buffer) is not followed
symbolically: with static sizes its values are computed (``expr.evaluate``, the
constants' elements from ``linalg.constant_array``) and checked against the band
pattern their rows show instead.

Skipping the keys outside the band is exact for -inf in every row; for a finite fill only
where each row keeps a key (upper >= 0, lower <= upper, and the last row's band starts
at a key) and the mask is nothing but the band (elsewhere PyTorch weighs the fills of a
row that keeps none equally).
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
class Abs:
    """``|linear|``: compared with a sum of indices, two half-planes (a window both ways)."""

    linear: Linear


@dataclass(frozen=True)
class Below:
    """Holds where ``linear > 0``."""

    linear: Linear

    def negated(self) -> Below:
        # not (l > 0)  <=>  -l >= 0  <=>  -l + 1 > 0 (integers)
        return Below(Linear(self.linear.times(-1).coeffs, 1 - self.linear.const))


@dataclass(frozen=True)
class AnyOf:
    """Holds where any of ``parts`` holds (``unknown``: or where a condition that is not
    followed does, such as a tensor read: an ``attention_mask`` input)."""

    parts: tuple[Below, ...]
    unknown: bool = False


@dataclass(frozen=True)
class AllOf:
    """Holds where every one of ``parts`` holds (``unknown``: and a condition that is not
    followed does)."""

    parts: tuple[Below, ...]
    unknown: bool = False


Condition = Below | AnyOf | AllOf
UNKNOWN = AnyOf((), unknown=True)  # an i1 not followed: holds somewhere, nobody knows where


def _negated(cond: Condition) -> Condition:
    if isinstance(cond, Below):
        return cond.negated()
    flipped = tuple(part.negated() for part in cond.parts)
    return (AllOf if isinstance(cond, AnyOf) else AnyOf)(flipped, cond.unknown)


def _parts(cond: Fact, kind: type[AnyOf] | type[AllOf]) -> tuple[tuple[Below, ...], bool] | None:
    """The half-planes ``cond`` is the union (``AnyOf``) or the intersection (``AllOf``)
    of, and whether an unknown condition is one more; None: it is the other kind, of
    several."""
    if isinstance(cond, Below):
        return (cond,), False
    if not isinstance(cond, AnyOf | AllOf):
        return None
    alone = len(cond.parts) + cond.unknown == 1  # one half-plane, or the unknown alone
    return (cond.parts, cond.unknown) if isinstance(cond, kind) or alone else None


def _logical(name: str, a: Fact, b: Fact) -> Fact:
    """``ori`` and ``andi`` of two conditions."""
    kind = AnyOf if name == "arith.ori" else AllOf
    parts = (_parts(a, kind), _parts(b, kind))
    if parts[0] is None or parts[1] is None:
        return None
    return kind(parts[0][0] + parts[1][0], parts[0][1] or parts[1][1])


@dataclass(frozen=True)
class Masked:
    where: tuple[Below, ...]  # masked where any of these holds
    pure: bool = False  # 0 wherever none holds: the mask is the band alone
    finite: bool = False  # masked by a finite fill that swamps the score, not by -inf


@dataclass(frozen=True)
class Float:
    value: float


Fact = Linear | Abs | Below | AnyOf | AllOf | Masked | Float | None

# predicate -> (sign of lhs - rhs, 1 to subtract for the inclusive forms); "u" forms
# only for operands that are never negative
_COMPARE = {"gt": (1, 0), "ge": (1, 1), "lt": (-1, 0), "le": (-1, 1)}
_SIGN_KEEPING = ("arith.index_cast", "arith.extsi")  # keep the value where they widen
_FLOAT_CASTS = ("arith.extf", "arith.truncf")  # keep -inf and 0


_FLIPPED = {"slt": "sgt", "sle": "sge", "sgt": "slt", "sge": "sle"}


def _compare(predicate: str, a: Fact, b: Fact) -> Fact:
    if isinstance(b, Abs) and predicate in _FLIPPED:
        a, b, predicate = b, a, _FLIPPED[predicate]
    if isinstance(a, Abs) and isinstance(b, Linear) and predicate in _FLIPPED:
        # |l| < b: l < b and -l < b; |l| > b: l > b or -l > b
        sides = [_compare(predicate, x, b) for x in (a.linear, a.linear.times(-1))]
        kind = AllOf if predicate[1] == "l" else AnyOf
        return kind(tuple(sides))
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
    if not isinstance(cond, Below | AnyOf | AllOf):
        return None
    finite = _fill(true, type_)
    if finite is not None:  # select(c, fill, x): masked where c
        return _masked(_parts(cond, AnyOf), false == Float(0.0), finite)
    finite = _fill(false, type_)
    if finite is not None:  # select(c, x, fill): masked where not c
        return _masked(_parts(_negated(cond), AnyOf), true == Float(0.0), finite)
    return None


def _masked(
    where: tuple[tuple[Below, ...], bool] | None, pure: bool, finite: bool
) -> Masked | None:
    """Masked where any of ``where``'s half-planes holds; where its unknown condition holds
    too (then not pure: the band bounds the kept keys, the mask is applied inside it)."""
    if where is None or not where[0]:  # masked where several hold at once, or unknown
        return None
    pure = pure and not where[1]
    # a finite fill with other values beside it is not followed: a row could keep no key
    return Masked(where[0], pure, finite) if pure or not finite else None


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
    if name == "arith.addf" and isinstance(a, Masked) and isinstance(b, Masked):
        # -inf where either is: the union (a causal mask plus a window's)
        return Masked(a.where + b.where, a.pure and b.pure)
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
        if e.type == "i1":  # true: the empty intersection; false: the empty union
            return AllOf(()) if e.value else AnyOf(())
        return Linear((), e.value) if _wide(e.type) else None
    fact = _followed(e)
    # a condition not followed (a tensor read, a compare of reads) is one all the same
    return UNKNOWN if fact is None and e.type == "i1" else fact


def _followed(e: Expr) -> Fact:
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
    if name == "math.absi" and _wide(e.type) and isinstance(args[0], Linear):
        return Abs(args[0])
    if name == "arith.cmpi":
        return _compare(e.predicate or "", *args)
    if name == "arith.xori" and e.operands[1] == Const(True, "i1"):
        cond = args[0]  # logical not
        return _negated(cond) if isinstance(cond, Below | AnyOf | AllOf) else None
    if name in ("arith.ori", "arith.andi") and e.type == "i1":
        return _logical(name, *args)
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


@dataclass(frozen=True)
class Band:
    """Row m keeps keys k with m + lower <= k <= m + upper (None: that side unbounded);
    every other key is -inf (or a swamping fill, where every row keeps a key)."""

    upper: int | None
    lower: int | None
    pure: bool  # 0 inside the band: the mask is nothing but the band


def band(mask: ir.Value, rows: int, keys: int) -> Band | None:
    """The band of ``mask`` (indexed as the attention reads it: its ``rows`` dim is the
    queries'), from its tree or else from its values; None if not proven."""
    fact = fact_of(mask)
    if fact == Float(0.0):  # adds nothing (transformers' bidirectional mask, no padding)
        return Band(None, None, pure=True)
    if not isinstance(fact, Masked):
        return _evaluated(mask, rows, keys)
    # each part: masked where keys - rows + const > 0 (k > m - const: an upper bound) or
    # rows - keys + const > 0 (k < m + const: a lower one); m is 0 where rows is a unit
    # dim (the decoding step's one query)
    single_row = ir.ShapedType(mask.type).shape[rows] == 1
    uppers, lowers = [], []
    for part in fact.where:
        coeffs = dict(part.linear.coeffs)
        if coeffs == {keys: 1, rows: -1} or (single_row and coeffs == {keys: 1}):
            uppers.append(-part.linear.const)
        elif coeffs == {keys: -1, rows: 1} or (single_row and coeffs == {keys: -1}):
            lowers.append(part.linear.const)
        else:
            return None
    found = Band(min(uppers, default=None), max(lowers, default=None), fact.pure)
    if fact.finite and not _every_row_keeps_a_key(found, mask, rows, keys):
        return None  # PyTorch weighs the fills of a row that keeps none
    if not found.pure:  # what else it reads may be constants that keep every key
        return _evaluated(mask, rows, keys) or found
    return found


def _every_row_keeps_a_key(found: Band, mask: ir.Value, rows: int, keys: int) -> bool:
    """Row m keeps the keys max(0, m + lower) ..= min(n_k - 1, m + upper): some for every
    m when upper >= 0 (row 0), lower <= upper, and the last row's start is a key."""
    if found.upper is not None and found.upper < 0:  # the first rows keep none
        return False
    if found.lower is None:
        return True
    if found.upper is not None and found.lower > found.upper:
        return False
    shape = ir.ShapedType(mask.type).shape
    n_q, n_k = shape[rows], shape[keys]
    if any(ir.ShapedType.is_dynamic_size(n) for n in (n_q, n_k)):
        return False
    return n_q - 1 + found.lower <= n_k - 1


def offset(mask: ir.Value, rows: int, keys: int) -> int | None:
    """c such that mask[..., m, k] = -inf whenever k > m + c (or a swamping fill, when
    every row keeps a key and the mask is nothing else); None if not proven."""
    found = band(mask, rows, keys)
    return found.upper if found is not None else None


def is_pure(mask: ir.Value, rows: int = 1, keys: int = 2) -> bool:
    """The mask is -inf (or a swamping fill) where causality masks and 0 elsewhere:
    nothing but causal."""
    found = band(mask, rows, keys)
    return found is not None and found.pure and found.upper is not None and found.lower is None


# the most elements of a mask's values ``values_of`` computes (broadcast dims count once)
_MAX_EVALUATED = 1 << 24
# ``_evaluated`` scans larger masks (a tril buffer of 32768 x 32768) a block of rows at a
# time: this many elements a block, at most this many in all
_ROWS_BLOCK_ELEMENTS = 1 << 22
_MAX_SCANNED = 1 << 30


def _coordinates(shape: list[int], dim: int, start: int = 0, stop: int | None = None):
    """The index along ``dim`` of every element of ``shape`` (from ``start`` to ``stop``
    along it), broadcastable."""
    stop = shape[dim] if stop is None else stop
    return np.arange(start, stop).reshape([-1 if d == dim else 1 for d in range(len(shape))])


class _Unknown(Exception):
    """The mask's values cannot be computed here."""


def _row_blocks(mask: ir.Value, rows: int, keys: int, tree: expr.Tree, most: int):
    """The mask's values as (first row, values of a block of rows broadcast to the
    mask's shape there), consecutive blocks of at most ``_ROWS_BLOCK_ELEMENTS``: static
    sizes, a tree of index arithmetic and constant tensors, at most ``most`` elements
    along the dims the values vary along. Raises ``_Unknown`` where they cannot be
    computed (what reads an input is unknown)."""
    shape = list(ir.RankedTensorType(mask.type).shape)
    if any(ir.ShapedType.is_dynamic_size(n) for n in shape) or 0 in shape:
        raise _Unknown
    arrays = [linalg.constant_array(v) for v in tree.inputs]
    if any(a is None for a in arrays):
        raise _Unknown
    used = {rows, keys} | _dims(tree.expr)  # the dims the values vary along
    per_row = math.prod(shape[d] for d in used if d != rows)
    if per_row * shape[rows] > most or per_row > _ROWS_BLOCK_ELEMENTS:
        raise _Unknown

    def load(leaf: Load, coords: list[np.ndarray]) -> np.ndarray:
        return arrays[leaf.slot][tuple(coords)] if coords else arrays[leaf.slot]

    step = _ROWS_BLOCK_ELEMENTS // per_row
    for start in range(0, shape[rows], step):
        stop = min(start + step, shape[rows])
        block = [stop - start if d == rows else n for d, n in enumerate(shape)]

        def at(dim: int, start=start, stop=stop) -> np.ndarray:
            return _coordinates(shape, dim, *((start, stop) if dim == rows else ()))

        try:
            with np.errstate(all="ignore"):
                values = np.asarray(expr.evaluate(tree.expr, at, load))
        except (expr.Unsupported, IndexError, ValueError):
            raise _Unknown from None
        if values.dtype != np.float64:  # f16, bf16 (held in f32) and f32 are exact in f32
            values = values.astype(np.float32)
        full = np.broadcast_shapes(
            values.shape, tuple(block[d] if d in used else 1 for d in range(len(shape)))
        )
        yield start, np.broadcast_to(values, full)


def values_of(
    mask: ir.Value, rows: int, keys: int, tree: expr.Tree | None = None
) -> np.ndarray | None:
    """The mask's values, broadcast to its shape: static sizes, a tree of index
    arithmetic and constant tensors (what reads an input is unknown: None). ``tree``:
    the mask's, where the caller has it already."""
    tree = tree or expr.of_tensor(mask, max_depth=24, opaque=True)
    try:
        blocks = [v for _, v in _row_blocks(mask, rows, keys, tree, _MAX_EVALUATED)]
    except _Unknown:
        return None
    return blocks[0] if len(blocks) == 1 else np.concatenate(blocks, axis=rows)


def kept_keys(mask: ir.Value, rows: int, keys: int) -> np.ndarray | None:
    """(n_q, n_k): where some batch of the mask is not -inf (static masks of indices
    and constants; None otherwise). Keys masked -inf in every batch add nothing to any
    row: skipping them is exact."""
    values = values_of(mask, rows, keys)
    if values is None:
        return None
    kept = ~(values == -math.inf)  # NaN counts as kept (PyTorch's row is NaN)
    others = tuple(d for d in range(kept.ndim) if d not in (rows, keys))
    plane = kept.any(axis=others) if others else kept
    return plane if rows < keys else plane.T


def _evaluated(mask: ir.Value, rows: int, keys: int) -> Band | None:
    """The band from the mask's values: static sizes, a tree of index arithmetic and
    constant tensors, -inf or a swamping fill exactly outside m + lower <= k <= m + upper.
    Scanned once, a block of rows at a time: every batch must mask what the first masks,
    whose rows each keep one run of keys; the runs' ends then give the band."""
    tree = expr.of_tensor(mask, max_depth=24, opaque=True)
    if not tree.inputs:
        return None  # index arithmetic alone is the symbolic proof's; inputs are unknown
    swamps = SWAMPS.get(str(ir.RankedTensorType(mask.type).element_type), -math.inf)
    shape = list(ir.RankedTensorType(mask.type).shape)
    if any(ir.ShapedType.is_dynamic_size(n) for n in shape):
        return None
    n_q, n_k = shape[rows], shape[keys]
    # per row: whether it keeps a key, its first and last kept key
    keeping = np.zeros(n_q, dtype=bool)
    first, last = np.zeros(n_q, dtype=np.int64), np.zeros(n_q, dtype=np.int64)
    masked_any = finite = False
    pure = True  # 0 wherever not masked
    first_batch = tuple(
        slice(None) if d in (rows, keys) else slice(0, 1) for d in range(len(shape))
    )
    try:
        for start, values in _row_blocks(mask, rows, keys, tree, _MAX_SCANNED):
            masked = values <= swamps  # -inf included
            masked_any = masked_any or bool(masked.any())
            finite = finite or bool(np.any(masked & (values > -math.inf)))
            pure = pure and bool(np.all(values[~masked] == 0))
            plane = masked[first_batch]
            if not np.array_equal(masked, np.broadcast_to(plane, masked.shape)):
                return None  # another batch masks otherwise
            plane = ~plane.reshape(plane.shape[min(rows, keys)], plane.shape[max(rows, keys)])
            kept = plane if rows < keys else plane.T  # (rows of the block, keys)
            at = slice(start, start + kept.shape[0])
            keeping[at] = kept.any(axis=1)
            first[at] = kept.argmax(axis=1)
            last[at] = n_k - 1 - kept[:, ::-1].argmax(axis=1)
            runs = kept.sum(axis=1) == last[at] - first[at] + 1
            if not np.all(runs | ~keeping[at]):
                return None  # a row keeps keys on both sides of a masked one
    except _Unknown:
        return None
    if not masked_any:  # no key masked anywhere: no bounds
        return Band(None, None, pure)
    # the bounds from the first row cut on each side; every row must then match
    kept_rows = np.flatnonzero(keeping)
    if kept_rows.size == 0:
        return None
    cut_above = kept_rows[last[kept_rows] < n_k - 1]
    cut_below = kept_rows[first[kept_rows] > 0]
    # no row cut above: the bound is where the first keeping row's keys end
    top = int(cut_above[0]) if cut_above.size else int(kept_rows[0])
    upper = int(last[top]) - top
    lower = int(first[cut_below[0]]) - int(cut_below[0]) if cut_below.size else None
    found = Band(upper, lower, pure)
    row = np.arange(n_q)
    low = np.maximum(0, row + lower) if lower is not None else np.zeros_like(row)
    high = np.minimum(n_k - 1, row + upper)
    if not np.array_equal(keeping, low <= high):
        return None
    if not (
        np.array_equal(first[keeping], low[keeping])
        and np.array_equal(last[keeping], high[keeping])
    ):
        return None
    if finite and not (found.pure and _every_row_keeps_a_key(found, mask, rows, keys)):
        return None
    return found


def _dims(tree: Expr) -> set[int]:
    """The coordinates ``tree`` reads."""
    return {e.dim for e in expr.walk(tree) if isinstance(e, Index)}
