"""Read-only views of Linalg ops: payloads, iterators, indexing maps, producers."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import numpy as np

from fusion_compiler.ir import ir

_RESHAPES = ("tensor.expand_shape", "tensor.collapse_shape")

# The bytes of ``dense_resource`` constants, which the bindings cannot read back (what
# the front end imported them from, or the blobs at the end of MLIR text), by the
# resource's name (its element type may change from ui8 to i8 on the way to Linalg), per
# context while a compile runs in it (``resources``). The context is held so that its id
# stays its own.
_RESOURCES: dict[int, tuple[ir.Context, dict[str, np.ndarray]]] = {}
_RESOURCES_LOCK = threading.Lock()


@contextlib.contextmanager
def resources(context: ir.Context, data: dict[str, np.ndarray]) -> Iterator[None]:
    """Makes ``data`` (a resource's name -> its bytes) what
    ``constant_array`` reads for the dense_resource constants of ``context``."""
    with _RESOURCES_LOCK:
        _RESOURCES[id(context)] = (context, data)
    try:
        yield
    finally:
        with _RESOURCES_LOCK:
            _RESOURCES.pop(id(context), None)


def producer(value: ir.Value) -> ir.Operation | None:
    """The op defining ``value``, or None for a block argument."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return owner.operation


def constant_value(value: ir.Value) -> float | int | bool | None:
    """The scalar an arith.constant defines (a splat tensor's element too), else None."""
    op = producer(value)
    if op is None or op.name != "arith.constant":
        return None
    attr = op.attributes["value"]
    if isinstance(attr, ir.BoolAttr):
        return attr.value
    if isinstance(attr, (ir.FloatAttr, ir.IntegerAttr)):
        return attr.value
    if isinstance(attr, ir.DenseFPElementsAttr) and attr.is_splat:
        return ir.FloatAttr(attr.get_splat_value()).value
    return None


# element types -> how their bytes read in numpy (i1 resources hold a byte per element)
_NUMPY = {
    "i1": np.bool_, "i8": np.int8, "ui8": np.uint8, "i16": np.int16, "i32": np.int32,
    "i64": np.int64, "f16": np.float16, "f32": np.float32, "f64": np.float64,
}  # fmt: skip


def resource_name(attr: ir.Attribute) -> str:
    """The blob name of a ``dense_resource<name> : type`` attribute."""
    return str(attr).partition(" : ")[0].removeprefix("dense_resource<").removesuffix(">")


def resource_bytes(op: ir.Operation) -> np.ndarray | None:
    """The bytes (uint8) of the dense_resource an arith.constant holds, where
    ``resources`` has them; else None."""
    attr = op.attributes["value"]
    # the bindings give a dense_resource no class of its own (and printing a large dense
    # attribute costs its size)
    if type(attr) is not ir.Attribute or not str(attr).startswith("dense_resource<"):
        return None
    with _RESOURCES_LOCK:
        entry = _RESOURCES.get(id(op.context))
    return entry[1].get(resource_name(attr)) if entry is not None else None


def constant_array(value: ir.Value) -> np.ndarray | None:
    """The elements of the tensor an arith.constant defines, in the tensor's shape: a
    dense attribute's, or a dense_resource's that ``resources`` holds; else None."""
    op = producer(value)
    if op is None or op.name != "arith.constant":
        return None
    attr = op.attributes["value"]
    shape = tuple(ir.RankedTensorType(value.type).shape)
    if type(attr) is ir.Attribute and str(attr).startswith("dense_resource<"):
        data = resource_bytes(op)
        dtype = _NUMPY.get(str(ir.RankedTensorType(value.type).element_type))
        if data is None or dtype is None or data.size % np.dtype(dtype).itemsize:
            return None
        array = data != 0 if dtype is np.bool_ else data.view(dtype)  # i1: a byte each
    elif isinstance(attr, ir.DenseElementsAttr) and not attr.is_splat:
        try:
            array = np.array(attr)
        except (TypeError, ValueError, RuntimeError):  # i1 and other packed types
            return None
    else:
        return None
    if array is None or array.size != int(np.prod(shape, dtype=np.int64)):
        return None
    return array.reshape(shape)


def producer_and_reshapes(value: ir.Value) -> tuple[ir.Operation | None, list[ir.Operation]]:
    """The first producer of ``value`` that is not an expand/collapse, and those skipped."""
    op, skipped = producer(value), []
    while op is not None and op.name in _RESHAPES:
        skipped.append(op)
        op = producer(op.operands[0])
    return op, skipped


def entry_input(value: ir.Value) -> int | None:
    """Which input of its function ``value`` is, reshaped or not: the argument's index
    among the tensors (in an entry point's body, among the buffer views that
    ``hal.tensor.import`` imports). None for a tensor the function computes."""
    op, skipped = producer_and_reshapes(value)
    if op is None:
        argument = skipped[-1].operands[0] if skipped else value
    elif op.name == "hal.tensor.import" and _is_argument(op.operands[0]):
        argument = op.operands[0]
    else:
        return None
    if not _is_argument(argument):
        return None
    inputs = [
        a for a in argument.owner.arguments
        if str(a.type) == "!hal.buffer_view" or isinstance(a.type, ir.RankedTensorType)
    ]  # fmt: skip
    return next((i for i, a in enumerate(inputs) if a == argument), None)


def reassociation(op: ir.Operation) -> list[list[int]]:
    """The dim groups of a ``tensor.collapse_shape`` / ``tensor.expand_shape``."""
    return [[ir.IntegerAttr(i).value for i in g] for g in op.attributes["reassociation"]]


def plain_slice(op: ir.Operation | None) -> tuple[list[int], list[int]] | None:
    """(offsets, sizes) of a ``tensor.extract_slice`` with static offsets and sizes, unit
    strides, that keeps its source's rank; None for any other op."""
    if op is None or op.name != "tensor.extract_slice" or len(op.operands) != 1:
        return None  # (dynamic offsets, sizes or strides are operands)
    offsets, sizes, strides = (
        list(ir.DenseI64ArrayAttr(op.attributes[f"static_{name}"]))
        for name in ("offsets", "sizes", "strides")
    )
    rank = ir.RankedTensorType(op.operands[0].type).rank
    if set(strides) - {1} or ir.RankedTensorType(op.results[0].type).rank != rank:
        return None
    return offsets, sizes


def _slice_operands(op: ir.Operation) -> tuple[list, list, list]:
    """(offsets, sizes, strides) of a ``tensor.extract_slice``: each an int, or the index
    value given for it."""
    dynamic = iter(list(op.operands)[1:])
    found = []
    for name in ("offsets", "sizes", "strides"):
        static = list(ir.DenseI64ArrayAttr(op.attributes[f"static_{name}"]))
        found.append([next(dynamic) if ir.ShapedType.is_dynamic_size(n) else n for n in static])
    return found[0], found[1], found[2]


def drops_last_column(op: ir.Operation | None) -> bool:
    """Whether ``op`` is a ``tensor.extract_slice`` keeping all of its source but the
    last entry of the last dim, its sizes static or computed (as torch's slice ``[..., :-1]``
    computes them for a dynamic length: proven from the sizes they are computed from)."""
    if op is None or op.name != "tensor.extract_slice":
        return False
    source = op.operands[0]
    rank = ir.RankedTensorType(source.type).rank
    if ir.RankedTensorType(op.results[0].type).rank != rank:
        return False
    offsets, sizes, strides = _slice_operands(op)
    memo: dict = {}
    whole = [dim_form(source, d, memo) for d in range(rank)]
    if whole[-1] is None or (set(whole[-1]) == {1} and whole[-1][1] <= 1):
        return False  # nothing would be left
    wanted = [*whole[:-1], _plus(whole[-1], {1: -1})]
    return (
        all(size_form(s, memo) == {1: 1} for s in strides)
        and all(size_form(o, memo) == {1: 0} for o in offsets)
        and all(
            f is not None and size_form(s, memo) == f for s, f in zip(sizes, wanted, strict=True)
        )
    )


# An index value as an affine form over the sizes it is computed from: root -> its
# coefficient (roots as ``dim_root`` names them: sizes, never negative), 1 -> the
# constant; None where it is not affine in them, or a min, max or select in it cannot be
# decided from the roots being sizes.
Form = dict


def size_form(value: ir.Value | int, memo: dict, depth: int = 0) -> Form | None:
    """``value`` as a ``Form`` (``memo``: the forms found so far, by value)."""
    if isinstance(value, int):
        return {1: value}
    if value not in memo:
        memo[value] = _form_of(value, memo, depth) if depth <= 32 else None
    return memo[value]


def _form_of(value: ir.Value, memo: dict, depth: int) -> Form | None:
    constant = constant_value(value)
    if isinstance(constant, int) and not isinstance(constant, bool):
        return {1: constant}
    op = producer(value)
    if op is None:
        return None
    name, args = op.name, list(op.operands)
    if name == "tensor.dim":
        dim = constant_value(args[1])
        return dim_form(args[0], dim, memo, depth + 1) if isinstance(dim, int) else None
    if name in ("arith.index_cast", "arith.extsi"):  # signed: the value kept (no overflow)
        return size_form(args[0], memo, depth + 1)
    if name == "affine.apply":
        return _affine_form(ir.AffineMapAttr(op.attributes["map"]).value, args, memo, depth)
    if name in ("util.assume.int", "hal.buffer_view.dim"):  # a size: as dim_root names it
        return {_size_root(value, depth): 1, 1: 0}
    if name == "arith.select":
        taken = _decided(producer(args[0]), memo, depth)
        return None if taken is None else size_form(args[1 if taken else 2], memo, depth + 1)
    forms = [size_form(a, memo, depth + 1) for a in args]
    if name in ("arith.addi", "arith.subi"):
        a, b = forms
        return None if a is None or b is None else _plus(a, b, -1 if name == "arith.subi" else 1)
    if name == "arith.muli":
        return product_form(*forms)
    if name in ("arith.minsi", "arith.maxsi"):
        order = _ordered(*forms)
        if order is None:
            return None
        return forms[0] if (order <= 0) == (name == "arith.minsi") else forms[1]
    return None


def dim_form(value: ir.Value, dim: int, memo: dict, depth: int = 0) -> Form | None:
    """Dim ``dim`` of ``value`` as a ``Form``."""
    size = ir.RankedTensorType(value.type).shape[dim]
    if not ir.ShapedType.is_dynamic_size(size):
        return {1: size}
    root = dim_root(value, dim)
    if isinstance(root, ir.Value):  # an index value the size was computed as
        return size_form(root, memo, depth + 1)
    return {root: 1, 1: 0}


def _plus(a: Form, b: Form, scale: int = 1) -> Form:
    total = {1: 0, **a}
    for key, n in b.items():
        total[key] = total.get(key, 0) + scale * n
    return {key: n for key, n in total.items() if n or key == 1}


def product_form(a: Form | None, b: Form | None) -> Form | None:
    """``a`` times ``b`` where one is a constant (None: unknown, or not affine)."""
    if a is None or b is None:
        return None
    if set(a) == {1}:
        a, b = b, a
    if set(b) != {1}:
        return None  # a product of two sizes: not affine
    return {key: n * b[1] for key, n in a.items() if n * b[1] or key == 1}


def _at_least(form: Form, bound: int) -> bool:
    """Whether ``form`` >= ``bound`` for all sizes (its roots, each >= 0)."""
    return form[1] >= bound and all(n >= 0 for key, n in form.items() if key != 1)


def _at_most(form: Form, bound: int) -> bool:
    return form[1] <= bound and all(n <= 0 for key, n in form.items() if key != 1)


def _ordered(a: Form | None, b: Form | None) -> int | None:
    """-1 where a <= b for all sizes, 1 where a >= b (0 where equal); else None."""
    if a is None or b is None:
        return None
    difference = _plus(a, b, -1)
    if set(difference) == {1} and difference[1] == 0:
        return 0
    if _at_most(difference, 0):
        return -1
    return 1 if _at_least(difference, 0) else None


def _decided(compare: ir.Operation | None, memo: dict, depth: int) -> bool | None:
    """The value of an ``arith.cmpi`` (signed or equality) where the forms of its two
    sides decide it for all sizes."""
    if compare is None or compare.name != "arith.cmpi":
        return None
    a, b = (size_form(v, memo, depth + 1) for v in compare.operands)
    if a is None or b is None:
        return None
    d = _plus(a, b, -1)  # a - b
    # arith.cmpi's predicates: eq, ne, slt, sle, sgt, sge (0-5); the unsigned ones (6-9)
    # are left undecided
    below = True if _at_most(d, -1) else (False if _at_least(d, 0) else None)  # a < b
    above = True if _at_least(d, 1) else (False if _at_most(d, 0) else None)  # a > b
    predicate = ir.IntegerAttr(compare.attributes["predicate"]).value
    if predicate in (0, 1):
        equal = _ordered(a, b) == 0 or (False if below or above else None)
        return None if equal is None else equal == (predicate == 0)
    decided = {2: below, 3: None if above is None else not above, 4: above}
    decided[5] = None if below is None else not below
    return decided.get(predicate)


def _affine_form(map_: ir.AffineMap, args: list[ir.Value], memo: dict, depth: int) -> Form | None:
    if len(map_.results) != 1:
        return None

    def walk(expr: ir.AffineExpr) -> Form | None:
        if isinstance(expr, ir.AffineConstantExpr):
            return {1: expr.value}
        if isinstance(expr, ir.AffineDimExpr):
            return size_form(args[expr.position], memo, depth + 1)
        if isinstance(expr, ir.AffineSymbolExpr):
            return size_form(args[map_.n_dims + expr.position], memo, depth + 1)
        if isinstance(expr, ir.AffineAddExpr):
            a, b = walk(expr.lhs), walk(expr.rhs)
            return None if a is None or b is None else _plus(a, b)
        if isinstance(expr, ir.AffineMulExpr):
            return product_form(walk(expr.lhs), walk(expr.rhs))
        return None

    return walk(map_.results[0])


def is_generic(op: ir.Operation | None) -> bool:
    return op is not None and op.name == "linalg.generic"


def iterator_types(op: ir.Operation) -> list[str]:
    """``["parallel", "reduction", ...]`` of a linalg.generic."""
    return [str(a).split("<")[1].rstrip(">") for a in op.attributes["iterator_types"]]


def reduction_dims(op: ir.Operation) -> list[int]:
    return [i for i, kind in enumerate(iterator_types(op)) if kind == "reduction"]


def indexing_maps(op: ir.Operation) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(a).value for a in op.attributes["indexing_maps"]]


def num_inputs(op: ir.Operation) -> int:
    """Operands before the outs of a DPS op (operandSegmentSizes holds [ins, outs])."""
    segments = op.attributes["operandSegmentSizes"]
    return ir.DenseI32ArrayAttr(segments)[0]


def inputs(op: ir.Operation) -> list[ir.Value]:
    return list(op.operands)[: num_inputs(op)]


def payload(op: ir.Operation) -> list[ir.Operation]:
    """The ops of a generic's body, without the terminator."""
    return [o.operation for o in op.regions[0].blocks[0].operations][:-1]


def is_elementwise_payload(op: ir.Operation, name: str) -> bool:
    """A generic whose body is one ``name`` op on the inputs, in order, yielded directly."""
    if not is_generic(op) or reduction_dims(op):
        return False
    body = payload(op)
    if len(body) != 1 or body[0].name != name:
        return False
    block = op.regions[0].blocks[0]
    args = list(block.arguments)[: num_inputs(op)]
    return list(body[0].operands) == args and _yields(op, body[0].results[0])


def _yields(op: ir.Operation, value: ir.Value) -> bool:
    terminator = list(op.regions[0].blocks[0].operations)[-1]
    return len(terminator.operands) >= 1 and terminator.operands[0] == value


def is_broadcast(op: ir.Operation | None) -> bool:
    """A generic yielding its one input read by a map that drops dims: a copy of a smaller
    tensor to every index of the missing ones."""
    if not is_generic(op) or num_inputs(op) != 1 or payload(op):
        return False
    in_map = indexing_maps(op)[0]
    block = op.regions[0].blocks[0]
    return len(in_map.results) < in_map.n_dims and _yields(op, block.arguments[0])


def reduction_payload(op: ir.Operation) -> str | None:
    """For a one-input reduction generic, the combiner of result 0 (``arith.addf``...),
    its input read as it is or widened (``arith.extf``: an fp16 sum accumulated in f32)."""
    if not is_generic(op) or len(reduction_dims(op)) != 1 or num_inputs(op) != 1:
        return None
    block = op.regions[0].blocks[0]
    arg_in, arg_out = block.arguments[0], block.arguments[1]
    body = payload(op)
    read = {arg_in}
    read |= {b.results[0] for b in body if b.name == "arith.extf" and b.operands[0] == arg_in}
    for body_op in body:
        operands = list(body_op.operands)
        if len(operands) == 2 and arg_out in operands and len(set(operands) & read) == 1:
            if _yields(op, body_op.results[0]):
                return body_op.name
    return None


def _dynamic_position(shape: list[int], dim: int) -> int:
    """The place of ``dim`` among the dynamic dims of ``shape``."""
    return sum(ir.ShapedType.is_dynamic_size(n) for n in shape[:dim])


def _is_argument(value: ir.Value) -> bool:
    return isinstance(value.owner, ir.Block)


def _size_root(size: ir.Value, depth: int) -> object:
    """What an index value is, as ``dim_root`` names it."""
    op = producer(size)
    if op is not None and op.name == "tensor.dim":
        c = constant_value(op.operands[1])
        if isinstance(c, int):
            return dim_root(op.operands[0], c, depth + 1)
    if op is not None and op.name == "hal.buffer_view.dim" and _is_argument(op.operands[0]):
        index = ir.IntegerAttr(op.attributes["index"]).value
        return ("argument", ir.BlockArgument(op.operands[0]).arg_number, index)
    if op is not None and op.name == "util.assume.int":
        results = list(op.results)
        return _size_root(op.operands[results.index(size)], depth + 1)
    return size


def dim_root(value: ir.Value, dim: int, depth: int = 0) -> object:
    """A key equal for two dynamic dims that are the same size by construction: the dim
    of a function argument, or an index value, that the ops producing ``value`` carry
    its size from (outputs sized by their inits, reshapes by their groups, tensor.empty
    and flow.tensor.tie_shape by their operands): ``("argument", i, d)`` for dim d of
    the entry point's input i. Else ``(value, dim)`` itself."""
    shape = list(ir.RankedTensorType(value.type).shape)
    if not ir.ShapedType.is_dynamic_size(shape[dim]) or depth > 64:
        return (value, dim)
    op = producer(value)
    at = _dynamic_position(shape, dim)
    if op is None:
        return (value, dim)
    name = op.name
    if name == "hal.tensor.import" and _is_argument(op.operands[0]):  # an entry's input
        return ("argument", ir.BlockArgument(op.operands[0]).arg_number, dim)
    if name in ("tensor.empty", "flow.tensor.tie_shape"):
        sizes = list(op.operands)[1:] if name == "flow.tensor.tie_shape" else list(op.operands)
        return _size_root(sizes[at], depth)
    if name == "tensor.cast":
        return dim_root(op.operands[0], dim, depth + 1)
    if name == "tensor.expand_shape":
        return _size_root(list(op.operands)[1:][at], depth)
    if name == "tensor.collapse_shape":
        group = reassociation(op)[dim]
        source = list(ir.RankedTensorType(op.operands[0].type).shape)
        dynamic = [d for d in group if ir.ShapedType.is_dynamic_size(source[d])]
        if len(dynamic) == 1 and all(source[d] == 1 for d in group if d != dynamic[0]):
            return dim_root(op.operands[0], dynamic[0], depth + 1)
        return (value, dim)
    if name.startswith("linalg.") and len(op.results) <= len(op.operands):
        # on tensors, a structured op's results are its inits', the last operands
        results = list(op.results)
        init = list(op.operands)[len(op.operands) - len(results) + results.index(value)]
        if init.type == value.type:  # not a pack's padding value or tile sizes
            return dim_root(init, dim, depth + 1)
    return (value, dim)
