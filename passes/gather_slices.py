"""fusion-gather-slices: a concatenation of slices of one tensor -> one elementwise read of it.

RoPE's ``rotate_half`` (Llama, Mistral, Qwen, GPT-NeoX, Phi...) is ``cat(-x[..., D/2:],
x[..., :D/2])``: a ``tensor.concat`` along the last dimension of two pieces, each a slice
of the same tensor, one negated. IREE 3.13 turns it into a gather over a (heads, 2, D/2)
view of ``x``; the multiply-add that consumes it runs over (heads, D), and with a reshape
between them they stay two dispatches (H100, a Llama-3.2-1B decoding step: 4 of its 17
dispatches per layer are RoPE). Here such a concatenation becomes one ``linalg.generic``
over the concatenation's own index space that reads ``x`` at the piece's index
(``tensor.extract``) and applies the piece's elementwise function: the consumers, over
the same space, take it into their dispatch.

A piece is a ``tensor.extract_slice`` of the source with unit strides that keeps every
other dimension whole, or an elementwise ``linalg.generic`` of one such slice (one input,
identity maps, a payload that reads neither the output nor the index).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

from fusion_compiler.dialects import linalg
from fusion_compiler.dialects.builders import (
    affine_map,
    empty_of,
    erase_dead,
    generic,
    index,
    inline_body,
    is_elementwise,
)

from fusion_compiler import remarks
from fusion_compiler.ir import dialects, ir

NAME = "fusion-gather-slices"


@dataclass(frozen=True)
class Options:
    pass


@dataclass(frozen=True)
class _Piece:
    source: ir.Value
    start: int  # the piece's first index along the concatenated dimension, in the source
    length: int
    function: ir.Operation | None  # the elementwise generic applied to the slice, if any


def _slice(value: ir.Value, dim: int) -> tuple[ir.Value, int] | None:
    """(source, start) of a slice that is whole but along ``dim``, with unit strides."""
    op = linalg.producer(value)
    found = linalg.plain_slice(op)
    if found is None:
        return None
    offsets, sizes = found
    source = op.operands[0]
    shape = ir.RankedTensorType(source.type).shape
    whole = all(offsets[i] == 0 and sizes[i] == shape[i] for i in range(len(shape)) if i != dim)
    return (source, offsets[dim]) if whole else None


# payload ops that may run on every element, the other pieces' too (their result is then
# not selected): no integer division (by 0 it is undefined), nothing that reads memory
_SPECULATABLE = ("arith.", "math.")
_NOT_SPECULATABLE = ("divsi", "divui", "remsi", "remui", "ceildivsi", "ceildivui", "floordivsi")


def _elementwise_of_one(op: ir.Operation | None) -> bool:
    """An elementwise generic (``builders.is_elementwise``) of one input read through the
    identity map, whose payload is made of arith and math ops without regions that may
    run on any element (so reads no ``linalg.index``)."""
    if not linalg.is_generic(op) or linalg.num_inputs(op) != 1 or len(op.results) != 1:
        return False
    if not is_elementwise(op):
        return False
    read = linalg.indexing_maps(op)[0]
    if read != ir.AffineMap.get_identity(read.n_dims):
        return False
    for body_op in linalg.payload(op):
        name = body_op.name
        if not name.startswith(_SPECULATABLE) or name.endswith(_NOT_SPECULATABLE):
            return False
        if len(body_op.regions):
            return False
    return True


def _piece(value: ir.Value, dim: int) -> _Piece | None:
    length = ir.RankedTensorType(value.type).shape[dim]
    found = _slice(value, dim)
    if found is not None:
        return _Piece(found[0], found[1], length, None)
    op = linalg.producer(value)
    if not _elementwise_of_one(op):
        return None
    found = _slice(linalg.inputs(op)[0], dim)
    if found is None:
        return None
    return _Piece(found[0], found[1], length, op)


def _pieces(op: ir.Operation) -> list[_Piece] | None:
    """The pieces of ``tensor.concat`` ``op``, all of one source shaped like the result
    but along the concatenated dimension; None where it is not such a concatenation."""
    result = ir.RankedTensorType(op.results[0].type)
    if not result.has_static_shape:
        return None
    dim = ir.IntegerAttr(op.attributes["dim"]).value
    pieces = [_piece(v, dim) for v in op.operands]
    if any(p is None for p in pieces) or len({p.source for p in pieces}) != 1:
        return None
    source = ir.RankedTensorType(pieces[0].source.type)
    same = [source.shape[i] == result.shape[i] for i in range(result.rank) if i != dim]
    if not all(same) or source.element_type != result.element_type:
        return None
    return pieces


def gather_slices(op: ir.Operation, pieces: list[_Piece]) -> None:
    """concat(f(slice(x, a)), g(slice(x, b)), ...) -> generic: at index i of the result,
    the piece's function of x at the piece's index."""
    result = ir.RankedTensorType(op.results[0].type)
    dim = ir.IntegerAttr(op.attributes["dim"]).value
    source = pieces[0].source
    ends = list(accumulate(p.length for p in pieces))  # where each piece ends, in the result
    with ir.InsertionPoint(op), op.location:
        init = empty_of(list(result.shape), result.element_type)

        def body(_: ir.Value) -> ir.Value:
            at = [dialects.linalg.IndexOp(i).result for i in range(result.rank)]
            # which piece the index falls in: each piece but the last ends at ends[k]
            below = dialects.arith.CmpIPredicate.ult
            inside = [dialects.arith.CmpIOp(below, at[dim], index(e)).result for e in ends[:-1]]

            def chosen(values: list[ir.Value]) -> ir.Value:
                picked = values[-1]
                for k in reversed(range(len(pieces) - 1)):
                    picked = dialects.arith.SelectOp(inside[k], values[k], picked).result
                return picked

            # the index each piece reads, then the one chosen (a select of sums, not a sum
            # with a selected shift: MLIR's vectorizer takes index + anything for a
            # contiguous read, and read a wrong half on the CPU)
            shifted = [
                dialects.arith.AddIOp(at[dim], index(p.start - (e - p.length))).result
                for p, e in zip(pieces, ends, strict=True)
            ]
            at[dim] = chosen(shifted)
            value = dialects.tensor.ExtractOp(source, at).result
            return chosen([inline_body(p.function, value) if p.function else value for p in pieces])

        identity = affine_map(result.rank, list(range(result.rank)))
        gathered = generic([], init, [identity], ["parallel"] * result.rank, body)
    remarks.emit(
        op.location,
        f"concatenation of {len(pieces)} slices of one tensor along dim {dim} read in place "
        "(one elementwise op its consumers take in)",
    )
    op.results[0].replace_all_uses_with(gathered)
    erase_dead([op])


def run(module: ir.Operation, options: Options) -> None:
    with module.context, module.location:
        found: list[ir.Operation] = []

        def visit(op: ir.Operation) -> ir.WalkResult:
            if op.name == "tensor.concat" and _pieces(op) is not None:
                found.append(op)
            return ir.WalkResult.ADVANCE

        module.walk(visit)
        for op in found:
            # read again: an earlier rewrite may have replaced this one's source (a
            # concatenation of slices of a concatenation of slices)
            pieces = _pieces(op)
            if pieces is not None:
                gather_slices(op, pieces)
