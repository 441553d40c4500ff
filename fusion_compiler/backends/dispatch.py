"""A kernel's binary -> a ``hal.executable.source`` and the ``flow.dispatch`` that runs it.

The binary (a cubin from Triton for CUDA, SPIR-V from the GLSL shader for Vulkan) travels
inside the executable's objects; IREE links it as the executable for that target and
dispatches it like its own. Each dispatch carries its kernel's spec as JSON
(``MARKER``), readable in the IR dumps.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from fusion_compiler.backends.plan import KernelPlan, OutputPlan
from fusion_compiler.backends.spec import Kernel, Problem
from fusion_compiler.backends.triton.spec import TritonSpec
from fusion_compiler.backends.vulkan.spec import VulkanSpec
from fusion_compiler.dialects import linalg
from fusion_compiler.dialects.builders import (
    expand_shape,
    extract_slice,
    index,
    static_elements,
)
from fusion_compiler.ir import dialects, ir

_EXECUTABLE_TARGETS = {
    "cuda": '#hal.executable.target<"cuda", "cuda-nvptx-fb">',
    "vulkan": '#hal.executable.target<"vulkan-spirv", "vulkan-spirv-fb">',
}
# Read-only and writable bindings of a kernel's layout: each may be indirect. A command
# buffer that runs more than once (its buffers the call's inputs, results and transient
# memory) then names them by slot in a binding table, so IREE records it once and
# replays it with each call's buffers. Without the flag IREE records the buffer itself,
# and the whole command buffer afresh each call. A binding of a constant (a weight) stays
# direct either way.
_READ_ONLY = '#hal.pipeline.binding<storage_buffer, "ReadOnly|Indirect">'
_WRITABLE = "#hal.pipeline.binding<storage_buffer, Indirect>"
# On each kernel dispatch: the kernel's spec as JSON, readable in the IR dumps (and how
# fused attentions are still counted and tests rebuild the kernel).
MARKER = "fusion.attention_kernel"
_SPECS: dict[str, type[Problem]] = {"cuda": TritonSpec, "vulkan": VulkanSpec}


def _shape(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def _dim(value: ir.Value, axis: int) -> ir.Value:
    return dialects.tensor.DimOp(value, dialects.arith.ConstantOp(ir.IndexType.get(), axis)).result


def _dense_bytes(data: bytes) -> str:
    return f'dense<"0x{data.hex().upper()}"> : vector<{len(data)}xi8>'


def _constant(value: int) -> ir.Value:
    return dialects.arith.ConstantOp(ir.IndexType.get(), value).result


def add_executable(
    module: ir.Operation,
    symbol: str,
    kernel: Kernel,
    n_inputs: int,
    grid: tuple[int, int, int],
    dynamic_rows: int | None = None,
) -> ir.Operation:
    """A ``hal.executable.source`` holding the kernel's binary (a cubin for CUDA, SPIR-V
    for Vulkan), first in ``module``: ``n_inputs`` read-only bindings, then the output
    and, for Triton's kernels, its scratch pointers. The grid is static, or with
    ``dynamic_rows`` its x is the row blocks of that height in n_q, the dispatch's
    workload. IREE's hal attributes have no builders here: they are parsed."""
    index = ir.IndexType.get()
    bindings = ", ".join([_READ_ONLY] * n_inputs + [_WRITABLE] * (1 + kernel.hidden_pointers))
    suffix = "cubin" if kernel.target == "cuda" else "spv"
    obj = (
        f'#hal.executable.object<{{path = "{symbol}.{suffix}", '
        f"data = {_dense_bytes(kernel.binary)}}}>"
    )
    target = _EXECUTABLE_TARGETS[kernel.target]
    export_attributes = {
        "layout": ir.Attribute.parse(f"#hal.pipeline.layout<bindings = [{bindings}]>"),
        "ordinal": ir.IntegerAttr.get(index, 0),
        "sym_name": ir.StringAttr.get(kernel.name),
        "sym_visibility": ir.StringAttr.get("public"),
        "workgroup_size": ir.ArrayAttr.get(
            [ir.IntegerAttr.get(index, n) for n in (kernel.threads, 1, 1)]
        ),
    }
    if kernel.shared_bytes:
        export_attributes["workgroup_local_memory"] = ir.IntegerAttr.get(index, kernel.shared_bytes)
    with ir.InsertionPoint.at_block_begin(module.regions[0].blocks[0]):
        source = ir.Operation.create(
            "hal.executable.source",
            attributes={
                "objects": ir.Attribute.parse(f"#hal.executable.objects<{{{target} = [{obj}]}}>"),
                "sym_name": ir.StringAttr.get(symbol),
                "sym_visibility": ir.StringAttr.get("private"),
            },
            regions=1,
        )
    with ir.InsertionPoint(source.regions[0].blocks.append()):
        export = ir.Operation.create(
            "hal.executable.export", attributes=export_attributes, regions=2
        )
        ir.Operation.create("hal.executable.source_end")
    device = ir.Type.parse("!hal.device")
    count = export.regions[0].blocks.append(device, *([index] if dynamic_rows else []))
    with ir.InsertionPoint(count):
        if dynamic_rows is not None:  # ceil(n / rows)
            last, rows = _constant(dynamic_rows - 1), _constant(dynamic_rows)
            padded = dialects.arith.AddIOp(count.arguments[1], last).result
            x = dialects.arith.DivUIOp(padded, rows).result
        else:
            x = _constant(grid[0])
        y, z = _constant(grid[1]), _constant(grid[2])
        ir.Operation.create("hal.return", operands=[x, y, z])
    return source


def dispatch_kernel(
    symbol: str,
    kernel: Kernel,
    workload: list[ir.Value],
    arguments: list[ir.Value],
    result_type: ir.Type,
    result_dims: list[ir.Value],
    attributes: dict[str, ir.Attribute],
    programs: int = 1,
) -> ir.Value:
    """A flow.dispatch of ``kernel`` (executable ``symbol``) at the current insertion
    point; its result. Triton's global scratch (where its TMA descriptors are made) is a
    result of ``programs`` times the kernel's bytes per program; IREE leaves it
    uninitialised, which the kernel expects."""
    i8 = ir.IntegerType.get_signless(8)
    if arguments and not any(map(_reads_an_argument, arguments)):
        arguments = _behind_a_barrier(arguments)
    sizes = [kernel.scratch_bytes * programs, 0][: kernel.hidden_pointers]  # global, profile
    scratch = [ir.RankedTensorType.get([max(1, size)], i8) for size in sizes]
    argument_dims = [
        _dim(a, axis)
        for a in arguments
        for axis, size in enumerate(_shape(a))
        if ir.ShapedType.is_dynamic_size(size)
    ]
    segments = [len(workload), len(arguments), len(argument_dims), len(result_dims)]
    dispatch = ir.Operation.create(
        "flow.dispatch",
        results=[result_type, *scratch],
        operands=[*workload, *arguments, *argument_dims, *result_dims],
        attributes={
            "entry_points": ir.ArrayAttr.get([ir.SymbolRefAttr.get([symbol, kernel.name])]),
            "operandSegmentSizes": ir.DenseI32ArrayAttr.get(segments),
            "tied_operands": ir.ArrayAttr.get(
                [ir.IntegerAttr.get(ir.IndexType.get(), -1)] * (1 + kernel.hidden_pointers)
            ),
            **attributes,
        },
    )
    return dispatch.results[0]


# a Step's argument that is the step before's result
PREVIOUS = None


@dataclass(frozen=True)
class Step:
    """One dispatch of a kernel that stands alone (``replace_by_kernels``): its executable
    ``symbol``, its ``inputs`` (``PREVIOUS``: the step before's result), a static grid,
    and the (shape, element type) of its result where it is not the replaced op's."""

    symbol: str
    kernel: Kernel
    inputs: list[ir.Value | None]
    grid: tuple[int, int, int]
    result: tuple[tuple[int, ...], str] | None = None


def replace_by_kernels(
    module: ir.Operation,
    replaced: ir.Operation,
    location: ir.Location,
    steps: list[Step],
    spec: tuple[str, str],
) -> None:
    """``replaced``'s one result made by flow.dispatches of ``steps``' kernels in order,
    placed before it at ``location``; the first dispatch carries ``spec``, (attribute
    name, the kernel's spec as JSON). A stand-alone kernel's lowering (a product, a
    concatenation): the caller erases what is dead."""
    value = None
    with ir.InsertionPoint(replaced), location:
        for n, step in enumerate(steps):
            inputs = [value if x is PREVIOUS else x for x in step.inputs]
            add_executable(module, step.symbol, step.kernel, len(inputs), step.grid)
            result_type = replaced.results[0].type
            if step.result is not None:
                shape, element = step.result
                result_type = ir.RankedTensorType.get(list(shape), ir.Type.parse(element))
            value = dispatch_kernel(
                step.symbol,
                step.kernel,
                [],
                inputs,
                result_type,
                [],
                {spec[0]: ir.StringAttr.get(spec[1])} if n == 0 else {},
                step.grid[0] * step.grid[1] * step.grid[2],
            )
    replaced.results[0].replace_all_uses_with(value)


def replace_by_kernel(
    module: ir.Operation,
    replaced: ir.Operation,
    location: ir.Location,
    symbol: str,
    kernel: Kernel,
    inputs: list[ir.Value],
    grid: tuple[int, int, int],
    spec: tuple[str, str],
) -> None:
    """``replaced``'s one result made by a flow.dispatch of ``kernel`` (executable
    ``symbol``, a static ``grid``) on ``inputs``, placed before it at ``location``; the
    dispatch carries ``spec``, (attribute name, the kernel's spec as JSON). A stand-alone
    kernel's lowering (a product, a concatenation): the caller erases what is dead."""
    replace_by_kernels(module, replaced, location, [Step(symbol, kernel, inputs, grid)], spec)


def _reads_an_argument(value: ir.Value) -> bool:
    """Whether ``value`` is computed from a block argument (the function's inputs), not
    from constants alone."""
    seen: set[ir.Operation] = set()
    stack = [value]
    while stack:
        op = linalg.producer(stack.pop())
        if op is None:
            return True
        if op not in seen:
            seen.add(op)
            stack.extend(op.operands)
    return False


def _behind_a_barrier(values: list[ir.Value]) -> list[ir.Value]:
    """``values`` through a ``util.optimization_barrier``. A dispatch computed from
    constants alone (a block map of a mask the model computes from its own buffers) is
    otherwise evaluated at compile time by IREE's const-eval, which compiles it for the
    host: IREE 3.13 crashes on a kernel for the GPU there (segfault in
    global-optimization)."""
    barrier = ir.Operation.create(
        "util.optimization_barrier", results=[v.type for v in values], operands=values
    )
    return list(barrier.results)


def module_of(op: ir.Operation) -> ir.Operation:
    while op.name != "builtin.module":
        op = op.parent
    return op


def _block_map(
    kernels: dict[str, Kernel], spec: TritonSpec, inputs: list[ir.Value], symbol: str
) -> ir.Value:
    """The dispatches of the ``block_classes`` and ``block_lists`` kernels, at the current
    insertion point: the int32 block map they compute from the mask's inputs (``inputs``
    after Q, K and V)."""
    module = module_of(ir.InsertionPoint.current.block.owner)
    i32 = ir.IntegerType.get_signless(32)
    value = None
    steps = (
        ("block_classes", spec.classes_grid, inputs[3:], spec.map_scratch_elements),
        ("block_lists", spec.map_grid, None, spec.map_elements),
    )
    for entry, grid, arguments, elements in steps:
        name, kernel = f"{symbol}_{entry}", kernels[entry]
        arguments = [value] if arguments is None else arguments
        add_executable(module, name, kernel, len(arguments), grid)
        result_type = ir.RankedTensorType.get([elements], i32)
        programs = grid[0] * grid[1] * grid[2]
        value = dispatch_kernel(name, kernel, [], arguments, result_type, [], {}, programs)
    return value


def build_dispatch(
    op: ir.Operation,
    kernels: dict[str, Kernel],
    kernel_plan: KernelPlan,
    symbol: str,
    spare_output: int = 0,
) -> OutputPlan:
    """Adds the executables to the module and flow.dispatches of them before ``op``.

    Bindings follow the kernel's parameters: Q, K, V, the mask (Q again without one),
    the sizes (Q again while static), the output, then two scratch results for the
    pointers Triton appends. Inputs are the tensors the kernel's views read in place; the
    result replaces the plan's output. With a ``kernels["combine"]`` (a split-KV
    TritonSpec) the kernel writes a float32 buffer of partial results that a second
    dispatch of it merges into the output; with ``kernels["block_classes"]`` and
    ``["block_lists"]`` their dispatches before the attention compute the block map it
    reads. With ``spare_output``, the kernel writes a flat output that many elements
    longer (a Vulkan shader storing 16-bit elements as 32-bit words: the last word must
    lie in the buffer), sliced and shaped as the plan's result.
    """
    spec, inputs, plan, form = (
        kernel_plan.spec,
        kernel_plan.inputs,
        kernel_plan.output,
        kernel_plan.form,
    )
    kernel = kernels["attention"]
    marker = {MARKER: ir.StringAttr.get(spec.to_json())}
    n_inputs = len(spec.pointers) - 1
    with ir.InsertionPoint(plan.replaced), op.location:
        workload, arguments = [], [*inputs]
        if "Sizes" in spec.pointers:  # static sizes: Q bound, never read
            arguments.append(inputs[0])
        result_dims: list[ir.Value] = []
        if spec.dynamic:
            n_q = _dim(op.operands[0], 1)
            n_k = _dim(op.operands[1], 2 if form.k_transposed else 1)
            i32 = ir.IntegerType.get_signless(32)
            sizes = ir.Operation.create(
                "tensor.from_elements",
                results=[ir.RankedTensorType.get([2], i32)],
                operands=[dialects.arith.IndexCastOp(i32, n).result for n in (n_q, n_k)],
            ).results[0]
            workload, arguments = [n_q], [*inputs, sizes]
            result_dims = [n_q] * sum(
                ir.ShapedType.is_dynamic_size(x)
                for x in ir.RankedTensorType(plan.result_type).shape
            )
        if "block_lists" in kernels:  # static sizes: the map after the mask's inputs
            assert isinstance(spec, TritonSpec)
            arguments.insert(len(inputs), _block_map(kernels, spec, inputs, symbol))
        if kernel_plan.sink is not None:  # a sink's logits after them (``pointers``)
            arguments.insert(len(inputs) + ("block_lists" in kernels), kernel_plan.sink)
        rows = spec.block_m if spec.dynamic else None
        grid = spec.grid_for(max(spec.n_q, 1))  # dynamic: x from the workload
        if kernel.scratch_bytes and spec.dynamic:
            raise ValueError("a kernel with global scratch needs a static grid")
        programs = grid[0] * grid[1] * grid[2]
        module = module_of(ir.InsertionPoint.current.block.owner)
        add_executable(module, symbol, kernel, n_inputs, grid, rows)
        if "combine" not in kernels:

            def make(result_type: ir.Type, dims: list[ir.Value]) -> ir.Value:
                return dispatch_kernel(
                    symbol, kernel, workload, arguments, result_type, dims, marker, programs
                )

            if spare_output:
                lengths = [n_q] if spec.dynamic else []
                result = _with_spare(plan.result_type, lengths, spare_output, make)
            else:
                result = make(plan.result_type, result_dims)
        else:  # static n_q: the partial results have a static size
            assert isinstance(spec, TritonSpec)
            partial_type = ir.RankedTensorType.get([spec.partial_elements], ir.F32Type.get())
            partial = dispatch_kernel(
                symbol, kernel, workload, arguments, partial_type, [], marker, programs
            )
            combine = kernels["combine"]
            merge = f"{symbol}_combine"
            add_executable(module, merge, combine, 1, spec.combine_grid)
            result = dispatch_kernel(merge, combine, [], [partial], plan.result_type, [], {})
    plan.replaced.results[0].replace_all_uses_with(result)
    return plan


def _with_spare(result_type: ir.Type, lengths: list[ir.Value], spare: int, make) -> ir.Value:
    """A ``result_type`` value made by ``make(flat_type, flat_dims)`` as a flat tensor of
    ``spare`` more elements: its first ones, shaped (every dynamic dim is ``lengths[0]``)."""
    shape = list(ir.RankedTensorType(result_type).shape)
    element = ir.RankedTensorType(result_type).element_type
    count: ir.Value | int = static_elements(result_type)
    for n in shape:
        if ir.ShapedType.is_dynamic_size(n):
            count = dialects.arith.MulIOp(index(count), lengths[0]).result
    if isinstance(count, int):
        flat = make(ir.RankedTensorType.get([count + spare], element), [])
    else:
        padded = dialects.arith.AddIOp(count, index(spare)).result
        flat = make(ir.RankedTensorType.get([ir.ShapedType.get_dynamic_size()], element), [padded])
    used = extract_slice(flat, [0], [count])
    if len(shape) == 1:
        return used
    sizes = [lengths[0] for n in shape if ir.ShapedType.is_dynamic_size(n)]
    return expand_shape(used, result_type, [list(range(len(shape)))], sizes)


def spec_from_json(text: str) -> Problem:
    """The spec ``Problem.to_json`` wrote: a TritonSpec or a VulkanSpec."""
    fields = json.loads(text)
    return _SPECS[fields.pop("target")](**fields)


def specs_in(module: ir.Operation) -> list[Problem]:
    """The spec of every generated-kernel dispatch in ``module``, in order."""
    found: list[Problem] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "flow.dispatch" and MARKER in op.attributes:
            found.append(spec_from_json(ir.StringAttr(op.attributes[MARKER]).value))
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return found
