"""fusion-kernel-concat: concatenations of two tensors -> dispatches of a generated sm_90
copy kernel.

A decoding step with transformers' DynamicCache concatenates every layer's K and V cache
with the new token's along the sequence: the result's rows are longer than the cache's,
and IREE 3.13 copies such strided data with a "slow_memcpy" dispatch at about a tenth of
the memory's bandwidth (H200: 10 of a 16 ms Llama-1B decoding step at batch 16,
benchmarks/results/models_h200.md). Each ``tensor.concat`` of two tensors of f16, bf16 or
f32 with static sizes whose result no Linalg or tensor op reads (our kernels' dispatches
read it, or the function returns it: IREE would copy it as it is) becomes a dispatch of
``backends/triton/concat.py``, which copies both operands into the result with wide
loads and stores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fusion_compiler.dialects.builders import erase_dead

from fusion_compiler import remarks
from fusion_compiler.backends import dispatch
from fusion_compiler.backends.triton.concat_kernel import (
    MARKER,
    ConcatSpec,
    compile_concat,
)
from fusion_compiler.backends.triton.kernel import TRITON_TYPES
from fusion_compiler.ir import ir

NAME = "fusion-kernel-concat"
# ops whose producers IREE fuses into their own dispatches: a concat they read stays
_FUSING_DIALECTS = ("linalg.", "tensor.")


@dataclass(frozen=True)
class Options:
    arch: str = "sm_90"


def _shape(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def _copied(op: ir.Operation) -> bool:
    """Whether ``op`` is a concatenation of two static tensors of a type the kernel
    copies, which no op IREE fuses producers into reads."""
    if len(op.operands) != 2:
        return False
    types = [ir.RankedTensorType(v.type) for v in (*op.operands, op.results[0])]
    if any(not t.has_static_shape for t in types):
        return False
    if str(types[0].element_type) not in TRITON_TYPES:
        return False
    users = [use.owner for use in op.results[0].uses]
    return bool(users) and not any(u.name.startswith(_FUSING_DIALECTS) for u in users)


def run(module: ir.Operation, options: Options) -> None:
    with module.context, module.location:
        found: list[ir.Operation] = []

        def visit(op: ir.Operation) -> ir.WalkResult:
            if op.name == "tensor.concat" and _copied(op):
                found.append(op)
            return ir.WalkResult.ADVANCE

        module.walk(visit)
        for n, op in enumerate(found):
            _lower(module, op, options, f"fusion_concat_{n}")


def _lower(module: ir.Operation, op: ir.Operation, options: Options, symbol: str) -> None:
    """``tensor.concat`` -> flow.dispatch of the concat kernel."""
    a, b = op.operands
    dim = ir.IntegerAttr(op.attributes["dim"]).value
    shape = _shape(op.results[0])
    inner = math.prod(shape[dim + 1 :])
    spec = ConcatSpec(
        dtype=str(ir.RankedTensorType(a.type).element_type),
        outer=math.prod(shape[:dim]),
        a_row=_shape(a)[dim] * inner,
        b_row=_shape(b)[dim] * inner,
        arch=int(options.arch.removeprefix("sm_").rstrip("a")),
    )
    kernel = compile_concat(spec)
    inputs, tagged = [a, b], (MARKER, spec.to_json())
    dispatch.replace_by_kernel(module, op, op.location, symbol, kernel, inputs, spec.grid, tagged)
    remarks.emit(
        op.location,
        f"concatenation lowered to a generated {options.arch} copy kernel "
        f"({spec.dtype}, {'x'.join(map(str, shape))} along dim {dim})",
    )
    erase_dead([op])
