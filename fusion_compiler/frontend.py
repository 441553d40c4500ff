"""PyTorch models and MLIR text into MLIR: ``nn.Module``, ExportedProgram, ``.pt2``, ``.mlir``.

Torch export and the torch-mlir FX importer (shipped in iree-base-compiler) do the
work; aten lowering is IREE's torch input pipeline, not ours.
"""

from __future__ import annotations

import traceback
import warnings
from pathlib import Path

import torch

from fusion_compiler import decompositions, diagnostics
from fusion_compiler.errors import FusionCompilerError, MLIRParseError
from fusion_compiler.ir import FxImporter, ir, passmanager
from fusion_compiler.stages import Stage

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


def load_model(
    model: object,
    example_args: tuple = (),
    example_kwargs: dict | None = None,
    dynamic_shapes: object = None,
) -> torch.export.ExportedProgram | str:
    """An ExportedProgram for torch models, or the MLIR text for MLIR input."""
    if isinstance(model, torch.export.ExportedProgram):
        return model
    if isinstance(model, torch.nn.Module):
        if not example_args and not example_kwargs:
            raise FusionCompilerError(
                f"compiling a {type(model).__name__} needs example inputs: "
                "fc.compile(model, example_args=(x, ...))"
            )
        try:
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
            return _restore_list_values(torch.export.load(str(path)))
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
        table.update({op: composite[op] for op in decompose})
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch's pytree, on deepcopy
            return program.run_decompositions(table)
    except Exception as exc:  # a graph torch itself cannot retrace: say which, and why
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise FusionCompilerError(
            "could not functionalise the exported program: torch's run_decompositions "
            f"raised {type(exc).__name__}: {first}\n"
            "A module compiles without state: if the model updates its own buffers in place "
            "(a static KV cache), pass that state as inputs and return its new value."
        ) from None


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
    source: torch.export.ExportedProgram | str, context: ir.Context, filename: str = "<input>"
) -> tuple[ir.Module, Stage]:
    """MLIR for the model and the stage it is at (torch for models, torch or linalg for text).

    A program is imported as ``functional`` gives it (a new program: the importer's
    in-place rewrites leave the caller's as it was). An operator the torch dialect has no
    definition of (imported as ``torch.operator``) cannot be lowered; where PyTorch
    defines it by composition of others, the program is imported again with it
    decomposed."""
    if not isinstance(source, torch.export.ExportedProgram):
        module = parse(source, context, filename)
        return module, _stage_of(module)
    decompose: frozenset = frozenset()
    while True:
        module = _import_program(functional(source, decompose), context)
        composite = composite_ops(source, _unregistered_ops(module.operation)) - decompose
        if not composite:
            return module, Stage.TORCH
        # the module is Python's: dropped here, freed once (an erase() would free it twice)
        del module
        decompose |= composite


def _import_program(program: torch.export.ExportedProgram, context: ir.Context) -> ir.Module:
    importer = FxImporter(context=context)
    try:
        importer.import_frozen_program(_frozen_state(program))
    except Exception as exc:  # the importer met a value or an op it cannot type
        raise FusionCompilerError(
            f"the FX importer could not import the program: {type(exc).__name__}: {exc}"
        ) from None
    return importer.module


def _unregistered_ops(module: ir.Operation) -> set[str]:
    """Names of the ``torch.operator`` ops: aten ops the torch dialect does not define."""
    names: set[str] = set()

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "torch.operator":
            names.add(ir.StringAttr(op.attributes["name"]).value)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return names


def parse(text: str, context: ir.Context, filename: str = "<input>") -> ir.Module:
    """Parses and verifies MLIR text; malformed text raises MLIRParseError with line:col."""
    try:
        module = ir.Module.parse(text, context)
    except ir.MLIRError as exc:
        raise MLIRParseError(diagnostics.errors_of(exc, filename)) from None
    with diagnostics.collect(context, filename) as seen:
        valid = module.operation.verify()
    if not valid or any(d.severity == "error" for d in seen):
        raise MLIRParseError([d for d in seen if d.severity in ("error", "note")])
    return module


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
    """The torch ops that IREE's input pipeline leaves unconverted, with their source lines.

    Runs on (and consumes) a copy of the torch-stage module.
    """
    context = torch_module.context
    pm = passmanager.PassManager.parse(_PARTIAL_TORCH_LOWERING, context=context)
    with diagnostics.collect(context) as seen:
        try:
            pm.run(torch_module)
        except ir.MLIRError:
            pass  # the leftover ops below, or the diagnostics, say what went wrong
    found: list[tuple[str, str]] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        name = op.name
        if name.startswith("torch.") and not name.startswith(_STRUCTURAL_TORCH_OPS):
            if name == "torch.operator":
                name = ir.StringAttr(op.attributes["name"]).value
            found.append((name, diagnostics.render_location(op.location)))
        return ir.WalkResult.ADVANCE

    torch_module.walk(visit)
    if not found:
        found = [(d.message, d.location) for d in seen if d.severity == "error"]
    return found
