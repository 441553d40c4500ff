"""fusion-fold-empty-attention: an attention over no keys (or of no rows) is zeros.

``F.scaled_dot_product_attention`` over zero keys returns zeros (an empty sum), and one
with a batch, head or query extent of 0 returns an empty tensor. IREE 3.13's compiler
stops with SIGFPE on an ``iree_linalg_ext.attention`` with a static extent of 0, so such
an op is replaced here by a zero fill of its output before anything lowers it.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusion_compiler.dialects import linalg_ext
from fusion_compiler.dialects.builders import erase_dead

from fusion_compiler import remarks
from fusion_compiler.ir import dialects, ir

NAME = "fusion-fold-empty-attention"


@dataclass(frozen=True)
class Options:
    pass


def _has_zero_extent(op: ir.Operation) -> bool:
    """Q, K, V or the output has an axis of static size 0."""
    values = [*list(op.operands)[:3], op.results[0]]
    return any(0 in ir.RankedTensorType(v.type).shape for v in values)


def fold_empty_attention(op: ir.Operation) -> None:
    """attention(Q, K, V, ...) with a 0 extent -> linalg.fill(0) of its output."""
    init = op.operands[len(op.operands) - 1]
    element = ir.RankedTensorType(op.results[0].type).element_type
    with ir.InsertionPoint(op), op.location:
        zero = dialects.arith.ConstantOp(element, 0.0).result
        zeros = dialects.linalg.fill(zero, outs=[init])
    op.results[0].replace_all_uses_with(zeros)
    erase_dead([op])


def run(module: ir.Operation, options: Options) -> None:
    with module.context:
        empty = [op for op in linalg_ext.find_all(module) if _has_zero_extent(op)]
    for op in empty:
        location = op.location
        fold_empty_attention(op)
        remarks.emit(location, "attention with an extent of 0 folded to zeros")
