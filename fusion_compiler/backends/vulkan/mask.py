"""Expression trees (``dialects.expr``) as GLSL: an attention's mask, computed in the shader.

The Vulkan twin of ``triton.mask``: the additive mask of a fused attention is printed as
one GLSL function of the shader's (batch, row, key), its leaves read from the small
tensors the mask starts from (a padding mask input, document ids, a bias buffer), each
bound as a buffer of its own element type (of 32-bit words where the device has no
storage of its width); no (B·H, Nq, Nk) mask is materialised. Values keep MLIR's types
and semantics: integers of 64 bits (``index``, i64) as ``int64_t``, unsigned compares
and divisions through ``uint64_t``, a half type's results rounded to it after every op
that rounds, unordered float compares as the negation of the ordered complement. On a
target without 64-bit integers they are ``int`` and ``uint`` where every value provably
fits (``backends.mask.narrow_problem``). What has no translation keeps the materialised
mask (a remark says why).
"""

from __future__ import annotations

import math

from fusion_compiler.backends import mask as shared
from fusion_compiler.backends.mask import DimNamer, strided
from fusion_compiler.backends.spec import MaskCode
from fusion_compiler.backends.vulkan import glsl
from fusion_compiler.backends.vulkan.spec import EVERYTHING, Capabilities
from fusion_compiler.dialects import expr
from fusion_compiler.dialects.expr import Const, Expr, Index, Load, Op, Unsupported
from fusion_compiler.ir import ir

# a buffer's GLSL element type per MLIR element type (IREE stores i1 as a byte)
BUFFER_TYPES = {
    "i1": "uint8_t",
    "i8": "int8_t",
    "i32": "int",
    "i64": "int64_t",
    "f16": "float16_t",
    "bf16": "uint16_t",
    "f32": "float",
}
# the GLSL type a value of each MLIR type is held in (half types: a float, rounded)
_VALUE_TYPES = {
    "i1": "bool",
    "i32": "int",
    "i64": "int64_t",
    "index": "int64_t",
    "f16": "float",
    "bf16": "float",
    "f32": "float",
    "f64": "double",
}
_ROUNDED = frozenset(
    ("arith.addf", "arith.subf", "arith.mulf", "arith.divf", "math.exp", "math.exp2",
     "math.log", "math.log2", "math.sqrt", "math.tanh")
)  # fmt: skip
_ARITHMETIC = {
    "arith.addf": "+",
    "arith.subf": "-",
    "arith.mulf": "*",
    "arith.divf": "/",
    "arith.addi": "+",
    "arith.subi": "-",
    "arith.muli": "*",
    "arith.andi": "&",
    "arith.ori": "|",
    "arith.xori": "^",
}
_BOOLEAN = {"arith.andi": "&&", "arith.ori": "||", "arith.xori": "!=", "arith.addi": "!="}
_UNARY = {
    "math.absf": "abs({})",
    "math.absi": "abs({})",
    "math.exp": "exp({})",
    "math.exp2": "exp2({})",
    "math.log": "log({})",
    "math.log2": "log2({})",
    "math.sqrt": "sqrt({})",
    "arith.negf": "(-{})",
    "math.tanh": "tanh({})",
    "math.floor": "floor({})",
    "math.ceil": "ceil({})",
}
_DOUBLE_UNARY = ("math.absf", "math.sqrt", "arith.negf", "math.floor", "math.ceil")
_MAX_MIN = {
    "arith.maximumf": "((isnan({0}) || isnan({1})) ? {0} + {1} : max({0}, {1}))",
    "arith.minimumf": "((isnan({0}) || isnan({1})) ? {0} + {1} : min({0}, {1}))",
    "arith.maxnumf": "(isnan({0}) ? {1} : (isnan({1}) ? {0} : max({0}, {1})))",
    "arith.minnumf": "(isnan({0}) ? {1} : (isnan({1}) ? {0} : min({0}, {1})))",
    "arith.maxsi": "max({}, {})",
    "arith.minsi": "min({}, {})",
}
_RELATIONS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_COORDS = ("batch", "row", "key")
# a narrow element read from 32-bit words (``glsl.in_words``): its bits as the value
_FROM_BITS = {
    "i1": "({} != 0u)",
    "i8": "((int({}) << 24) >> 24)",  # sign-extended, as an int8_t
    "f16": "unpackHalf2x16({}).x",
    "bf16": "uintBitsToFloat({} << 16)",
}


def _floor_division(e: Op) -> tuple[Expr, int] | None:
    """(x, c) where ``e`` is torch-mlir's integer floor division x // c: floor of an f64
    division of an integer by a nonzero integral constant. The f64 quotient of integers
    below 2^53 floors to the exact integer quotient; Vulkan computes an f64 division to
    about 2.5 ulp, which can floor one too low, so it is printed as integer arithmetic."""
    if e.name != "math.floor" or e.type != "f64":
        return None
    inner = e.operands[0]
    if not (isinstance(inner, Op) and inner.name == "arith.divf"):
        return None
    a, b = inner.operands
    if not (isinstance(a, Op) and a.name == "arith.sitofp") or not isinstance(b, Const):
        return None
    c = float(b.value)
    if not c.is_integer() or c == 0 or abs(c) >= 2**31:
        return None
    return a.operands[0], int(c)


def _float_literal(value: float, type_: str) -> str:
    if math.isnan(value) or math.isinf(value):
        bits = "0x7fc00000u" if math.isnan(value) else "0x7f800000u"
        text = f"uintBitsToFloat({bits})"
        text = f"(-{text})" if value < 0 else text
        return f"double({text})" if type_ == "f64" else text
    return f"{value!r}lf" if type_ == "f64" else repr(float(value))


def _paired(e: Expr) -> bool:
    """An element of an i64 tensor held as its (low, high) 32-bit words: on a target
    without int64, where the mask only compares it (``shared.compared_wide``)."""
    return isinstance(e, Load) and e.type == "i64"


def _words(e: Expr, text: str) -> str:
    return text if _paired(e) else f"ivec2({text}, {text} >> 31)"  # an int, sign-extended


def _compare_words(predicate: str, relation: str, a: str, b: str) -> str:
    """cmpi of 64-bit integers held as (low, high) words: the high words decide, signed
    or unsigned as the predicate, unless equal; then the low words, unsigned."""
    if relation in ("eq", "ne"):
        return f"({a} {_RELATIONS[relation]} {b})"
    high = "uint({}.y)" if predicate[0] == "u" else "{}.y"
    strict = _RELATIONS[relation[0] + "t"]  # lt, le: <; gt, ge: >
    low = f"uint({a}.x) {_RELATIONS[relation]} uint({b}.x)"
    return f"(({high.format(a)} {strict} {high.format(b)}) || ({a}.y == {b}.y && {low}))"


class _Printer:
    def __init__(self, sizes: dict[int, list[int | str]], has: Capabilities):
        self.sizes = sizes  # a Load slot's sizes, dynamic ones named
        self.has = has
        self.int = "int64_t" if has.int64 else "int"  # index and i64 values

    def value_type(self, type_: str) -> str:
        found = _VALUE_TYPES.get(type_)
        if type_ == "f64" and not self.has.fp64:
            raise Unsupported("the target has no 64-bit floats: a value of type f64")
        if found is None:
            raise Unsupported(f"a value of type {type_} in the mask")
        return self.int if found == "int64_t" else found

    def integer(self, value: int) -> str:
        if not self.has.int64:
            return f"int({value})" if value != -(2**31) else "int(0x80000000u)"
        return f"int64_t({value}l)"

    def unsigned(self, text: str, type_: str) -> str:
        """An integer value read as unsigned of its own width: a narrow one (an i8 load,
        held sign-extended in an int) keeps its low bits; a 64-bit one held in an int
        (every value in int's range: unsigned compares order them alike)."""
        bits = expr.width(type_)
        if bits == 64:
            return f"uint64_t({text})" if self.has.int64 else f"uint({text})"
        return f"uint({text})" if bits == 32 else f"(uint({text}) & {(1 << bits) - 1}u)"

    def __call__(self, e: Expr) -> str:
        if isinstance(e, Const):
            return self.const(e)
        if isinstance(e, Index):
            return f"{self.int}({_COORDS[e.dim]})"
        if isinstance(e, Load):
            return self.load(e)
        if isinstance(e, Op):
            return self.op(e)
        raise Unsupported(f"{type(e).__name__.lower()} {e} in the mask")

    def const(self, e: Const) -> str:
        kind = self.value_type(e.type)
        if kind == "bool":
            return "true" if e.value else "false"
        if kind in ("float", "double"):
            return _float_literal(float(e.value), e.type)
        return self.integer(int(e.value)) if kind == self.int else f"int({int(e.value)})"

    def load(self, leaf: Load) -> str:
        read = strided(leaf, self.sizes.get(leaf.slot, list(leaf.shape)))
        if leaf.type not in BUFFER_TYPES:
            raise Unsupported(f"a mask input of element type {leaf.type}")
        terms = [f"{self(c)} * {s if isinstance(s, int) else f'({s})'}" for c, s in read]
        offset = f"uint({' + '.join(terms) or '0'})"
        if leaf.type == "i64" and not self.has.int64:  # compared only (narrow_problem)
            return f"l{leaf.slot}_pair({offset})"
        if glsl.in_words(BUFFER_TYPES[leaf.type], self.has.b16, self.has.b8):
            return _FROM_BITS[leaf.type].format(f"l{leaf.slot}_bits({offset})")
        element = f"l{leaf.slot}[{offset}]"
        if leaf.type == "i1":
            return f"({element} != uint8_t(0))"
        if leaf.type in ("i8", "f16", "bf16"):
            return f"{'int' if leaf.type == 'i8' else 'to_float'}({element})"
        return element

    def op(self, e: Op) -> str:
        text = self.value(e)
        if e.type in ("f16", "bf16") and e.name in _ROUNDED:
            return f"round_{e.type}({text})"  # MLIR computes in the half type
        return text

    def value(self, e: Op) -> str:
        name, kind = e.name, self.value_type(e.type)
        division = _floor_division(e)
        if division is not None:  # q = x / c truncated, one less where that rounded up
            x, c = f"{self.int}({self(division[0])})", self.integer(division[1])
            q = f"({x} / {c})"
            up = f"(({q} * {c} != {x}) && (({x} < 0) != ({c} < 0)))"
            return f"double({q} - ({up} ? {self.integer(1)} : {self.integer(0)}))"
        args = [self(o) for o in e.operands]
        if name == "arith.select":
            return f"({args[0]} ? {args[1]} : {args[2]})"
        if name == "arith.cmpi":
            return self.cmpi(e, args)
        if name == "arith.cmpf":
            return glsl.cmpf(e.predicate or "", *args)
        if name in expr.CASTS:
            return self.cast(e, args[0])
        if kind == "bool" and name in _BOOLEAN:
            return f"({args[0]} {_BOOLEAN[name]} {args[1]})"
        if kind == "bool" and name in ("arith.maxsi", "arith.minsi"):  # true is -1
            return f"({args[0]} {'&&' if name == 'arith.maxsi' else '||'} {args[1]})"
        if kind == "bool":
            raise Unsupported(f"{name} of i1 has no GLSL translation")
        if name in _ARITHMETIC:
            return f"({args[0]} {_ARITHMETIC[name]} {args[1]})"
        if name in ("arith.divui", "arith.remui", "arith.maxui", "arith.minui"):
            a, b = (self.unsigned(x, e.type) for x in args)
            op = {"arith.divui": "{} / {}", "arith.remui": "{} % {}"}.get(name)
            op = op or ("max({}, {})" if name == "arith.maxui" else "min({}, {})")
            return f"{kind}({op.format(a, b)})"
        if name in _UNARY:
            if kind == "double" and name not in _DOUBLE_UNARY:
                raise Unsupported(f"{name} of f64 has no GLSL translation")
            return _UNARY[name].format(args[0])
        if name in _MAX_MIN:
            return _MAX_MIN[name].format(*args)
        raise Unsupported(f"{name} has no GLSL translation")

    def cmpi(self, e: Op, args: list[str]) -> str:
        predicate = e.predicate or ""
        a, b = e.operands
        relation = predicate if predicate in ("eq", "ne") else predicate[1:]
        if a.type == "i1":
            if relation in ("eq", "ne"):
                return f"({args[0]} {_RELATIONS[relation]} {args[1]})"
            signed = predicate[0] == "s"  # signed: true is -1; unsigned: 1
            args = [f"({x} ? {-1 if signed else 1} : 0)" for x in args]
        elif not self.has.int64 and (_paired(a) or _paired(b)):
            return _compare_words(predicate, relation, _words(a, args[0]), _words(b, args[1]))
        elif predicate[0] == "u":
            args = [self.unsigned(x, a.type) for x in args]
        return f"({args[0]} {_RELATIONS[relation]} {args[1]})"

    def cast(self, e: Op, text: str) -> str:
        source, target, name = e.operands[0].type, e.type, e.name
        kind = self.value_type(target)
        if name == "arith.fptoui":
            raise Unsupported("a cast of a float to unsigned")
        integer = not expr.is_float(source) and source != "i1"
        if (target in ("f16", "bf16") and source == "f64") or (
            target == "bf16" and integer and expr.width(source) > 16
        ):  # made a float first, then the half type: rounded twice (MLIR rounds once)
            raise Unsupported(f"{name} of {source} to {target}")
        if target == "i1":
            if name == "arith.fptosi" or source == "i1":
                raise Unsupported(f"{name} to i1")
            return f"(({text} & 1) != 0)"  # an integer to i1 keeps its low bit
        if source == "i1":
            one = -1 if name in ("arith.sitofp", "arith.extsi", "arith.index_cast") else 1
            value = f"({text} ? {kind}({one}) : {kind}(0))"
        elif name in ("arith.uitofp", "arith.extui", "arith.index_castui"):
            value = f"{kind}({self.unsigned(text, source)})"
        else:
            value = f"{kind}({text})"
        if target in ("f16", "bf16") and name != "arith.extf":
            return f"round_{target}({value})"
        return value


def mask_code(
    mask: ir.Value,
    dim_name: DimNamer,
    has: Capabilities = EVERYTHING,
    extents: shared.Extents = (None, None, None),
) -> MaskCode | str:
    """The mask (batch, n_q, n_k) as a GLSL expression of the shader's ``batch``, ``row``
    and ``key``, or why it cannot be, with what the target ``has``. ``dim_name``: what
    a dynamic dim of a tensor the mask reads is among the kernel's sizes ("n_q", "n_k"
    or None); ``extents``: the sizes (batch, n_q, n_k) at their largest (None: unbounded),
    which bound its values where the target has no 64-bit integers."""

    def printed(tree: Expr, sizes: dict[int, list[int | str]]) -> str:
        printer = _Printer(sizes, has)
        text = printer(tree)
        return f"float({text})" if printer.value_type(tree.type) != "float" else text

    integer = "int64_t" if has.int64 else "int"
    return shared.mask_code(
        mask,
        dim_name,
        printed,
        BUFFER_TYPES,
        lambda name: f"{integer}({name})",
        None if has.int64 else extents,
    )
