"""fusion-caller-storage: entry points take result and transient buffers from the caller.

Each entry point writes its results, and keeps its transient memory, in buffers its
caller passes (destination-passing, as IREE's ``iree.abi.output`` and
``iree.abi.transients`` do)::

    @f$async(%in.., %wait, %done)          @f$async(%in.., %out.., %tmp, %wait, %done)
      %r = barrier join(%t) => %done  ->     %a = alias wait(%wait) => %t to %out
                                             %b = transients %a from %tmp
                                             %r = barrier join(%b) => %done
    @f(%in..) calls @f$async               @f(%in.., %out.., %tmp) passes them on

Without it IREE allocates each result, and the scratch memory of the generated kernels,
afresh for every call: with the CUDA driver's stream-ordered allocations off (as the
runtime sets them) a synchronous allocation and a free that waits for the device: half
of a blocking call of one attention kernel on an H200
(benchmarks/results/call_overhead_h200.md). With
storage the runtime passes tensors torch allocated on the device and hands the results
back as they are; ``iree.abi.transients.size.constant`` on the ``$async`` function says
how large the transient buffer must be. An entry point with inputs or results of dynamic
size (known only once it is called, or once it ran) keeps its form.
``signature.STORAGE_KEY`` tells the runtime how many result buffers follow the inputs,
then one transient buffer.

After IREE's stream phase, ``pin_transient_sizes`` gives the transient buffer the size
IREE computed for it (a constant) in place of the length the caller's buffer has (a
value known only when called). With every buffer of the call from its caller and no size
left to read at run time, IREE records the call's command buffer once, with the buffers
as slots of a binding table (the kernels' bindings are indirect,
``backends.dispatch``), and each call submits it with its own buffers: the host no
longer records every dispatch again. IREE checks that the buffer passed is at least that
large.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusion_compiler.dialects import hal
from fusion_compiler.passes.online_softmax import MARKER as ONLINE_SOFTMAX

from fusion_compiler import remarks, signature
from fusion_compiler.ir import dialects, ir

NAME = "fusion-caller-storage"


@dataclass(frozen=True)
class Options:
    pass


def _functions(module: ir.Operation) -> dict[str, ir.Operation]:
    return {
        ir.StringAttr(op.attributes["sym_name"]).value: op.operation
        for op in module.regions[0].blocks[0].operations
        if op.operation.name == "util.func"
    }


def _reflection(func: ir.Operation) -> dict[str, ir.Attribute]:
    if "iree.reflection" not in func.attributes:
        return {}
    return {a.name: a.attr for a in ir.DictAttr(func.attributes["iree.reflection"])}


def _has_storage(func: ir.Operation) -> bool:
    return signature.STORAGE_KEY in _reflection(func)


def _owner(value: ir.Value) -> ir.Operation | None:
    owner = value.owner
    return owner.operation if isinstance(owner, ir.Operation | ir.OpView) else None


def _results(body: ir.Operation) -> tuple[ir.Operation, list[int]] | str:
    """The barrier that joins the results of an ``$async`` body, and which of its values
    each returned buffer view exports; or why there is none."""
    block = body.regions[0].blocks[0]
    for op in block.operations:
        op = op.operation
        if op.name == "hal.tensor.import":
            if not ir.RankedTensorType(op.results[0].type).has_static_shape:
                return "an input of dynamic size (the transient memory's size would be too)"
        if ONLINE_SOFTMAX in op.attributes:
            # its blocks' temporaries are sized per block on the host, inside the loop:
            # IREE's stream phase cannot hoist one transient size out of it
            return "an online-softmax loop nest (its transient memory is sized per block)"
    ret = list(block.operations)[-1].operation
    barrier, joined = None, []
    for value in ret.operands:
        export = _owner(value)
        if export is None or export.name != "hal.tensor.export":
            return "a result that is not an exported tensor"
        source = export.operands[0]
        owner = _owner(source)
        if owner is None or owner.name != "hal.tensor.barrier":
            return "a result not joined by the call's barrier"
        if barrier is not None and owner != barrier:
            return "results joined by several barriers"
        if not ir.RankedTensorType(source.type).has_static_shape:
            return "a result of dynamic size (known only once the call ran)"
        barrier = owner
        joined.append(ir.OpResult(source).result_number)
    if barrier is None:
        return "no result"
    return barrier, joined


def _set_type(func: ir.Operation) -> None:
    block = func.regions[0].blocks[0]
    old = ir.TypeAttr(func.attributes["function_type"]).value
    inputs = [a.type for a in block.arguments]
    func.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(inputs, ir.FunctionType(old).results)
    )


def give_storage_async(body: ir.Operation, barrier: ir.Operation, joined: list[int]) -> None:
    """f$async(%in.., %wait, %done) -> f$async(%in.., %out.., %tmp, %wait, %done), each
    result aliased to its storage and computed with %tmp's memory before the barrier."""
    block = body.regions[0].blocks[0]
    n = len(block.arguments)
    views = [block.add_argument(hal.buffer_view_type(), body.location) for _ in joined]
    scratch = block.add_argument(hal.buffer_view_type(), body.location)
    # the fences move behind the storage: new arguments take their uses, the old go
    for fence in list(block.arguments)[n - 2 : n]:
        moved = block.add_argument(fence.type, body.location)
        fence.replace_all_uses_with(moved)
    block.erase_argument(n - 2)
    block.erase_argument(n - 2)
    wait = block.arguments[len(block.arguments) - 2]
    with ir.InsertionPoint(barrier), barrier.location:
        for out, index in zip(views, joined, strict=True):
            aliased = hal.alias(barrier.operands[index], out, wait)
            barrier.operands[index] = hal.transients(aliased, scratch)
    _set_type(body)


def give_storage_sync(func: ir.Operation, callee: str, count: int) -> None:
    """f(%in..) -> f(%in.., %out.., %tmp), passed on to ``callee`` before its fences."""
    block = func.regions[0].blocks[0]
    storage = [block.add_argument(hal.buffer_view_type(), func.location) for _ in range(count + 1)]
    calls = [
        op.operation
        for op in block.operations
        if op.operation.name == "util.call"
        and ir.FlatSymbolRefAttr(op.operation.attributes["callee"]).value == callee
    ]
    for call in calls:
        operands = list(call.operands)
        with ir.InsertionPoint(call), call.location:
            new = ir.Operation.create(
                "util.call",
                results=[r.type for r in call.results],
                operands=operands[:-2] + storage + operands[-2:],
                attributes={name: call.attributes[name] for name in call.attributes},
            )
        for old, value in zip(call.results, new.results, strict=True):
            old.replace_all_uses_with(value)
        call.erase()
    _set_type(func)
    reflection = _reflection(func)
    reflection[signature.STORAGE_KEY] = ir.StringAttr.get(str(count))
    func.attributes["iree.reflection"] = ir.DictAttr.get(reflection)


def run(module: ir.Operation, options: Options) -> None:
    with module.context:
        functions = _functions(module)
        for name, func in functions.items():
            body = functions.get(f"{name}$async")
            if body is None or _has_storage(func):
                continue
            found = _results(body)
            if isinstance(found, str):
                why = f"{name} returns its results as IREE allocates them: {found}"
                remarks.emit(func.location, why)
                continue
            barrier, joined = found
            give_storage_async(body, barrier, joined)
            give_storage_sync(func, f"{name}$async", len(joined))
            written = (
                f"{name} writes its {len(joined)} result(s) into storage its caller passes, "
                "and takes its transient memory from the caller"
            )
            remarks.emit(func.location, written)


def _transient_lengths(func: ir.Operation) -> list[ir.Operation]:
    """The ``hal.buffer.length`` ops reading the length of the transient buffer
    argument (the one before the two fences) of an ``$async`` function."""
    block = func.regions[0].blocks[0]
    scratch = block.arguments[len(block.arguments) - 3]
    lengths = []
    for use in scratch.uses:
        view = use.owner.operation if hasattr(use.owner, "operation") else use.owner
        if view.name != "hal.buffer_view.buffer":
            continue
        for inner in view.results[0].uses:
            op = inner.owner.operation if hasattr(inner.owner, "operation") else inner.owner
            if op.name == "hal.buffer.length":
                lengths.append(op)
    return lengths


def pin_transient_sizes(module: ir.Operation) -> list[str]:
    """After IREE's stream phase: the transient buffer of each entry point with caller
    storage has the constant size IREE computed for it. Returns the functions changed."""
    pinned = []
    key = "iree.abi.transients.size.constant"
    with module.context:
        functions = _functions(module)
        for name, func in functions.items():
            caller = functions.get(name.removesuffix("$async"))
            if not name.endswith("$async") or caller is None:
                continue
            if not _has_storage(caller):
                continue
            size = _reflection(func).get(key)
            if size is None:
                continue
            size = ir.IntegerAttr(size).value
            lengths = _transient_lengths(func)
            for length in lengths:
                with ir.InsertionPoint(length), length.location:
                    constant = dialects.arith.ConstantOp(ir.IndexType.get(), size).result
                length.results[0].replace_all_uses_with(constant)
                length.erase()
            if lengths:
                pinned.append(name.removesuffix("$async"))
    return pinned
