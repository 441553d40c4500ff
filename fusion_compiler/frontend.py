"""PyTorch models and MLIR text into MLIR: ``nn.Module``, ExportedProgram, ``.pt2``, ``.mlir``.

Torch export and the torch-mlir FX importer (shipped in iree-base-compiler) do the
work; aten lowering is IREE's torch input pipeline, not ours.

torch.export keeps its tracing state in process globals (two exports at once in two
threads fail, each blaming its inputs), so everything here that traces or reads a torch
program holds ``TORCH_LOCK``; what follows in ``fc.compile`` (IREE's sessions, each with
its own MLIR context and options, and our passes) runs in parallel across threads.
"""

from __future__ import annotations

import importlib
import json
import math
import operator
import re
import sys
import threading
import traceback
import warnings
import zipfile
from pathlib import Path

import numpy as np
import sympy
import torch
import torch.utils._pytree as pytree
from torch import nn
from torch.export.graph_signature import (
    ConstantArgument,
    InputKind,
    InputSpec,
    OutputKind,
    TensorArgument,
)
from torch.utils._sympy.functions import FloorDiv, Mod, PythonMod

from fusion_compiler import (
    byte_integers,
    complex_numbers,
    decompositions,
    diagnostics,
    inputs,
    signature,
)
from fusion_compiler.dialects import linalg
from fusion_compiler.errors import (
    DamagedFileError,
    ExampleInputError,
    FusionCompilerError,
    InputFileError,
    TrainingModeError,
    UnsupportedOpError,
)
from fusion_compiler.ir import (
    TORCH_DTYPE_TO_MLIR_TYPE_ASM,
    FxImporter,
    FxImporterHooks,
    RefTracker,
    ir,
    passmanager,
)
from fusion_compiler.stages import Stage

TORCH_LOCK = threading.RLock()

# Torch ops that lower to nothing on their own (constants, lists) and so never explain a failure.
_STRUCTURAL_TORCH_OPS = ("torch.constant.", "torch.prim.ListConstruct", "torch_c.")

# Everything IREE's torch input pipeline converts with, minus the final legality check,
# so the ops it cannot convert stay behind to be named.
_PARTIAL_TORCH_LOWERING = (
    "builtin.module(torch-function-to-torch-backend-pipeline,"
    "func.func(torch-iree-torch-unstructured-to-linalg-ext,convert-torch-to-tmtensor,"
    "convert-torch-to-linalg,convert-torch-to-scf,convert-torch-to-arith,convert-torch-to-tensor))"
)


def _export_error(model: torch.nn.Module, example_args: tuple, exc: Exception):
    """torch.export's failure as one message: the error, the model's own line, the inputs."""
    ours = (str(Path(torch.__file__).parent), str(Path(__file__).parent))
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(ours)]
    where = next(
        (f"{Path(f.filename).name}:{f.lineno}: {f.line}" for f in reversed(frames) if f.line),
        "(no line of the model's source in the trace)",
    )
    shapes = ", ".join(
        f"{tuple(a.shape)} {str(a.dtype).removeprefix('torch.')}"
        if isinstance(a, torch.Tensor)
        else type(a).__name__
        for a in example_args
    )
    # torch's own text names the failing check (and for dynamic shapes, the fix); its
    # closing advice about export() itself is left out
    lines = [
        line
        for line in str(exc).strip().splitlines()
        if line.strip() and not line.startswith("The error above occurred")
    ]
    message = "\n  ".join(lines[:12]) or type(exc).__name__
    return FusionCompilerError(
        f"torch.export could not trace {type(model).__name__} with example_args ({shapes}): "
        f"{message}\n  at {where}\nCheck the example inputs' shapes and dtypes (and any "
        "dynamic_shapes) against what the model expects."
    )


def _register_transformers_outputs() -> None:
    """Imports transformers' output classes before an export where transformers is in use.
    Each registers itself as a pytree node when its module is imported; torch.export
    (non-strict) restores the pytree registry when it returns, so classes first imported
    while it traces (transformers imports lazily) are forgotten, and the next export of a
    model returning one fails ("not a known type")."""
    if "transformers" in sys.modules:
        importlib.import_module("transformers.modeling_outputs")


def load_model(
    model: object,
    example_args: object = (),
    example_kwargs: dict | None = None,
    dynamic_shapes: object = None,
) -> torch.export.ExportedProgram | str:
    """An ExportedProgram for torch models, or the MLIR text for MLIR input.

    ``example_args`` may be one tensor (taken as the 1-tuple, as torch.onnx.export and
    torch.jit.trace take it: a tensor can only be one argument) or a list. Tensors on the
    meta device stand for real ones of their shape and dtype: torch.export reads nothing
    else of an example input, so they are traced as zeros on the model's device."""
    if isinstance(model, torch.export.ExportedProgram):
        return model
    if isinstance(model, torch.nn.Module):
        example_args = _example_args(example_args)
        if not example_args and not example_kwargs:
            raise FusionCompilerError(
                f"compiling a {type(model).__name__} needs example inputs: "
                "fc.compile(model, example_args=(x, ...))"
            )
        _check_inference_mode(model)
        example_args, example_kwargs = _materialised(model, example_args, example_kwargs)
        _register_transformers_outputs()
        try:
            with TORCH_LOCK:
                return torch.export.export(
                    model, _unalias(example_args), example_kwargs, dynamic_shapes=dynamic_shapes
                )
        except Exception as exc:  # the model failed on its example inputs: say where
            raise _export_error(model, example_args, exc) from None
    if isinstance(model, Path) or (isinstance(model, str) and _looks_like_path(model)):
        path = Path(model)
        if not path.exists():
            raise FusionCompilerError(f"{path}: no such file")
        if path.suffix == ".pt2":
            return _load_pt2(path)
        if path.suffix == ".mlir":
            return path.read_text()
        raise FusionCompilerError(
            f"{path}: unknown model file type {path.suffix!r}; "
            "expected a .pt2 saved by torch.export.save or a .mlir file"
        )
    if isinstance(model, str):
        return model
    raise FusionCompilerError(
        f"cannot compile a {type(model).__name__}: expected an nn.Module with example_args, "
        "a torch.export.ExportedProgram, a .pt2 or .mlir path, or MLIR text"
    )


def _example_args(example_args: object) -> tuple:
    if example_args is None:
        return ()
    if isinstance(example_args, tuple):
        return example_args
    if isinstance(example_args, torch.Tensor):
        return (example_args,)
    if isinstance(example_args, list):
        return tuple(example_args)
    if isinstance(example_args, dict):
        raise ExampleInputError(
            None,
            "is a dict",
            "pass keyword inputs as example_kwargs={...}, positional ones as example_args=(x, ...)",
        )
    raise ExampleInputError(
        None,
        f"is a {type(example_args).__name__}",
        "give the model's positional inputs as a tuple: example_args=(x, ...)",
    )


# Layers whose forward in training mode is not their inference one: (class, whether an
# instance's differs). Norms with running statistics use the batch's and update theirs
# (a buffer written in place, which the importer cannot lower); dropout drops at random.
_TRAINING_ONLY: tuple[tuple[type, object], ...] = (
    (nn.modules.batchnorm._BatchNorm, lambda m: m.track_running_stats),
    (nn.modules.instancenorm._InstanceNorm, lambda m: m.track_running_stats),
    (nn.modules.dropout._DropoutNd, lambda m: m.p > 0),
)


def _check_inference_mode(model: nn.Module) -> None:
    found = [
        (name, type(module).__name__)
        for name, module in model.named_modules()
        if module.training
        and any(isinstance(module, kind) and differs(module) for kind, differs in _TRAINING_ONLY)
    ]
    if found:
        raise TrainingModeError(type(model).__name__, found)


def _materialised(model: nn.Module, args: tuple, kwargs: dict | None) -> tuple[tuple, dict | None]:
    """Meta tensors among the example inputs replaced by zeros on the model's device."""
    state = [t for t in (*model.parameters(), *model.buffers()) if not t.is_meta]
    device = state[0].device if state else torch.device("cpu")

    def real(tensor: torch.Tensor) -> torch.Tensor:
        if not tensor.is_meta:
            return tensor
        return torch.zeros(tensor.shape, dtype=tensor.dtype, device=device)

    return pytree.tree_map_only(torch.Tensor, real, (args, kwargs))


def _load_pt2(path: Path) -> torch.export.ExportedProgram:
    """torch.export.load, after the archive's CRC-32s are checked: PyTorch's reader skips
    them, so a damaged weight would otherwise compile into the module unnoticed."""
    try:
        with zipfile.ZipFile(path) as archive:
            damaged = archive.testzip()
    except (zipfile.BadZipFile, OSError) as exc:
        raise InputFileError(
            path,
            f"is not a torch.export archive ({exc})",
            "save the program with torch.export.save(program, path)",
        ) from None
    if damaged is not None:
        raise DamagedFileError(
            path, f"its entry {damaged!r}", "save the program again with torch.export.save"
        )
    try:
        with TORCH_LOCK:
            return _restore_list_values(torch.export.load(str(path)))
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        raise InputFileError(
            path,
            f"could not be read by torch.export.load ({type(exc).__name__}: {first})",
            "save it again with torch.export.save (from the torch version installed here)",
        ) from None


def _unalias(args: tuple) -> tuple:
    """Distinct copies of example tensors passed more than once.

    torch.export specialises on aliasing: ``export(m, (x, x, x))`` yields a program that
    reads only the last argument, which would then silently ignore the others.
    """
    seen: set[int] = set()
    out = []
    for arg in args:
        if isinstance(arg, torch.Tensor) and id(arg) in seen:
            arg = arg.clone()
        seen.add(id(arg))
        out.append(arg)
    return tuple(out)


def functional(
    program: torch.export.ExportedProgram, decompose: frozenset = frozenset()
) -> torch.export.ExportedProgram:
    """The program functionalised, with our decompositions and ``decompose``'s ops (each
    by PyTorch's own composite definition) applied; the caller's program is left as is."""
    table = dict(decompositions.TABLE)
    if decompose:
        composite = torch.export.default_decompositions()  # PyTorch's own, per operator
        for op in decompose:  # after ours where we have one (half types in f32)
            table[op] = (
                decompositions.either(table[op], composite[op]) if op in table else composite[op]
            )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch's pytree, on deepcopy
            program = program.run_decompositions(table)
            program = _einsum_operands_broadcast(_sdpa_masks_at_query_rank(program))
            program = _empty_results_as_zeros(program)
            program = _input_free_values_folded(program)
            program = _state_in_lists_read_through_ops(program)
    except Exception as exc:  # a graph torch itself cannot retrace: say which, and why
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise FusionCompilerError(
            "could not functionalise the exported program: torch's run_decompositions "
            f"raised {type(exc).__name__}: {first}\n"
            "A module compiles without state: if the model updates its own buffers in place "
            "(a static KV cache), pass that state as inputs (updated in place) instead."
        ) from None
    _refuse_buffer_mutations(program)
    return program


def _refuse_buffer_mutations(program: torch.export.ExportedProgram) -> None:
    """A compiled module holds no state of its own: a model that updates its buffers in
    place (``self.cache[:, pos] = k``, ``self.count.add_(1)``) is refused, naming them.
    Inputs updated in place are kept (IREE writes into the caller's buffers)."""
    mutated = [
        s.target
        for s in program.graph_signature.output_specs
        if s.kind == OutputKind.BUFFER_MUTATION
    ]
    if mutated:
        names = ", ".join(repr(name) for name in mutated)
        raise FusionCompilerError(
            f"the model updates its buffer(s) {names} in place, and a compiled module "
            "holds no state of its own: pass each as an input tensor that the model "
            "updates in place (the call then writes into the caller's tensor), or return "
            "its new value"
        )


# Ops whose every element is a sum of products over the contracted dims: with an operand
# of no element (a contracted dim of extent 0, the result's being non-empty), each is 0.
_SUMS_OF_PRODUCTS = {
    torch.ops.aten.einsum.default,
    torch.ops.aten.matmul.default,
    torch.ops.aten.bmm.default,
    torch.ops.aten.mm.default,
    torch.ops.aten.mv.default,
    torch.ops.aten.dot.default,
}


def _empty_results_as_zeros(program: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """Every op whose result has no element computes nothing, and a sum of products over
    no terms is 0: each becomes ``aten.zeros`` of its shape (IREE 3.13's torch lowering
    stops with SIGFPE on some ops over an extent of 0, and on the views its einsum
    lowering makes of empty operands; what such a result feeds is folded in Linalg by
    fusion-fold-empty)."""
    graph = program.graph_module.graph
    changed = False
    for node in list(graph.nodes):
        value = node.meta.get("val")
        if node.op != "call_function" or not isinstance(value, torch.Tensor):
            continue
        if node.target is torch.ops.aten.zeros.default or not _static(value):
            continue
        operands = [a.meta.get("val") for a in node.all_input_nodes]
        over_nothing = node.target in _SUMS_OF_PRODUCTS and any(
            isinstance(a, torch.Tensor) and _static(a) and a.numel() == 0 for a in operands
        )
        if value.numel() != 0 and not over_nothing:
            continue
        with graph.inserting_before(node):
            zeros = graph.call_function(
                torch.ops.aten.zeros.default,
                (list(value.shape),),
                {"dtype": value.dtype, "device": torch.device("cpu")},
            )
        zeros.meta = dict(node.meta)
        node.replace_all_uses_with(zeros)
        changed = True
    if changed:
        graph.eliminate_dead_code()
        program.graph_module.recompile()
    return program


# What the expression IR follows symbolically (``dialects/expr.py``: index arithmetic,
# comparisons, selects, casts, views, broadcasts, index tensors): an input-free value
# made of these stays a computation, which proves masks banded for any length. Any
# other op of no input (a cumsum of position ids, a sort, a reduction) would be a
# tensor the mask reads; PyTorch computes it at compile time instead.
_FOLLOWED = {
    torch.ops.aten.arange.default,
    torch.ops.aten.arange.start,
    torch.ops.aten.arange.start_step,
    torch.ops.aten.full.default,
    torch.ops.aten.zeros.default,
    torch.ops.aten.ones.default,
    torch.ops.aten.scalar_tensor.default,
    torch.ops.aten.index.Tensor,
    torch.ops.aten._to_copy.default,
    torch.ops.aten.lift_fresh_copy.default,
    torch.ops.aten.triu.default,
    torch.ops.aten.tril.default,
    torch.ops.aten.floor_divide.default,
}
# the most elements of an input-free value computed at compile time (position ids,
# document ids: a few per token)
_FOLDED_ELEMENTS = 1 << 16
# the most elements of an input-free value computed to see whether it is one value
# repeated (a splat), or small, which IREE's torch input would fold (below)
_COMPUTED_ELEMENTS = 1 << 22
# IREE 3.13's torch input folds ops of constant operands when they are splats, or of at
# most this many elements, and computes some wrongly: ``full((), 3.0) + (-3)`` came out
# 1.8e19 (a negative int read unsigned), ``full((), 3.0) % -3`` C's fmod for Python's
# mod, ``ones(4) < 0`` true, and a bf16 power kept f32's digits. PyTorch computes those.
_IMPORTER_FOLDS = 16
# ops whose values are not defined (uninitialised memory): never computed here
_UNDEFINED = {
    torch.ops.aten.empty,
    torch.ops.aten.empty_strided,
    torch.ops.aten.empty_like,
    torch.ops.aten.new_empty,
    torch.ops.aten.new_empty_strided,
}


def _followed(node: torch.fx.Node) -> bool:
    op = node.target
    if op in _FOLLOWED or not isinstance(op, torch._ops.OpOverload):
        return True
    if torch.Tag.pointwise in op.tags:
        return True
    return any(r.alias_info is not None for r in op._schema.returns)  # a view


def _input_free_values_folded(
    program: torch.export.ExportedProgram,
) -> torch.export.ExportedProgram:
    """Every small value the model computes from no input, parameter or buffer by an op
    the expression IR does not follow becomes a constant, computed here by PyTorch:
    transformers derives packed-sequence ids from position ids (``cumsum`` of an arange's
    steps), and the causal mask and-ed with them is then proven causal from its values
    rather than read per tile. Random ops are left alone."""
    graph = program.graph
    # the program's own: run_decompositions may share them with the caller's program
    program._constants = dict(program.constants)
    program.graph_signature.input_specs = list(program.graph_signature.input_specs)
    constants = {
        spec.arg.name: program.constants[spec.target]
        for spec in program.graph_signature.input_specs
        if spec.kind == InputKind.CONSTANT_TENSOR and spec.target in program.constants
    }
    values: dict[torch.fx.Node, torch.Tensor] = {}  # of the input-free nodes, in order
    for node in graph.nodes:
        if node.op == "placeholder" and node.name in constants:
            values[node] = constants[node.name]
        meta = node.meta.get("val")
        if (
            node.op != "call_function"
            or not isinstance(node.target, torch._ops.OpOverload)
            or torch.Tag.nondeterministic_seeded in node.target.tags
            or node.target.overloadpacket in _UNDEFINED
            or not isinstance(meta, torch.Tensor)
            or not _static(meta)
            or meta.numel() > _COMPUTED_ELEMENTS
            or not all(a in values for a in node.all_input_nodes)
        ):
            continue
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), values.__getitem__)
        try:
            with torch.no_grad():
                values[node] = node.target(*args, **kwargs)
        except Exception:  # noqa: BLE001 - e.g. a device this machine lacks: left as is
            continue
    literal = _literals(graph, constants)
    folded = [
        node
        for node in values
        if node.op == "call_function"
        and node.users
        and isinstance(values[node], torch.Tensor)
        and values[node].device.type == "cpu"
        and (
            _folded_by_the_importer(node, values[node], literal)
            or _computed_here(node, values[node])
        )
        and not any(user.op == "output" for user in node.users)  # a result stays one
    ]
    for node in folded:
        _as_constant(program, node, values[node])
    if folded:
        graph.eliminate_dead_code()
        _drop_unused_constants(program)
        program.graph_module.recompile()
    return program


def _state_in_lists_read_through_ops(
    program: torch.export.ExportedProgram,
) -> torch.export.ExportedProgram:
    """A parameter, buffer or constant in a list argument (Swin's and BEiT's relative
    position bias, ``table[index]`` with the index a buffer: ``aten.index.Tensor(table,
    [index])``) read through a copy: the frozen import puts the tensor itself in place of
    its placeholder, and the importer refuses a list mixing a literal with values."""
    state = {
        spec.arg.name
        for spec in program.graph_signature.input_specs
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
    }

    def is_state(item: object) -> bool:
        return isinstance(item, torch.fx.Node) and item.op == "placeholder" and item.name in state

    def read(node: torch.fx.Node, item: object) -> object:
        if not is_state(item):
            return item
        with program.graph.inserting_before(node):
            copy = program.graph.call_function(torch.ops.aten.lift_fresh_copy.default, (item,))
        copy.meta["val"] = item.meta["val"]
        return copy

    for node in list(program.graph.nodes):
        lists = [isinstance(a, list | tuple) and any(map(is_state, a)) for a in node.args]
        if node.op == "call_function" and any(lists):
            node.args = tuple(
                type(arg)(read(node, item) for item in arg) if in_list else arg
                for arg, in_list in zip(node.args, lists, strict=True)
            )
    return program


def _computed_here(node: torch.fx.Node, value: torch.Tensor) -> bool:
    """An input-free value the expression IR does not follow, small enough to embed."""
    return not _followed(node) and value.numel() <= _FOLDED_ELEMENTS


# ops of numbers alone that IREE's torch input folds into a literal tensor
_LITERAL_MAKERS = {
    torch.ops.aten.full.default,
    torch.ops.aten.zeros.default,
    torch.ops.aten.ones.default,
    torch.ops.aten.scalar_tensor.default,
}


def _literals(graph: torch.fx.Graph, constants: dict) -> set[torch.fx.Node]:
    """The nodes IREE's torch input may see as literal tensors, and so fold their users:
    constants, fills of a number, and ops of those alone. (An ``arange`` it does not fold:
    index arithmetic on it stays a computation, which the expression IR follows.)"""
    literal: set[torch.fx.Node] = set()
    for node in graph.nodes:
        if node.op == "placeholder":
            if node.name in constants:
                literal.add(node)
            continue
        tensors = [a for a in node.all_input_nodes if isinstance(a.meta.get("val"), torch.Tensor)]
        if node.target in _LITERAL_MAKERS or (tensors and all(a in literal for a in tensors)):
            literal.add(node)
    return literal


def _folded_by_the_importer(node: torch.fx.Node, value: torch.Tensor, literal: set) -> bool:
    """Whether IREE's torch input would compute ``node`` from literal operands (see
    ``_IMPORTER_FOLDS`` and ``_literals``): an op of literal tensors whose value is small
    or a splat. It is computed here instead; a splat stays one (a broadcast of one
    element)."""
    if node not in literal or node.target in _LITERAL_MAKERS:
        return False  # not foldable, or made from numbers: the importer's literal is right
    if value.numel() <= _IMPORTER_FOLDS:
        return True
    flat = _bits(value.flatten())
    return bool((flat == flat[0]).all())


def _as_constant(program: torch.export.ExportedProgram, node: torch.fx.Node, value) -> None:
    """``node`` replaced by a lifted constant tensor of ``value`` (before the inputs)."""
    specs = program.graph_signature.input_specs
    name = f"_folded_{node.name}"
    at = next((i for i, s in enumerate(specs) if s.kind == InputKind.USER_INPUT), len(specs))
    placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    anchor = placeholders[specs[at].arg.name] if at < len(specs) else node
    with program.graph.inserting_before(anchor):
        constant = program.graph.placeholder(name)
    constant.meta["val"] = node.meta["val"]
    name = constant.name  # as FX named it
    # read through an op: the frozen import puts the tensor itself in place of the
    # placeholder, and a list of index tensors then mixes a literal with values
    source = _broadcast_source(value)
    with program.graph.inserting_before(node):
        copy = program.graph.call_function(torch.ops.aten.lift_fresh_copy.default, (constant,))
        read = copy
        if source.shape != value.shape:  # a broadcast the expression IR follows
            read = program.graph.call_function(
                torch.ops.aten.expand.default, (copy, list(value.shape))
            )
    constant.meta["val"] = copy.meta["val"] = node.meta["val"].new_empty(source.shape)
    read.meta["val"] = node.meta["val"]
    node.replace_all_uses_with(read)
    specs.insert(at, InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(name), target=name))
    program.constants[name] = source.contiguous()


def _broadcast_source(value: torch.Tensor) -> torch.Tensor:
    """The smallest tensor ``value`` is a broadcast of: size 1 along each dim whose slices
    are all equal (transformers' packed-sequence ids of one row, expanded to the batch).
    Mask proofs then see one row for every batch, not a batch of values to compare."""
    for dim, size in enumerate(value.shape):
        first = value.narrow(dim, 0, 1)
        if size > 1 and torch.equal(_bits(value), _bits(first).expand_as(value)):
            value = first
    return value


_SAME_SIZE_INTEGERS = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def _bits(value: torch.Tensor) -> torch.Tensor:
    """``value`` compared by its bits: -0.0 apart from 0.0, a NaN equal to itself."""
    if not value.is_floating_point():
        return value
    return value.contiguous().view(_SAME_SIZE_INTEGERS[value.element_size()])


def _drop_unused_constants(program: torch.export.ExportedProgram) -> None:
    """Lifted constants whose placeholder lost its last use (what a folded value read)."""
    specs = program.graph_signature.input_specs
    for node in list(program.graph.nodes):
        if node.op != "placeholder" or node.users:
            continue
        spec = next((s for s in specs if getattr(s.arg, "name", None) == node.name), None)
        if spec is None or spec.kind != InputKind.CONSTANT_TENSOR:
            continue
        program.graph.erase_node(node)
        specs.remove(spec)
        program.constants.pop(spec.target, None)


def _static(value: torch.Tensor) -> bool:
    return all(isinstance(d, int) for d in value.shape)


def _sdpa_masks_at_query_rank(
    program: torch.export.ExportedProgram,
) -> torch.export.ExportedProgram:
    """SDPA's ``attn_mask`` viewed at Q's rank: IREE 3.13's torch lowering fails on a
    (Nq, Nk) or (H, Nq, Nk) mask, which broadcasts as one with leading 1s."""
    graph = program.graph_module.graph
    changed = False
    for node in list(graph.nodes):
        if node.target is not torch.ops.aten.scaled_dot_product_attention.default:
            continue
        mask = node.args[3] if len(node.args) > 3 else node.kwargs.get("attn_mask")
        if not isinstance(mask, torch.fx.Node):
            continue
        query, value = node.args[0].meta["val"], mask.meta["val"]
        if value.dim() >= query.dim():
            continue
        view = mask
        for _ in range(query.dim() - value.dim()):  # unsqueeze: no sizes, so dynamic ones too
            with graph.inserting_before(node):
                view = graph.call_function(torch.ops.aten.unsqueeze.default, (view, 0))
            with value.fake_mode:
                value = value.unsqueeze(0)
            view.meta["val"] = value
        node.replace_input_with(mask, view)
        changed = True
    if changed:
        program.graph_module.recompile()
    return program


def _einsum_operands_broadcast(
    program: torch.export.ExportedProgram,
) -> torch.export.ExportedProgram:
    """Each einsum operand expanded where it broadcasts a dim of size 1 against a larger
    one of the same label (GQA: Q (B, Hkv, G, N, D) against K (B, Hkv, 1, N, D)): IREE
    3.13's einsum lowering takes every label to have one size, and fails on the matmul it
    builds. An expand is a view: the einsum computes the same."""
    graph = program.graph_module.graph
    changed = False
    for node in list(graph.nodes):
        if node.target is not torch.ops.aten.einsum.default:
            continue
        equation, operands = node.args[0], list(node.args[1])
        subscripts = equation.replace(" ", "").split("->")[0].split(",")
        if len(subscripts) != len(operands):
            continue
        values = [operand.meta["val"] for operand in operands]
        labels = [
            decompositions.einsum_labels(s, v.dim())
            for s, v in zip(subscripts, values, strict=True)
        ]
        # where each label has a size other than 1: the operand and dim to read it from
        larger: dict[object, tuple[int, int]] = {}
        for i, (names, value) in enumerate(zip(labels, values, strict=True)):
            for d, name in enumerate(names):
                if not _is_one(value.shape[d]):
                    larger.setdefault(name, (i, d))
        for i, (names, value) in enumerate(zip(labels, values, strict=True)):
            broadcast = [
                d for d, name in enumerate(names) if _is_one(value.shape[d]) and name in larger
            ]
            if not broadcast:
                continue
            sizes: list = [-1] * value.dim()  # the expand's arguments: -1 keeps a dim
            shape: list = [-1] * value.dim()  # the same, SymInts where a length is dynamic
            with graph.inserting_before(node):
                for d in broadcast:
                    source, source_dim = larger[names[d]]
                    size = shape[d] = values[source].shape[source_dim]
                    if isinstance(size, torch.SymInt):  # read from the operand that has it
                        size = graph.call_function(
                            torch.ops.aten.sym_size.int, (operands[source], source_dim)
                        )
                        size.meta["val"] = shape[d]
                    sizes[d] = size
                expand = graph.call_function(torch.ops.aten.expand.default, (operands[i], sizes))
            with value.fake_mode:
                expand.meta["val"] = value.expand(shape)
            operands[i] = expand
        if operands != list(node.args[1]):
            node.args = (equation, operands, *node.args[2:])
            changed = True
    if changed:
        program.graph_module.recompile()
    return program


def _is_one(size: int | torch.SymInt) -> bool:
    return isinstance(size, int) and size == 1


def composite_ops(program: torch.export.ExportedProgram, names: set[str]) -> frozenset:
    """The graph's operators among the MLIR op ``names`` that PyTorch defines by
    composition of others (CompositeImplicitAutograd), so that they can be decomposed."""
    found = set()
    for node in program.graph.nodes:
        op = node.target
        if node.op != "call_function" or not isinstance(op, torch._ops.OpOverload):
            continue
        name = "torch." + str(op).removesuffix(".default")
        if name in names and op.has_kernel_for_dispatch_key(_COMPOSITE):
            found.add(op)
    return frozenset(found)


_COMPOSITE = torch._C.DispatchKey.CompositeImplicitAutograd


def _frozen_state(program: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """The FX importer looks buffers up in ``state_dict`` only, where non-persistent
    buffers (``register_buffer(..., persistent=False)``) are not: they live in
    ``constants``. The importer gets a program whose ``state_dict`` holds both (a fresh
    program of ``functional``'s: its ``state_dict`` is its own)."""
    signature = program.graph_signature
    missing = {
        name: program.constants[name]
        for name in signature.inputs_to_buffers.values()
        if name not in program.state_dict and name in program.constants
    }
    program.state_dict.update(missing)
    return program


def _restore_list_values(program: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """Undoes a .pt2 round-trip quirk: ops returning ``Tensor[]`` (unbind, split) come back
    with a tuple as their value, which the FX importer cannot type; it expects a list."""
    for node in program.graph.nodes:
        value = node.meta.get("val")
        schema = getattr(node.target, "_schema", None)
        if isinstance(value, tuple) and schema is not None and len(schema.returns) == 1:
            if isinstance(schema.returns[0].type, torch.ListType):
                node.meta["val"] = list(value)
    return program


def _looks_like_path(text: str) -> bool:
    return "\n" not in text and text.rstrip().endswith((".pt2", ".mlir"))


def import_model(
    source: torch.export.ExportedProgram | str,
    context: ir.Context,
    filename: str = "<input>",
    external_weights: bool = False,
) -> tuple[ir.Module, Stage, dict[str, np.ndarray]]:
    """MLIR for the model, the stage it is at (torch for models, torch or linalg for text)
    and the elements of its dense_resource constants (``linalg.resources``), which the
    bindings cannot read back: by the resource's name, as bytes (of a model: those of
    integer types and of small float ones).

    A program is imported as ``functional`` gives it (a new program: the importer's
    in-place rewrites leave the caller's as it was). An operator the torch dialect has no
    definition of (imported as ``torch.operator``) cannot be lowered; where PyTorch
    defines it by composition of others, the program is imported again with it
    decomposed. The program's dynamic dims, and how they relate, go with the module
    (``signature.DIMS_KEY``) for the runtime to check calls against."""
    if not isinstance(source, torch.export.ExportedProgram):
        module = inputs.parse(source, context, filename)
        return module, _stage_of(module), inputs.resource_blobs(source)
    decompose: frozenset = frozenset()
    with TORCH_LOCK:
        while True:
            program = complex_numbers.as_real_pairs(functional(source, decompose))
            program = byte_integers.widened(program)
            _refuse_complex(program)
            _refuse_data_dependent_shapes(program)
            results = _constant_outputs_dropped(program)
            module, constants = _import_program(program, context, external_weights)
            names = {name for name, _ in _torch_operators(module.operation)}
            composite = composite_ops(program, names) - decompose
            if not composite:
                break
            # the module is Python's: dropped here, freed once (an erase() would free it twice)
            del module
            decompose |= composite
        _refuse_random(program)
        dims = dynamic_dims(source)
        ranges = dim_ranges(source) if dims else None
        unsigned = unsigned_inputs(source)
        unsigned_results = unsigned_outputs(program)
    entries = {
        signature.DIMS_KEY: dims,
        signature.RANGES_KEY: ranges,
        signature.RESULTS_KEY: results,
        signature.UNSIGNED_KEY: unsigned,
        signature.UNSIGNED_OUTPUTS_KEY: unsigned_results,
        signature.NAMES_KEY: input_names(source),
    }
    _attach_to_entry_point(module.operation, {k: v for k, v in entries.items() if v})
    return module, Stage.TORCH, constants


_COMPLEX_ADVICE = (
    "IREE 3.13 cannot compile complex numbers (its CPU and GPU code generation has no "
    "lowering for them); compute with the real and imaginary parts as separate float "
    "tensors (as transformers' rotary embeddings do with cos and sin)"
)


def _refuse_complex(program: torch.export.ExportedProgram) -> None:
    """Where complex values enter the program: complex inputs, parameters and buffers,
    and the ops that make complex results of real operands (``view_as_complex``,
    ``polar``, ``complex``), each with its source line."""
    found = []
    for node in program.graph.nodes:
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor) or not value.is_complex():
            continue
        if node.op == "placeholder":
            found.append(
                (
                    f"{_placeholder(program, node.name)} of {value.dtype} ({_COMPLEX_ADVICE})",
                    "<input>",
                )
            )
            continue
        operands = [a.meta.get("val") for a in node.all_input_nodes]
        if not any(isinstance(a, torch.Tensor) and a.is_complex() for a in operands):
            found.append(
                (f"{_node_op(node)}, a {value.dtype} result ({_COMPLEX_ADVICE})", _node_line(node))
            )
    if found:
        raise UnsupportedOpError(found)


_DATA_DEPENDENT_ADVICE = (
    "its size depends on the values of the data (a boolean mask as an index, nonzero, "
    "masked_select, unique), which IREE 3.13 cannot compile (its input pipeline did not "
    "finish on one); keep the shape and mark the entries instead, e.g. "
    "torch.where(mask, x, fill), or return the mask with the tensor"
)


def _refuse_data_dependent_shapes(program: torch.export.ExportedProgram) -> None:
    """The ops whose result's shape torch.export left as a value of the data (an
    unbacked symbol) other than one read with ``.item()`` (a slice to such a length
    compiles), each with its source line."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    def sized(value: object) -> set:
        if not isinstance(value, torch.Tensor):
            return set()
        return free_unbacked_symbols(tuple(value.shape)) - read

    read: set = set()  # the symbols of values read from tensors (``.item()``)
    found = []
    for node in program.graph.nodes:
        value = node.meta.get("val")
        if isinstance(value, torch.SymInt) and node.target in _READS_A_VALUE:
            read |= free_unbacked_symbols(value)
        if node.op != "call_function" or not sized(value):
            continue
        if not any(sized(a.meta.get("val")) for a in node.all_input_nodes):
            made = node.args[0] if node.target is operator.getitem else node  # unique's
            found.append((f"{_node_op(made)} ({_DATA_DEPENDENT_ADVICE})", _node_line(node)))
    if found:
        raise UnsupportedOpError(found)


_READS_A_VALUE = (torch.ops.aten._local_scalar_dense.default, torch.ops.aten.item.default)

_RANDOM_ADVICE = (
    "it draws random numbers, and a compiled module has no generator that follows "
    "torch.manual_seed (IREE's started from one seed at every load); for dropout, put the "
    "model in eval mode (model.eval()) before exporting; otherwise draw the numbers in "
    "PyTorch and pass them to the module as an input"
)


def _refuse_random(program: torch.export.ExportedProgram) -> None:
    """The ops that draw random numbers (PyTorch tags them ``nondeterministic_seeded``:
    dropout in training, ``rand``, ``bernoulli``, ``multinomial``...), each with its line."""
    found = [
        (f"{_node_op(node)} ({_RANDOM_ADVICE})", _node_line(node))
        for node in program.graph.nodes
        if _draws_random_numbers(node)
    ]
    if found:
        raise UnsupportedOpError(found)


def _draws_random_numbers(node: torch.fx.Node) -> bool:
    """An op PyTorch tags ``nondeterministic_seeded``, unless its arguments say it draws
    nothing: a probability of 0 (``dropout_p=0.0``: attention in inference), training
    off (``dropout(x, p, train=False)``), or a recurrent net of one layer (its dropout
    is between layers: a GRU in training mode computes as in inference)."""
    op = node.target
    if node.op != "call_function" or not isinstance(op, torch._ops.OpOverload):
        return False
    if torch.Tag.nondeterministic_seeded not in op.tags:
        return False
    values = {}
    for i, argument in enumerate(op._schema.arguments):
        if i < len(node.args):
            values[argument.name] = node.args[i]
        elif argument.name in node.kwargs:
            values[argument.name] = node.kwargs[argument.name]
        elif argument.has_default_value():
            values[argument.name] = argument.default_value
    if values.get("train", values.get("training", True)) is False:
        return False
    if values.get("num_layers", 2) == 1:
        return False
    probability = next((values[n] for n in ("p", "dropout_p", "dropout") if n in values), 1)
    return probability != 0


def _placeholder(program: torch.export.ExportedProgram, name: str) -> str:
    """What a placeholder of the graph is in the model: ``parameter 'w'``, ``input 0``."""
    signature = program.graph_signature
    for kind, table in (
        ("parameter", signature.inputs_to_parameters),
        ("buffer", signature.inputs_to_buffers),
        ("constant", signature.inputs_to_lifted_tensor_constants),
    ):
        if name in table:
            return f"{kind} {table[name]!r}"
    if name in signature.user_inputs:
        return f"input {signature.user_inputs.index(name)}"
    return name


def _constant_outputs_dropped(program: torch.export.ExportedProgram) -> str | None:
    """Takes the constants (a ``None`` as MultiheadAttention's weights) out of the
    program's results, which IREE cannot return; JSON of the results' order, ``{}`` for
    a tensor and ``{"value": v}`` for a constant, for the runtime to put them back."""
    specs = program.graph_signature.output_specs
    constant = [
        s.kind == OutputKind.USER_OUTPUT and isinstance(s.arg, ConstantArgument) for s in specs
    ]
    if not any(constant):
        return None
    values = [s.arg.value for s, c in zip(specs, constant, strict=True) if c]
    if not all(v is None or isinstance(v, (bool, int, float, str)) for v in values):
        return None  # the importer says what it cannot return
    order = [
        {"value": s.arg.value} if c else {}
        for s, c in zip(specs, constant, strict=True)
        if s.kind == OutputKind.USER_OUTPUT
    ]
    output = next(n for n in program.graph.nodes if n.op == "output")
    kept = [v for v, c in zip(output.args[0], constant, strict=True) if not c]
    output.args = (tuple(kept),)
    specs[:] = [s for s, c in zip(specs, constant, strict=True) if not c]
    return json.dumps(order)


_UNSIGNED = (torch.uint8, torch.uint16, torch.uint32, torch.uint64)


def unsigned_inputs(program: torch.export.ExportedProgram) -> str | None:
    """The indices of the tensor inputs of an unsigned type, ``,``-separated (None: none;
    ``signature.UNSIGNED_KEY``): MLIR's integers are signless, so a uint8 input reaches
    the module as i8 and its signature would ask for int8."""
    placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    found = []
    for i, name in enumerate(program.graph_signature.user_inputs):
        value = placeholders[name].meta.get("val") if name in placeholders else None
        if isinstance(value, torch.Tensor) and value.dtype in _UNSIGNED:
            found.append(str(i))
    return ",".join(found) or None


def unsigned_outputs(program: torch.export.ExportedProgram) -> str | None:
    """The indices of the tensor results of an unsigned type among the module's results
    (the program's user outputs once constants are dropped), ``,``-separated (None: none;
    ``signature.UNSIGNED_OUTPUTS_KEY``): IREE returns a uint8 result as int8."""
    output = next(n for n in program.graph.nodes if n.op == "output")
    found, index = [], 0
    for spec, node in zip(program.graph_signature.output_specs, output.args[0], strict=False):
        if spec.kind != OutputKind.USER_OUTPUT:
            continue
        value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        if isinstance(value, torch.Tensor) and value.dtype in _UNSIGNED:
            found.append(str(index))
        index += 1
    return ",".join(found) or None


def input_names(program: torch.export.ExportedProgram) -> str:
    """The model's names of its tensor inputs, ``,``-separated (``signature.NAMES_KEY``):
    the entry point's buffer-view arguments, in order."""
    placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    return ",".join(
        name
        for name in program.graph_signature.user_inputs
        if name in placeholders and isinstance(placeholders[name].meta.get("val"), torch.Tensor)
    )


def unread_inputs(program: torch.export.ExportedProgram) -> list[str]:
    """A warning per tensor input the program never reads. torch.export ties example
    inputs passed as one tensor: ``export(m, (x, x, x))`` reads only the last, and a
    call with three different tensors would silently use the last for all three
    (``load_model`` copies them for an nn.Module; an ExportedProgram comes as it is)."""
    placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    tensors = [
        name
        for name in program.graph_signature.user_inputs
        if name in placeholders and isinstance(placeholders[name].meta.get("val"), torch.Tensor)
    ]
    return [
        f"input {i} `{name}` is not read by the exported program: torch.export ties example "
        "inputs passed as one tensor (export(m, (x, x)) reads only the last); if the model "
        "reads it, export with distinct tensors (x.clone()), or give fc.compile the "
        "nn.Module and its example inputs"
        for i, name in enumerate(tensors)
        if not placeholders[name].users
    ]


def dynamic_dims(program: torch.export.ExportedProgram) -> str | None:
    """Each tensor input's dims as ``;``-separated arguments of ``,``-separated dims: the
    empty string for a static dim (or one we cannot express), else an expression over
    the program's symbols (``s0``, ``2 * s0``). None when no input has a dynamic dim."""
    placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    arguments: list[list[str]] = []
    for name in program.graph_signature.user_inputs:
        value = placeholders[name].meta.get("val") if name in placeholders else None
        if not isinstance(value, torch.Tensor):
            return None  # non-tensor inputs do not become buffer views: no alignment
        arguments.append(
            [
                (_expression(d.node.expr) or "") if isinstance(d, torch.SymInt) else ""
                for d in value.shape
            ]
        )
    if not any(any(dims) for dims in arguments):
        return None
    return ";".join(",".join(dims) for dims in arguments)


def _finite(bound: object) -> int | None:
    """A range bound as an int; None for an infinite one (sympy's oo, torch's int_oo)."""
    try:
        value = float(bound)
    except (TypeError, ValueError):
        return None
    return int(value) if math.isfinite(value) else None


def dim_ranges(program: torch.export.ExportedProgram) -> str | None:
    """``s0=2:4096;s1=0:``: each symbol's range from torch.export (``Dim(min=, max=)``),
    an unbounded end left empty; None when no symbol has a bound."""
    ranges = []
    for symbol, bounds in program.range_constraints.items():
        if not isinstance(symbol, sympy.Symbol):
            continue
        low, high = _finite(bounds.lower), _finite(bounds.upper)
        # torch's own floor for a dynamic dim (0, or 2 where it specialises 0 and 1) is
        # not a limit of the compiled module: only a minimum above it is kept
        low = str(low) if low is not None and low > 2 else ""
        high = str(high) if high is not None else ""
        if low or high:
            ranges.append(f"{symbol}={low}:{high}")
    return ";".join(ranges) or None


def _expression(expr: sympy.Expr) -> str | None:
    """A sympy size expression in the runtime's arithmetic (+, *, //, %), or None."""
    if expr.is_Symbol:
        return str(expr)
    if expr.is_Integer:
        return str(int(expr))
    if expr.is_Add:
        operator = " + "
    elif expr.is_Mul:
        operator = " * "
    elif isinstance(expr, FloorDiv):
        operator = " // "
    elif isinstance(expr, (Mod, PythonMod)):
        operator = " % "
    else:
        return None
    parts = [_expression(a) for a in expr.args]
    if any(p is None for p in parts):
        return None
    return "(" + operator.join(parts) + ")"


def _attach_to_entry_point(module: ir.Operation, entries: dict[str, str]) -> None:
    """Facts of the program for ``signature.attach`` to put in the entry point's
    reflection, as module attributes ``{key = {function = "..."}}``."""
    functions = [
        ir.StringAttr(op.attributes["sym_name"]).value
        for op in module.regions[0].blocks[0].operations
        if op.operation.name == "func.func"
    ]
    if len(functions) != 1:
        return
    context = module.context
    for key, value in entries.items():
        entry = {functions[0]: ir.StringAttr.get(value, context=context)}
        module.attributes[key] = ir.DictAttr.get(entry, context=context)


def _import_program(
    program: torch.export.ExportedProgram, context: ir.Context, external_weights: bool = False
) -> tuple[ir.Module, dict[str, np.ndarray]]:
    tracker = _KeepingTracker()
    hooks = _ExternalWeights(program) if external_weights else None
    importer = FxImporter(context=context, py_attr_tracker=tracker, hooks=hooks)
    try:
        # the lengths' ranges (torch.export's Dim min/max) go with the module: the torch
        # input pipeline makes them util.assume.int bounds that IREE's code generation reads
        # inputs updated in place (a KV cache written at a position) stay mutable
        # (!torch.tensor) through import_program: IREE writes into the caller's buffers
        mutates = bool(program.graph_signature.user_inputs_to_mutate)
        imports = importer.import_program if mutates else importer.import_frozen_program
        imports(_frozen_state(program), import_symbolic_shape_expressions=True)
    except Exception as exc:  # the importer met a value or an op it cannot type
        node = _node_being_imported(exc)
        if node is None:
            raise FusionCompilerError(
                f"the FX importer could not import the program: {type(exc).__name__}: {exc}"
            ) from None
        reason = f"the FX importer cannot import it: {type(exc).__name__}: {exc}"
        raise UnsupportedOpError([(f"{_node_op(node)} ({reason})", _node_line(node))]) from None
    return importer.module, _resource_elements(tracker)


# The scope of the IREE parameters a module compiled with external weights reads: the
# runtime serves the weights it is given under it (``runtime.load(..., weights=)``).
PARAMETER_SCOPE = "model"


def external_parameters(program: torch.export.ExportedProgram) -> dict[str, torch.Tensor]:
    """The parameters a module compiled with external weights reads, by state-dict key:
    the floating-point ones (integer ones, quantized weights, stay in the module)."""
    return {
        name: tensor
        for name in program.graph_signature.inputs_to_parameters.values()
        if (tensor := program.state_dict.get(name)) is not None
        and tensor.dtype in TORCH_DTYPE_TO_MLIR_TYPE_ASM
        and tensor.is_floating_point()
        and not tensor.is_meta
    }


class _ExternalWeights(FxImporterHooks):
    """Imports the model's floating-point parameters as IREE parameters, named by their
    state-dict keys (``#stream.parameter.named<"model"::"layers.0.weight">``): the module
    holds none of their values, which the runtime reads when it loads the module."""

    def __init__(self, program: torch.export.ExportedProgram) -> None:
        self._names = {id(tensor): name for name, tensor in external_parameters(program).items()}
        self._module: ir.Operation | None = None
        self._declared: set[str] = set()

    def prepare_module(self, module_op: ir.Operation) -> None:
        self._module = module_op
        for dialect in ("util", "stream", "torch_c"):  # ops made by name must be registered
            module_op.context.dialects[dialect]

    def resolve_literal(self, gni, literal, info):
        name = self._names.get(id(literal)) if isinstance(literal, torch.Tensor) else None
        if name is None or self._module is None:
            return None
        element = TORCH_DTYPE_TO_MLIR_TYPE_ASM[literal.dtype]
        tensor = f"tensor<{''.join(f'{n}x' for n in literal.shape)}{element}>"
        symbol = f"{PARAMETER_SCOPE}.{name}"
        if name not in self._declared:
            self._declared.add(name)
            declaration = ir.Operation.parse(
                f'util.global private @"{symbol}" = '
                f'#stream.parameter.named<"{PARAMETER_SCOPE}"::"{name}"> : {tensor}',
                context=self._module.context,
            )
            ir.InsertionPoint.at_block_begin(self._module.regions[0].blocks[0]).insert(declaration)
        loaded = ir.Operation.create(
            "util.global.load",
            results=[ir.Type.parse(tensor)],
            attributes={"global": ir.FlatSymbolRefAttr.get(symbol)},
        ).result
        vtensor = gni._cc.create_vtensor_type(literal.dtype, literal.size())
        return ir.Operation.create(
            "torch_c.from_builtin_tensor", results=[vtensor], operands=[loaded]
        ).result


# the most elements of a float constant whose values are kept for the passes (a mask
# buffer of 2048 x 2048 is 2^22; weights are larger and never read)
_KEPT_FLOAT_ELEMENTS = 1 << 22
_KEPT_ELEMENTS = 1 << 24  # of an integer one (quantized weights are larger)
# of a one-byte one: a bool mask buffer up to 32768 x 32768 (a tril of the context),
# whose band the passes find by scanning it
_KEPT_BYTE_ELEMENTS = 1 << 30


class _KeepingTracker(RefTracker):
    """The importer's map of tensors -> their attributes, holding the tensors it is given
    (the frozen program's temporaries, a bool buffer made uint8, die before the passes
    run) where the passes may read their values: small integer and float tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.kept: list[torch.Tensor] = []

    def track(self, referrent):
        if isinstance(referrent, torch.Tensor) and referrent.numel() <= _kept_elements(referrent):
            self.kept.append(referrent)
        return super().track(referrent)


def _kept_elements(tensor: torch.Tensor) -> int:
    if tensor.is_floating_point():
        return _KEPT_FLOAT_ELEMENTS
    return _KEPT_BYTE_ELEMENTS if tensor.element_size() == 1 else _KEPT_ELEMENTS


def _resource_elements(tracker: _KeepingTracker) -> dict[str, np.ndarray]:
    """The bytes of the kept tensors the importer made dense_resource constants of, by
    the resource's name."""
    found: dict[str, np.ndarray] = {}
    for tensor in tracker.kept:
        attr = RefTracker.track(tracker, tensor).value
        if not isinstance(attr, ir.DenseResourceElementsAttr) or tensor.is_meta:
            continue
        data = tensor.detach().cpu().resolve_conj().resolve_neg().contiguous()
        data = data.reshape(-1).view(torch.uint8)  # as the importer writes its bytes
        found[linalg.resource_name(attr)] = data.numpy()
    return found


def _node_being_imported(exc: Exception) -> torch.fx.Node | None:
    """The graph node the importer was at: the innermost of its frames' ``node``."""
    node, frame = None, exc.__traceback__
    while frame is not None:
        candidate = frame.tb_frame.f_locals.get("node")
        if isinstance(candidate, torch.fx.Node):
            node = candidate
        frame = frame.tb_next
    return node


def _node_op(node: torch.fx.Node) -> str:
    if isinstance(node.target, torch._ops.OpOverload):
        return "torch." + str(node.target).removesuffix(".default")
    return f"{node.op} {node.name}"


_TRACE_LINE = re.compile(r'File "([^"]+)", line (\d+)')


def _node_line(node: torch.fx.Node) -> str:
    """``file:line:0`` of the model's line that made ``node`` (as the importer's locations)."""
    found = _TRACE_LINE.findall(node.meta.get("stack_trace") or "")
    if not found:
        return "<unknown location>"
    path, line = found[-1]
    return f"{path}:{line}:0"


def _torch_operators(module: ir.Operation) -> list[tuple[str, str]]:
    """The ``torch.operator`` ops (aten ops the torch dialect does not define, which
    nothing can lower) by aten name, with their source lines."""
    found: list[tuple[str, str]] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "torch.operator":
            name = ir.StringAttr(op.attributes["name"]).value
            found.append((name, diagnostics.render_location(op.location)))
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return found


def _stage_of(module: ir.Module) -> Stage:
    torch_seen = False

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal torch_seen
        if op.name.startswith(("torch.", "torch_c.")):
            torch_seen = True
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return Stage.TORCH if torch_seen else Stage.LINALG


def unsupported_ops(torch_module: ir.Operation) -> list[tuple[str, str]]:
    """The torch ops that IREE's input pipeline cannot convert, with their source lines.

    A ``torch.operator`` fails the backend contract that the pipeline verifies first, so
    the whole module comes back unconverted: those ops alone are named. Otherwise, the
    ops the conversions leave behind; where a pass fails instead, what its errors point
    at. Runs on (and consumes) a copy of the torch-stage module.
    """
    undefined = _torch_operators(torch_module)
    if undefined:
        return undefined
    context = torch_module.context
    pm = passmanager.PassManager.parse(_PARTIAL_TORCH_LOWERING, context=context)
    with diagnostics.collect(context) as seen:
        try:
            pm.run(torch_module)
        except ir.MLIRError:  # the module is as the failing pass left it: its errors say why
            return [(d.message.splitlines()[0], d.location) for d in seen if d.severity == "error"]
    found: list[tuple[str, str]] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        name = op.name
        if name.startswith("torch.") and not name.startswith(_STRUCTURAL_TORCH_OPS):
            found.append((name, diagnostics.render_location(op.location)))
        return ir.WalkResult.ADVANCE

    torch_module.walk(visit)
    return found
