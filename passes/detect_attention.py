"""fusion-detect-attention: fuses softmax(f(Q·Kᵀ))·V written as separate ops into one attention op.

``f`` is any chain of score ops that is affine in the score: scales (mul or div by a
constant, on the scores; by a tensor that does not vary along the keys, folded into Q),
additive masks and biases, ``where``/``masked_fill`` with
-inf (buffers or iota/compare), and casts; optionally with a softcap (``cap·tanh(s/cap)``)
before the masks. It becomes the attention's ``scale``, its score region (the softcap)
and its additive ``mask = f(0)``. Anything else shaped like attention is left alone with
a remark saying why; a wrong rewrite is worse than none.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusion_compiler.dialects import attention, score
from fusion_compiler.dialects.builders import erase_dead

from fusion_compiler import remarks
from fusion_compiler.ir import ir

NAME = "fusion-detect-attention"


@dataclass(frozen=True)
class Options:
    pass


def describe(term: score.Affine) -> str:
    """``scale 0.125, softcap 30, with a mask``."""
    if term.tanh_of is None:
        parts = [f"scale {term.slope:g}"]
    else:
        parts = [f"scale {term.tanh_of:g}", f"softcap {term.slope:g}"]
    parts.append("with a mask" if term.offset else "without a mask")
    return ", ".join(parts)


def fuse_attention(found: attention.Attention) -> None:
    """batch_matmul(softmax(f(batch_matmul(Q, Kᵀ))), V) -> iree_linalg_ext.attention."""
    fused = attention.build(found)
    found.pv.results[0].replace_all_uses_with(fused)
    erase_dead(found.ops)


def run(module: ir.Operation, options: Options) -> None:
    anchors: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "linalg.batch_matmul":
            anchors.append(op.operation)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    for pv in anchors:
        found = attention.match(pv)
        if isinstance(found, attention.Attention):
            location = pv.location
            fuse_attention(found)
            extras = ", with a sink" if found.sink is not None else ""
            if found.row_factor is not None:
                extras += ", a factor per query row folded into Q"
            remarks.emit(location, f"fused attention ({describe(found.score)}{extras})")
        elif isinstance(found, attention.NearMiss):
            remarks.emit(found.op.location, f"attention not fused: {found.reason}")
