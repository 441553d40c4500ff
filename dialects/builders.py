"""Small builders of Linalg on tensors used by our rewrites (insert at the current point)."""

from __future__ import annotations

from collections.abc import Callable

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


def index(value: int) -> ir.Value:
    return dialects.arith.ConstantOp(ir.IndexType.get(), value).result


def size_of(value: ir.Value, axis: int) -> Size:
    """Axis ``axis`` of a tensor: its static size, or a tensor.dim."""
    size = ir.RankedTensorType(value.type).shape[axis]
    if ir.ShapedType.is_dynamic_size(size):
        return dialects.tensor.DimOp(value, index(axis)).result
    return size


def empty_of(sizes: list[Size], element: ir.Type) -> ir.Value:
    return dialects.tensor.EmptyOp(sizes, element).result


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


def tile_size(start: ir.Value, bound: Size, step: int) -> ir.Value:
    """min(step, bound - start): the size of a (possibly ragged) last tile."""
    bound_value = bound if isinstance(bound, ir.Value) else index(bound)
    remaining = dialects.arith.SubIOp(bound_value, start).result
    return dialects.arith.MinSIOp(remaining, index(step)).result
