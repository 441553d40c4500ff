"""Proves a mask causal: -inf wherever the key index exceeds the query index plus c.

Follows the mask's producers (iota generics, comparisons, selects of -inf, additions,
reshapes) and keeps, for each value, what it is as a function of the indices of the
tensor holding it:

- ``Linear``: an integer ``Σ coeff[d]·index_d + const`` (iota arithmetic);
- ``Below``: a condition ``Σ coeff[d]·index_d + const > 0``;
- ``Masked``: a float that is -inf wherever its ``Below`` condition holds.

What cannot be followed is None. ``offset`` turns a ``Masked`` over (batch, rows, keys)
into the c of "keys > rows + c are masked", which lets the online softmax stop each row
block's key loop early (causal tile skipping).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fusion_compiler.dialects import linalg

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


@dataclass(frozen=True)
class Below:
    """Holds where ``linear > 0``."""

    linear: Linear


@dataclass(frozen=True)
class Masked:
    where: Below
    pure: bool = False  # 0 wherever ``where`` does not hold: the mask is causality alone


@dataclass(frozen=True)
class Zero:
    """A float that is 0 everywhere (a zero fill, cast or scaled)."""


Fact = Linear | Below | Masked | Zero | None


def _relabel(fact: Fact, dims: dict[int, int | None]) -> Fact:
    """Re-expresses a fact over other indices; None if it used a dim that has no image."""
    if fact is None or isinstance(fact, Zero):
        return fact
    linear = (
        fact
        if isinstance(fact, Linear)
        else (fact.linear if isinstance(fact, Below) else fact.where.linear)
    )
    coeffs = []
    for d, c in linear.coeffs:
        if dims.get(d) is None:
            return None
        coeffs.append((dims[d], c))
    relabeled = Linear(tuple(sorted(coeffs)), linear.const)
    if isinstance(fact, Linear):
        return relabeled
    if isinstance(fact, Below):
        return Below(relabeled)
    return Masked(Below(relabeled), fact.pure)


_COMPARE = {  # predicate -> (lhs - rhs > 0 form): sign, and 1 to subtract for >= forms
    "sgt": (1, 0),
    "ugt": (1, 0),
    "sge": (1, 1),
    "uge": (1, 1),
    "slt": (-1, 0),
    "ult": (-1, 0),
    "sle": (-1, 1),
    "ule": (-1, 1),
}


def _payload_fact(op: ir.Operation, body_op: ir.Operation, facts: dict) -> Fact:
    name = body_op.name
    operands = list(body_op.operands)

    def get(value: ir.Value) -> Fact:
        if value in facts:
            return facts[value]
        captured = linalg.constant_value(value)  # an integer defined above the generic
        return Linear((), captured) if type(captured) is int else None

    if name == "linalg.index":
        return Linear(((ir.IntegerAttr(body_op.attributes["dim"]).value, 1),), 0)
    if name in ("arith.index_cast", "arith.extsi", "arith.extf", "arith.truncf"):
        return get(operands[0])
    if name == "arith.constant":
        value = linalg.constant_value(body_op.results[0])
        return Linear((), int(value)) if isinstance(value, int) else None
    if name in ("arith.addi", "arith.subi"):
        a, b = get(operands[0]), get(operands[1])
        if isinstance(a, Linear) and isinstance(b, Linear):
            return a.plus(b, 1 if name == "arith.addi" else -1)
        return None
    if name == "arith.cmpi":
        a, b = get(operands[0]), get(operands[1])
        predicate = str(body_op.attributes["predicate"]).split()[0]
        predicate = {
            0: "eq",
            1: "ne",
            2: "slt",
            3: "sle",
            4: "sgt",
            5: "sge",
            6: "ult",
            7: "ule",
            8: "ugt",
            9: "uge",
        }.get(ir.IntegerAttr(body_op.attributes["predicate"]).value, predicate)
        if not (isinstance(a, Linear) and isinstance(b, Linear)) or predicate not in _COMPARE:
            return None
        sign, inclusive = _COMPARE[predicate]
        diff = a.plus(b, -1)
        if sign < 0:
            diff = Linear(tuple((d, -c) for d, c in diff.coeffs), -diff.const)
        return Below(Linear(diff.coeffs, diff.const + inclusive))
    if name == "arith.select":
        cond, true, false = (get(v) for v in operands)
        if not isinstance(cond, Below):
            return None

        def is_(value: ir.Value, key: str, constant: float) -> bool:
            return linalg.constant_value(value) == constant or bool(facts.get((key, value)))

        def zero(value: ir.Value) -> bool:
            return is_(value, "zero", 0.0) or isinstance(get(value), Zero)

        if is_(operands[1], "ninf", -math.inf):  # select(c, -inf, x): masked where c
            return Masked(cond, zero(operands[2]))
        if is_(operands[2], "ninf", -math.inf):  # select(c, x, -inf): masked where not c
            # not (l > 0)  <=>  -l >= 0  <=>  -l + 1 > 0 (integers)
            negated = Linear(tuple((d, -c) for d, c in cond.linear.coeffs), 1 - cond.linear.const)
            return Masked(Below(negated), zero(operands[1]))
        return None
    if name in ("arith.addf", "arith.subf"):
        a, b = get(operands[0]), get(operands[1])
        if name == "arith.addf" and isinstance(a, Zero | Masked) and isinstance(b, Zero):
            return a
        if name == "arith.addf" and isinstance(a, Zero) and isinstance(b, Masked):
            return b
        masked = [f for f in (a, b) if isinstance(f, Masked)]
        if (
            len(masked) == 1
            and name == "arith.addf"
            or (name == "arith.subf" and isinstance(a, Masked))
        ):
            return Masked(masked[0].where)  # plus something else: no longer pure
        return None
    if name in ("arith.mulf", "arith.divf"):
        a, b = get(operands[0]), get(operands[1])
        scale = _finite(operands[1])
        if isinstance(a, Zero) and scale is not None and (name == "arith.mulf" or scale != 0):
            return a
        if name == "arith.divf":
            return None
        for m, other in ((a, operands[1]), (b, operands[0])):
            if isinstance(m, Masked):
                c = linalg.constant_value(other)
                if isinstance(c, float) and c > 0:
                    return m
        return None
    return None


def fact_of(value: ir.Value, depth: int = 16) -> Fact:
    """What ``value`` is, as a function of its own indices."""
    op = linalg.producer(value)
    if op is None or depth == 0:
        return None
    rank = ir.RankedTensorType(value.type).rank
    if op.name == "tensor.collapse_shape":
        groups = linalg.reassociation(op)
        fact = fact_of(op.operands[0], depth - 1)
        # only source dims alone in their group have an index of their own here
        dims = {g[0]: r for r, g in enumerate(groups) if len(g) == 1}
        return _relabel(fact, dims)
    if op.name == "tensor.expand_shape":
        groups = linalg.reassociation(op)
        shape = ir.RankedTensorType(value.type).shape
        dims: dict[int, int | None] = {}
        for source_dim, group in enumerate(groups):
            non_unit = [r for r in group if shape[r] != 1]
            dims[source_dim] = (
                non_unit[0] if len(non_unit) == 1 else (group[0] if len(group) == 1 else None)
            )
        return _relabel(fact_of(op.operands[0], depth - 1), dims)
    if op.name == "linalg.fill":
        return Zero() if linalg.constant_value(op.operands[0]) == 0 else None
    if op.name != "linalg.generic" or len(op.results) != 1:
        return None
    maps = [ir.AffineMapAttr(a).value for a in op.attributes["indexing_maps"]]
    n_inputs = len(maps) - len(op.results)
    if maps[-1] != ir.AffineMap.get_identity(rank, context=value.context):
        return None
    block = op.regions[0].blocks[0]
    facts: dict = {}
    for i, (operand, map_) in enumerate(zip(list(op.operands)[:n_inputs], maps, strict=False)):
        arg = block.arguments[i]
        if ir.RankedTensorType(operand.type).rank == 0:
            facts[("ninf", arg)] = _splat(operand) == -math.inf
            facts[("zero", arg)] = _splat(operand) == 0
            continue
        # a constant-0 result reads a unit dim: facts never depend on it
        dims = {
            k: e.position if isinstance(e, ir.AffineDimExpr) else None
            for k, e in enumerate(map_.results)
        }
        facts[arg] = _relabel(fact_of(operand, depth - 1), dims)
    *body, terminator = block.operations
    for body_op in body:
        fact = _payload_fact(op, body_op.operation, facts)
        for r in body_op.results:
            facts[r] = fact
    return facts.get(terminator.operands[0])


def _finite(value: ir.Value) -> float | None:
    """A finite float constant, looking through casts of constants (arith.truncf %c)."""
    op = linalg.producer(value)
    if op is not None and op.name in ("arith.truncf", "arith.extf"):
        value = op.operands[0]
    c = linalg.constant_value(value)
    return c if isinstance(c, float) and math.isfinite(c) else None


def _splat(value: ir.Value) -> float | None:
    c = linalg.constant_value(value)
    return c if isinstance(c, float) else None


def offset(mask: ir.Value, rows: int, keys: int) -> int | None:
    """c such that mask[..., m, k] = -inf whenever k > m + c; None if not proven."""
    fact = fact_of(mask)
    if not isinstance(fact, Masked):
        return None
    coeffs = dict(fact.where.linear.coeffs)
    # masked where keys - rows + const > 0, i.e. k > m - const
    if coeffs != {keys: 1, rows: -1}:
        return None
    return -fact.where.linear.const


def is_pure(mask: ir.Value) -> bool:
    """The mask is -inf where causality masks and 0 elsewhere: nothing but causal."""
    fact = fact_of(mask)
    return isinstance(fact, Masked) and fact.pure
