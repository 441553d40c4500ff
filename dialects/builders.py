"""Small builders of Linalg on tensors used by our rewrites (insert at the current point)."""

from __future__ import annotations

import math
from collections.abc import Callable

from fusion_compiler.dialects import linalg

from fusion_compiler.ir import dialects, ir

Extent = tuple[ir.Value, int]  # a dimension's size: that of axis ``i`` of a tensor


def empty(extents: list[Extent], element: ir.Type) -> ir.Value:
    """tensor.empty sized like the given axes; dynamic ones through tensor.dim."""
    sizes: list[int | ir.Value] = []
    for value, axis in extents:
        size = ir.RankedTensorType(value.type).shape[axis]
        if ir.ShapedType.is_dynamic_size(size):
            index = dialects.arith.ConstantOp(ir.IndexType.get(), axis).result
            size = dialects.tensor.DimOp(value, index).result
        sizes.append(size)
    return dialects.tensor.EmptyOp(sizes, element).result


def axes(value: ir.Value) -> list[Extent]:
    return [(value, i) for i in range(ir.RankedTensorType(value.type).rank)]


def zeros(like: ir.Value) -> ir.Value:
    element = ir.RankedTensorType(like.type).element_type
    zero = dialects.arith.ConstantOp(element, 0.0).result
    return dialects.linalg.fill(zero, outs=[empty(axes(like), element)])


def dims(map_: ir.AffineMap) -> list[int]:
    return [ir.AffineDimExpr(e).position for e in map_.results]


def reassociation_attr(groups: list[list[int]]) -> ir.ArrayAttr:
    """The ``reassociation`` of a collapse_shape / expand_shape with these dim groups."""
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get(
        [ir.ArrayAttr.get([ir.IntegerAttr.get(i64, d) for d in g]) for g in groups]
    )


def expand_shape(
    source: ir.Value, result_type: ir.Type, groups: list[list[int]], sizes: list[ir.Value]
) -> ir.Value:
    """``tensor.expand_shape`` of ``source`` into ``result_type`` (``sizes``: its dynamic
    dims, in order)."""
    return ir.Operation.create(
        "tensor.expand_shape",
        results=[result_type],
        operands=[source, *sizes],
        attributes={
            "reassociation": reassociation_attr(groups),
            "static_output_shape": ir.DenseI64ArrayAttr.get(
                list(ir.RankedTensorType(result_type).shape)
            ),
        },
    ).result


def static_elements(tensor_type: ir.Type) -> int:
    """The product of ``tensor_type``'s static dims (its element count where all are)."""
    shape = ir.RankedTensorType(tensor_type).shape
    return math.prod(n for n in shape if not ir.ShapedType.is_dynamic_size(n))


def collapse_shape(source: ir.Value, result_type: ir.Type, groups: list[list[int]]) -> ir.Value:
    """``tensor.collapse_shape`` of ``source`` into ``result_type``."""
    return ir.Operation.create(
        "tensor.collapse_shape",
        results=[result_type],
        operands=[source],
        attributes={"reassociation": reassociation_attr(groups)},
    ).result


def affine_map(n_dims: int, positions: list[int]) -> ir.AffineMapAttr:
    exprs = [ir.AffineDimExpr.get(p) for p in positions]
    return ir.AffineMapAttr.get(ir.AffineMap.get(n_dims, 0, exprs))


def generic(
    inputs: list[ir.Value],
    init: ir.Value,
    maps: list[ir.AffineMapAttr],
    iterators: list[str],
    body: Callable[..., ir.Value],
) -> ir.Value:
    """A one-result linalg.generic whose payload ``body(*block_args)`` returns the yield."""
    kinds = [ir.Attribute.parse(f"#linalg.iterator_type<{k}>") for k in iterators]
    op = dialects.linalg.GenericOp(
        [init.type], inputs, [init], ir.ArrayAttr.get(maps), ir.ArrayAttr.get(kinds)
    )
    types = [ir.RankedTensorType(v.type).element_type for v in [*inputs, init]]
    block = op.regions[0].blocks.append(*types)
    with ir.InsertionPoint(block):
        dialects.linalg.YieldOp([body(*block.arguments)])
    return op.results[0]


def inline_body(op: ir.Operation, argument: ir.Value) -> ir.Value:
    """Clones the ops of ``op``'s region here with its first argument bound to
    ``argument`` (a score region, an elementwise generic's payload of its one input);
    returns what it yields."""
    block = op.regions[0].blocks[0]
    bound: dict[ir.Value, ir.Value] = {block.arguments[0]: argument}
    *body, terminator = block.operations
    for body_op in body:
        clone = body_op.operation.clone()
        for i, operand in enumerate(clone.operands):
            if operand in bound:
                clone.operands[i] = bound[operand]
        for old, new in zip(body_op.results, clone.results, strict=True):
            bound[old] = new
    yielded = terminator.operands[0]
    return bound.get(yielded, yielded)


def to_f32(value: ir.Value) -> ir.Value:
    if value.type == ir.F32Type.get():
        return value
    return dialects.arith.ExtFOp(ir.F32Type.get(), value).result


def filled(extents: list[Extent], value: float) -> ir.Value:
    f32 = ir.F32Type.get()
    constant = dialects.arith.ConstantOp(f32, value).result
    return dialects.linalg.fill(constant, outs=[empty(extents, f32)])


def times(value: ir.Value, factor: float) -> ir.Value:
    constant = dialects.arith.ConstantOp(ir.F32Type.get(), factor).result
    return dialects.arith.MulFOp(value, constant).result


Size = int | ir.Value  # a static size or an index value


def index(value: Size) -> ir.Value:
    """An index value: a constant for a static size, the value itself otherwise."""
    if isinstance(value, ir.Value):
        return value
    return dialects.arith.ConstantOp(ir.IndexType.get(), value).result


def size_of(value: ir.Value, axis: int) -> Size:
    """Axis ``axis`` of a tensor: its static size, or a tensor.dim."""
    size = ir.RankedTensorType(value.type).shape[axis]
    if ir.ShapedType.is_dynamic_size(size):
        return dialects.tensor.DimOp(value, index(axis)).result
    return size


def empty_of(sizes: list[Size], element: ir.Type) -> ir.Value:
    return dialects.tensor.EmptyOp(sizes, element).result


def own_buffer(like: ir.Value) -> ir.Value:
    """An uninitialised tensor shaped like ``like`` that no other value shares:
    ``flow.tensor.alloca`` allocates per op, where CSE merges equal ``tensor.empty`` ops
    and IREE hoists equal fills into one constant. A loop that updates its tensor in
    place (behind a ``hal.tensor.barrier``) needs one: IREE 3.13 follows no such update
    through a loop's iter_args, so two loops started from one value write one buffer."""
    return ir.Operation.create(
        "flow.tensor.alloca", results=[like.type], operands=dynamic_sizes(like)
    ).result


def dynamic_sizes(value: ir.Value) -> list[ir.Value]:
    """The sizes of ``value``'s dynamic dims (``tensor.dim``s), in order: the operands
    flow's ops take with a tensor of dynamic shape."""
    shape = ir.RankedTensorType(value.type).shape
    return [size_of(value, i) for i, n in enumerate(shape) if ir.ShapedType.is_dynamic_size(n)]


def full(sizes: list[Size], value: float) -> ir.Value:
    """An f32 tensor of ``sizes`` filled with ``value``."""
    f32 = ir.F32Type.get()
    constant = dialects.arith.ConstantOp(f32, value).result
    return dialects.linalg.fill(constant, outs=[empty_of(sizes, f32)])


def _split(values: list[Size]) -> tuple[list[ir.Value], list[int]]:
    dynamic = ir.ShapedType.get_dynamic_size()
    return (
        [v for v in values if isinstance(v, ir.Value)],
        [dynamic if isinstance(v, ir.Value) else v for v in values],
    )


def extract_slice(source: ir.Value, offsets: list[Size], sizes: list[Size]) -> ir.Value:
    """A unit-stride tensor.extract_slice."""
    element = ir.RankedTensorType(source.type).element_type
    dyn_offsets, static_offsets = _split(offsets)
    dyn_sizes, static_sizes = _split(sizes)
    result = ir.RankedTensorType.get(static_sizes, element)
    return dialects.tensor.ExtractSliceOp(
        result,
        source,
        dyn_offsets,
        dyn_sizes,
        [],
        static_offsets,
        static_sizes,
        [1] * len(sizes),
    ).result


def insert_slice(source: ir.Value, dest: ir.Value, offsets: list[Size]) -> ir.Value:
    """A unit-stride tensor.insert_slice of all of ``source``."""
    rank = ir.RankedTensorType(source.type).rank
    dyn_offsets, static_offsets = _split(offsets)
    dyn_sizes, static_sizes = _split([size_of(source, i) for i in range(rank)])
    return dialects.tensor.InsertSliceOp(
        source, dest, dyn_offsets, dyn_sizes, [], static_offsets, static_sizes, [1] * rank
    ).result


def tile_size(start: ir.Value, bound: Size, step: int) -> Size:
    """min(step, bound - start): the size of a (possibly ragged) last tile, for a
    ``start`` that is a multiple of ``step`` (every tile loop starts at one).

    Static when ``step`` divides a static ``bound``: static tiles let IREE size its
    buffers and vectors at compile time. From an unaligned start that static size reads
    past ``bound`` (a window's key loop did: its last tile read keys, values and mask
    past their ends, and the output's tail came back wrong now and then).
    """
    if isinstance(bound, int) and bound % step == 0:
        return step
    bound_value = bound if isinstance(bound, ir.Value) else index(bound)
    remaining = dialects.arith.SubIOp(bound_value, start).result
    return dialects.arith.MinSIOp(remaining, index(step)).result


def _affine_position(expr: ir.AffineExpr) -> int | None:
    """The dim of a dim expression, None for the constant 0 (a broadcast unit dim)."""
    if isinstance(expr, ir.AffineDimExpr):
        return expr.position
    if isinstance(expr, ir.AffineConstantExpr) and expr.value == 0:
        return None
    raise ValueError(f"unsupported indexing expression {expr}")


def tile_of(value: ir.Value, offsets: list[Size], sizes: list[Size], depth: int = 8) -> ir.Value:
    """The tile ``value[offsets : offsets + sizes]``, recomputed from its producers.

    Elementwise generics, fills and batch-collapsing reshapes are re-run on tiles of their
    inputs (producer fusion), so a mask built from iota/compare or a broadcast buffer is
    never materialised whole; anything else is sliced.
    """
    if ir.RankedTensorType(value.type).rank == 0:
        return value
    op = linalg.producer(value)
    if op is None or depth == 0:
        return extract_slice(value, offsets, sizes)
    element = ir.RankedTensorType(value.type).element_type
    while op.name in ("tensor.expand_shape", "tensor.collapse_shape"):  # a reshaped fill?
        source = linalg.producer(op.operands[0])
        if source is None or source.name != "linalg.fill":
            break
        op = source
    if op.name == "linalg.fill":
        return dialects.linalg.fill(op.operands[0], outs=[empty_of(sizes, element)])
    if op.name == "linalg.generic" and len(op.results) == 1 and is_elementwise(op):
        maps = [ir.AffineMapAttr(a).value for a in op.attributes["indexing_maps"]]
        n_inputs = len(maps) - 1
        tiled = []
        for operand, map_ in zip(list(op.operands)[:n_inputs], maps[:n_inputs], strict=True):
            positions = [_affine_position(e) for e in map_.results]
            tiled.append(
                tile_of(
                    operand,
                    [0 if p is None else offsets[p] for p in positions],
                    [1 if p is None else sizes[p] for p in positions],
                    depth - 1,
                )
            )
        init = empty_of(sizes, element)
        clone = op.clone()
        _shift_indices(clone, offsets)
        for i, operand in enumerate(tiled):
            clone.operands[i] = operand
        clone.operands[n_inputs] = init
        clone.results[0].set_type(
            ir.RankedTensorType.get(
                [s if isinstance(s, int) else ir.ShapedType.get_dynamic_size() for s in sizes],
                element,
            )
        )
        return clone.results[0]
    if op.name == "tensor.collapse_shape":
        groups = linalg.reassociation(op)
        source = op.operands[0]
        if all(len(g) == 1 for g in groups[1:]) and _full_dim(value, 0, offsets, sizes):
            # (A, B, ...) -> (A·B, ...): the collapsed batch is taken whole
            first = groups[0]
            src_offsets = [0] * len(first) + [offsets[k] for k in range(1, len(groups))]
            src_sizes = [size_of(source, a) for a in first] + [
                sizes[k] for k in range(1, len(groups))
            ]
            tile = tile_of(source, src_offsets, src_sizes, depth - 1)
            result = ir.RankedTensorType.get(
                [s if isinstance(s, int) else ir.ShapedType.get_dynamic_size() for s in sizes],
                element,
            )
            return dialects.tensor.CollapseShapeOp(
                result, tile, op.attributes["reassociation"]
            ).result
    return extract_slice(value, offsets, sizes)


def is_elementwise(op: ir.Operation) -> bool:
    """All parallel, an identity output map, and a payload that never reads the output."""
    kinds = [str(a) for a in op.attributes["iterator_types"]]
    out = ir.AffineMapAttr(op.attributes["indexing_maps"][len(op.operands) - 1]).value
    reads_out = bool(list(op.regions[0].blocks[0].arguments[-1].uses))
    parallel = all("parallel" in k for k in kinds)
    return parallel and out == ir.AffineMap.get_identity(out.n_dims) and not reads_out


def _shift_indices(op: ir.Operation, offsets: list[Size]) -> None:
    """In a generic re-run on a tile, ``linalg.index d`` must still give the global index."""
    for body_op in list(op.regions[0].blocks[0].operations):
        if body_op.operation.name != "linalg.index":
            continue
        offset = offsets[ir.IntegerAttr(body_op.operation.attributes["dim"]).value]
        if isinstance(offset, int) and offset == 0:
            continue
        local = body_op.operation.results[0]
        with ir.InsertionPoint.after(body_op.operation):
            shift = offset if isinstance(offset, ir.Value) else index(offset)
            global_ = dialects.arith.AddIOp(local, shift)
        local.replace_all_uses_except(global_.result, global_.operation)


def _full_dim(value: ir.Value, axis: int, offsets: list[Size], sizes: list[Size]) -> bool:
    """Whether the tile covers axis ``axis`` of ``value`` entirely (statically known)."""
    size = ir.RankedTensorType(value.type).shape[axis]
    return offsets[axis] == 0 and isinstance(sizes[axis], int) and sizes[axis] == size


def erase_dead(ops: list[ir.Operation]) -> None:
    """Erases the replaced ops, users first, and the producers left without users."""
    pending = list(ops)
    while True:
        dead = next((op for op in pending if all(not list(r.uses) for r in op.results)), None)
        if dead is None:
            return
        pending = [op for op in pending if op != dead]
        for producer in (linalg.producer(v) for v in dead.operands):
            if producer is not None and _pure(producer) and producer not in pending:
                pending.append(producer)
        dead.erase()


def _pure(op: ir.Operation) -> bool:
    """Ops on tensors with no effect but their results: safe to erase once unused."""
    return op.name.startswith(("linalg.", "tensor.")) or op.name == "arith.constant"
