"""fusion-expand-reshapes: a ``tensor.reshape`` that regroups its source's dims becomes an
``expand_shape`` or a ``collapse_shape``.

With dynamic lengths, ``torch.bmm``'s and ``torch.einsum``'s views of (B·H, N, N) scores
as (B, H, N, N) reach Linalg as ``tensor.reshape`` to a shape computed at run time (a
``tensor.from_elements`` of the sizes). IREE 3.13 miscompiles it next to the rest of
such an attention on the CPU: NaN and wrong values that change from run to run, and a
heap corruption under IREE's own runtime (two chained attentions written with bmm, a
padding mask and an ALiBi bias, float32; found by the fuzzer). Nor can detection see an
attention through it. Where each dim of the smaller side is proven the product of a run
of dims of the larger (the sizes as affine forms of the sizes they are computed from:
``linalg.dim_form``), the reshape is that regrouping, which IREE folds into its
dispatches; others are left as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusion_compiler.dialects import linalg
from fusion_compiler.dialects.builders import collapse_shape, erase_dead, expand_shape

from fusion_compiler.ir import dialects, ir

NAME = "fusion-expand-reshapes"


@dataclass(frozen=True)
class Options:
    pass


Form = dict


def _normal(form: Form | None) -> Form | None:
    if form is None:
        return None
    return {1: form.get(1, 0), **{k: n for k, n in form.items() if k != 1 and n}}


def _groups(small: list[Form | None], large: list[Form | None]) -> list[list[int]] | None:
    """For each dim of ``small``, the run of ``large``'s dims whose product it is (size-1
    dims at the end join the last run); None where that is not proven."""
    if not small or len(large) <= len(small) or None in small or None in large:
        return None
    groups, at = [], 0
    for want in small:
        if at == len(large):
            return None
        group, product = [at], large[at]
        at += 1
        while _normal(product) != _normal(want):
            if at == len(large):
                return None
            product = linalg.product_form(product, large[at])
            if product is None:
                return None
            group.append(at)
            at += 1
        groups.append(group)
    for rest in range(at, len(large)):
        if _normal(large[rest]) != {1: 1}:
            return None
        groups[-1].append(rest)
    return groups


def _as_index(value: ir.Value) -> ir.Value:
    if isinstance(value.type, ir.IndexType):
        return value
    return dialects.arith.IndexCastOp(ir.IndexType.get(), value).result


def _regrouped(op: ir.Operation) -> ir.Value | None:
    """``op`` (a ``tensor.reshape``) as an expand or collapse of its source, built before it."""
    shape = linalg.producer(op.operands[1])
    if shape is None or shape.name != "tensor.from_elements":
        return None
    source, sizes = op.operands[0], list(shape.operands)
    result_type = ir.RankedTensorType(op.results[0].type)
    memo: dict = {}
    source_rank = ir.RankedTensorType(source.type).rank
    have = [linalg.dim_form(source, d, memo) for d in range(source_rank)]
    want = [linalg.size_form(s, memo) for s in sizes]
    for d, n in enumerate(result_type.shape):  # a static size of the result holds
        if not ir.ShapedType.is_dynamic_size(n):
            want[d] = {1: n}
    with ir.InsertionPoint(op), op.location:
        groups = _groups(have, want)
        if groups is not None:
            dynamic = [
                _as_index(s)
                for s, n in zip(sizes, result_type.shape, strict=True)
                if ir.ShapedType.is_dynamic_size(n)
            ]
            return expand_shape(source, result_type, groups, dynamic)
        groups = _groups(want, have)
        if groups is not None:
            return collapse_shape(source, result_type, groups)
    return None


def run(module: ir.Operation, options: Options) -> None:
    del options
    reshapes: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "tensor.reshape":
            reshapes.append(op.operation)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    with module.context:
        for op in reshapes:
            value = _regrouped(op)
            if value is not None:
                op.results[0].replace_all_uses_with(value)
                erase_dead([op])
