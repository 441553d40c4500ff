"""fusion-fold-empty: ops over an extent of 0 are folded before IREE sees them.

IREE 3.13's compiler stops with SIGFPE on an op with a static extent of 0, and PyTorch
gives such ops a defined answer:

- an ``iree_linalg_ext.attention`` over no keys is zeros (SDPA's empty sum), and one
  with no batch, head or query rows is empty: both become a zero fill of its output;
- a Linalg op with an operand of extent 0 runs no iteration: its result is its ``outs``
  operand (an empty tensor, or the init of a reduction over nothing: a sum over no keys
  is the fill it starts from).
"""

from __future__ import annotations

from dataclasses import dataclass

from fusion_compiler.dialects import linalg_ext
from fusion_compiler.dialects.builders import erase_dead

from fusion_compiler import remarks
from fusion_compiler.ir import dialects, ir

NAME = "fusion-fold-empty"


@dataclass(frozen=True)
class Options:
    pass


def _has_zero_extent(values: list[ir.Value]) -> bool:
    return any(
        isinstance(v.type, ir.RankedTensorType) and 0 in ir.RankedTensorType(v.type).shape
        for v in values
    )


def fold_empty_attention(op: ir.Operation) -> None:
    """attention(Q, K, V, ...) with a 0 extent -> linalg.fill(0) of its output."""
    init = op.operands[len(op.operands) - 1]
    element = ir.RankedTensorType(op.results[0].type).element_type
    with ir.InsertionPoint(op), op.location:
        zero = dialects.arith.ConstantOp(element, 0.0).result
        zeros = dialects.linalg.fill(zero, outs=[init])
    op.results[0].replace_all_uses_with(zeros)


def fold_empty_linalg(op: ir.Operation) -> None:
    """linalg op over a 0 extent -> its outs operands."""
    outs = list(op.operands)[len(op.operands) - len(op.results) :]
    for result, init in zip(op.results, outs, strict=True):
        result.replace_all_uses_with(init)


def _empty_ops(module: ir.Operation) -> tuple[list[ir.Operation], list[ir.Operation]]:
    attention, structured = [], []

    def visit(op: ir.Operation) -> ir.WalkResult:
        op = op.operation
        if op.name == linalg_ext.ATTENTION:
            if _has_zero_extent([*list(op.operands)[:3], op.results[0]]):
                attention.append(op)
            return ir.WalkResult.SKIP
        if (
            op.name.startswith("linalg.")
            and op.name not in ("linalg.yield", "linalg.index")
            and len(op.results) > 0
            and "operandSegmentSizes" in op.attributes
            and _has_zero_extent([*op.operands, *op.results])
        ):
            structured.append(op)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return attention, structured


def run(module: ir.Operation, options: Options) -> None:
    with module.context:
        attention, structured = _empty_ops(module)
    for op in attention:
        fold_empty_attention(op)
        remarks.emit(op.location, "attention with an extent of 0 folded to zeros")
    for op in structured:
        fold_empty_linalg(op)
    # every folded op is unused now; erased (with what only it read) once all are folded
    erase_dead(attention + structured)
