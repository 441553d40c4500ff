"""fusion-bf16-via-f32: integer and f64 values become bf16 through f32, as PyTorch rounds them.

``x.to(torch.bfloat16)`` of an int64 tensor (ALiBi's distances, positions) reaches
Linalg as ``arith.sitofp %x : i64 to bf16``. llvm-cpu lowers that conversion to a call
of compiler-rt's ``__truncsfbf2``, which IREE 3.13's linker does not have ("undefined
symbol: __truncsfbf2"; the compile fails, measured in constant evaluation of an ALiBi
bias on the CPU). PyTorch converts an integer or a double to bf16 through float (c10's
BFloat16 is built from a float, rounded to nearest even), so ``sitofp``/``uitofp`` to
bf16 and ``truncf`` from f64 to bf16 in a payload become the same conversion to f32
and that rounding written in integer ops (arith's canonicalization folds a ``truncf``
of a ``sitofp`` back into the direct conversion). The result is PyTorch's, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusion_compiler.ir import ir

NAME = "fusion-bf16-via-f32"
_CONVERSIONS = ("arith.sitofp", "arith.uitofp", "arith.truncf")


@dataclass(frozen=True)
class Options:
    pass


def _to_bf16_directly(op: ir.Operation) -> bool:
    """A scalar sitofp/uitofp to bf16, or truncf from f64 to bf16 (payloads hold them)."""
    if op.name not in _CONVERSIONS or str(op.results[0].type) != "bf16":
        return False
    return op.name != "arith.truncf" or str(op.operands[0].type) == "f64"


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
    """sitofp %i : i64 to bf16 -> round_to_bf16(sitofp %i : i64 to f32)."""
    result = op.results[0]
    with ir.InsertionPoint(op), op.location:
        f32 = ir.F32Type.get()
        wide = ir.Operation.create(op.name, results=[f32], operands=[op.operands[0]])
        narrow = _round_to_bf16(wide.results[0])
    result.replace_all_uses_with(narrow)
    op.erase()


def run(module: ir.Operation, options: Options) -> None:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if _to_bf16_directly(op.operation):
            found.append(op.operation)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    for op in found:
        through_f32(op)
