"""fusion-kernel-matvec: matrix-vector products -> dispatches of a generated sm_90 kernel.

A decoding step multiplies one token's activations by every weight matrix (M = 1): the
time is the time to read the weights, and IREE 3.13's code for these products on the
H200 reads them at a tenth of the memory's bandwidth (benchmarks/results/
decode_step_h200.md). Each ``linalg.batch_matmul`` (batch 1) or ``linalg.matmul`` of one
row, f16 or bf16, static sizes, becomes a dispatch of ``backends/triton/matvec.py``
compiled for sm_90a. The weight is read where it lives: through the broadcast to a batch
of one and the transpose of PyTorch's (N, K) Linear weight, so neither copy is made; a
cast of the f32 product to the input type after it is written by the kernel itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusion_compiler.dialects import linalg
from fusion_compiler.dialects.builders import dims, erase_dead

from fusion_compiler import remarks
from fusion_compiler.backends import dispatch
from fusion_compiler.backends.plan import output_cast
from fusion_compiler.backends.triton import epilogues
from fusion_compiler.backends.triton.matvec_kernel import (
    MARKER,
    MatvecSpec,
    compile_matvec,
    tiles,
)
from fusion_compiler.ir import ir

NAME = "fusion-kernel-matvec"
_ELEMENTS = ("f16", "bf16")


@dataclass(frozen=True)
class Options:
    arch: str = "sm_90"


def _shape(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def _element(value: ir.Value) -> str:
    return str(ir.RankedTensorType(value.type).element_type)


def is_broadcast_of_matrix(op: ir.Operation | None) -> bool:
    """A generic copying a (K, N) matrix into a (1, K, N) tensor."""
    if not linalg.is_generic(op) or len(op.operands) != 2 or linalg.payload(op):
        return False
    block = op.regions[0].blocks[0]
    if list(block.operations)[-1].operands[0] != block.arguments[0]:
        return False
    maps = [ir.AffineMapAttr(m).value for m in op.attributes["indexing_maps"]]
    return dims(maps[0]) == [1, 2] and maps[1] == ir.AffineMap.get_identity(3)


def weight_view(b: ir.Value) -> tuple[ir.Value, int, int]:
    """(base, sk, sn): the (K, N) or (1, K, N) operand ``b`` read in place from ``base``,
    its element (k, n) at k * sk + n * sn; through a broadcast to a batch of one and a
    transpose of an (N, K) matrix (PyTorch's Linear weight)."""
    op = linalg.producer(b)
    if is_broadcast_of_matrix(op):
        b, op = op.operands[0], linalg.producer(op.operands[0])
    k, n = _shape(b)[-2:]
    if op is not None and op.name == "linalg.transpose":
        if list(ir.DenseI64ArrayAttr(op.attributes["permutation"])) == [1, 0]:
            return op.operands[0], 1, k
    return b, n, 1


def _matvec(op: ir.Operation) -> str | None:
    """Why ``op`` is not a product this kernel takes, or None when it is."""
    if op.name not in ("linalg.batch_matmul", "linalg.matmul"):
        return "not a matmul"
    if "indexing_maps" in op.attributes and op.name == "linalg.matmul":
        maps = [ir.AffineMapAttr(m).value for m in op.attributes["indexing_maps"]]
        if [dims(m) for m in maps] != [[0, 2], [2, 1], [0, 1]]:
            return "a matmul with transposed operands"
    a, b = op.operands[0], op.operands[1]
    shapes = [_shape(v) for v in (a, b, op.results[0])]
    if any(ir.ShapedType.is_dynamic_size(x) for s in shapes for x in s):
        return "dynamic sizes"
    if op.name == "linalg.batch_matmul" and shapes[0][0] != 1:
        return "a batch of more than one"
    if shapes[0][-2] != 1:
        return "more than one row"
    if _element(a) not in _ELEMENTS or _element(b) != _element(a):
        return "operands not both f16 or both bf16"
    if _element(op.results[0]) not in ("f32", _element(a)):
        return "a result type other than f32 or the operands'"
    return None


def run(module: ir.Operation, options: Options) -> None:
    with module.context, module.location:
        found: list[ir.Operation] = []

        def visit(op: ir.Operation) -> ir.WalkResult:
            if op.name in ("linalg.batch_matmul", "linalg.matmul") and _matvec(op) is None:
                found.append(op)
            return ir.WalkResult.ADVANCE

        module.walk(visit)
        for n, op in enumerate(found):
            _lower(module, op, options, f"fusion_matvec_{n}")


def _lower(module: ir.Operation, op: ir.Operation, options: Options, symbol: str) -> None:
    """``op`` [-> cast] [-> its epilogue] -> flow.dispatch of the matvec kernel."""
    a, b = op.operands[0], op.operands[1]
    base, sk, sn = weight_view(b)
    k, n = _shape(b)[-2:]
    cast = output_cast(op)
    product = cast or op
    epilogue = epilogues.find(product.results[0], n)
    replaced = epilogue.ops[-1] if epilogue else product
    block_n, block_k, num_warps, num_stages = tiles(k, n, sk)
    spec = MatvecSpec(
        dtype=_element(a),
        out_dtype=_element(replaced.results[0]),
        k=k,
        n=n,
        sk=sk,
        sn=sn,
        block_n=block_n,
        block_k=block_k,
        num_warps=num_warps,
        num_stages=num_stages,
        arch=int(options.arch.removeprefix("sm_").rstrip("a")),
        **(epilogue.spec_fields(product.results[0]) if epilogue else {}),
    )
    kernel = compile_matvec(spec)
    inputs = [a, base, *(epilogue.inputs if epilogue else [])]
    dispatch.replace_by_kernel(
        module, replaced, op.location, symbol, kernel, inputs, spec.grid, (MARKER, spec.to_json())
    )
    remarks.emit(
        op.location,
        f"matrix-vector product lowered to a generated {options.arch} kernel "
        f"({spec.dtype}, K={k}, N={n}, {block_n} outputs per program"
        f"{', the weight read transposed' if sk == 1 else ''}){epilogues.said(epilogue)}",
    )
    erase_dead(epilogues.replaced(op, product, epilogue))
