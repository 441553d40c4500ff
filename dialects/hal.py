"""hal: the host-side synchronisation ops we create (IREE 3.13 takes them at its input)."""

from __future__ import annotations

from fusion_compiler.dialects.builders import index

from fusion_compiler.ir import dialects, ir

_NO_FLAGS = 0  # hal.fence_flags "None", as IREE's ABI wrapper writes it


def _flags() -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), _NO_FLAGS)


def fence_type() -> ir.Type:
    return ir.Type.parse("!hal.fence")


def null_fence() -> ir.Value:
    """No fence: awaiting it returns at once (the VM skips null fences)."""
    return ir.Operation.create("util.null", results=[fence_type()]).result


def signal_when_ready(value: ir.Value) -> tuple[ir.Value, ir.Value]:
    """``value`` for chaining (``hal.tensor.barrier``), and a fresh fence the device
    signals once ``value`` has been computed, as IREE's ABI wrapper signals a call's end."""
    device = ir.Operation.create(
        "hal.devices.get", results=[ir.Type.parse("!hal.device")], operands=[index(0)]
    ).result
    fence = ir.Operation.create(
        "hal.fence.create",
        results=[fence_type()],
        operands=[device],
        attributes={"flags": _flags()},
    ).result
    ready = ir.Operation.create(
        "hal.tensor.barrier", results=[value.type], operands=[value, fence]
    ).result
    return ready, fence


def wait(fence: ir.Value) -> None:
    """The host program blocks until ``fence`` is signalled (no timeout)."""
    i32 = ir.IntegerType.get_signless(32)
    forever = dialects.arith.ConstantOp(i32, -1).result
    ir.Operation.create(
        "hal.fence.await", results=[i32], operands=[forever, fence], attributes={"flags": _flags()}
    )


def buffer_view_type() -> ir.Type:
    return ir.Type.parse("!hal.buffer_view")


def alias(value: ir.Value, storage: ir.Value, wait: ir.Value) -> ir.Value:
    """``value`` computed into ``storage`` (a caller's buffer view), once ``wait`` is
    reached: IREE's ``iree.abi.output`` lowering. Static shapes only (no dims operands)."""
    return ir.Operation.create(
        "hal.tensor.alias",
        results=[value.type],
        operands=[value, storage, wait],
        attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 0, 1, 1])},
    ).result


def transients(value: ir.Value, storage: ir.Value) -> ir.Value:
    """``value``, whose computation takes its transient memory from ``storage`` (a
    caller's buffer view) instead of allocating it on the queue."""
    return ir.Operation.create(
        "hal.tensor.transients", results=[value.type], operands=[value, storage]
    ).result
