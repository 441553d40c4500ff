"""fusion-softmax-input-in-memory: a softmax over a dynamic extent reads its input from memory.

IREE 3.13 puts an elementwise producer of a softmax (the scale and bias of the scores, a
cast) into the softmax's dispatch, where the max, the sum and the divide each read the
producer's rows; llvm-cpu keeps those rows on the stack, and a row over a dynamic extent
has no bound ("exceeded stack allocation limit of 32768 bytes ... Got
576460752303424192 bytes"; measured on unfused fp16 scores with an ALiBi bias and
dynamic lengths; iree-org/iree#17469 describes the stack buffer of its softmax
decomposition). Over a static extent the rows are tiled within the limit (measured up to
65536 keys), and nothing is changed.

For each softmax (``linalg.softmax`` or the decomposition) over a dynamic extent whose
input an op computes, the input passes through ``iree_tensor_ext.compute_barrier.start``
(IREE's identity marker, which carries the dynamic sizes and which dispatch formation
did not fuse across, measured): the producer is computed into a buffer by its own
dispatch (or its producer's), and the softmax's dispatch reads that buffer. The cost is
one pass over the scores where IREE would have fused a mere cast.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusion_compiler.dialects import softmax
from fusion_compiler.dialects.builders import size_of

from fusion_compiler import remarks
from fusion_compiler.ir import ir

NAME = "fusion-softmax-input-in-memory"
BARRIER = "iree_tensor_ext.compute_barrier.start"


@dataclass(frozen=True)
class Options:
    pass


def _needs_memory(found: softmax.Softmax) -> bool:
    """Over a dynamic extent, computed by an op, and not behind a barrier yet."""
    shape = ir.RankedTensorType(found.input.type).shape
    if not ir.ShapedType.is_dynamic_size(shape[found.dim]):
        return False
    if isinstance(found.input.owner, ir.Block):  # an argument: in memory already
        return False
    # another softmax of the same input put it behind a barrier already
    users = [use.owner.name for use in found.input.uses]
    return found.input.owner.operation.name != BARRIER and BARRIER not in users


def input_through_barrier(found: softmax.Softmax) -> None:
    """softmax(producer(x)) -> softmax(compute_barrier.start(producer(x)))."""
    value = found.input
    producer = value.owner.operation
    rank = ir.RankedTensorType(value.type).rank
    with ir.InsertionPoint.after(producer), producer.location:
        sizes = [size_of(value, axis) for axis in range(rank)]
        dynamic = [s for s in sizes if isinstance(s, ir.Value)]
        barrier = ir.Operation.create(BARRIER, results=[value.type], operands=[value, *dynamic])
    reads_of_sizes = [s.owner.operation for s in dynamic]
    value.replace_all_uses_except(barrier.result, [barrier, *reads_of_sizes])
    remarks.emit(
        found.result.location,
        f"softmax over dynamic dimension {found.dim} reads its input from memory "
        "(IREE's llvm-cpu keeps a fused producer's rows on the stack)",
    )


def run(module: ir.Operation, options: Options) -> None:
    with module.context:
        found = [s for s in softmax.find_all(module) if isinstance(s, softmax.Softmax)]
        for each in found:
            if _needs_memory(each):
                input_through_barrier(each)
