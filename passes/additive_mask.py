"""fusion-additive-mask: boolean attention masks become additive ones (0 kept, -inf masked).

``F.scaled_dot_product_attention(..., attn_mask=bool)`` lowers to an
``iree_linalg_ext.attention`` with an ``i1`` mask (true: the key is attended to). Every
lowering of ours reads the mask as a float added to the scores, so the boolean one is
turned into ``select(m, 0, -inf)`` here, in Q's float type. The select is a producer of
the mask: the online softmax re-runs it per block and no float mask is stored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fusion_compiler.dialects import linalg_ext
from fusion_compiler.dialects.builders import affine_map, axes, empty, generic

from fusion_compiler import remarks
from fusion_compiler.ir import dialects, ir

NAME = "fusion-additive-mask"
_MASK = 4  # operand index of the mask: Q, K, V, scale, mask


@dataclass(frozen=True)
class Options:
    pass


def additive_mask(op: ir.Operation) -> None:
    """attention(..., mask: i1) -> attention(..., select(mask, 0, -inf): Q's float type)."""
    mask = op.operands[_MASK]
    element = ir.RankedTensorType(op.operands[0].type).element_type
    rank = ir.RankedTensorType(mask.type).rank
    with ir.InsertionPoint(op), op.location:
        identity = affine_map(rank, list(range(rank)))

        def select(keep: ir.Value, _: ir.Value) -> ir.Value:
            zero = dialects.arith.ConstantOp(element, 0.0).result
            minus_inf = dialects.arith.ConstantOp(element, -math.inf).result
            return dialects.arith.SelectOp(keep, zero, minus_inf).result

        additive = generic(
            [mask], empty(axes(mask), element), [identity, identity], ["parallel"] * rank, select
        )
    op.operands[_MASK] = additive


def _boolean_mask(op: ir.Operation) -> bool:
    if len(op.attributes["indexing_maps"]) != 6:
        return False
    element = ir.RankedTensorType(op.operands[_MASK].type).element_type
    return element == ir.IntegerType.get_signless(1)


def run(module: ir.Operation, options: Options) -> None:
    with module.context:
        boolean = [op for op in linalg_ext.find_all(module) if _boolean_mask(op)]
    for op in boolean:
        additive_mask(op)
        remarks.emit(op.location, "boolean attention mask made additive (-inf where false)")
