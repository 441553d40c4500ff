"""fusion-decompose-attention: turns attention ops IREE cannot compile correctly back into Linalg.

IREE 3.13 computes ``iree_linalg_ext.attention`` wrongly when the QK contraction (the
head dim) is above 128, on llvm-cpu and on CUDA (measured: relative errors of 0.7 and
2.4). With ``above-head-dim`` this pass rewrites such ops (ours and those IREE's torch
lowering makes of ``F.scaled_dot_product_attention``), without it every op, as QKᵀ, scale
and mask, ``linalg.softmax`` and P·V with f32 sums, and says so in a remark. IREE's op
adds its mask where ``masked_fill(m, -inf)`` replaces the score; an op it keeps with
such a mask gets a remark saying so (the decomposition replaces).
"""

from __future__ import annotations

from dataclasses import dataclass

from fusion_compiler.dialects import linalg_ext

from fusion_compiler import remarks
from fusion_compiler.ir import ir

NAME = "fusion-decompose-attention"


@dataclass(frozen=True)
class Options:
    # Decompose attention whose head dim is above this; 0 decomposes every attention.
    above_head_dim: int = 0


def decompose_attention(op: ir.Operation) -> None:
    """iree_linalg_ext.attention -> generic(QKᵀ), generic(scale, mask), softmax, generic(PV);
    an online_attention the same up to the softmax, then its running values."""
    for result, value in zip(op.results, linalg_ext.decompose(op), strict=True):
        result.replace_all_uses_with(value)
    op.erase()


_KEPT_ADDING = (
    "attention left to IREE's op, which adds its mask: a NaN or inf score at a key "
    "masked_fill drops reaches the row here (the online softmax, the sm_90 and Vulkan "
    "kernels drop it)"
)


def _why(op: ir.Operation, options: Options) -> str | None:
    """Why ``op`` is decomposed ("" for every op), or None where IREE's op computes it."""
    if not options.above_head_dim:
        return ""
    head_dim = linalg_ext.head_dim(op)
    if head_dim > options.above_head_dim:
        return (
            f": head dim {head_dim} is above {options.above_head_dim}, which this target's "
            "attention code generation computes wrongly"
        )
    return None


def run(module: ir.Operation, options: Options) -> None:
    online = linalg_ext.find_all(module, linalg_ext.ONLINE_ATTENTION)
    for op in linalg_ext.find_all(module) + online:
        why = _why(op, options)
        if why is None:
            if linalg_ext.mask_replaces(op):
                remarks.emit(op.location, _KEPT_ADDING)
            continue
        location, online = op.location, op.name == linalg_ext.ONLINE_ATTENTION
        decompose_attention(op)
        parts = "matmul, running max and sum, matmul" if online else "matmul, softmax, matmul"
        remarks.emit(location, f"attention decomposed into {parts}{why}")
