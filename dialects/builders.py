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
