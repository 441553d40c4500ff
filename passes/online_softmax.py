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
    block_q: int = 64  # 0: sized to the attention's batch (``blocks``)
    block_k: int = 64


# Sized blocks: each step of the loop nest writes the scores of one block for every batch
# and reads them back in the next op, so they should stay in cache. 256x256 blocks where
# those scores take at most this much, else 128x128 (2-core CPU, fp32, D64, interleaved
# A/B, benchmarks/results/cpu_online_softmax_blocks.md: 256x256 1.07x-1.34x faster than
# 128x128 over 8 heads, about 2x slower over 64; 64x64 no faster than 128x128 there).
_SCORES_BYTES = 2 << 20


def blocks(op: ir.Operation, options: Options) -> tuple[int, int]:
    """(block_q, block_k) for ``op``: the options', or sized to its batch where 0."""
    if options.block_q and options.block_k:
        return options.block_q, options.block_k
    batch = ir.RankedTensorType(op.operands[0].type).shape[0]
    side = 256 if 0 < batch * 256 * 256 * 4 <= _SCORES_BYTES else 128
    return options.block_q or side, options.block_k or side


def rewrite_online_softmax(
    op: ir.Operation, form: flash.Layout, block_q: int, block_k: int
) -> None:
    """iree_linalg_ext.attention -> scf.for(Q blocks) { scf.for(K blocks) { FA2 step } }."""
    result = flash.build(op, form, block_q, block_k)
    op.results[0].replace_all_uses_with(result)
    erase_dead([op])  # and the mask producers, now re-run per block inside the loop


def run(module: ir.Operation, options: Options) -> None:
    for op in linalg_ext.find_all(module):
        form = flash.layout(op)
        if isinstance(form, str):
            remarks.emit(op.location, f"attention left to IREE: {form}")
            continue
        location = op.location
        block_q, block_k = blocks(op, options)
        rewrite_online_softmax(op, form, block_q, block_k)
        skipping = (
            f", key blocks above the diagonal (offset {form.causal_offset}) skipped"
            if form.causal_offset is not None
            else ""
        )
        remarks.emit(
            location,
            f"attention rewritten as online softmax (blocks {block_q}x{block_k}{skipping})",
        )
