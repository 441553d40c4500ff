"""One expression IR for what a mask's producers or a score region compute.

An attention's additive mask is computed by fills, elementwise generics (iota compares,
selects of -inf, ALiBi's slope x distance, casts), reshapes and broadcasts of small
tensors; its score region by a one-argument block. ``of_tensor`` and ``of_region`` read
that Linalg once into a tree of ``Expr`` over the coordinates of the value (``Index``),
the region's argument (``Arg``), constants and reads of the tensors at the leaves
(``Load``). The operations keep their MLIR names and MLIR's semantics (``arith.cmpi ult``
is unsigned, ``arith.cmpf ult`` is unordered, ``arith.maximumf`` propagates NaN), and
constants are folded with those semantics in the value's own type (``evaluate``).
The causality proof reads the tree; each backend prints it (Triton, GLSL).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
from fusion_compiler.dialects import linalg

from fusion_compiler.ir import ir


@dataclass(frozen=True)
class Index:
    """The coordinate ``dim`` of the value the tree computes (an ``index``)."""

    dim: int
    type: str = "index"


@dataclass(frozen=True)
class Arg:
    """The region's argument (the score)."""

    type: str


@dataclass(frozen=True)
class Const:
    value: float | int | bool
    type: str


@dataclass(frozen=True)
class Load:
    """Element ``coords`` of the tensor ``inputs[slot]``, of static or dynamic ``shape``."""

    slot: int
    coords: tuple[Expr, ...]
    type: str
    shape: tuple[int, ...]  # -1: dynamic


@dataclass(frozen=True)
class Op:
    """An arith or math op on ``operands``; ``predicate`` for cmpi/cmpf (``"ult"``...)."""

    name: str
    operands: tuple[Expr, ...]
    type: str
    predicate: str | None = None


@dataclass(frozen=True)
class Outside:
    """A value defined outside the payload (a dynamic size): only while a fold may still
    drop it (torch's wrap of a negative index adds the size to an index that is never
    negative); a tree that keeps one cannot be followed."""

    type: str


Expr = Index | Arg | Const | Load | Op | Outside


class Unsupported(Exception):
    """What the tree cannot express: the reason, for a remark."""


@dataclass
class Tree:
    expr: Expr
    inputs: list[ir.Value] = field(default_factory=list)  # Load slots -> tensors


# cmpi/cmpf predicate attribute values -> names (MLIR's arith enums)
CMPI = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")
CMPF = (
    "false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord",
    "ueq", "ugt", "uge", "ult", "ule", "une", "uno", "true",
)  # fmt: skip
UNARY = ("arith.negf", "math.absf", "math.absi", "math.exp", "math.exp2", "math.log", "math.log2",
         "math.sqrt", "math.tanh", "math.floor", "math.ceil", "math.erf")  # fmt: skip
BINARY = (
    "arith.addf", "arith.subf", "arith.mulf", "arith.divf",
    "arith.addi", "arith.subi", "arith.muli",
    "arith.andi", "arith.ori", "arith.xori",
    "arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf",
    "arith.maxsi", "arith.minsi", "arith.maxui", "arith.minui",
)  # fmt: skip
CASTS = (
    "arith.extf", "arith.truncf", "arith.sitofp", "arith.uitofp", "arith.fptosi",
    "arith.fptoui", "arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast",
    "arith.index_castui",
)  # fmt: skip
# what a payload may hold; the coordinates of reshapes also divide and take remainders
# (``arith.divui``, ``arith.remui``) of indices, which are never negative
# ``math.fpowi``: a float to an integer power (GPT-2's GELU cubes its input)
OPS = frozenset((*UNARY, *BINARY, *CASTS, "arith.cmpi", "arith.cmpf", "arith.select", "math.fpowi"))


# Half the lowest finite value of each float type: a fill this low swamps any score it is
# added to in that type (the sum rounds to the fill), so PyTorch, adding in the mask's
# type, sees the fill alone. Rows of nothing but such fills get equal weights.
SWAMPS = {"f16": -32752.0, "bf16": -1.6947e38, "f32": -1.7014117e38}


def width(type_: str) -> int:
    """Bits of an integer type (``index`` is 64 bits, as on every target here)."""
    return 64 if type_ == "index" else int(type_[1:])


def is_float(type_: str) -> bool:
    return type_ in ("f16", "bf16", "f32", "f64")


# ---- building the tree from Linalg


def _element(value: ir.Value) -> str:
    return str(ir.ShapedType(value.type).element_type)


def _shape(value: ir.Value) -> tuple[int, ...]:
    shape = ir.ShapedType(value.type).shape
    return tuple(-1 if ir.ShapedType.is_dynamic_size(n) else n for n in shape)


class _Builder:
    def __init__(
        self,
        max_depth: int = 24,
        opaque: bool = False,
        within: Sequence[ir.Operation] | None = None,
    ):
        self.inputs: list[ir.Value] = []
        self.max_depth = max_depth
        self.opaque = opaque  # what cannot be followed becomes a Load, not an error
        self.within = within  # if given, only these producers are followed

    def tensor(self, value: ir.Value, coords: Sequence[Expr], depth: int = 0) -> Expr:
        if not self.opaque:
            return self.follow(value, coords, depth)
        try:
            return self.follow(value, coords, depth)
        except Unsupported:
            return self.load(value, coords)

    def follow(self, value: ir.Value, coords: Sequence[Expr], depth: int) -> Expr:
        if depth > self.max_depth:
            raise Unsupported("the mask's producers are too deep")
        constant = _splat(value)
        if constant is not None:
            return const(constant, _element(value))
        op = linalg.producer(value)
        if op is None or op.name == "arith.constant":
            return self.load(value, coords)
        if self.within is not None and not any(op == o for o in self.within):
            return self.load(value, coords)
        if op.name == "linalg.fill":
            scalar = linalg.constant_value(op.operands[0])
            if scalar is None:
                raise Unsupported("a fill with a value that is not a constant")
            return const(scalar, _element(value))
        if op.name == "tensor.collapse_shape":
            return self.tensor(op.operands[0], _collapsed(op, coords), depth + 1)
        if op.name == "tensor.expand_shape":
            return self.tensor(op.operands[0], _expanded(op, coords), depth + 1)
        if op.name == "tensor.extract_slice":
            return self.tensor(op.operands[0], _sliced(op, coords), depth + 1)
        if op.name == "linalg.generic":
            return self.generic(op, coords, depth)
        return self.load(value, coords)

    def load(self, value: ir.Value, coords: Sequence[Expr]) -> Load:
        if self.within is not None:  # an epilogue: one input per tensor, however often read
            slot = next((i for i, v in enumerate(self.inputs) if v == value), None)
            if slot is not None:
                return Load(slot, tuple(coords), _element(value), _shape(value))
        self.inputs.append(value)
        return Load(len(self.inputs) - 1, tuple(coords), _element(value), _shape(value))

    def generic(self, op: ir.Operation, coords: Sequence[Expr], depth: int) -> Expr:
        maps = linalg.indexing_maps(op)
        n_inputs = linalg.num_inputs(op)
        if len(op.results) != 1 or maps[-1] != ir.AffineMap.get_identity(
            len(coords), context=op.context
        ):
            raise Unsupported("a producer generic without an identity output")
        if linalg.reduction_dims(op):
            raise Unsupported("a reduction among the mask's producers")
        block = op.regions[0].blocks[0]
        if list(block.arguments[n_inputs].uses):
            raise Unsupported("a producer that reads its output")
        names: dict[ir.Value, Expr | Callable[[], Expr]] = {}
        for i in range(n_inputs):  # built where the payload reads them: no unused leaves

            def read(i: int = i) -> Expr:
                sub = [_map_result(e, coords) for e in maps[i].results]
                return self.tensor(op.operands[i], sub, depth + 1)

            names[block.arguments[i]] = read

        def extract(tensor: ir.Value, at: list[Expr]) -> Expr:
            return self.tensor(tensor, at, depth + 1)

        return _without_outside(_block(block, names, coords, extract=extract))


def _without_outside(tree: Expr) -> Expr:
    """``tree``, where no fold dropped a value read from outside the payload: Unsupported."""
    if any(isinstance(e, Outside) for e in walk(tree)):
        raise Unsupported("a payload reading a value from outside")
    return tree


def _splat(value: ir.Value) -> float | int | bool | None:
    """The scalar an arith.constant holds, a splat tensor's of any element type too
    (``torch.ones(n, n, dtype=torch.bool)`` is ``dense<true>``)."""
    constant = linalg.constant_value(value)
    op = linalg.producer(value)
    if constant is not None or op is None or op.name != "arith.constant":
        return constant
    attr = op.attributes["value"]
    if isinstance(attr, ir.DenseIntElementsAttr) and attr.is_splat:
        element = attr.get_splat_value()
        return element.value if isinstance(element, ir.BoolAttr) else ir.IntegerAttr(element).value
    return None


def _map_result(expr: ir.AffineExpr, coords: Sequence[Expr]) -> Expr:
    if isinstance(expr, ir.AffineDimExpr):
        return coords[expr.position]
    if isinstance(expr, ir.AffineConstantExpr):
        return Const(expr.value, "index")
    raise Unsupported("an indexing map that is not a projection")


def _collapsed(op: ir.Operation, coords: Sequence[Expr]) -> list[Expr]:
    """The source coordinates of a collapse_shape's result at ``coords``."""
    shape = _shape(op.operands[0])
    groups = linalg.reassociation(op)
    if not groups:  # to rank 0: every source dim is a unit dim
        return [Const(0, "index")] * len(shape)
    inner: list[Expr] = []
    for group, coord in zip(groups, coords, strict=True):
        wide = [axis for axis in group if shape[axis] != 1]  # a unit axis is at 0
        parts: dict[int, Expr] = {axis: Const(0, "index") for axis in group}
        rest = coord
        for axis in reversed(wide):
            if axis == wide[0]:
                parts[axis] = rest
                break
            if shape[axis] < 0:
                raise Unsupported("a dynamic size in a collapsed group of the mask's producers")
            size = Const(shape[axis], "index")
            parts[axis] = fold(Op("arith.remui", (rest, size), "index"))
            rest = fold(Op("arith.divui", (rest, size), "index"))
        inner.extend(parts[axis] for axis in group)
    return inner


def _sliced(op: ir.Operation, coords: Sequence[Expr]) -> list[Expr]:
    """The source coordinates of a static extract_slice's result at ``coords``
    (``bias[:, :, k - q : k, :k]``); a dim the slice drops is at its offset."""
    if len(op.operands) != 1:
        raise Unsupported("a slice of the mask's producers at dynamic offsets or sizes")
    offsets, sizes, strides = (
        list(ir.DenseI64ArrayAttr(op.attributes[name]))
        for name in ("static_offsets", "static_sizes", "static_strides")
    )
    result = _shape(op.results[0])
    kept = list(range(len(sizes)))  # the source dims the result's are, in order
    if len(result) != len(sizes):  # rank-reducing: the unit dims dropped
        kept = [dim for dim, size in enumerate(sizes) if size != 1]
        if [sizes[dim] for dim in kept] != result:
            raise Unsupported("a rank-reducing slice that keeps a unit dim")
    inner: list[Expr] = [Const(offset, "index") for offset in offsets]
    for dim, coord in zip(kept, coords, strict=True):
        scaled = fold(Op("arith.muli", (coord, Const(strides[dim], "index")), "index"))
        inner[dim] = fold(Op("arith.addi", (scaled, Const(offsets[dim], "index")), "index"))
    return inner


def _expanded(op: ir.Operation, coords: Sequence[Expr]) -> list[Expr]:
    """The source coordinates of an expand_shape's result at ``coords``."""
    shape = _shape(op.results[0])
    inner: list[Expr] = []
    for group in linalg.reassociation(op):
        wide = [axis for axis in group if shape[axis] != 1]
        linear: Expr = coords[wide[0]] if wide else Const(0, "index")
        for axis in wide[1:]:
            if shape[axis] < 0:
                raise Unsupported("a dynamic size in an expanded group of the mask's producers")
            scaled = fold(Op("arith.muli", (linear, Const(shape[axis], "index")), "index"))
            linear = fold(Op("arith.addi", (scaled, coords[axis]), "index"))
        inner.append(linear)
    return inner


def _block(
    block: ir.Block,
    names: dict[ir.Value, Expr | Callable[[], Expr]],
    coords: Sequence[Expr],
    leaf: Callable[[ir.Value], Expr] | None = None,
    fold_casts: bool = True,
    extract: Callable[[ir.Value, list[Expr]], Expr] | None = None,
) -> Expr:
    """The tree of the value ``block`` yields, its arguments in ``names`` (or how to
    build them). ``leaf``: how a value defined outside, or by an op that has no
    expression and does not read the argument, becomes a leaf (else Unsupported).
    ``extract(tensor, coords)``: what a ``tensor.extract`` of a tensor from outside at
    computed coordinates reads (transformers' mask functions index their inputs so)."""

    def operand(value: ir.Value) -> Expr:
        if value in names:
            tree = names[value]
            if callable(tree):
                tree = names[value] = tree()
            return tree
        constant = linalg.constant_value(value)
        if constant is not None:
            return const(constant, str(value.type))
        if leaf is None:
            return Outside(str(value.type))
        return leaf(value)

    *body, terminator = block.operations
    for body_op in body:
        body_op = body_op.operation
        name = body_op.name
        result_type = str(body_op.results[0].type) if len(body_op.results) == 1 else ""
        if name == "arith.constant":
            value = linalg.constant_value(body_op.results[0])
            if value is None:
                raise Unsupported("a constant that is not a scalar")
            tree: Expr = const(value, result_type)
        elif name == "linalg.index" and leaf is not None and not coords:
            tree = leaf(body_op.results[0])  # an iota: not followed here
        elif name == "linalg.index":
            tree = coords[ir.IntegerAttr(body_op.attributes["dim"]).value]
        elif name == "tensor.extract" and extract is not None:
            tensor, *indices = body_op.operands
            if tensor in names:
                raise Unsupported("tensor.extract of a block argument")
            tree = extract(tensor, [operand(i) for i in indices])
        elif name in OPS and result_type not in _NUMPY:
            raise Unsupported(f"{name} to {result_type}")
        elif name in OPS:
            predicate = None
            if name in ("arith.cmpi", "arith.cmpf"):
                table = CMPI if name == "arith.cmpi" else CMPF
                predicate = table[ir.IntegerAttr(body_op.attributes["predicate"]).value]
            operands = tuple(operand(v) for v in body_op.operands)
            tree = Op(name, operands, result_type, predicate)
            if fold_casts or name not in ("arith.extf", "arith.truncf"):
                tree = fold(tree)
        elif leaf is not None and len(body_op.results) == 1:
            if any(reads_argument(operand(v)) for v in body_op.operands):
                raise Unsupported(f"the score goes through {name}")
            tree = leaf(body_op.results[0])
        else:
            raise Unsupported(f"{name} has no expression")
        names[body_op.results[0]] = tree
    return operand(terminator.operands[0])


def reads_argument(tree: Expr) -> bool:
    if isinstance(tree, Arg):
        return True
    children = tree.operands if isinstance(tree, Op) else getattr(tree, "coords", ())
    return any(reads_argument(c) for c in children)


def of_tensor(value: ir.Value, max_depth: int = 24, opaque: bool = False) -> Tree:
    """What ``value`` holds at ``Index(0..rank-1)`` (a unit dim's index is 0), following
    its producers; tensors that are not computed elementwise become ``Load`` leaves.
    Unsupported names what cannot be followed, unless ``opaque``: then that tensor is
    a leaf too."""
    builder = _Builder(max_depth, opaque)
    coords = [Const(0, "index") if n == 1 else Index(d) for d, n in enumerate(_shape(value))]
    return _used(builder.tensor(value, coords), builder.inputs)


def of_chain(value: ir.Value, ops: Sequence[ir.Operation]) -> Tree:
    """What ``value`` holds at ``Index(0..rank-1)``, following only the producers in
    ``ops`` (elementwise ops and reshapes after a matrix product, its epilogue): every
    other tensor is a ``Load`` leaf. Unsupported names what cannot be followed."""
    builder = _Builder(within=ops)
    coords = [Const(0, "index") if n == 1 else Index(d) for d, n in enumerate(_shape(value))]
    return _used(builder.tensor(value, coords), builder.inputs)


def replace_input(tree: Tree, value: ir.Value, by: Expr) -> Tree:
    """``tree`` with every read of ``value`` replaced by ``by`` (the product an epilogue
    is computed from, which the kernel holds), the other leaves renumbered."""

    def replace(e: Expr) -> Expr:
        if isinstance(e, Load):
            if tree.inputs[e.slot] == value:
                return by
            return Load(e.slot, tuple(replace(c) for c in e.coords), e.type, e.shape)
        if isinstance(e, Op):
            return Op(e.name, tuple(replace(o) for o in e.operands), e.type, e.predicate)
        return e

    return _used(replace(tree.expr), tree.inputs)


def _used(tree: Expr, inputs: list[ir.Value]) -> Tree:
    """The tree with its Load slots renumbered to the tensors it still reads (folding a
    select of a constant condition drops a branch and its reads)."""
    slots = {leaf.slot: i for i, leaf in enumerate(leaves(tree))}

    def renumber(e: Expr) -> Expr:
        if isinstance(e, Load):
            return Load(slots[e.slot], tuple(renumber(c) for c in e.coords), e.type, e.shape)
        if isinstance(e, Op):
            return Op(e.name, tuple(renumber(o) for o in e.operands), e.type, e.predicate)
        return e

    return Tree(renumber(tree), [inputs[s] for s in sorted(slots)])


def _computed_scalar(value: ir.Value) -> float | int | bool | None:
    """The one element of a tensor of one element computed elementwise from constants
    alone (``torch.sqrt(torch.tensor(d))`` as a divisor), else None."""
    if any(n != 1 for n in _shape(value)) or linalg.producer(value) is None:
        return None
    try:
        tree = of_tensor(value, max_depth=8)
        if tree.inputs:
            return None
        return evaluate(tree.expr).item()
    except Unsupported:
        return None


def of_payload(op: ir.Operation, argument: int, fold_casts: bool = True) -> Tree:
    """What one elementwise generic yields as a function of its input ``argument``
    (``Arg``): its other inputs, values from outside and ops without an expression that
    do not read the argument are scalar ``Load`` leaves, not followed. ``fold_casts``
    False: float casts of constants are kept (not rounded)."""
    block = op.regions[0].blocks[0]
    n_inputs = linalg.num_inputs(op)
    inputs: list[ir.Value] = []

    def leaf(value: ir.Value) -> Expr:
        inputs.append(value)
        return Load(len(inputs) - 1, (), str(value.type), ())

    def output() -> Expr:
        raise Unsupported("the payload reads its output")

    names: dict[ir.Value, Expr | Callable[[], Expr]] = {}
    for i, arg in enumerate(block.arguments):
        if i == argument:
            names[arg] = Arg(str(arg.type))
        elif i < n_inputs:
            constant = _splat(op.operands[i])
            if constant is None:
                constant = _computed_scalar(op.operands[i])
            names[arg] = const(constant, str(arg.type)) if constant is not None else leaf(arg)
        else:
            names[arg] = output
    return _used(_block(block, names, [], leaf, fold_casts), inputs)


def of_region(block: ir.Block) -> Expr:
    """The value a one-argument region yields, as a tree of ``Arg``."""
    argument = block.arguments[0]
    return _without_outside(_block(block, {argument: Arg(str(argument.type))}, []))


# ---- exact evaluation (constant folding, and a reference for tests)

_NUMPY = {
    "f16": np.float16,
    "f32": np.float32,
    "f64": np.float64,
    "bf16": np.float32,  # rounded to bf16 after every op
    "i1": np.bool_,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
    "index": np.int64,
}
_UNSIGNED = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def _bf16_of_wide(x: np.ndarray) -> np.ndarray:
    """An integer or float64 rounded once to bfloat16 (nearest even), kept in float32."""
    v = np.asarray(x, np.float64)  # exact for the integers that fit 53 bits
    mantissa, exponent = np.frexp(v)  # v = m · 2^e, 0.5 <= |m| < 1: 8 significant bits
    rounded = np.ldexp(np.round(mantissa * 256.0) / 256.0, exponent)  # np.round: half even
    big = np.abs(rounded) >= 2.0**128  # past bf16's largest finite value: inf
    rounded = np.where(big, np.copysign(np.inf, v), rounded)
    return np.where(np.isfinite(v), rounded, v).astype(np.float32)


def _bf16(x: np.ndarray) -> np.ndarray:
    """float32 rounded to bfloat16 (nearest even), kept in float32; NaN stays NaN."""
    x = np.asarray(x, np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return np.where(np.isnan(x), x, rounded.view(np.float32))


def as_type(x: np.ndarray, type_: str) -> np.ndarray:
    """``x`` converted to ``type_`` as MLIR's casts round and wrap it."""
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        if type_ == "i1":
            return x if x.dtype == np.bool_ else (x.astype(np.int64) & 1) != 0
        if type_ == "bf16" and x.dtype in (np.float32, np.float16, np.bool_):
            return _bf16(x.astype(np.float32))  # exact in float32: one rounding
        if type_ == "bf16":  # integers and f64: rounded once, from the exact value
            return _bf16_of_wide(x)
        if is_float(type_):
            return x.astype(_NUMPY[type_])
        return x.astype(np.int64).astype(_NUMPY[type_])  # wraps


def const(value: float | int | bool, type_: str) -> Const:
    """A constant in the form ``fold`` gives it: i1 as a bool, floats as floats."""
    if type_ not in _NUMPY:
        raise Unsupported(f"a value of type {type_}")
    if type_ == "i1":
        return Const(bool(int(value) & 1), type_)
    return Const(float(value) if is_float(type_) else int(value), type_)


def _unsigned(x: np.ndarray, type_: str) -> np.ndarray:
    if type_ == "i1":
        return np.asarray(x).astype(np.uint8)
    return np.asarray(x).astype(_NUMPY[type_]).view(_UNSIGNED[width(type_)])


def _compare(predicate: str, a: np.ndarray, b: np.ndarray, type_: str) -> np.ndarray:
    if not is_float(type_):  # cmpi (its "ult" is unsigned; cmpf's is unordered)
        if predicate[0] == "u":
            a, b = _unsigned(a, type_), _unsigned(b, type_)
        elif type_ == "i1":  # signed i1: true is -1
            a, b = -np.asarray(a, np.int8), -np.asarray(b, np.int8)
        relation = predicate[-2:] if predicate not in ("eq", "ne") else predicate
        return _RELATIONS[relation](a, b)
    unordered = np.isnan(a) | np.isnan(b)
    if predicate in ("false", "true"):
        return np.full(np.broadcast(a, b).shape, predicate == "true")
    if predicate == "ord":
        return ~unordered
    if predicate == "uno":
        return unordered
    relation = _RELATIONS[{"one": "ne", "une": "ne"}.get(predicate, predicate[1:])]
    with np.errstate(invalid="ignore"):
        holds = relation(a, b) & ~unordered
    return holds | unordered if predicate[0] == "u" else holds


_RELATIONS: dict[str, Callable] = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


def _max_min(name: str, a: np.ndarray, b: np.ndarray, type_: str) -> np.ndarray:
    larger = "max" in name
    if name.endswith("f"):  # maximumf/minimumf: NaN wins; maxnumf/minnumf: NaN loses
        pick = np.fmax if larger else np.fmin
        if "num" in name:
            return pick(a, b)
        # maximumf and minimumf order -0 below +0
        zeros = (a == 0) & (b == 0)
        signed = np.where(np.signbit(a) == larger, b, a)
        picked = np.where(zeros, signed, pick(a, b))
        return np.where(np.isnan(a) | np.isnan(b), a + b, picked)
    if type_ == "i1" and name.endswith("si"):  # signed i1: true is -1
        return (a & b) if larger else (a | b)
    if name.endswith("ui"):
        ua, ub = _unsigned(a, type_), _unsigned(b, type_)
        return np.where((ua >= ub) == larger, a, b)
    return np.maximum(a, b) if larger else np.minimum(a, b)


def _apply(op: Op, args: list[np.ndarray]) -> np.ndarray:
    name, out = op.name, op.type
    operand_type = op.operands[0].type
    if name == "arith.select":
        return np.where(args[0], args[1], args[2])
    if name in ("arith.cmpi", "arith.cmpf"):
        return _compare(op.predicate or "", args[0], args[1], operand_type)
    if name in CASTS:
        x = args[0]
        if name in ("arith.uitofp", "arith.extui", "arith.index_castui"):
            x = _unsigned(x, operand_type)
        elif name in ("arith.sitofp", "arith.extsi", "arith.index_cast") and operand_type == "i1":
            x = -np.asarray(x, np.int64)
        elif name in ("arith.fptosi", "arith.fptoui"):
            x = np.trunc(x)  # out of range is poison in MLIR: any value will do
            x = np.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0)
        return as_type(x, out)
    a = args[0]
    with np.errstate(all="ignore"):
        if name in UNARY:
            unary = {
                "arith.negf": np.negative,
                "math.absf": np.abs,
                "math.absi": np.abs,  # wraps at the lowest integer, as MLIR's
                "math.exp": np.exp,
                "math.exp2": np.exp2,
                "math.log": np.log,
                "math.log2": np.log2,
                "math.sqrt": np.sqrt,
                "math.tanh": np.tanh,
                "math.floor": np.floor,  # integer floor division, as torch-mlir writes it
                "math.ceil": np.ceil,
                "math.erf": np.vectorize(math.erf, otypes=[np.float64]),
            }[name]
            return as_type(unary(a), out)
        b = args[1]
        if name == "math.fpowi":
            return as_type(np.power(np.asarray(a, np.float64), b), out)
        if "max" in name or "min" in name:
            return _max_min(name.split(".")[1], a, b, out)
        if name in ("arith.divui", "arith.remui"):
            ua, ub = _unsigned(a, out), _unsigned(b, out)
            safe = np.where(ub == 0, 1, ub)  # division by zero is undefined: 0 here
            value = ua // safe if name == "arith.divui" else ua % safe
            return as_type(np.where(ub == 0, 0, value).astype(np.uint64).view(np.int64), out)
        binary = {
            "add": np.add,
            "sub": np.subtract,
            "mul": np.multiply,
            "div": np.divide,
            "and": np.bitwise_and,
            "or": np.bitwise_or,
            "xor": np.bitwise_xor,
        }[name.split(".")[1][:-1]]
        if out == "i1" and binary in (np.add, np.subtract):
            binary = np.bitwise_xor  # i1 arithmetic wraps
        elif out == "i1" and binary is np.multiply:
            binary = np.bitwise_and
        return as_type(binary(a, b), out)


def evaluate(
    expr: Expr,
    index: Callable[[int], np.ndarray] | None = None,
    load: Callable[[Load, list[np.ndarray]], np.ndarray] | None = None,
    arg: np.ndarray | None = None,
) -> np.ndarray:
    """The value of ``expr`` with MLIR's semantics, in numpy (bf16 held in float32):
    ``index(dim)`` gives the coordinates, ``load(leaf, coords)`` the leaves' elements."""
    if isinstance(expr, Const):
        return as_type(np.asarray(expr.value), expr.type)
    if isinstance(expr, Index):
        if index is None:
            raise Unsupported("an index without coordinates")
        return np.asarray(index(expr.dim), np.int64)
    if isinstance(expr, Arg):
        if arg is None:
            raise Unsupported("the argument without a value")
        return as_type(arg, expr.type)
    if isinstance(expr, Load):
        if load is None:
            raise Unsupported("a tensor read without its tensors")
        coords = [evaluate(c, index, load, arg) for c in expr.coords]
        return as_type(load(expr, coords), expr.type)
    args = [evaluate(o, index, load, arg) for o in expr.operands]
    return _apply(expr, args)


def fold(op: Op) -> Expr:
    """``op`` as a ``Const`` where its operands are all constants, and the identities
    of index arithmetic on the coordinates (x·1, x+0, x/1, x%1) and of boolean selects
    (select(c, true, false) is c); else ``op``."""
    if all(isinstance(o, Const) for o in op.operands):
        return const(evaluate(op).item(), op.type)
    if op.name == "arith.select" and isinstance(op.operands[0], Const):
        return op.operands[1] if op.operands[0].value else op.operands[2]
    if op.name == "arith.cmpi" and _sign_test(op) is not None:
        return Const(_sign_test(op), "i1")
    if op.name == "arith.select" and _wrapped_index(op) is not None:
        return _wrapped_index(op)
    if op.name == "arith.select" and op.type == "i1":  # select(c, true, false) is c
        true, false = Const(True, "i1"), Const(False, "i1")
        if op.operands[1:] == (true, false):
            return op.operands[0]
        if op.operands[1:] == (false, true):
            return Op("arith.xori", (op.operands[0], true), "i1")
    if op.type == "index" and len(op.operands) == 2:
        a, b = op.operands
        one, zero = Const(1, "index"), Const(0, "index")
        if op.name in ("arith.muli", "arith.divui") and b == one:
            return a
        if op.name == "arith.muli" and a == one:
            return b
        if op.name == "arith.addi" and zero in (a, b):
            return b if a == zero else a
        if op.name == "arith.remui" and b == one:
            return zero
    return op


# ops whose result is never negative where their operands are not (index arithmetic:
# sizes are far from overflowing)
_KEEPS_SIGN = ("arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui",
               "arith.addi", "arith.muli", "arith.divui", "arith.remui", "arith.maxsi",
               "arith.minsi")  # fmt: skip


def never_negative(e: Expr) -> bool:
    """``e`` is an integer sum or product of coordinates and non-negative constants."""
    if isinstance(e, Index):
        return True
    if isinstance(e, Const):
        return not is_float(e.type) and e.value >= 0
    wide = e.type in ("index", "i64")  # sums of indices never wrap in 64 bits
    return (
        isinstance(e, Op)
        and e.name in _KEEPS_SIGN
        and wide  # no wrap: an index cast to i8 is negative from 128
        and all(map(never_negative, e.operands))
    )


def _sign_test(op: Op) -> bool | None:
    """The value of ``x >= 0`` (true) or ``x < 0`` (false) where x is never negative, as
    transformers' bidirectional mask writes "every key" (``q_idx >= 0``)."""
    x, zero = op.operands
    if zero != Const(0, zero.type) or not never_negative(x):
        return None
    return {"sge": True, "slt": False}.get(op.predicate or "")


def _wrapped_index(op: Op) -> Expr | None:
    """x for ``select(x < 0, x + n, x)`` (and ``select(x >= 0, x, ...)``) where x is
    never negative: how torch indexes with an index tensor (a negative index counts from
    the end), which transformers' masks do with aranges."""
    cond, true, false = op.operands
    if not (
        isinstance(cond, Op)
        and cond.name == "arith.cmpi"
        and cond.operands[1] == Const(0, cond.operands[1].type)
    ):
        return None
    x = cond.operands[0]
    if cond.predicate == "slt" and false == x and never_negative(x):
        return x
    if cond.predicate == "sge" and true == x and never_negative(x):
        return x
    return None


def walk(expr: Expr) -> Iterator[Expr]:
    """Every node of ``expr``, parents before their operands (a Load's coordinates too)."""
    yield expr
    if isinstance(expr, Load):
        for c in expr.coords:
            yield from walk(c)
    elif isinstance(expr, Op):
        for o in expr.operands:
            yield from walk(o)


def reads_coordinate(expr: Expr, dim: int) -> bool:
    """Whether ``expr`` reads coordinate ``dim`` (a mask that reads dim 1 varies by row)."""
    return any(isinstance(e, Index) and e.dim == dim for e in walk(expr))


def leaves(expr: Expr) -> list[Load]:
    """The tensor reads in ``expr``, each once, in slot order."""
    found: dict[int, Load] = {}
    for e in walk(expr):
        if isinstance(e, Load):
            found.setdefault(e.slot, e)
    return [found[s] for s in sorted(found)]


# ---- bounds (which integers a kernel may hold them in)

Interval = tuple[float, float]  # the lowest and highest value; integers exact, as ints
_FLOAT_OPS = {"arith.addf": "add", "arith.subf": "sub", "arith.mulf": "mul", "arith.divf": "div"}
_INT_OPS = {"arith.addi": "add", "arith.subi": "sub", "arith.muli": "mul"}
_SIGNED_CASTS = ("arith.index_cast", "arith.extsi", "arith.trunci")
_UNSIGNED_CASTS = ("arith.index_castui", "arith.extui")


def type_range(type_: str) -> Interval:
    """The values of an integer type, held signed (i1 as 0 and 1)."""
    if type_ == "i1":
        return (0, 1)
    bits = width(type_)
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def _hull(*pairs: Interval) -> Interval:
    return (min(p[0] for p in pairs), max(p[1] for p in pairs))


def arith(kind: str, a: Interval, b: Interval) -> Interval:
    """Exact interval arithmetic; ``div`` of an interval holding 0 is unbounded."""
    if kind == "add":
        return (a[0] + b[0], a[1] + b[1])
    if kind == "sub":
        return (a[0] - b[1], a[1] - b[0])
    if kind == "div" and b[0] <= 0 <= b[1]:
        return (-np.inf, np.inf)
    corners = [x * y if kind == "mul" else x / y for x in a for y in b]
    if any(c != c for c in corners):  # inf · 0
        return (-np.inf, np.inf)
    return (min(corners), max(corners))


def _wrapped(found: Interval, type_: str) -> Interval:
    """``found`` where the type holds it all, else the type's range (the op may wrap)."""
    low, high = type_range(type_)
    return found if low <= found[0] and found[1] <= high else (low, high)


def _float_bounds(e: Op, args: list[Interval]) -> Interval:
    """Bounds of a float op, widened by a relative 2^-20 for its rounding."""
    name = e.name
    if name in _FLOAT_OPS:
        found = arith(_FLOAT_OPS[name], *args)
    elif name in ("arith.sitofp", "arith.uitofp", "arith.extf", "arith.truncf", "arith.select"):
        found = _hull(*args[-2:]) if name == "arith.select" else args[0]
        if name == "arith.uitofp" and found[0] < 0:
            found = (0, 2 ** width(e.operands[0].type))
    elif name in ("math.floor", "math.ceil"):
        found = (np.floor(args[0][0]), np.ceil(args[0][1]))
    elif name == "arith.negf":
        found = (-args[0][1], -args[0][0])
    elif "max" in name or "min" in name:  # NaN aside, one of the operands or between them
        found = _hull(*args)
    else:
        return (-np.inf, np.inf)
    return (found[0] - abs(found[0]) * 2**-20, found[1] + abs(found[1]) * 2**-20)


def _integer_bounds(e: Op, args: list[Interval]) -> Interval:
    """Bounds of an integer op with MLIR's semantics: where it may wrap, its type's range."""
    name, type_ = e.name, e.type
    full = type_range(type_)
    if name in ("arith.cmpi", "arith.cmpf"):
        return (0, 1)
    if name == "arith.select":
        return _hull(*args[1:])
    if name in _INT_OPS:
        return _wrapped(arith(_INT_OPS[name], *args), type_)
    if name in ("arith.maxsi", "arith.minsi", "arith.maxui", "arith.minui"):
        return _hull(*args)  # one of the operands
    if name == "math.absi":  # a distance (ModernBERT's local window: |row - key|)
        low, high = args[0]
        found = (max(low, -high, 0), max(-low, high))
        return _wrapped(found, type_)
    if name in ("arith.divui", "arith.remui"):
        (a_low, a_high), (b_low, b_high) = args
        if a_low < 0 or b_low <= 0:
            return full  # read unsigned: a negative operand is huge
        if name == "arith.divui":
            return (a_low // b_high, a_high // b_low)
        return (0, min(a_high, b_high - 1))
    source = e.operands[0].type if e.operands else type_
    if name in _SIGNED_CASTS or name == "arith.fptosi":
        found = args[0]
        if source == "i1" and name != "arith.trunci":
            found = (-found[1], -found[0])  # true is -1
        if name == "arith.fptosi":  # out of range is poison: any value
            found = (np.trunc(found[0]), np.trunc(found[1]))
            if not all(map(np.isfinite, found)):
                return full
            found = (int(found[0]), int(found[1]))
        return _wrapped(found, type_)
    if name in _UNSIGNED_CASTS:
        found = args[0]
        if found[0] < 0:  # its bits read unsigned
            found = (0, (1 << width(source)) - 1)
        return _wrapped(found, type_)
    if name in ("arith.andi", "arith.ori", "arith.xori") and min(a[0] for a in args) >= 0:
        high = min(a[1] for a in args) if name == "arith.andi" else max(a[1] for a in args)
        return (0, high if name == "arith.andi" else (1 << int(high).bit_length()) - 1)
    return full


def bounds(
    tree: Expr,
    index: Callable[[int], Interval],
    load: Callable[[Load], Interval],
) -> dict[Expr, Interval]:
    """The values each node of ``tree`` may take, from the coordinates' (``index(dim)``)
    and the tensors' (``load(leaf)``) bounds, with MLIR's semantics: an integer op that
    may wrap spans its type's range; a float op without a finite bound is unbounded (a
    cast of it to an integer then spans that type). ``load`` raises Unsupported for a
    tensor it cannot bound."""
    found: dict[Expr, Interval] = {}

    def visit(e: Expr) -> Interval:
        if e in found:
            return found[e]
        if isinstance(e, Const):
            value = e.value
            result = (value, value) if value == value else (-np.inf, np.inf)  # NaN
        elif isinstance(e, Index):
            result = index(e.dim)
        elif isinstance(e, Load):
            for c in e.coords:
                visit(c)
            result = load(e)
        elif isinstance(e, Op):
            args = [visit(o) for o in e.operands]
            result = _float_bounds(e, args) if is_float(e.type) else _integer_bounds(e, args)
        else:
            raise Unsupported(f"{type(e).__name__.lower()} {e} has no bounds")
        found[e] = result
        return result

    visit(tree)
    return found
