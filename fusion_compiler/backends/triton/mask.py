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


def mask_code(
    mask: ir.Value, dim_name: DimNamer | None = None, extents: shared.Extents | None = None
) -> MaskCode | str:
    """The mask (batch, n_q, n_k) as an expression of the kernel's ``batch``, ``rows``,
    ``keys``, ``inside``; or why it cannot be. ``dim_name``: what a dynamic dim of a
    tensor the mask reads is, among the kernel's sizes (an ``attention_mask`` input of
    the dynamic sequence length: ``n_k``), written in 64 bits: strides multiply sizes
    (n_k * n_q overflows int32 from 46341). ``extents``: the coordinates' sizes, for the
    mask's bounds over a tile (``bounds_code``)."""

    def printed(tree: Expr, sizes: dict[int, list[int | str]]) -> str:
        coords = ["batch", "rows[:, None]", "keys[None, :]"]
        bounds = [None, "rows[:, None] < n_q", "keys[None, :] < n_k"]
        return expression(tree, coords, sizes=sizes, bounds=bounds)

    return shared.mask_code(
        mask, dim_name, printed, _POINTER_TYPES, lambda name: f"{name}.to(tl.int64)",
        bounded=lambda tree, sizes: bounds_code(tree, sizes, extents),
    )  # fmt: skip


def region_expression(block: ir.Block) -> str:
    """A one-argument region (the attention's score region) as a Triton expression of
    ``x``; ValueError naming what has no translation."""
    try:
        return expression(expr.of_region(block), [])
    except Unsupported as why:
        raise ValueError(f"score region: {why}") from None


# ---- bounds over a tile: what a block map's classes need, without every (row, key)

# integer types whose sums of coordinates never wrap
_WIDE = ("index", "i64")
# float casts that keep the order of their operand (rounding is monotone)
_MONOTONE_CASTS = ("arith.extf", "arith.truncf", "arith.sitofp")
_INDEX_CASTS = ("arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui")
_ORDERED = {"olt": "slt", "ole": "sle", "ogt": "sgt", "oge": "sge", "oeq": "eq", "one": "ne"}


def _uncast(e: Expr) -> Expr:
    """``e`` without the casts of an index to wider integers around it."""
    while isinstance(e, Op) and e.name in _INDEX_CASTS:
        e = e.operands[0]
    return e


class _Bounds:
    """The least and the most each node of a mask's tree takes over one row block and
    the key blocks of a chunk, as Triton lines of ``block_classes``' ``_map_bounds``:
    the coordinates' ranges are ``batch`` (exact), ``row_lo``..``row_hi`` and, per key
    block, ``key_lo``..``key_hi``; a tensor read along the rows (``rr``) or the keys
    (``kk``, (key blocks, BLOCK_N)) is reduced to its least and most there. Each node's
    bounds are two variables (i1 as int32 0 and 1); NaN widens them to (-inf, inf), so
    a compare of them is undecided, as a compare of NaN is either way. Unsupported for
    what has no order-preserving bounds here (a tensor read along both the rows and the
    keys, integer arithmetic that may wrap, a product of two varying values)."""

    def __init__(self, sizes: dict[int, list[int | str]]):
        self.sizes = sizes
        self.lines: list[str] = []
        self.names: dict[Expr, tuple[str, str]] = {}
        self.exact = _Printer(["batch", "rr", "kk"])  # a load's coordinates

    def __call__(self, e: Expr) -> tuple[str, str]:
        if isinstance(e, Const):  # its literal, never NaN (a NaN's bounds are (-inf, inf))
            return self.node(e)
        if e not in self.names:
            low, high = self.node(e)
            name = f"b{len(self.names)}"
            self.lines += [f"{name}_lo = {low}", f"{name}_hi = {high}"]
            if expr.is_float(e.type):  # NaN (inf - inf, 0 · inf, a NaN read): any value
                nan = f"({name}_lo != {name}_lo) | ({name}_hi != {name}_hi)"
                self.lines += [
                    f"{name}_nan = {nan}",
                    f"{name}_lo = tl.where({name}_nan, float('-inf'), {name}_lo)",
                    f"{name}_hi = tl.where({name}_nan, float('inf'), {name}_hi)",
                ]
            self.names[e] = (f"{name}_lo", f"{name}_hi")
        return self.names[e]

    def node(self, e: Expr) -> tuple[str, str]:
        if isinstance(e, Const):
            if e.value != e.value:  # NaN
                return 'float("-inf")', 'float("inf")'
            value = literal(int(e.value) if e.type == "i1" else e.value)
            return value, value
        if isinstance(e, Index):
            return [("batch", "batch"), ("row_lo", "row_hi"), ("key_lo", "key_hi")][e.dim]
        if isinstance(e, Load):
            return self.load(e)
        if isinstance(e, Op):
            return self.op(e)
        raise Unsupported(f"{type(e).__name__.lower()} in a mask's bounds")

    def load(self, leaf: Load) -> tuple[str, str]:
        if leaf.type not in _POINTER_TYPES:
            raise Unsupported(f"a mask input of element type {leaf.type}")
        read = strided(leaf, self.sizes.get(leaf.slot, list(leaf.shape)))
        along = set()
        for c, _ in read:
            blocks = {d for d in (1, 2) if expr.reads_coordinate(c, d)}
            if any(isinstance(x, Load) for x in expr.walk(c)):
                raise Unsupported("a mask input read at an index read from another")
            if blocks and not isinstance(_uncast(c), Index):
                raise Unsupported(f"a mask input read at a computed row or key: {c}")
            along |= blocks
        if len(along) > 1:
            raise Unsupported("a mask input read along both the rows and the keys")
        terms = [f"({self.exact(c)}) * {s if isinstance(s, int) else f'({s})'}" for c, s in read]
        at = f"L{leaf.slot} + " + (" + ".join(terms) or "0")
        wide = "tl.float32" if expr.is_float(leaf.type) else "tl.int64"
        if not along:  # one element per program: exact
            value = f"tl.load({at}).to({wide})"
            return value, value
        name = f"v{len(self.lines)}"
        inside, axis = ("rr <= row_hi", 0) if 1 in along else ("kk < n_k", 1)
        self.lines.append(f"{name} = tl.load({at}, mask={inside}, other=0).to({wide})")
        if expr.is_float(leaf.type):  # NaN somewhere: any value
            nan = f"(({inside}) & ({name} != {name})).to(tl.int32)"
            self.lines.append(f"{name}_nan = tl.max({nan}, {axis}) > 0")
            top, bottom = 'float("inf")', 'float("-inf")'
            low = (
                f"tl.where({name}_nan, {bottom}, tl.min(tl.where({inside}, {name}, {top}), {axis}))"
            )
            high = (
                f"tl.where({name}_nan, {top}, tl.max(tl.where({inside}, {name}, {bottom}), {axis}))"
            )
            return low, high
        top, bottom = str(2**62), str(-(2**62))
        low = f"tl.min(tl.where({inside}, {name}, {top}), {axis})"
        high = f"tl.max(tl.where({inside}, {name}, {bottom}), {axis})"
        return low, high

    def op(self, e: Op) -> tuple[str, str]:
        name, kind = e.name, e.type
        if name in ("arith.addi", "arith.subi", "arith.muli", "math.absi") and kind not in _WIDE:
            raise Unsupported(f"{name} on {kind} in a mask's bounds: it may wrap")
        low, high = self.value(e)
        if kind in _HALF and name in _ROUNDED:  # rounding keeps the order
            low, high = f"({low}).to({_TYPES[kind]})", f"({high}).to({_TYPES[kind]})"
        return low, high

    def value(self, e: Op) -> tuple[str, str]:
        name = e.name
        args = [self(o) for o in e.operands]
        if name in ("arith.addf", "arith.addi"):
            (a, b), (c, d) = args
            return f"({a} + {c})", f"({b} + {d})"
        if name in ("arith.subf", "arith.subi"):
            (a, b), (c, d) = args
            return f"({a} - {d})", f"({b} - {c})"
        if name in ("arith.mulf", "arith.muli", "arith.divf", "arith.divui"):
            return self.scaled(e, args)
        if name in ("arith.maxsi", "arith.minsi") and e.type == "i1":
            # signed, true is -1: the larger of two booleans is their and
            (a, b), (c, d) = args
            symbol = "&" if name == "arith.maxsi" else "|"
            return f"({a} {symbol} {c})", f"({b} {symbol} {d})"
        if name in ("arith.maximumf", "arith.maxnumf", "arith.maxsi"):
            (a, b), (c, d) = args
            low, high = f"tl.maximum({a}, {c})", f"tl.maximum({b}, {d})"
            return self.propagating(e, args, low, high)
        if name in ("arith.minimumf", "arith.minnumf", "arith.minsi"):
            (a, b), (c, d) = args
            low, high = f"tl.minimum({a}, {c})", f"tl.minimum({b}, {d})"
            return self.propagating(e, args, low, high)
        if name == "arith.negf":
            (a, b), = args  # fmt: skip
            return f"(-{b})", f"(-{a})"
        if name in ("math.floor", "math.ceil"):
            (a, b), = args  # fmt: skip
            function = name.removeprefix("math.")
            if e.type in _HALF:  # Triton's floor takes fp32; exact, then back
                a, b = f"({a}).to(tl.float32)", f"({b}).to(tl.float32)"
            return f"tl.{function}({a})", f"tl.{function}({b})"
        if name in ("math.absf", "math.absi"):
            (a, b), = args  # fmt: skip
            low = f"tl.where({a} >= 0, {a}, tl.where({b} <= 0, -({b}), 0))"
            return self.propagating(e, args, low, f"tl.maximum(-({a}), {b})")
        if name == "arith.select":
            (c, d), (a, b), (x, y) = args
            return (
                f"tl.where({c} == 1, {a}, tl.where({d} == 0, {x}, tl.minimum({a}, {x})))",
                f"tl.where({c} == 1, {b}, tl.where({d} == 0, {y}, tl.maximum({b}, {y})))",
            )
        if name in ("arith.andi", "arith.ori", "arith.xori") and e.type == "i1":
            (a, b), (c, d) = args
            if name != "arith.xori":
                symbol = "&" if name == "arith.andi" else "|"
                return f"({a} {symbol} {c})", f"({b} {symbol} {d})"
            known = f"(({a} == {b}) & ({c} == {d}))"
            return f"tl.where({known}, {a} ^ {c}, 0)", f"tl.where({known}, {a} ^ {c}, 1)"
        if name == "arith.cmpi":
            return self.compare(e.predicate or "", e.operands, args)
        if name == "arith.cmpf":
            return self.compare_floats(e.predicate or "", e.operands, args)
        if name in expr.CASTS:
            return self.cast(e, args[0])
        raise Unsupported(f"{name} in a mask's bounds")

    @staticmethod
    def propagating(e: Op, args, low: str, high: str) -> tuple[str, str]:
        """``low``, ``high`` of an op that gives NaN where an operand is NaN (maximumf,
        minimumf, absf): (-inf, inf), a NaN's bounds, where an operand's are."""
        if e.name not in ("arith.maximumf", "arith.minimumf", "math.absf"):
            return low, high
        if any(isinstance(o, Const) and o.value != o.value for o in e.operands):
            return 'float("-inf")', 'float("inf")'
        varying = [
            pair for o, pair in zip(e.operands, args, strict=True) if not isinstance(o, Const)
        ]
        if not varying:
            return low, high
        nan = " | ".join(
            f"(({lo} == float('-inf')) & ({hi} == float('inf')))" for lo, hi in varying
        )
        return f"tl.where({nan}, float('-inf'), {low})", f"tl.where({nan}, float('inf'), {high})"

    def scaled(self, e: Op, args: list[tuple[str, str]]) -> tuple[str, str]:
        """A product or quotient by a constant (its sign orders the bounds)."""
        (a, b), factor = args[0], e.operands[1]
        if isinstance(e.operands[0], Const) and e.name in ("arith.mulf", "arith.muli"):
            (a, b), factor = args[1], e.operands[0]
        if not isinstance(factor, Const) or factor.value != factor.value:
            raise Unsupported(f"{e.name} of two varying values in a mask's bounds")
        value = factor.value
        if e.name in ("arith.divf", "arith.divui") and value <= 0:
            raise Unsupported(f"{e.name} by {value} in a mask's bounds")
        if e.name == "arith.divui" and not expr.never_negative(e.operands[0]):
            raise Unsupported("arith.divui of a value that may be negative")
        symbol = {"arith.mulf": "*", "arith.muli": "*", "arith.divf": "/", "arith.divui": "//"}
        text = f" {symbol[e.name]} {literal(value)}"
        if e.name == "arith.divf" and e.type == "f32":
            return (
                f"tl.math.div_rn({a}, {literal(value)})",
                f"tl.math.div_rn({b}, {literal(value)})",
            )
        if value >= 0:
            return f"({a}{text})", f"({b}{text})"
        return f"({b}{text})", f"({a}{text})"

    def compare(self, predicate: str, operands, args, floats: bool = False) -> tuple[str, str]:
        """Whether it holds everywhere (low) and somewhere (high), as 0 and 1. Of
        floats, everywhere only between finite bounds: (-inf, inf) may be NaN, for
        which no ordered compare holds."""
        if predicate[0] == "u":
            if not all(map(expr.never_negative, operands)):
                raise Unsupported(f"cmpi {predicate} of values that may be negative")
            predicate = "s" + predicate[1:]
        if operands[0].type == "i1" and predicate not in ("eq", "ne"):
            raise Unsupported(f"cmpi {predicate} of booleans")
        (a, b), (c, d) = args
        one = f"(({a} == {b}) & ({c} == {d}) & ({a} == {c}))"  # one value, the same
        apart = f"(({b} < {c}) | ({d} < {a}))"
        cases = {
            "slt": (f"({b} < {c})", f"({a} < {d})"),
            "sle": (f"({b} <= {c})", f"({a} <= {d})"),
            "sgt": (f"({a} > {d})", f"({b} > {c})"),
            "sge": (f"({a} >= {d})", f"({b} >= {c})"),
            "eq": (one, f"(~{apart})"),
            "ne": (apart, f"(~{one})"),
        }
        low, high = cases[predicate]
        if floats:
            if any(isinstance(o, Const) and abs(o.value) == math.inf for o in operands):
                low = "False"  # never "everywhere" against an infinity: NaN may be there
            bounds = [x for o, pair in zip(operands, args, strict=True) for x in pair
                      if not isinstance(o, Const)]  # fmt: skip
            finite = " & ".join(f"(tl.abs({x}) < float('inf'))" for x in bounds)
            low = f"({low} & {finite})" if finite else low
        return f"({low}).to(tl.int32)", f"({high}).to(tl.int32)"

    def compare_floats(self, predicate: str, operands, args) -> tuple[str, str]:
        """Ordered compares as integers' (NaN's bounds are (-inf, inf): undecided); an
        unordered one as the negation of the ordered complement."""
        if predicate in _ORDERED:
            return self.compare(_ORDERED[predicate], operands, args, True)
        if predicate == "une":
            low, high = self.compare("eq", operands, args, True)
        elif predicate in _COMPLEMENT:
            low, high = self.compare(_ORDERED[_COMPLEMENT[predicate]], operands, args, True)
        else:
            raise Unsupported(f"cmpf {predicate} in a mask's bounds")
        return f"(1 - {high})", f"(1 - {low})"

    def cast(self, e: Op, bounds: tuple[str, str]) -> tuple[str, str]:
        source, target, name = e.operands[0].type, e.type, e.name
        low, high = bounds
        to = "tl.int64" if target == "index" else _TYPES.get(target)
        if to is None or target == "i1":
            raise Unsupported(f"{name} to {target} in a mask's bounds")
        if source == "i1":  # 0 and 1; signed, true is -1
            if name in ("arith.extsi", "arith.sitofp", "arith.index_cast"):
                low, high = f"(-{high})", f"(-{low})"
            return f"({low}).to({to})", f"({high}).to({to})"
        unsigned = name in ("arith.extui", "arith.uitofp", "arith.index_castui")
        widening = name in ("arith.extsi", "arith.index_cast") and target in _WIDE
        if unsigned and expr.never_negative(e.operands[0]) or widening:
            return f"({low}).to({to})", f"({high}).to({to})"
        if name in _MONOTONE_CASTS:
            return f"({low}).to({to})", f"({high}).to({to})"
        if name == "arith.fptosi" and target in (*_WIDE, "i32"):
            # rounds toward zero, in order, saturating at the type's ends as the GPU's
            # conversion does (an infinite bound: the end); clamped at 2^63 (2^31), which
            # the conversion saturates
            most = 2**63 if target in _WIDE else 2**31
            low, high = (f"tl.minimum(tl.maximum({x}, {-most}.0), {most}.0)" for x in bounds)
            return f"({low}).to({to})", f"({high}).to({to})"
        raise Unsupported(f"{name} from {source} to {target} in a mask's bounds")


def bounds_code(
    tree: Expr, sizes: dict[int, list[int | str]], extents: shared.Extents | None = None
) -> tuple[str, ...]:
    """Lines of Triton that set ``low`` and ``high``: the least and the most the mask
    ``tree`` adds over a row block and each key block of a chunk (``_Bounds``);
    Unsupported where they cannot be found so. Integer sums and products must not wrap
    for coordinates within ``extents`` (the batch, n_q, n_k): their bounds keep order
    only then (an index's within 32 bits, as the kernel holds coordinates)."""
    _check_no_wrap(tree, extents)
    bounds = _Bounds(sizes)
    low, high = bounds(tree)
    return (*bounds.lines, f"low = {low}", f"high = {high}")


_WRAPPING = {"arith.addi": "add", "arith.subi": "sub", "arith.muli": "mul", "math.absi": "abs"}


def _check_no_wrap(tree: Expr, extents: shared.Extents | None) -> None:
    """Unsupported where an integer sum, difference, product or absolute value in
    ``tree`` may leave its type (an index: 32 bits) for coordinates within ``extents``
    and inputs anywhere in their types."""
    arithmetic = [e for e in expr.walk(tree) if isinstance(e, Op) and e.name in _WRAPPING]
    if not arithmetic:
        return
    if extents is None or any(n is None or n <= 0 for n in extents):
        raise Unsupported("integer arithmetic over coordinates without known sizes")

    def index(dim: int) -> expr.Interval:
        return (0, extents[dim] - 1)

    def load(leaf: Load) -> expr.Interval:
        return (-math.inf, math.inf) if expr.is_float(leaf.type) else expr.type_range(leaf.type)

    found = expr.bounds(tree, index, load)
    for e in arithmetic:
        a = found[e.operands[0]]
        if e.name == "math.absi":
            exact = (0, max(-a[0], a[1]))
        else:
            exact = expr.arith(_WRAPPING[e.name], a, found[e.operands[1]])
        low, high = expr.type_range("i32" if e.type == "index" else e.type)
        if not (low <= exact[0] and exact[1] <= high):
            raise Unsupported(f"{e.name} may leave {e.type} in a mask's bounds")
