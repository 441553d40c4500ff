"""``fc.compile``: model -> torch MLIR -> Linalg -> our passes -> IREE's phases -> bytecode."""

from __future__ import annotations

import functools
import re
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fusion_compiler import frontend, inputs, signature, targets
from fusion_compiler.backends import dispatch
from fusion_compiler.compiler import CompilerSession
from fusion_compiler.dialects import linalg, linalg_ext, softmax
from fusion_compiler.errors import (
    CompileError,
    Diagnostic,
    EmptyModuleError,
    FusionCompilerError,
    InputFileError,
    OutputPathError,
    UnsupportedOpError,
)
from fusion_compiler.ir import ir
from fusion_compiler.passes import caller_storage, online_softmax
from fusion_compiler.pipeline import check_pipeline, join_pipeline, run_pipeline, split_pipeline
from fusion_compiler.stages import IREE_STAGES, Stage
from fusion_compiler.targets import VULKAN_TARGET, Target, get_target


@dataclass
class CompiledModule:
    """What ``fc.compile`` returns: the bytecode (or the IR of an earlier stage) and facts."""

    target: Target
    stage: Stage
    vmfb: bytes | None
    mlir: str | None  # the IR at ``stage`` when compilation stopped before bytecode
    stats: dict[str, int] = field(default_factory=dict)
    remarks: list[Diagnostic] = field(default_factory=list)
    # ``mlir`` elides large constants to stay readable; what ``save`` writes keeps them,
    # so iree-compile and fusion-opt can take the file (printed only then, from the IR
    # this holds on to)
    _full_mlir: Callable[[], str] | None = field(default=None, repr=False, compare=False)
    # compiled with weights="external": the parameters the module reads, by key
    weights: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    def save(self, path: str | Path) -> Path:
        """Writes the .vmfb (or, for an earlier stage, the MLIR text with every constant)
        to ``path``. The .vmfb carries the SHA-256 of its bytes, which ``fc.load`` checks:
        a file altered since (a flipped bit, a truncated copy) is refused, not run. A
        module compiled with external weights gets them beside it, in an IREE parameter
        archive of the same name (``m.vmfb``: ``m.irpa``), which ``fc.load(path)`` reads."""
        from fusion_compiler.runtime import seal, weights_beside, write_parameters

        path = Path(path)
        if self.weights and path.suffix == ".irpa":
            raise OutputPathError(
                path, "is where the module's weights go (.irpa)", "save to m.vmfb"
            )
        if self.vmfb is not None:
            path.write_bytes(seal(self.vmfb))
            if self.weights:
                write_parameters(self.weights, weights_beside(path))
        else:
            path.write_text(self._full_mlir() if self._full_mlir else self.mlir or "")
        return path


class IRDumper:
    """Writes the IR after each stage and pass as ``NN-name.mlir``, numbered in order.

    The folder's manifest names the files written into it; a new dump removes those of
    the previous one and nothing else, and will not write over a numbered file it did
    not write (a user's own, or a dump of an earlier version without a manifest).
    """

    MANIFEST = ".fusion-ir-dump"
    _DUMP = re.compile(r"[0-9][0-9]-[^/\\]*\.mlir")

    def __init__(self, directory: str | Path | None):
        self.directory = Path(directory) if directory is not None else None
        self.count = 0
        if self.directory is None:
            return
        inputs.make_folder(self.directory, "dump_ir (--dump-ir)")
        manifest = self.directory / self.MANIFEST
        listed = manifest.read_text().splitlines() if manifest.is_file() else []
        ours = {name for name in listed if self._DUMP.fullmatch(name)}
        theirs = sorted(
            p.name for p in self.directory.glob("[0-9][0-9]-*.mlir") if p.name not in ours
        )
        if theirs:
            more = f" and {len(theirs) - 1} more" if len(theirs) > 1 else ""
            raise OutputPathError(
                self.directory,
                f"it holds {theirs[0]}{more}, not written by a dump of fusion_compiler "
                f"(not in its {self.MANIFEST})",
                "dump to an empty or new folder, or remove those files",
            )
        for name in ours:
            (self.directory / name).unlink(missing_ok=True)
        manifest.write_text("")

    def write(self, name: str, module: ir.Operation) -> None:
        if self.directory is None:
            return
        path = self.directory / f"{self.count:02d}-{name}.mlir"
        # named in the manifest first: a file half written is still ours to remove
        with (self.directory / self.MANIFEST).open("a") as manifest:
            manifest.write(path.name + "\n")
        path.write_text(str(module.get_asm(large_elements_limit=16, assume_verified=True)))
        self.count += 1


def _count(module: ir.Operation, names: tuple[str, ...], *attributes: str) -> int:
    """Ops with one of ``names``, or carrying one of ``attributes``."""
    n = 0

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal n
        n += op.name in names or any(a in op.attributes for a in attributes)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return n


def compile(  # noqa: A001 - the public name users call, as in torch.compile
    model: object,
    example_args: tuple = (),
    *,
    example_kwargs: dict | None = None,
    dynamic_shapes: object = None,
    target: str = "cpu",
    dump_ir: str | Path | None = None,
    compile_to: Stage | str = Stage.VMFB,
    pipeline: str | None = None,
    remarks: bool = False,
    attention: str = "auto",
    cuda_arch: str = "sm_80",
    vulkan_target: str = VULKAN_TARGET,
    weights: str = "embedded",
) -> CompiledModule:
    """Compiles a PyTorch model or MLIR to an IREE module for ``target``.

    ``model``: an nn.Module (with ``example_args``), a torch.export.ExportedProgram, the
    path of a ``.pt2`` saved by torch.export.save or of a ``.mlir`` file, or MLIR text.
    ``dump_ir``: a folder that receives the IR after every stage and pass.
    ``pipeline``: our pass pipeline, ``builtin.module(...)``; default ``targets.pipeline``.
    ``remarks``: print what the passes found (and why they did not fuse) to stderr.
    ``attention``: "auto" (default) picks per target: our online-softmax rewrite on the
    CPU, generated kernels on CUDA with ``cuda_arch="sm_90"`` and on Vulkan, IREE's op
    otherwise;
    "iree" hands each fused attention to IREE's attention op; "online-softmax" lowers it
    with our FlashAttention-2 rewrite (fusion-online-softmax).
    ``vulkan_target``: IREE's SPIR-V target for what is not a generated kernel (default
    "pascal": no cooperative matrices, which NVIDIA's driver 580 refuses in IREE's code).
    ``weights``: "embedded" (default) puts the model's parameters in the module;
    "external" leaves them out (IREE parameters named by their state-dict keys), and
    ``fc.load(module, weights=...)`` gives them: a state dict or a .irpa/.safetensors file
    (``save`` writes them beside the module, where ``fc.load(path)`` finds them).
    """
    if weights not in ("embedded", "external"):
        raise FusionCompilerError(f"weights={weights!r}: expected 'embedded' or 'external'")
    compile_to = Stage.parse(compile_to)
    tgt = get_target(target, cuda_arch=cuda_arch, vulkan_target=vulkan_target)
    default_elements = targets.pipeline(tgt.name, attention, tgt.kernel_arch, vulkan_target)
    session = CompilerSession(tgt, reproducer_dir=dump_ir)
    if pipeline:  # before the front end's minutes: a typo fails now
        check_pipeline(pipeline, session.context)
    if isinstance(model, Path) or (isinstance(model, str) and inputs.names_a_file(model)):
        model = Path(model)
        problem = inputs.input_file_problem(model)
        if problem:
            raise InputFileError(model, *problem)
    dumper = IRDumper(dump_ir)
    source = frontend.load_model(model, example_args, example_kwargs, dynamic_shapes)
    filename = str(model) if isinstance(model, Path) else None
    module, stage, constants = frontend.import_model(
        source, session.context, filename or "<input>", external_weights=weights == "external"
    )
    # the passes read the constants' elements (a registered mask's causality)
    with linalg.resources(session.context, constants):
        op = module.operation
        if isinstance(source, str) and not _count(op, ("func.func", "util.func")):
            raise EmptyModuleError(filename or "the MLIR text")
        dumper.write(stage.value, op)
        result = CompiledModule(tgt, stage, None, None)
        if not isinstance(source, str):  # shown whatever ``remarks`` says: results may be wrong
            for text in frontend.unread_inputs(source):
                result.remarks.append(Diagnostic("warning", filename or "<input>", text))
                warnings.warn(text, stacklevel=2)
        if weights == "external" and not isinstance(source, str):
            result.weights = frontend.external_parameters(source)

        def done(at: Stage) -> CompiledModule:
            result.stage = at
            result.mlir = str(op.get_asm(large_elements_limit=16, assume_verified=True))
            result._full_mlir = functools.partial(_asm, op)
            return result

        if compile_to is Stage.TORCH:
            return done(stage)
        # Linalg text goes through IREE's input phase too: it is where IREE adopts func.func.
        op = _lower_to_linalg(session, op)
        signature.attach(op, tgt.vulkan_target)
        if stage is Stage.TORCH:
            stage = Stage.LINALG
            dumper.write(stage.value, op)
        if compile_to is Stage.LINALG:
            return done(stage)

        elements = split_pipeline(pipeline) if pipeline else default_elements
        for element in elements:
            found = run_pipeline(
                op, join_pipeline([element]), reproducer_dir=dump_ir, filename=filename
            )
            result.remarks += [d for d in found if d.severity in ("remark", "warning")]
            dumper.write(element.partition("{")[0], op)
        if remarks:
            for remark in result.remarks:
                print(remark, file=sys.stderr)
        dumper.write(Stage.FUSED.value, op)
        # Fused attentions: IREE's op, our online-softmax loop nest, or a generated kernel.
        result.stats["attention_ops"] = _count(
            op,
            (linalg_ext.ATTENTION, linalg_ext.ONLINE_ATTENTION),
            online_softmax.MARKER,
            dispatch.MARKER,
        )
        result.stats["softmax_ops"] = sum(
            isinstance(found, softmax.Softmax) for found in softmax.find_all(op)
        )
        if compile_to is Stage.FUSED:
            return done(Stage.FUSED)

        previous = Stage.LINALG.iree_phase
        for phase in IREE_STAGES:
            op = session.run_phases(op, previous, phase.iree_phase)
            previous = phase.iree_phase
            dumper.write(phase.value, op)
            if phase is Stage.STREAM and caller_storage.pin_transient_sizes(op):
                dumper.write("fusion-caller-storage-sizes", op)
            if phase is Stage.FLOW:
                result.stats["dispatches"] = _count(op, ("flow.dispatch",))
            if phase is compile_to:
                return done(phase)
        result.vmfb = session.to_vmfb(op)
        result.stage = Stage.VMFB
        return result


def _asm(op: ir.Operation) -> str:
    return str(op.get_asm(assume_verified=True))


def _lower_to_linalg(session: CompilerSession, torch_module: ir.Operation) -> ir.Operation:
    """IREE's torch input pipeline; on failure, names the torch ops it could not lower."""
    keep = torch_module.clone()
    try:
        return session.run_phases(torch_module, None, Stage.LINALG.iree_phase)
    except CompileError:
        unsupported = frontend.unsupported_ops(keep)
        if unsupported:
            raise UnsupportedOpError(unsupported) from None
        raise
    finally:
        keep.erase()
