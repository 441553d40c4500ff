"""fusion-online-softmax: rewrites each fused attention as our FlashAttention-2 loop nest.

Q is tiled by ``block-q`` rows; a loop over ``block-k`` keys keeps a running max, a
running sum and a rescaled accumulator, with exp2 and the scale folded in, and divides
once at the end (``dialects/flash.py``). Masks, biases and the score region (softcap)
are carried into the loop body; no tensor of Nq×Nk scores is created.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusion_compiler.dialects import flash, linalg_ext
from fusion_compiler.dialects.builders import erase_dead

from fusion_compiler import remarks
from fusion_compiler.ir import ir

NAME = "fusion-online-softmax"


@dataclass(frozen=True)
class Options:
    block_q: int = 64
    block_k: int = 64


def rewrite_online_softmax(op: ir.Operation, form: flash.Layout, options: Options) -> None:
    """iree_linalg_ext.attention -> scf.for(Q blocks) { scf.for(K blocks) { FA2 step } }."""
    result = flash.build(op, form, options.block_q, options.block_k)
    op.results[0].replace_all_uses_with(result)
    erase_dead([op])  # and the mask producers, now re-run per block inside the loop


def run(module: ir.Operation, options: Options) -> None:
    for op in linalg_ext.find_all(module):
        form = flash.layout(op)
        if isinstance(form, str):
            remarks.emit(op.location, f"attention left to IREE: {form}")
            continue
        location = op.location
        rewrite_online_softmax(op, form, options)
        skipping = (
            f", key blocks above the diagonal (offset {form.causal_offset}) skipped"
            if form.causal_offset is not None
            else ""
        )
        remarks.emit(
            location,
            f"attention rewritten as online softmax "
            f"(blocks {options.block_q}x{options.block_k}{skipping})",
        )
