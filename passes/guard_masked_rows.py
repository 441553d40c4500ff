"""fusion-guard-masked-rows: IREE's attention op gives PyTorch's answer on f32 and bf16 fills.

IREE 3.13's ``iree_linalg_ext.attention`` scales the mask into its exp2 domain, where a
finite fill such as ``finfo(f32).min`` overflows to -inf (measured on llvm-cpu: NaN on
a row of such fills; PyTorch gives equal weights there), and a row whose keys are all
-inf comes out 0/0. For each attention op with a float mask left for IREE:

- finite mask values are clamped at ``-FLT_MAX / (2·log2 e)``, which stays finite in
  exp2's domain and still gives exp2(... ) = 0 next to any allowed key; -inf stays;
- rows with no key above -inf are set to 0, the answer of
  ``F.scaled_dot_product_attention`` and FlashAttention (and of our own lowerings).

- where the mask's producers hold a fill that swamps the score in its type
  (``finfo(f16).min``: PyTorch's fp16 sum ``s + fill`` is the fill), rows whose keys all
  hold such a fill read a zero query: IREE's op adds the mask in f32, so it would give
  them softmax(s); with ``q = 0`` the score is 0 (the score region is a softcap, 0 at 0)
  and the row gets softmax(fill), PyTorch's answer. Rows with an allowed key are
  untouched: next to it, a swamped key weighs 0 either way.

All are producers and a consumer of the op that IREE fuses into neighbouring
dispatches; the row tests read the mask's own producers, not a stored mask.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fusion_compiler.dialects import linalg_ext
from fusion_compiler.dialects.builders import affine_map, axes, empty, generic

from fusion_compiler import remarks
from fusion_compiler.ir import dialects, ir

NAME = "fusion-guard-masked-rows"
_QUERY = 0
_MASK = 4
# finite in exp2's domain: FLOOR·log2(e) = -FLT_MAX / 2
FLOOR = -3.4028234663852886e38 / 2 / 1.4426950408889634


@dataclass(frozen=True)
class Options:
    pass


def _constant(element: ir.Type, value: float) -> ir.Value:
    return dialects.arith.ConstantOp(element, value).result


def _is_minus_inf(x: ir.Value) -> ir.Value:
    return dialects.arith.CmpFOp(
        dialects.arith.CmpFPredicate.OEQ, x, _constant(x.type, -math.inf)
    ).result


def clamp_finite_fills(mask: ir.Value) -> ir.Value:
    """mask -> (mask == -inf ? -inf : max(mask, FLOOR)), for f32 and bf16 masks."""
    element = ir.RankedTensorType(mask.type).element_type
    rank = ir.RankedTensorType(mask.type).rank
    identity = affine_map(rank, list(range(rank)))

    def clamp(x: ir.Value, _: ir.Value) -> ir.Value:
        floored = dialects.arith.MaximumFOp(x, _constant(element, FLOOR)).result
        return dialects.arith.SelectOp(_is_minus_inf(x), x, floored).result

    return generic([mask], empty(axes(mask), element), [identity] * 2, ["parallel"] * rank, clamp)


def zero_swamped_queries(op: ir.Operation, threshold: float) -> ir.Value:
    """q -> (some key of the row above ``threshold`` ? q : 0): the score drops out of
    rows that PyTorch's sum in the mask's type reduces to the fill."""

    def above_threshold(x: ir.Value) -> ir.Value:
        floor = _constant(x.type, threshold)
        return dialects.arith.CmpFOp(dialects.arith.CmpFPredicate.UGT, x, floor).result

    rows, row_dims = linalg_ext.rows_with_a_key(op, above_threshold)
    query = op.operands[_QUERY]
    return linalg_ext.keep_rows(query, linalg_ext.operand_dims(op, _QUERY), rows, row_dims)


def guard_masked_rows(op: ir.Operation) -> bool:
    """attention(..., mask) -> zero_empty_rows(attention(..., clamp_finite_fills(mask)));
    whether fp16 fills swamp the score (the model added them in fp16)."""
    with ir.InsertionPoint(op), op.location:
        element = ir.RankedTensorType(op.operands[_MASK].type).element_type
        if element in (ir.F32Type.get(), ir.BF16Type.get()):
            op.operands[_MASK] = clamp_finite_fills(op.operands[_MASK])
        threshold = linalg_ext.swamp_threshold(op)
        threshold = linalg_ext.swamping_fill(op.operands[_MASK], threshold=threshold)
        swamps = element == ir.F16Type.get() and threshold is not None
        if swamps:
            op.operands[_QUERY] = zero_swamped_queries(op, threshold)
    result = op.results[0]
    # the users before the guard exists: the guard's own reads of ``result`` (its
    # operand, the tensor.dim of dynamic sizes) stay on it
    users = [use.owner for use in result.uses]
    with ir.InsertionPoint.after(op), op.location:
        guarded = linalg_ext.zero_empty_rows(op, result)
    for user in users:
        for i, operand in enumerate(user.operands):
            if operand == result:
                user.operands[i] = guarded
    return swamps


def _float_mask(op: ir.Operation) -> bool:
    if len(op.attributes["indexing_maps"]) != 6:
        return False
    element = ir.RankedTensorType(op.operands[_MASK].type).element_type
    return isinstance(element, ir.FloatType)


def run(module: ir.Operation, options: Options) -> None:
    with module.context:
        masked = [op for op in linalg_ext.find_all(module) if _float_mask(op)]
    for op in masked:
        swamps = guard_masked_rows(op)
        remarks.emit(
            op.location,
            "masked attention left to IREE: f32/bf16 fills clamped, "
            f"{'fp16 fills swamp the score, ' if swamps else ''}rows with no key set to 0",
        )
