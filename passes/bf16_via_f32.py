"""fusion-bf16-via-f32: values become bf16 as PyTorch rounds them, in integer ops.

``x.to(torch.bfloat16)`` of an int64 tensor (ALiBi's distances, positions) reaches
Linalg as ``arith.sitofp %x : i64 to bf16``. llvm-cpu lowers that conversion to a call
of compiler-rt's ``__truncsfbf2``, which IREE 3.13's linker does not have ("undefined
symbol: __truncsfbf2"; the compile fails, measured in constant evaluation of an ALiBi
bias on the CPU). PyTorch converts an integer or a double to bf16 through float (c10's
BFloat16 is built from a float, rounded to nearest even), so ``sitofp``/``uitofp`` to
bf16 and ``truncf`` from f64 to bf16 in a payload become the same conversion to f32
and that rounding written in integer ops (arith's canonicalization folds a ``truncf``
of a ``sitofp`` back into the direct conversion). The result is PyTorch's, bit for bit.

A ``truncf`` from f32 to bf16 is rounded by the same integer ops: llvm-cpu computes
bf16 values in f32 (``iree-convert-bf16-arith-to-f32``) and so drops a ``truncf`` whose
result is extended again in the same dispatch: ``h.bfloat16().float()`` of an fp16 h
kept h's digits (0.30005 for PyTorch's 0.30078). Arithmetic on bf16 values is still
computed in f32 without rounding each result, as torch.compile computes it.

A bf16 ``dense_resource`` constant small enough for IREE to copy into a dispatch (a
relative-position bias table) becomes a dense one: llvm-cpu's bf16 emulation retypes
the copy to f32 but keeps the resource, and the compile fails verification ("'arith.
constant' op failed to verify that all of {value, result} have same type", measured).
A dense attribute's elements are converted with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fusion_compiler.dialects import linalg

from fusion_compiler.ir import ir

NAME = "fusion-bf16-via-f32"
_CONVERSIONS = ("arith.sitofp", "arith.uitofp", "arith.truncf")
# IREE copies a constant of at most 256 bytes into the dispatches that read it
# (iree-flow-inline-constants-max-byte-length); a margin above that costs nothing
_DENSE_BYTES = 1 << 16


@dataclass(frozen=True)
class Options:
    pass


def _to_bf16_directly(op: ir.Operation) -> bool:
    """A scalar sitofp/uitofp or truncf to bf16 (payloads hold them)."""
    return op.name in _CONVERSIONS and str(op.results[0].type) == "bf16"


def _constant(value: int, type_: ir.Type) -> ir.Value:
    return ir.Operation.create(
        "arith.constant", results=[type_], attributes={"value": ir.IntegerAttr.get(type_, value)}
    ).results[0]


def _round_to_bf16(x: ir.Value) -> ir.Value:
    """An f32 rounded to bf16, nearest even (NaN: the quiet NaN), in integer ops."""
    i32, i16 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(16)

    def op(name: str, *operands: ir.Value, result: ir.Type = i32, **attributes) -> ir.Value:
        return ir.Operation.create(
            name, results=[result], operands=list(operands), attributes=attributes
        ).results[0]

    bits = op("arith.bitcast", x)
    sixteen = _constant(16, i32)
    odd = op("arith.andi", op("arith.shrui", bits, sixteen), _constant(1, i32))
    rounded = op("arith.addi", bits, op("arith.addi", odd, _constant(0x7FFF, i32)))
    high = op("arith.shrui", rounded, sixteen)
    unordered = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 14)  # uno
    nan = op("arith.cmpf", x, x, result=ir.IntegerType.get_signless(1), predicate=unordered)
    chosen = op("arith.select", nan, _constant(0x7FC0, i32), high)
    return op("arith.bitcast", op("arith.trunci", chosen, result=i16), result=ir.BF16Type.get())


def through_f32(op: ir.Operation) -> None:
    """sitofp %i : i64 to bf16 -> round_to_bf16(sitofp %i : i64 to f32); a truncf from
    f32 rounded directly."""
    result = op.results[0]
    with ir.InsertionPoint(op), op.location:
        f32 = ir.F32Type.get()
        source = op.operands[0]
        if str(source.type) != "f32":
            source = ir.Operation.create(op.name, results=[f32], operands=[source]).results[0]
        narrow = _round_to_bf16(source)
    result.replace_all_uses_with(narrow)
    op.erase()


def _small_bf16_resource(op: ir.Operation) -> bool:
    if op.name != "arith.constant" or not isinstance(op.results[0].type, ir.RankedTensorType):
        return False
    type_ = ir.RankedTensorType(op.results[0].type)
    return (
        str(type_.element_type) == "bf16"
        and type_.has_static_shape
        and 2 * math.prod(type_.shape) <= _DENSE_BYTES
    )


def dense(op: ir.Operation) -> None:
    """A bf16 dense_resource constant whose bytes are known -> the same dense constant."""
    data = linalg.resource_bytes(op)
    type_ = op.results[0].type
    if data is None or data.size != 2 * math.prod(ir.RankedTensorType(type_).shape):
        return
    with op.context:
        op.attributes["value"] = ir.Attribute.parse(f'dense<"0x{data.tobytes().hex()}"> : {type_}')


def run(module: ir.Operation, options: Options) -> None:
    found: list[ir.Operation] = []
    constants: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if _to_bf16_directly(op.operation):
            found.append(op.operation)
        elif _small_bf16_resource(op.operation):
            constants.append(op.operation)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    for op in found:
        through_f32(op)
    for op in constants:
        dense(op)
