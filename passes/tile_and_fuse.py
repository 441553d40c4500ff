"""fusion-tile-and-fuse: pulls the head split and merge around each attention into the op.

Models split heads with a reshape and a transpose, and fold them into the batch with a
second reshape, before attention; after it they undo both. Left as they are, each
transpose is a copy of its own: IREE makes it a dispatch (an fp32 attention block on
the CPU: three projections, three head-split transposes with the projections' bias,
attention, the output projection: 8 dispatches). This pass moves them into the
``iree_linalg_ext.attention`` op's indexing maps instead, so the op's tiles read Q, K, V
(and the mask) in the layout their producers wrote and write the output in the layout
its consumer reads:

1. ``split_batch``: the batch folded from (B, H) by ``tensor.collapse_shape`` becomes two
   batch dims of the op (its operands the collapse's sources, the mask reshaped to
   match, the result expanded only where something still wants the folded form);
2. ``fold_transposes``: a ``linalg.transpose`` feeding an operand (also through a slice,
   as when Q, K and V are cut from one fused projection), or taking the result, becomes
   a permutation of that operand's map.

The transposes' dispatches go, and IREE may fuse each projection's bias into its matmul
again: on the CPU the block above takes 5 dispatches at dim 64 (``tests/test_tile_and_fuse.py``)
and 7 at dim 1024, N 2048, where IREE keeps the K and V biases apart
(``benchmarks/results/experiments.md``). For the lowerings that keep IREE's attention op
(``attention="iree"``, CUDA below sm_90) and those that decompose it (whose matmuls take
the maps). The generated kernels and the online-softmax rewrite fold these
producers and consumers in their own lowering (strided views of each operand).
"""

from __future__ import annotations

from dataclasses import dataclass

from fusion_compiler.dialects import linalg, linalg_ext
from fusion_compiler.dialects.builders import (
    affine_map,
    dims,
    erase_dead,
    index,
    reassociation_attr,
)

from fusion_compiler import remarks
from fusion_compiler.ir import dialects, ir

NAME = "fusion-tile-and-fuse"


@dataclass(frozen=True)
class Options:
    pass


def _producer(value: ir.Value, name: str) -> ir.Operation | None:
    op = linalg.producer(value)
    return op if op is not None and op.name == name else None


def _shape(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def _rebuild(
    op: ir.Operation,
    operands: list[ir.Value],
    maps: list[ir.AffineMapAttr],
    result_type: ir.Type,
) -> ir.Operation:
    """A copy of attention ``op`` on new operands, maps and result type (an empty init of
    that type), its score region moved over; inserted before ``op``."""
    result = ir.RankedTensorType(result_type)
    with ir.InsertionPoint(op), op.location:
        sizes: list[int | ir.Value] = list(result.shape)
        positions = [dims(m.value) for m in maps]
        for axis, size in enumerate(sizes):
            if ir.ShapedType.is_dynamic_size(size):  # read from an operand with that dim
                loop_dim = positions[-1][axis]
                i = next(i for i, p in enumerate(positions[:-1]) if loop_dim in p)
                sizes[axis] = dialects.tensor.DimOp(
                    operands[i], index(positions[i].index(loop_dim))
                ).result
        init = dialects.tensor.EmptyOp(sizes, result.element_type).result
        attributes = {name: op.attributes[name] for name in op.attributes}
        attributes["indexing_maps"] = ir.ArrayAttr.get(maps)
        new = ir.Operation.create(
            op.name,
            results=[result_type],
            operands=[*operands, init],
            attributes=attributes,
            regions=1,
        )
    op.regions[0].blocks[0].append_to(new.regions[0])
    return new


def split_batch(op: ir.Operation) -> ir.Operation | str:
    """attention(collapse(Q4), collapse(K4), collapse(V4)) over (B·H, ...) ->
    collapse(attention(Q4, K4, V4) over (B, H, ...)): the reason when it does not apply."""
    maps = linalg.indexing_maps(op)
    n_in = len(maps) - 1
    out_dims = dims(maps[-1])
    if any(_pos(e) is None for m in maps for e in m.results):
        return "its maps are not projections"
    batch = out_dims[0]
    collapses = [_producer(op.operands[i], "tensor.collapse_shape") for i in range(3)]
    if any(c is None for c in collapses):
        return "Q, K and V are not all reshaped from a (batch, heads, ...) layout"
    split: list[int] | None = None
    for i, collapse in enumerate(collapses):
        position = dims(maps[i]).index(batch) if batch in dims(maps[i]) else None
        groups = linalg.reassociation(collapse)
        if position is None or any(len(g) != 1 for j, g in enumerate(groups) if j != position):
            return "the reshapes of Q, K, V fold more than the batch"
        sizes = [_shape(collapse.operands[0])[a] for a in groups[position]]
        if split is None:
            split = sizes
        elif sizes != split:
            return f"Q, K and V split the batch differently ({split} and {sizes})"
    if any(ir.ShapedType.is_dynamic_size(s) for s in split) or len(split) < 2:
        return "the batch split is dynamic or trivial"
    extra = len(split) - 1
    n_dims = maps[0].n_dims + extra

    def renumbered(positions: list[int]) -> list[int]:
        out: list[int] = []
        for p in positions:
            if p == batch:
                out.extend(range(batch, batch + extra + 1))
            else:
                out.append(p + extra if p > batch else p)
        return out

    operands, new_maps = [], []
    for i in range(n_in):
        value, positions = op.operands[i], dims(maps[i])
        if i < 3:
            value = collapses[i].operands[0]
        elif batch in positions:  # the mask: reshaped to the split batch
            collapse = _producer(value, "tensor.collapse_shape")
            if collapse is not None and _shape(collapse.operands[0])[: len(split)] == split:
                value = collapse.operands[0]
            else:
                value = _expand(op, value, positions.index(batch), split)
                if isinstance(value, str):
                    return value
        operands.append(value)
        new_maps.append(affine_map(n_dims, renumbered(positions)))
    old_type = ir.RankedTensorType(op.results[0].type)
    o_position = out_dims.index(batch)
    out_shape = list(old_type.shape)
    out_shape[o_position : o_position + 1] = split
    new_maps.append(affine_map(n_dims, renumbered(out_dims)))
    new = _rebuild(
        op, operands, new_maps, ir.RankedTensorType.get(out_shape, old_type.element_type)
    )
    # uses that expand the batch again take the new result; the rest its collapse
    result = new.results[0]
    for use in list(op.results[0].uses):
        user = use.owner
        if user.name == "tensor.expand_shape" and user.results[0].type == result.type:
            user.results[0].replace_all_uses_with(result)
            user.erase()
    if list(op.results[0].uses):
        groups = _split_groups(old_type.rank, o_position, len(split))
        with ir.InsertionPoint(op), op.location:
            folded = dialects.tensor.CollapseShapeOp(old_type, result, groups)
        op.results[0].replace_all_uses_with(folded.result)
    erase_dead([op, *collapses])
    return new


def _pos(expr: ir.AffineExpr) -> int | None:
    try:
        return ir.AffineDimExpr(expr).position
    except ValueError:
        return None


def _split_groups(rank: int, axis: int, parts: int) -> ir.ArrayAttr:
    """The reassociation between a rank-``rank`` tensor and the same with ``axis`` split
    into ``parts`` dims (for collapse_shape and expand_shape alike)."""
    groups = [[a] for a in range(axis)] + [list(range(axis, axis + parts))]
    groups += [[a + parts - 1] for a in range(axis + 1, rank)]
    return reassociation_attr(groups)


def _expand(op: ir.Operation, value: ir.Value, axis: int, split: list[int]) -> ir.Value | str:
    """``value`` with its ``axis`` split into ``split`` (a static-shaped tensor)."""
    shape = _shape(value)
    if any(ir.ShapedType.is_dynamic_size(s) for s in shape):
        return "the mask has a dynamic shape"
    element = ir.RankedTensorType(value.type).element_type
    new_shape = shape[:axis] + split + shape[axis + 1 :]
    with ir.InsertionPoint(op), op.location:
        return dialects.tensor.ExpandShapeOp(
            ir.RankedTensorType.get(new_shape, element),
            value,
            _split_groups(len(shape), axis, len(split)),
            [],
            new_shape,
        ).result


def _permutation(transpose: ir.Operation) -> list[int]:
    return list(ir.DenseI64ArrayAttr(transpose.attributes["permutation"]))


def _slice_before_transpose(
    taken: ir.Operation, permutation: list[int], op: ir.Operation
) -> ir.Value:
    """extract_slice(transpose(X)) -> the same elements as extract_slice(X), before the
    transpose (offsets and sizes permuted back); inserted before ``op``."""
    offsets = list(ir.DenseI64ArrayAttr(taken.attributes["static_offsets"]))
    sizes = list(ir.DenseI64ArrayAttr(taken.attributes["static_sizes"]))
    source_offsets, source_sizes = [0] * len(offsets), [0] * len(sizes)
    for axis, source_axis in enumerate(permutation):
        source_offsets[source_axis], source_sizes[source_axis] = offsets[axis], sizes[axis]
    transpose = linalg.producer(taken.operands[0])
    source = transpose.operands[0]
    element = ir.RankedTensorType(source.type).element_type
    with ir.InsertionPoint(op), op.location:
        return dialects.tensor.ExtractSliceOp(
            ir.RankedTensorType.get(source_sizes, element),
            source,
            [],
            [],
            [],
            source_offsets,
            source_sizes,
            [1] * len(sizes),
        ).result


def fold_transposes(op: ir.Operation) -> tuple[ir.Operation, int]:
    """attention(transpose(X), ...) -> transpose(attention(X, ...)) with X read through a
    permuted map; transpose(attention(...)) -> attention(...) writing the permuted layout.
    The op (new if anything folded) and how many transposes it took."""
    maps = linalg.indexing_maps(op)
    n_in, n_dims = len(maps) - 1, maps[0].n_dims
    operands, new_maps, folded = [], [], []
    for i in range(n_in):
        value, positions = op.operands[i], dims(maps[i])
        transpose = _producer(value, "linalg.transpose") if positions else None
        taken = _producer(value, "tensor.extract_slice") if positions else None
        if linalg.plain_slice(taken) is not None:  # Q, K, V cut from one tensor
            transpose = _producer(taken.operands[0], "linalg.transpose")
        else:
            taken = None
        if transpose is not None:
            permutation = _permutation(transpose)
            source_positions = [0] * len(positions)
            for axis, source_axis in enumerate(permutation):
                source_positions[source_axis] = positions[axis]
            value, positions = transpose.operands[0], source_positions
            if taken is not None:
                value = _slice_before_transpose(taken, permutation, op)
            folded.append(taken or transpose)
        operands.append(value)
        new_maps.append(affine_map(n_dims, positions))
    result_type = op.results[0].type
    out_positions = dims(maps[-1])
    consumer = None
    users = [use.owner for use in op.results[0].uses]
    if len(users) == 1 and users[0].name == "linalg.transpose":
        consumer = users[0]
        out_positions = [out_positions[a] for a in _permutation(consumer)]
        result_type = consumer.results[0].type
    new_maps.append(affine_map(n_dims, out_positions))
    if not folded and consumer is None:
        return op, 0
    new = _rebuild(op, operands, new_maps, result_type)
    if consumer is not None:
        consumer.results[0].replace_all_uses_with(new.results[0])
        erase_dead([consumer, op, *folded])
    else:
        op.results[0].replace_all_uses_with(new.results[0])
        erase_dead([op, *folded])
    return new, len(folded) + (consumer is not None)


def run(module: ir.Operation, options: Options) -> None:
    with module.context, module.location:
        for op in linalg_ext.find_all(module):
            location = op.location
            split = split_batch(op)
            why = split if isinstance(split, str) else None
            _, transposes = fold_transposes(op if why else split)
            if why and not transposes:
                remarks.emit(location, f"head split and merge not fused into attention: {why}")
                continue
            batch = "" if why else "batch split into its heads, "
            remarks.emit(
                location,
                f"head split and merge fused into attention ({batch}{transposes} transposes "
                "folded into its indexing maps)",
            )
