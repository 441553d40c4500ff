"""Records each entry point's tensor signature in the module, for call-time checks.

The torch ABI passes ``!hal.buffer_view``s, which carry no shape or dtype, so the
tensor types are read off the ``hal.tensor.import``/``export`` ops and stored as
``iree.reflection`` entries that the runtime reads back (``fusion_compiler.runtime``).
What only the exported program knows, how dynamic dims relate (K and V of one length),
their ranges, and the constants (None) among the model's results, the front end leaves
on the module (``DIMS_KEY``, ``RANGES_KEY``, ``RESULTS_KEY``: per function); ``attach``
moves it into the reflection.
"""

from __future__ import annotations

import re

from fusion_compiler.ir import ir

INPUTS_KEY = "fusion.inputs"
OUTPUTS_KEY = "fusion.outputs"
# Per argument (``;``), per dim (``,``): "" or an expression over symbols, ``s0``, ``(2 * s0)``.
DIMS_KEY = "fusion.dims"
# Per symbol of DIMS_KEY (``;``): ``s0=2:4096``, the range torch.export was given for it
# (``Dim(min=, max=)``); an empty bound is unbounded.
RANGES_KEY = "fusion.dim_ranges"
# JSON of the model's results in order: {} a tensor the module returns, {"value": v} a
# constant the program returned (None) that the runtime puts back.
RESULTS_KEY = "fusion.results"
# The inputs of an unsigned torch type (``0,3``): MLIR's integers are signless, so the
# imported type (i8) is read as its unsigned twin there (ui8).
UNSIGNED_KEY = "fusion.unsigned_inputs"
# The results of an unsigned torch type (``0``), which the runtime views as unsigned.
UNSIGNED_OUTPUTS_KEY = "fusion.unsigned_outputs"
# The model's names of its tensor inputs (``,``-separated, in order:
# ``input_ids,attention_mask``), for remarks and errors to name an input (``input_name``).
NAMES_KEY = "fusion.input_names"
# IREE's SPIR-V target the module was compiled for (Vulkan): the runtime refuses a device
# that target's code is wrong on (``targets.VULKAN_VENDORS``)
VULKAN_TARGET_KEY = "fusion.vulkan_target"
# How many result storage buffer views follow an entry point's inputs
# (``fusion-caller-storage``): the runtime passes one per result, of its type, then one
# buffer for the call's transient memory.
STORAGE_KEY = "fusion.result_storage"
# The inputs a call updates in place (``,``-separated indices): the program wrote into them
# (``k_cache[:, :, pos] = k``), and IREE writes their new values into the buffers passed.
MUTATED_KEY = "fusion.mutated"
# The IREE parameters the module reads (compiled with external weights): ``;``-separated
# ``key=tensor<...>``, for the runtime to check the weights it is given.
PARAMETERS_KEY = "fusion.parameters"
_PARAMETER = re.compile(r'^#stream\.parameter\.named<"[^"]*"::"(.*)">$')
ANY = "*"  # an argument the module never reads: any tensor will do


def _functions(module: ir.Operation) -> dict[str, ir.Operation]:
    return {
        ir.StringAttr(op.attributes["sym_name"]).value: op.operation
        for op in module.regions[0].blocks[0].operations
        if op.operation.name == "util.func"
    }


def _tensor_types(func: ir.Operation) -> tuple[list[str], list[str], list[int]]:
    """Tensor types of the buffer-view arguments (``*`` for one never read) and results,
    and the arguments whose buffers receive a value (``hal.tensor.alias``)."""
    args = [a for a in func.regions[0].blocks[0].arguments if str(a.type) == "!hal.buffer_view"]
    inputs: dict[int, str] = {}
    outputs: list[str] = []
    written: list[int] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "hal.tensor.import":
            for i, arg in enumerate(args):
                if arg == op.operands[0]:  # the imported buffer view
                    inputs[i] = str(op.results[0].type)
        elif op.name == "hal.tensor.export":
            outputs.append(str(op.operands[0].type))
        elif op.name == "hal.tensor.alias":
            # its storage: a buffer view argument (the other operands are the value,
            # its dims and a fence)
            written.extend(i for i, arg in enumerate(args) if arg in list(op.operands))
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    return [inputs.get(i, ANY) for i in range(len(args))], outputs, sorted(set(written))


def attach(module: ir.Operation, vulkan_target: str | None = None) -> None:
    """Adds the signature to every public entry point with a ``$async`` body (torch ABI),
    and the Vulkan target it is compiled for."""
    functions = _functions(module)
    context = module.context
    facts: dict[str, dict[str, str]] = {}  # key -> function -> value, from the front end
    for key in (DIMS_KEY, RANGES_KEY, RESULTS_KEY, UNSIGNED_KEY, UNSIGNED_OUTPUTS_KEY, NAMES_KEY):
        if key in module.attributes:
            facts[key] = {
                a.name: ir.StringAttr(a.attr).value for a in ir.DictAttr(module.attributes[key])
            }
            del module.attributes[key]
    parameters = _parameters(module)
    for name, func in functions.items():
        body = functions.get(f"{name}$async")
        if body is None:
            continue
        inputs, outputs, written = _tensor_types(body)
        entries = {}
        if "iree.reflection" in func.attributes:
            entries = {a.name: a.attr for a in ir.DictAttr(func.attributes["iree.reflection"])}
        if STORAGE_KEY in entries:  # compiled before: its result storage follows the inputs
            inputs = inputs[: len(inputs) - int(ir.StringAttr(entries[STORAGE_KEY]).value) - 1]
        unsigned = facts.get(UNSIGNED_KEY, {}).get(name)
        for index in map(int, unsigned.split(",") if unsigned else []):
            if index < len(inputs):  # tensor<2x8xi8> -> tensor<2x8xui8>, tensor<i8> too
                inputs[index] = re.sub(r"([<x])i(\d+)>$", r"\1ui\2>", inputs[index])
        entries[INPUTS_KEY] = ir.StringAttr.get(";".join(inputs), context=context)
        entries[OUTPUTS_KEY] = ir.StringAttr.get(";".join(outputs), context=context)
        mutated = [i for i in written if i < len(inputs)]  # not the result storage
        if mutated:
            entries[MUTATED_KEY] = ir.StringAttr.get(",".join(map(str, mutated)), context=context)
        names = facts.get(NAMES_KEY, {}).get(name)
        if names is not None and names.count(",") + 1 == len(inputs):
            entries[NAMES_KEY] = ir.StringAttr.get(names, context=context)
        dims = facts.get(DIMS_KEY, {}).get(name)
        if dims is not None and dims.count(";") + 1 == len(inputs):
            entries[DIMS_KEY] = ir.StringAttr.get(dims, context=context)
        for key in (RANGES_KEY, RESULTS_KEY, UNSIGNED_OUTPUTS_KEY):
            value = facts.get(key, {}).get(name)
            if value is not None:
                entries[key] = ir.StringAttr.get(value, context=context)
        if parameters:
            entries[PARAMETERS_KEY] = ir.StringAttr.get(parameters, context=context)
        if vulkan_target is not None:
            entries[VULKAN_TARGET_KEY] = ir.StringAttr.get(vulkan_target, context=context)
        func.attributes["iree.reflection"] = ir.DictAttr.get(entries, context=context)


def input_name(op: ir.Operation, index: int) -> str | None:
    """The model's name of input ``index`` of the entry point ``op`` is in (``NAMES_KEY``);
    None if unknown."""
    names = (_entry_fact(op, NAMES_KEY) or "").split(",")
    return (names[index] or None) if index < len(names) else None


def _parameters(module: ir.Operation) -> str:
    """The module's parameters as PARAMETERS_KEY writes them ("" when it has none)."""
    found = []
    for op in module.regions[0].blocks[0].operations:
        if op.operation.name != "util.global" or "initial_value" not in op.attributes:
            continue
        match = _PARAMETER.match(str(op.attributes["initial_value"]).rsplit(" : ", 1)[0])
        if match:
            found.append(f"{match.group(1)}={ir.TypeAttr(op.attributes['type']).value}")
    return ";".join(found)


def _entry_fact(op: ir.Operation, key: str) -> str | None:
    """What the front end recorded under ``key`` for the entry point ``op`` is in (on the
    module before ``attach``, in the entry's reflection after)."""
    func = op
    while func is not None and func.name not in ("util.func", "func.func"):
        func = func.parent
    if func is None:
        return None
    name = ir.StringAttr(func.attributes["sym_name"]).value.removesuffix("$async")
    module = func.parent
    if key in module.attributes:  # before ``attach``
        entries = {a.name: a.attr for a in ir.DictAttr(module.attributes[key])}
        if name in entries:
            return ir.StringAttr(entries[name]).value
    entry = _functions(module).get(name)
    if entry is not None and "iree.reflection" in entry.attributes:
        entries = {a.name: a.attr for a in ir.DictAttr(entry.attributes["iree.reflection"])}
        return ir.StringAttr(entries[key]).value if key in entries else None
    return None


def dim_symbols(op: ir.Operation) -> dict[tuple[int, int], str]:
    """(input, dim) -> the symbol torch.export named that dim (``s0``), for the entry
    point ``op`` is in: inputs whose dims share a symbol are one size at every call (the
    runtime checks it)."""
    symbols = {}
    for i, dims in enumerate((_entry_fact(op, DIMS_KEY) or "").split(";")):
        for d, symbol in enumerate(dims.split(",")):
            if re.fullmatch(r"s\d+", symbol):
                symbols[i, d] = symbol
    return symbols


def dim_maxima(op: ir.Operation) -> dict[str, int]:
    """symbol -> the largest size torch.export was given for it (``Dim(max=)``), for the
    entry point ``op`` is in; the runtime refuses a call past it."""
    maxima = {}
    for entry in filter(None, (_entry_fact(op, RANGES_KEY) or "").split(";")):
        symbol, _, bounds = entry.partition("=")
        high = bounds.partition(":")[2]
        if high:
            maxima[symbol] = int(high)
    return maxima
