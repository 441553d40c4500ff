"""fusion-find-softmax: reports each softmax in Linalg on tensors, and what only looks like one.

An analysis pass: it leaves the IR unchanged and emits one remark per softmax
(``linalg.softmax`` or the max/sub/exp/sum/div decomposition) at the op that yields it,
and one per near miss with the reason it is not a softmax.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusion_compiler.dialects import softmax

from fusion_compiler import remarks
from fusion_compiler.ir import ir

NAME = "fusion-find-softmax"


@dataclass(frozen=True)
class Options:
    pass


def run(module: ir.Operation, options: Options) -> None:
    for found in softmax.find_all(module):
        if isinstance(found, softmax.Softmax):
            remarks.emit(
                found.result.location,
                f"softmax over dimension {found.dim} of {found.input.type} ({found.form})",
            )
        else:
            remarks.emit(found.op.location, f"not a softmax: {found.reason}")
