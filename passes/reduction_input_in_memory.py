"""fusion-reduction-input-in-memory: a dynamic-extent reduction reads a shared input from memory.

IREE 3.13 puts an elementwise producer into the dispatch of the reduction that reads it;
when other ops of that dispatch read the producer too (a softmax's max, subtract and
divide; a log-softmax's max and subtract; a reduction whose input is also returned),
llvm-cpu keeps the producer's rows on the stack, and a row over a dynamic extent has no
bound ("exceeded stack allocation limit of 32768 bytes ... Got 576460752303424192
bytes"; with torch.export's bounds on the lengths, 131392 bytes for 4096 keys: still
over the limit). Measured on unfused fp16 scores with an ALiBi bias and dynamic lengths;
iree-org/iree#17469 describes the stack buffer of its softmax decomposition. Over a
static extent the rows are tiled within the limit (measured up to 65536 keys), and a
producer read by the reduction alone is fused into it element by element: nothing is
changed for either.

The input of each such reduction (``linalg.softmax``, which IREE decomposes into several
readers, or a ``linalg.generic`` whose reduction loop runs over a dynamic extent of an
input that another op also reads) passes through ``iree_tensor_ext.compute_barrier.start``
(IREE's identity marker, which carries the dynamic sizes and which dispatch formation
did not fuse across, measured): the producer is computed into a buffer by its own
dispatch (or its producer's), and the reduction's dispatch reads that buffer. The cost is
one pass over the input where IREE would have fused a mere cast.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusion_compiler.dialects import linalg, softmax
from fusion_compiler.dialects.builders import size_of

from fusion_compiler import remarks
from fusion_compiler.ir import ir

NAME = "fusion-reduction-input-in-memory"
BARRIER = "iree_tensor_ext.compute_barrier.start"
_FUNCTIONS = ("func.func", "util.func")


@dataclass(frozen=True)
class Options:
    pass


@dataclass(frozen=True)
class Row:
    """A reduction's input, the dynamic axis it reduces, and what the remark names."""

    input: ir.Value
    axis: int
    reduction: ir.Operation
    what: str


def _readers(value: ir.Value) -> list[ir.Operation]:
    """The ops that read ``value``'s elements (a tensor.dim reads its sizes only)."""
    return [use.owner for use in value.uses if use.owner.name != "tensor.dim"]


def _is_dynamic(value: ir.Value, axis: int) -> bool:
    return ir.ShapedType.is_dynamic_size(ir.RankedTensorType(value.type).shape[axis])


def _needs_memory(row: Row) -> bool:
    """Over a dynamic extent, computed by an op, and not behind a barrier yet."""
    if not _is_dynamic(row.input, row.axis):
        return False
    if isinstance(row.input.owner, ir.Block):  # an argument: in memory already
        return False
    if row.input.owner.operation.name == BARRIER:
        return False
    return BARRIER not in [reader.name for reader in _readers(row.input)]


def _generic_rows(op: ir.Operation) -> list[Row]:
    """The inputs of a linalg.generic that its reduction loops run over a dynamic extent
    of, and that another op reads too."""
    reductions = set(linalg.reduction_dims(op))
    if not reductions:
        return []
    rows = []
    inputs = linalg.inputs(op)
    for value, indexing in zip(inputs, linalg.indexing_maps(op)[: len(inputs)], strict=True):
        if not isinstance(value.type, ir.RankedTensorType) or len(_readers(value)) < 2:
            continue
        for axis, result in enumerate(indexing.results):
            if isinstance(result, ir.AffineDimExpr) and (
                result.position in reductions and _is_dynamic(value, axis)
            ):
                rows.append(Row(value, axis, op, "reduction"))
                break
    return rows


def rows(module: ir.Operation) -> list[Row]:
    """Every reduction input this pass may put in memory: each softmax's, then each other
    reduction's (a softmax's own max and sum are left to IREE, which lowers the softmax
    as one op: its input alone matters)."""
    softmaxes = [s for s in softmax.find_all(module) if isinstance(s, softmax.Softmax)]
    found = [Row(s.input, s.dim, s.result, "softmax") for s in softmaxes]
    inside = {op for s in softmaxes for op in s.ops}

    def visit(op: ir.Operation) -> ir.WalkResult:
        op = op.operation
        # in a loop (the online softmax's blocks) an extent is bounded by its block
        at_top = op.parent is not None and op.parent.name in _FUNCTIONS
        if linalg.is_generic(op) and at_top and op not in inside:
            found.extend(_generic_rows(op))
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return found


def input_through_barrier(row: Row) -> None:
    """reduce(producer(x)) -> reduce(compute_barrier.start(producer(x))), for every reader."""
    value = row.input
    producer = value.owner.operation
    rank = ir.RankedTensorType(value.type).rank
    with ir.InsertionPoint.after(producer), producer.location:
        sizes = [size_of(value, axis) for axis in range(rank)]
        dynamic = [s for s in sizes if isinstance(s, ir.Value)]
        barrier = ir.Operation.create(BARRIER, results=[value.type], operands=[value, *dynamic])
    reads_of_sizes = [s.owner.operation for s in dynamic]
    value.replace_all_uses_except(barrier.result, [barrier, *reads_of_sizes])
    remarks.emit(
        row.reduction.location,
        f"{row.what} over dynamic dimension {row.axis} reads its input from memory "
        "(IREE's llvm-cpu keeps a fused producer's rows on the stack)",
    )


def run(module: ir.Operation, options: Options) -> None:
    with module.context:
        for row in rows(module):
            if _needs_memory(row):
                input_through_barrier(row)
