"""Linalg payloads as Triton expressions: an attention's mask producers and score region.

The additive mask a fused attention carries is f(0) of the model's score chain: fills,
elementwise generics (iota compares, selects of -inf, ALiBi's slope x distance, casts),
reshapes and broadcasts of small tensors (a padding mask input, a bias buffer). Instead
of materialising it at (B·H, Nq, Nk) before the kernel, ``mask_code`` translates those
producers into one expression of the kernel's (batch, row, key) coordinates; the tensors
at its leaves are read with their own indexing (a broadcast dim has stride 0), so no
Nq×Nk mask exists. What cannot be translated keeps the materialised mask.
``region_expression`` translates the op's score region (softcap) with the same table.
"""

from __future__ import annotations

import math
import operator
import struct
from dataclasses import dataclass, field

from fusion_compiler.backends.triton.spec import contiguous_strides
from fusion_compiler.dialects import linalg
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
_BINARY = {
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
}
_CMPI = {0: "==", 1: "!=", 2: "<", 3: "<=", 4: ">", 5: ">=", 6: "<", 7: "<=", 8: ">", 9: ">="}
_CMPF = {
    1: "==",
    2: ">",
    3: ">=",
    4: "<",
    5: "<=",
    6: "!=",
    8: "==",
    9: ">",
    10: ">=",
    11: "<",
    12: "<=",
    13: "!=",
}
_UNARY = {
    "math.absf": "tl.abs({})",
    "math.exp": "tl.exp({})",
    "math.exp2": "tl.math.exp2({})",
    "math.log": "tl.log({})",
    "math.log2": "tl.math.log2({})",
    "math.sqrt": "tl.sqrt({})",
    "arith.negf": "(-{})",
    "math.tanh": "(2.0 * tl.sigmoid(2.0 * {}) - 1.0)",
}
_UNARY_FOLD = {
    "math.absf": abs,
    "math.exp": math.exp,
    "math.exp2": lambda x: 2.0**x,
    "math.log": math.log,
    "math.log2": math.log2,
    "math.sqrt": math.sqrt,
    "arith.negf": operator.neg,
    "math.tanh": math.tanh,
}
_CASTS = {
    "f16": "tl.float16",
    "bf16": "tl.bfloat16",
    "f32": "tl.float32",
    "i64": "tl.int64",
    "i32": "tl.int32",
}


class Untranslatable(Exception):
    pass


Term = str | float | int | bool  # a Triton expression, or a constant folded in Python

_FOLD = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "&": operator.and_,
    "|": operator.or_,
    "^": operator.xor,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _round(value: float, target: str) -> float:
    """``value`` rounded to a narrower float type, as the model's casts round it."""
    if target == "f16":
        return struct.unpack("e", struct.pack("e", value))[0]
    if target == "bf16":  # round to nearest even on the f32 bits
        bits = struct.unpack("I", struct.pack("f", value))[0]
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return struct.unpack("f", struct.pack("I", bits))[0]
    return value


def _text(term: Term) -> str:
    return term if isinstance(term, str) else _literal(term)


@dataclass
class MaskCode:
    expr: str
    inputs: list[ir.Value] = field(default_factory=list)  # tensors the kernel reads
    types: list[str] = field(default_factory=list)  # their Triton pointer types


def _shape(value: ir.Value) -> list[int]:
    shape = list(ir.RankedTensorType(value.type).shape)
    if any(ir.ShapedType.is_dynamic_size(s) for s in shape):
        raise Untranslatable("dynamic sizes in the mask's producers")
    return shape


def _literal(value: float | int | bool) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float) and math.isinf(value):
        return 'float("-inf")' if value < 0 else 'float("inf")'
    return repr(value)


class _Translator:
    def __init__(self, inside: str):
        self.code = MaskCode("")
        self.inside = inside

    def tensor(self, value: ir.Value, coords: list[str], depth: int = 0) -> Term:
        if depth > 24:
            raise Untranslatable("the mask's producers are too deep")
        constant = linalg.constant_value(value)
        if constant is not None:
            return constant
        op = linalg.producer(value)
        if op is None or op.name == "arith.constant":
            return self._load(value, coords)
        if op.name == "linalg.fill":
            scalar = linalg.constant_value(op.operands[0])
            if scalar is None:
                raise Untranslatable("a fill with a value that is not a constant")
            return scalar
        if op.name == "tensor.collapse_shape":
            return self._collapse(op, coords, depth)
        if op.name == "tensor.expand_shape":
            return self._expand(op, coords, depth)
        if op.name == "linalg.generic":
            return self._generic(op, value, coords, depth)
        return self._load(value, coords)

    def _load(self, value: ir.Value, coords: list[str]) -> str:
        shape = _shape(value)
        element = str(ir.RankedTensorType(value.type).element_type)
        if element not in _POINTER_TYPES:
            raise Untranslatable(f"a mask input of element type {element}")
        strides = contiguous_strides(shape)
        terms = [f"({c}) * {s}" for c, s, n in zip(coords, strides, shape, strict=True) if n != 1]
        index = len(self.code.inputs)
        self.code.inputs.append(value)
        self.code.types.append(_POINTER_TYPES[element])
        offset = " + ".join(terms) or "0"
        return f"tl.load(L{index} + {offset}, mask={self.inside}, other=0)"

    def _collapse(self, op: ir.Operation, coords: list[str], depth: int) -> Term:
        source = op.operands[0]
        shape = _shape(source)
        inner: list[str] = []
        for group, coord in zip(linalg.reassociation(op), coords, strict=True):
            rest = coord
            parts = []
            for axis in reversed(group):
                parts.append(f"(({rest}) % {shape[axis]})" if axis != group[0] else f"({rest})")
                rest = f"(({rest}) // {shape[axis]})"
            inner.extend(reversed(parts))
        return self.tensor(source, inner, depth + 1)

    def _expand(self, op: ir.Operation, coords: list[str], depth: int) -> Term:
        shape = _shape(op.results[0])
        inner = []
        for group in linalg.reassociation(op):
            linear = coords[group[0]]
            for axis in group[1:]:
                linear = f"(({linear}) * {shape[axis]} + ({coords[axis]}))"
            inner.append(linear)
        return self.tensor(op.operands[0], inner, depth + 1)

    def _generic(self, op: ir.Operation, value: ir.Value, coords: list[str], depth: int) -> Term:
        maps = [ir.AffineMapAttr(m).value for m in op.attributes["indexing_maps"]]
        n_inputs = linalg.num_inputs(op)
        rank = len(coords)
        if len(op.results) != 1 or maps[-1] != ir.AffineMap.get_identity(rank):
            raise Untranslatable("a producer generic without an identity output")
        if any("parallel" not in str(k) for k in op.attributes["iterator_types"]):
            raise Untranslatable("a reduction among the mask's producers")
        block = op.regions[0].blocks[0]
        names: dict = {}
        for i in range(n_inputs):
            sub = []
            for expr in maps[i].results:
                if isinstance(expr, ir.AffineDimExpr):
                    sub.append(coords[expr.position])
                elif isinstance(expr, ir.AffineConstantExpr):
                    sub.append(str(expr.value))
                else:
                    raise Untranslatable("an indexing map that is not a projection")
            term = self.tensor(op.operands[i], sub, depth + 1)
            names[block.arguments[i]] = f"({term})" if isinstance(term, str) else term
        if list(block.arguments[n_inputs].uses):
            raise Untranslatable("a producer that reads its output")
        *body, terminator = block.operations
        for body_op in body:
            names[body_op.results[0]] = _payload(body_op.operation, names, coords)
        return names[terminator.operands[0]]


def _payload(op: ir.Operation, names: dict, coords: list[str]) -> Term:
    """One payload op as a Term, its operands looked up in ``names``."""

    def arg(i: int) -> Term:
        value = op.operands[i]
        if value in names:
            return names[value]
        constant = linalg.constant_value(value)
        if constant is None:
            raise Untranslatable("a payload reading a value from outside")
        return constant

    name = op.name
    if name == "arith.constant":
        return linalg.constant_value(op.results[0])
    if name == "linalg.index":
        return f"({coords[ir.IntegerAttr(op.attributes['dim']).value]})"
    if name in _BINARY:
        return _binary(arg(0), _BINARY[name], arg(1))
    if name in _UNARY:
        value = arg(0)
        if not isinstance(value, str):  # a constant: evaluate here
            return _UNARY_FOLD[name](value)
        return _UNARY[name].format(value)
    if name in ("arith.maximumf", "arith.maxsi", "arith.maxnumf"):
        return f"tl.maximum({_text(arg(0))}, {_text(arg(1))})"
    if name in ("arith.minimumf", "arith.minsi", "arith.minnumf"):
        return f"tl.minimum({_text(arg(0))}, {_text(arg(1))})"
    if name == "arith.select":
        c, a, b = arg(0), arg(1), arg(2)
        if not isinstance(c, str):
            return a if c else b
        return f"tl.where({c}, {_text(a)}, {_text(b)})"
    if name == "arith.cmpi":
        return _binary(arg(0), _CMPI[ir.IntegerAttr(op.attributes["predicate"]).value], arg(1))
    if name == "arith.cmpf":
        predicate = ir.IntegerAttr(op.attributes["predicate"]).value
        if predicate not in _CMPF:
            raise Untranslatable(f"cmpf predicate {predicate}")
        return _binary(arg(0), _CMPF[predicate], arg(1))
    if name in (
        "arith.extf",
        "arith.truncf",
        "arith.sitofp",
        "arith.uitofp",
        "arith.extsi",
        "arith.trunci",
        "arith.index_cast",
        "arith.fptosi",
    ):
        target = str(op.results[0].type)
        value = arg(0)
        if target == "index":
            return value
        if target not in _CASTS:
            raise Untranslatable(f"a cast to {target}")
        if not isinstance(value, str):  # a constant: cast here
            return _round(float(value), target) if target[0] in "fb" else int(value)
        return f"({value}).to({_CASTS[target]})"
    raise Untranslatable(f"{name} has no kernel translation")


def _binary(a: Term, symbol: str, b: Term) -> Term:
    if not isinstance(a, str) and not isinstance(b, str):
        return _FOLD[symbol](a, b)  # both constants: fold
    return f"({_text(a)} {symbol} {_text(b)})"


def mask_code(mask: ir.Value) -> MaskCode | str:
    """The mask (batch, n_q, n_k) as an expression of the kernel's ``batch``, ``rows``,
    ``keys``, ``inside``; or why it cannot be."""
    translator = _Translator("inside")
    try:
        expr = translator.tensor(mask, ["batch", "rows[:, None]", "keys[None, :]"])
    except Untranslatable as why:
        return str(why)
    if len(translator.code.inputs) > 4:
        return "more than 4 tensors feed the mask"
    translator.code.expr = _text(expr)
    return translator.code


def region_expression(block: ir.Block, argument: str) -> str:
    """A one-argument region (the attention's score region) as a Triton expression of
    ``argument``; ValueError naming what has no translation."""
    names: dict = {block.arguments[0]: argument}
    *body, terminator = block.operations
    try:
        for body_op in body:
            names[body_op.results[0]] = _payload(body_op.operation, names, [])
    except Untranslatable as why:
        raise ValueError(f"score region: {why}") from None
    yielded = terminator.operands[0]
    return _text(names[yielded] if yielded in names else linalg.constant_value(yielded))
