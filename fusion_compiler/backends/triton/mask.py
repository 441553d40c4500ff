"""Expression trees (``dialects.expr``) as Triton: an attention's mask and score region.

The additive mask a fused attention carries is f(0) of the model's score chain: fills,
elementwise generics (iota compares, selects of -inf, ALiBi's slope x distance, casts),
reshapes and broadcasts of small tensors (a padding mask input, a bias buffer). Instead
of materialising it at (B·H, Nq, Nk) before the kernel, ``mask_code`` prints its tree as
one expression of the kernel's (batch, row, key) coordinates; the tensors at its leaves
are read with their own indexing (a broadcast dim has stride 0), so no Nq×Nk mask exists.
What cannot be printed keeps the materialised mask. ``region_expression`` prints the op's
score region (softcap) the same way. Each op is printed with MLIR's semantics: unsigned
compares and casts through unsigned types, unordered float compares as the negation of
the ordered complement, ``maximumf`` propagating NaN.
"""

from __future__ import annotations

import math

from fusion_compiler.backends import mask as shared
from fusion_compiler.backends.mask import DimNamer, strided
from fusion_compiler.backends.spec import MaskCode
from fusion_compiler.dialects import expr
from fusion_compiler.dialects.expr import Arg, Const, Expr, Index, Load, Op, Unsupported
from fusion_compiler.ir import ir

_POINTER_TYPES = {
    "f32": "*fp32",
    "f16": "*fp16",
    "bf16": "*bf16",
    "i1": "*i1",
    "i8": "*i8",
    "i32": "*i32",
    "i64": "*i64",
}
_TYPES = {
    "f16": "tl.float16",
    "bf16": "tl.bfloat16",
    "f32": "tl.float32",
    "f64": "tl.float64",  # integer floor division goes through it (torch-mlir's)
    "i1": "tl.int1",
    "i8": "tl.int8",
    "i16": "tl.int16",
    "i32": "tl.int32",
    "i64": "tl.int64",
}
_SYMBOLS = {
    "arith.addf": "+",
    "arith.addi": "+",
    "arith.subf": "-",
    "arith.subi": "-",
    "arith.mulf": "*",
    "arith.muli": "*",
    "arith.divf": "/",
    "arith.andi": "&",
    "arith.ori": "|",
    "arith.xori": "^",
    "arith.divui": "//",  # of coordinates only: never negative
    "arith.remui": "%",
}
_HALF = ("f16", "bf16")
# the ops whose result a half type rounds
_ROUNDED = frozenset(
    ("arith.addf", "arith.subf", "arith.mulf", "arith.divf", "math.exp", "math.exp2",
     "math.log", "math.log2", "math.sqrt", "math.tanh", "math.erf", "math.fpowi")
)  # fmt: skip
# the most multiplications a power of an integer constant is written out as
_MAX_POWER = 8
_RELATIONS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
# an unordered float compare holds where the ordered complement does not
_COMPLEMENT = {"ueq": "one", "ugt": "ole", "uge": "olt", "ult": "oge", "ule": "ogt"}
_UNARY = {
    "math.absf": "tl.abs({})",
    "math.absi": "tl.abs({})",
    "math.exp": "tl.exp({})",
    "math.exp2": "tl.math.exp2({})",
    "math.log": "tl.log({})",
    "math.log2": "tl.math.log2({})",
    "math.sqrt": "tl.sqrt_rn({})",  # correctly rounded, as MLIR's
    "arith.negf": "(-{})",
    "math.tanh": "(2.0 * tl.sigmoid(2.0 * {}) - 1.0)",
    "math.floor": "tl.floor({})",  # exact: no rounding to a half type
    "math.ceil": "tl.ceil({})",
    "math.erf": "tl.math.erf({})",
}
_MAX_MIN = {
    "arith.maximumf": "tl.maximum({}, {}, propagate_nan=tl.PropagateNan.ALL)",
    "arith.minimumf": "tl.minimum({}, {}, propagate_nan=tl.PropagateNan.ALL)",
    # the number where one is NaN (spelled out: Triton's interpreter propagates NaN)
    "arith.maxnumf": "tl.where({0} != {0}, {1}, tl.where({1} != {1}, {0}, tl.maximum({0}, {1})))",
    "arith.minnumf": "tl.where({0} != {0}, {1}, tl.where({1} != {1}, {0}, tl.minimum({0}, {1})))",
    "arith.maxsi": "tl.maximum({}, {})",
    "arith.minsi": "tl.minimum({}, {})",
}


def literal(value: float | int | bool) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float) and not math.isfinite(value):
        return f'float("{value}")'  # inf, -inf, nan
    return repr(value)


class _Printer:
    def __init__(
        self,
        coords: list[str],
        inside: str = "inside",
        sizes: dict[int, list[int | str]] | None = None,
        bounds: list[str | None] | None = None,
    ):
        self.coords = coords
        self.inside = inside
        self.sizes = sizes or {}  # a Load slot's sizes, dynamic ones named
        self.bounds = bounds  # per coordinate that is a block: where it is in bounds

    def __call__(self, e: Expr) -> str:
        if isinstance(e, Const):
            return literal(e.value)
        if isinstance(e, Index):
            return self.coords[e.dim]
        if isinstance(e, Arg):
            return "x"
        if isinstance(e, Load):
            return self.load(e)
        return self.op(e)

    def load(self, leaf: Load) -> str:
        read = strided(leaf, self.sizes.get(leaf.slot, list(leaf.shape)))
        if leaf.type not in _POINTER_TYPES:
            raise Unsupported(f"a mask input of element type {leaf.type}")
        terms = [f"({self(c)}) * {s if isinstance(s, int) else f'({s})'}" for c, s in read]
        offset = " + ".join(terms) or "0"
        varies = set().union(
            *(self._tiled(c) for c, n in zip(leaf.coords, leaf.shape, strict=True) if n != 1)
        )
        if not varies:
            # one element per program (a decoding position, a per-batch length): a scalar
            # pointer, which Triton loads without a tile's mask; it is always in bounds
            return f"tl.load(L{leaf.slot} + {offset})"
        if self.bounds is None:
            inside = self.inside
        else:
            # a tensor along the coordinates it varies over, bounded by them alone: a
            # padding mask's (1, BLOCK_N) keys, not a (BLOCK_M, BLOCK_N) tile of copies
            # (H200: the tile's loads held a document mask's kernel to one pipeline stage)
            inside = " & ".join(f"({self.bounds[d]})" for d in sorted(varies))
        return f"tl.load(L{leaf.slot} + {offset}, mask={inside}, other=0)"

    def _tiled(self, e: Expr) -> set[int]:
        """The coordinates that are blocks (rows[:, None], keys[None, :]) ``e`` reads:
        where it varies over the tile."""
        if isinstance(e, Index):
            return {e.dim} if "[" in self.coords[e.dim] else set()
        if isinstance(e, Load | Op):
            operands = e.coords if isinstance(e, Load) else e.operands
            return set().union(*(self._tiled(o) for o in operands))
        return set()

    def unsigned(self, e: Expr) -> str:
        """``e`` reinterpreted as unsigned of its own width (bools are 0 and 1)."""
        bits = expr.width(e.type) if e.type != "i1" else 1
        if isinstance(e, Const):
            return literal(int(e.value) % 2**bits)
        if e.type == "i1":
            return f"({self(e)}).to(tl.int32)"
        return f"({self(e)}).to(tl.int{bits}).to(tl.uint{bits}, bitcast=True)"

    def op(self, e: Op) -> str:
        text = self.value(e)
        if e.type in _HALF and e.name in _ROUNDED:
            # Triton computes with a literal (or a where of two) in fp32: round to MLIR's
            # type (an fp32 op on half values, rounded once, is the half op's result);
            # selects, max/min, negation and abs return an operand's value as it is
            return f"({text}).to({_TYPES[e.type]})"
        return text

    def value(self, e: Op) -> str:
        name = e.name
        args = [self(o) for o in e.operands]
        if name in ("arith.maxsi", "arith.minsi") and e.type == "i1":  # true is -1
            return f"({args[0]} {'&' if name == 'arith.maxsi' else '|'} {args[1]})"
        if name == "arith.divf" and e.type == "f32":
            return f"tl.math.div_rn({args[0]}, {args[1]})"  # correctly rounded, as MLIR's
        if name in _SYMBOLS:
            return f"({args[0]} {_SYMBOLS[name]} {args[1]})"
        if name in _UNARY:
            if e.type in _HALF and name != "arith.negf":  # Triton's math takes fp32
                args = [f"({a}).to(tl.float32)" for a in args]
            return _UNARY[name].format(args[0])
        if name in _MAX_MIN:
            return _MAX_MIN[name].format(*args)
        if name == "arith.select":
            return f"tl.where({args[0]}, {args[1]}, {args[2]})"
        if name == "math.fpowi":
            return self.power(e, args[0])
        if name == "arith.cmpi":
            return self.cmpi(e, args)
        if name == "arith.cmpf":
            return self.cmpf(e.predicate or "", *args)
        if name in expr.CASTS:
            return self.cast(e, args[0])
        raise Unsupported(f"{name} has no kernel translation")

    def power(self, e: Op, base: str) -> str:
        """x^n for a constant n in 1..``_MAX_POWER``, multiplied out in fp32 (rounded once
        to a half type after, as MLIR's op is)."""
        exponent = e.operands[1]
        if not isinstance(exponent, Const) or not 1 <= int(exponent.value) <= _MAX_POWER:
            raise Unsupported("math.fpowi of an exponent that is not a small constant")
        if e.type in _HALF:
            base = f"({base}).to(tl.float32)"
        return "(" + " * ".join([base] * int(exponent.value)) + ")"

    def cmpi(self, e: Op, args: list[str]) -> str:
        predicate = e.predicate or ""
        a, b = e.operands
        if predicate[0] == "u":
            args = [self.unsigned(a), self.unsigned(b)]
        elif a.type == "i1" and predicate not in ("eq", "ne"):  # signed i1: true is -1
            args = [self.signed_bool(o) for o in e.operands]
        relation = predicate if predicate in ("eq", "ne") else predicate[1:]
        return f"({args[0]} {_RELATIONS[relation]} {args[1]})"

    def signed_bool(self, e: Expr) -> str:
        if isinstance(e, Const):
            return literal(-int(e.value))
        return f"(-({self(e)}).to(tl.int32))"

    def cmpf(self, predicate: str, a: str, b: str) -> str:
        if predicate in _COMPLEMENT:
            return f"(~{self.cmpf(_COMPLEMENT[predicate], a, b)})"
        if predicate == "one":
            return f"(({a} < {b}) | ({a} > {b}))"
        if predicate == "une":
            return f"({a} != {b})"  # Triton's != is une
        if predicate == "ord":
            return f"(({a} == {a}) & ({b} == {b}))"
        if predicate == "uno":
            return f"(({a} != {a}) | ({b} != {b}))"
        if predicate[1:] not in _RELATIONS:
            raise Unsupported(f"cmpf {predicate}")
        return f"({a} {_RELATIONS[predicate[1:]]} {b})"

    def cast(self, e: Op, text: str) -> str:
        source, target, name = e.operands[0].type, e.type, e.name
        if target == "i1" and source != "i1" and name != "arith.fptosi":
            return f"((({text}) & 1) != 0)"  # an integer to i1 keeps its low bit
        to = "tl.int64" if target == "index" else _TYPES.get(target)
        if to is None:
            raise Unsupported(f"a cast to {target}")
        if name == "arith.fptoui":
            raise Unsupported("a cast of a float to unsigned")
        widens_unsigned = name in ("arith.uitofp", "arith.extui", "arith.index_castui")
        if widens_unsigned and source != "i1":
            return f"{self.unsigned(e.operands[0])}.to({to})"
        if name in ("arith.sitofp", "arith.extsi", "arith.index_cast") and source == "i1":
            return f"(-({text}).to({to}))"  # signed i1: true is -1
        if target == "index" and source in ("i32", "i64", "index"):
            return text  # sign-extended where used: Triton's integers are signed
        return f"({text}).to({to})"


def expression(
    tree: Expr,
    coords: list[str],
    inside: str = "inside",
    sizes: dict[int, list[int | str]] | None = None,
    bounds: list[str | None] | None = None,
) -> str:
    """``tree`` as a Triton expression: ``Index(d)`` is ``coords[d]``, ``Arg`` is ``x``,
    ``Load`` slot i reads pointer ``Li`` where ``inside`` holds (with ``bounds``, where
    ``bounds[d]`` holds for each block coordinate d it reads), laid out by its shape (or
    ``sizes[i]``, where dynamic sizes are named); Unsupported naming what has no
    translation."""
    return _Printer(coords, inside, sizes, bounds)(tree)


def mask_code(mask: ir.Value, dim_name: DimNamer | None = None) -> MaskCode | str:
    """The mask (batch, n_q, n_k) as an expression of the kernel's ``batch``, ``rows``,
    ``keys``, ``inside``; or why it cannot be. ``dim_name``: what a dynamic dim of a
    tensor the mask reads is, among the kernel's sizes (an ``attention_mask`` input of
    the dynamic sequence length: ``n_k``), written in 64 bits: strides multiply sizes
    (n_k * n_q overflows int32 from 46341)."""

    def printed(tree: Expr, sizes: dict[int, list[int | str]]) -> str:
        coords = ["batch", "rows[:, None]", "keys[None, :]"]
        bounds = [None, "rows[:, None] < n_q", "keys[None, :] < n_k"]
        return expression(tree, coords, sizes=sizes, bounds=bounds)

    return shared.mask_code(
        mask, dim_name, printed, _POINTER_TYPES, lambda name: f"{name}.to(tl.int64)"
    )


def region_expression(block: ir.Block) -> str:
    """A one-argument region (the attention's score region) as a Triton expression of
    ``x``; ValueError naming what has no translation."""
    try:
        return expression(expr.of_region(block), [])
    except Unsupported as why:
        raise ValueError(f"score region: {why}") from None
