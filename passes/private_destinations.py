"""fusion-private-destinations: a tensor computed from no input and updated in place gets
a buffer of its own.

IREE 3.13 updates the destination of a scatter, a sort or an insert of a slice in place.
Where that destination is computed from no input (an ``arange``, a table built from
constants), its dispatch has no operands: copy-on-write gives each in-place user a copy,
the canonicaliser turns each copy into another dispatch of the same computation, and
CSE merges those as equal, so two updates write one buffer (two ``index_put`` into one
``arange``, or two slices written into copies of one: both results wrong; two sorts:
the positions of the second sorted twice). Found by trying, each remedy on its own ops:

- a scatter or an insert of a slice updates a ``flow.tensor.clone`` of the tensor, made
  once per block for its in-place users (behind a barrier, IREE had made the tensor a
  constant and wrote into it: a read-only buffer);
- a sort of static sizes sorts the tensor through a ``util.optimization_barrier`` (a
  clone was not enough; IREE cannot read a barrier's dynamic sizes, so a dynamic sort
  keeps its operand: ``decompositions._sort`` leaves IREE only float64 sorts).

With dynamic sizes IREE removed the clone; a barrier before it, its sizes tied back
(``flow.tensor.tie_shape``), keeps it. Not fixed: an ``arange`` of a dynamic length
updated in place and also read by a cumulative sum (``iree_linalg_ext.scan``): the sum
is wrong, with or without the pass (IREE alone too).

Fills of a constant (IREE makes each user its own), constants (never written) and
anything that reads an input's data are left as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusion_compiler.dialects import linalg
from fusion_compiler.dialects.builders import dynamic_sizes

from fusion_compiler.ir import ir

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
        for op, index in users:
            value = op.operands[index]
            if not _needs_barrier(value):
                continue
            sort = op.name == "iree_linalg_ext.sort"
            if sort and not ir.RankedTensorType(value.type).has_static_shape:
                continue  # IREE 3.13 cannot read a barrier's dynamic sizes
            key = (value, op.operation.block, sort)
            barrier = barriers.get(key)
            if barrier is None:  # before the block's first in-place user (walk order)
                with ir.InsertionPoint(op), op.location:
                    barrier = _hidden(value) if sort else _copy(value)
                barriers[key] = barrier
            op.operands[index] = barrier


def _copy(value: ir.Value) -> ir.Value:
    """``value`` copied (``flow.tensor.clone``), for a scatter or an insert of a slice;
    of dynamic sizes, through a barrier (its sizes tied back: IREE cannot read them
    through one), else IREE folds the clone away."""
    dims = dynamic_sizes(value)
    if dims:
        hidden = _hidden(value)
        value = ir.Operation.create(
            "flow.tensor.tie_shape", results=[value.type], operands=[hidden, *dims]
        ).result
    return ir.Operation.create(
        "flow.tensor.clone", results=[value.type], operands=[value, *dims]
    ).result


def _hidden(value: ir.Value) -> ir.Value:
    """``value`` through a ``util.optimization_barrier``, for a sort."""
    return ir.Operation.create(
        "util.optimization_barrier", results=[value.type], operands=[value]
    ).result
