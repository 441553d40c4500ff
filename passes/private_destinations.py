"""fusion-private-destinations: a tensor computed from no input and updated in place gets
a buffer of its own.

IREE 3.13 updates the destination of a scatter, a sort or an insert of a slice in place.
Where that destination is computed from no input (an ``arange``, a table built from
constants), its dispatch has no operands: copy-on-write gives each in-place user a copy,
the canonicaliser turns each copy into another dispatch of the same computation, and
CSE merges those as equal, so two updates write one buffer (two ``index_put`` into one
``arange``, or two slices written into copies of one: both results wrong; two sorts:
the positions of the second sorted twice). Found by trying:

- an in-place user updates a ``flow.tensor.clone`` of the tensor, made once per block
  for its in-place users (behind a barrier, IREE had made the tensor a constant and wrote
  into it: a read-only buffer);
- the copy is made behind a ``util.optimization_barrier`` (a bare clone was folded
  away: the positions of a second sort sorted twice; an ``index_put`` and a slice written
  into one arange: both results wrong; the arange of a dynamic length), the sizes tied
  back (``flow.tensor.tie_shape``: IREE cannot read them through a barrier); but where
  only slices are written into a static tensor no other op reads, a bare clone (behind
  a barrier, two slices written into copies of one arange wrote one copy);
- where the tensor also has readers that do not update it (a ``cumsum``, an elementwise
  op, a gather whose body extracts from it), they read the barrier too: a clone whose
  source had no other user was elided, and the update wrote the buffer they read (an
  ``arange`` of a dynamic length updated and summed, or written a slice into and read
  flipped by ``x[idx.flip(0)]``; a static one updated twice and read; a float64
  ``arange`` sorted, updated and read).

A slice written into such a tensor (static offsets, sizes and strides) becomes a select
over it instead (``_as_select``): with a scatter's update, both had updated one copy.
Fills of a constant (IREE makes each user its own), constants (never written) and
anything that reads an input's data are left as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusion_compiler.dialects import linalg
from fusion_compiler.dialects.builders import affine_map, axes, dynamic_sizes, empty, generic

from fusion_compiler.ir import dialects, ir

NAME = "fusion-private-destinations"


@dataclass(frozen=True)
class Options:
    pass


def _destinations(op: ir.Operation) -> list[int]:
    """The operand indices ``op`` updates in place."""
    if op.name == "iree_linalg_ext.scatter":
        return [len(op.operands) - 1]  # ins(updates, indices) outs(original)
    if op.name == "iree_linalg_ext.sort":
        return list(range(len(op.operands)))  # every operand is sorted in place
    if op.name == "tensor.insert_slice":
        return [1]
    return []


# ops that give a function's input, or a global (a weight), as a tensor
_INPUTS = ("hal.tensor.import", "util.global.load", "flow.tensor.load")


def _reads_input_data(value: ir.Value) -> bool:
    """Whether ``value`` is computed from the elements of an input of the function, a
    global or a tensor block argument (a loop's): tensor operands are followed, sizes
    (``tensor.dim``, index values) are not."""
    seen: set[ir.Operation] = set()
    stack = [value]
    while stack:
        current = stack.pop()
        op = linalg.producer(current)
        if op is None:
            if isinstance(current.type, ir.RankedTensorType):
                return True
            continue
        if op.name in _INPUTS:
            return True
        if op in seen:
            continue
        seen.add(op)
        stack.extend(v for v in op.operands if isinstance(v.type, ir.RankedTensorType))
    return False


def _needs_barrier(value: ir.Value) -> bool:
    op = linalg.producer(value)
    if op is None or op.name in ("arith.constant", "linalg.fill", "tensor.empty"):
        return False
    return not _reads_input_data(value)


def run(module: ir.Operation, options: Options) -> None:
    del options
    users: list[tuple[ir.Operation, int]] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        users.extend((op, i) for i in _destinations(op))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    barriers: dict[tuple[ir.Value, ir.Block], ir.Value] = {}
    with module.context:
        # first the slices that become selects: what they read is then a reader of the
        # tensor that the in-place users left are given a copy of
        selected = {
            id(op)
            for op, index in users
            if op.name == "tensor.insert_slice"
            and _needs_barrier(op.operands[index])
            and _as_select(op)  # erases op
        }
        for op, index in users:
            if id(op) in selected:
                continue
            value = op.operands[index]
            if not _needs_barrier(value):
                continue
            key = (value, op.operation.block)
            barrier = barriers.get(key)
            if barrier is None:
                barrier = _private(value, op)
                barriers[key] = barrier
            op.operands[index] = barrier


def _static_list(op: ir.Operation, name: str) -> list[int] | None:
    values = list(ir.DenseI64ArrayAttr(op.attributes[name]))
    return None if any(ir.ShapedType.is_dynamic_size(v) for v in values) else values


def _as_select(op: ir.Operation) -> bool:
    """``tensor.insert_slice`` of static offsets, sizes and strides, and of the
    destination's rank, rewritten as a ``linalg.generic`` over the destination that takes
    the source's element inside the slice and the destination's elsewhere: no in-place
    update remains (IREE 3.13 made a scatter and a slice written into copies of one
    ``arange`` update one clone: the slice's values reached the scatter's result).
    False where the slice is not of that form (it keeps its private copy)."""
    source, dest = op.operands[0], op.operands[1]
    offsets = _static_list(op, "static_offsets")
    sizes = _static_list(op, "static_sizes")
    strides = _static_list(op, "static_strides")
    rank = ir.RankedTensorType(dest.type).rank
    if None in (offsets, sizes, strides) or ir.RankedTensorType(source.type).rank != rank:
        return False
    index_type = ir.IndexType.get()
    element = ir.RankedTensorType(dest.type).element_type
    identity = affine_map(rank, list(range(rank)))

    def constant(n: int) -> ir.Value:
        return dialects.arith.ConstantOp(index_type, n).result

    def take(outside: ir.Value, _: ir.Value) -> ir.Value:
        inside, at = None, []
        for axis in range(rank):
            i = dialects.linalg.IndexOp(axis).result
            offset, size, stride = offsets[axis], sizes[axis], strides[axis]
            shifted = dialects.arith.SubIOp(i, constant(offset)).result
            position = dialects.arith.DivUIOp(shifted, constant(stride)).result
            low = dialects.arith.CmpIOp(dialects.arith.CmpIPredicate.uge, i, constant(offset))
            high = dialects.arith.CmpIOp(dialects.arith.CmpIPredicate.ult, position, constant(size))
            here = dialects.arith.AndIOp(low.result, high.result).result
            if stride != 1:
                rest = dialects.arith.RemUIOp(shifted, constant(stride)).result
                zero = dialects.arith.CmpIOp(dialects.arith.CmpIPredicate.eq, rest, constant(0))
                here = dialects.arith.AndIOp(here, zero.result).result
            at.append(dialects.arith.SelectOp(here, position, constant(0)).result)
            inside = here if inside is None else dialects.arith.AndIOp(inside, here).result
        taken = dialects.tensor.ExtractOp(source, at).result
        return dialects.arith.SelectOp(inside, taken, outside).result

    with ir.InsertionPoint(op), op.location:
        selected = generic(
            [dest], empty(axes(dest), element), [identity] * 2, ["parallel"] * rank, take
        )
    op.results[0].replace_all_uses_with(selected)
    op.operation.erase()
    return True


def _private(value: ir.Value, user: ir.Operation) -> ir.Value:
    """The tensor that ``value``'s in-place users in ``user``'s block update, made right
    after ``value``'s producer (or at the block's start, the producer outside it)."""
    block = user.operation.block
    producer = linalg.producer(value)
    if producer is not None and producer.block == block:
        point = ir.InsertionPoint.after(producer)
    else:
        point = ir.InsertionPoint.at_block_begin(block)
    readers = _readers(value, block)
    with point, user.location:
        dims = dynamic_sizes(value)
        slices_only = all(
            u.owner.operation.name == "tensor.insert_slice"
            for u in value.uses
            if u.operand_number in _destinations(u.owner.operation)
        )
        if not dims and not readers and slices_only:
            return _copy(value, [])  # behind a barrier, two slices written wrote one copy
        # a bare clone was folded away (of a dynamic tensor; of a sort's; of one that a
        # scatter and an insert of a slice both update: both results wrong): the copy is
        # made behind a barrier, its sizes tied back (IREE cannot read them through one);
        # the value's other readers read the barrier too: where the copy was its only
        # user, IREE elided the copy and the update wrote the buffer they read (an arange
        # updated in place and summed by ``cumsum``; two updates and a read of a static
        # one; a sort, an update and a read of a float64 one)
        shared = _hidden(value)
        if dims:
            shared = _tied(shared, dims)
        copy = _copy(shared, dims)
    for reader, index in readers:
        reader.operands[index] = shared
    return copy


def _readers(value: ir.Value, block: ir.Block) -> list[tuple[ir.Operation, int]]:
    """The ops in ``block`` (or nested in one of its ops: a ``tensor.extract`` in a
    gather's body) that read ``value``'s elements without updating it in place (op,
    operand index): not its in-place users, not ``tensor.dim``, not a barrier."""
    readers = []
    for use in value.uses:
        op = use.owner.operation
        index = use.operand_number
        # a barrier: this pass's own, which its copies read
        passive = op.name in ("tensor.dim", "util.optimization_barrier")
        if _within(op, block) and not passive and index not in _destinations(op):
            readers.append((op, index))
    return readers


def _within(op: ir.Operation, block: ir.Block) -> bool:
    """Whether ``op`` is in ``block`` or nested in one of its ops."""
    while op is not None:
        if op.block == block:
            return True
        op = op.parent
    return False


def _copy(value: ir.Value, dims: list[ir.Value]) -> ir.Value:
    """``value`` copied (``flow.tensor.clone``), for a scatter or an insert of a slice."""
    return ir.Operation.create(
        "flow.tensor.clone", results=[value.type], operands=[value, *dims]
    ).result


def _tied(value: ir.Value, dims: list[ir.Value]) -> ir.Value:
    """``value`` with its dynamic sizes ``dims`` (``flow.tensor.tie_shape``)."""
    return ir.Operation.create(
        "flow.tensor.tie_shape", results=[value.type], operands=[value, *dims]
    ).result


def _hidden(value: ir.Value) -> ir.Value:
    """``value`` through a ``util.optimization_barrier``."""
    return ir.Operation.create(
        "util.optimization_barrier", results=[value.type], operands=[value]
    ).result
