"""``fc.compile``: model -> torch MLIR -> Linalg -> our passes -> IREE's phases -> bytecode."""

from __future__ import annotations

import functools
import os
import re
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fusion_compiler import frontend, passes, signature
from fusion_compiler.backends import dispatch
from fusion_compiler.compiler import CompilerSession
from fusion_compiler.dialects import linalg_ext, softmax
from fusion_compiler.errors import (
    CompileError,
    Diagnostic,
    EmptyModuleError,
    InputFileError,
    OutputPathError,
    UnsupportedOpError,
)
from fusion_compiler.ir import ir
from fusion_compiler.passes import online_softmax
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

    def save(self, path: str | Path) -> Path:
        """Writes the .vmfb (or, for an earlier stage, the MLIR text with every constant)
        to ``path``. The .vmfb carries the SHA-256 of its bytes, which ``fc.load`` checks:
        a file altered since (a flipped bit, a truncated copy) is refused, not run."""
        from fusion_compiler.runtime import seal

        path = Path(path)
        if self.vmfb is not None:
            path.write_bytes(seal(self.vmfb))
        else:
            path.write_text(self._full_mlir() if self._full_mlir else self.mlir or "")
        return path


def check_output_file(path: str | Path) -> Path:
    """``path`` as a Path when a file can be written there; OutputPathError (what is in
    the way, and what to do) otherwise, so a CLI fails before it compiles."""
    path = Path(path)
    folder = path.parent
    if path.is_dir():
        raise OutputPathError(path, "it is a folder", "give the name of a file to write")
    if folder.exists() and not folder.is_dir():
        raise OutputPathError(path, f"{folder} is a file, not a folder", "write elsewhere")
    if not folder.is_dir():
        raise OutputPathError(path, f"folder {folder} does not exist", "create it first")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise OutputPathError(path, "permission denied", "write to a folder you can write in")
    return path


def _make_folder(folder: Path, what: str) -> None:
    """Creates ``folder`` (and its parents); OutputPathError when it cannot be made or written."""
    if folder.exists() and not folder.is_dir():
        raise OutputPathError(folder, "it is a file", f"give {what} a folder (made if missing)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        problem = exc.strerror or str(exc)
        raise OutputPathError(folder, problem, f"give {what} a folder you can write in") from None
    if not os.access(folder, os.W_OK):
        raise OutputPathError(folder, "permission denied", f"give {what} a folder you can write in")


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
        _make_folder(self.directory, "dump_ir (--dump-ir)")
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


def _count(module: ir.Operation, name: str, *attributes: str) -> int:
    """Ops named ``name``, or carrying one of ``attributes``."""
    n = 0

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal n
        n += op.name == name or any(a in op.attributes for a in attributes)
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
) -> CompiledModule:
    """Compiles a PyTorch model or MLIR to an IREE module for ``target``.

    ``model``: an nn.Module (with ``example_args``), a torch.export.ExportedProgram, the
    path of a ``.pt2`` saved by torch.export.save or of a ``.mlir`` file, or MLIR text.
    ``dump_ir``: a folder that receives the IR after every stage and pass.
    ``pipeline``: our pass pipeline, ``builtin.module(...)``; default DEFAULT_PIPELINE.
    ``remarks``: print what the passes found (and why they did not fuse) to stderr.
    ``attention``: "auto" (default) picks per target: our online-softmax rewrite on the
    CPU, generated kernels on CUDA with ``cuda_arch="sm_90"``, IREE's op otherwise;
    "iree" hands each fused attention to IREE's attention op; "online-softmax" lowers it
    with our FlashAttention-2 rewrite (fusion-online-softmax).
    ``vulkan_target``: IREE's SPIR-V target for what is not a generated kernel (default
    "pascal": no cooperative matrices, which NVIDIA's driver 580 refuses in IREE's code).
    """
    compile_to = Stage.parse(compile_to)
    tgt = get_target(target, cuda_arch=cuda_arch, vulkan_target=vulkan_target)
    default_elements = passes.default_pipeline(tgt.name, attention, tgt.kernel_arch)
    session = CompilerSession(tgt, reproducer_dir=dump_ir)
    if pipeline:  # before the front end's minutes: a typo fails now
        check_pipeline(pipeline, session.context)
    if isinstance(model, Path) or (isinstance(model, str) and _names_a_file(model)):
        model = Path(model)
        problem = input_file_problem(model)
        if problem:
            raise InputFileError(model, *problem)
    dumper = IRDumper(dump_ir)
    source = frontend.load_model(model, example_args, example_kwargs, dynamic_shapes)
    filename = str(model) if isinstance(model, Path) else None
    module, stage = frontend.import_model(source, session.context, filename or "<input>")
    op = module.operation
    if isinstance(source, str) and not _count(op, "func.func") + _count(op, "util.func"):
        raise EmptyModuleError(filename or "the MLIR text")
    dumper.write(stage.value, op)
    result = CompiledModule(tgt, stage, None, None)

    def done(at: Stage) -> CompiledModule:
        result.stage = at
        result.mlir = str(op.get_asm(large_elements_limit=16, assume_verified=True))
        result._full_mlir = functools.partial(_asm, op)
        return result

    if compile_to is Stage.TORCH:
        return done(stage)
    # Linalg text goes through IREE's input phase too: it is where IREE adopts func.func.
    op = _lower_to_linalg(session, op)
    signature.attach(op)
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
        op, linalg_ext.ATTENTION, online_softmax.MARKER, dispatch.MARKER
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
        if phase is Stage.FLOW:
            result.stats["dispatches"] = _count(op, "flow.dispatch")
        if phase is compile_to:
            return done(phase)
    result.vmfb = session.to_vmfb(op)
    result.stage = Stage.VMFB
    return result


def _names_a_file(text: str) -> bool:
    """MLIR text never names an existing file or folder (``os.path`` takes any text)."""
    return "\n" not in text and os.path.exists(text)


_EXPECTED = "expected a .pt2 saved by torch.export.save, or MLIR text (.mlir)"
_SAVE = "torch.export.save(torch.export.export(model, args), 'model.pt2')"
_EXPORT = "export the model: " + _SAVE
# What a file given as input is, when it is not what we take: (what it is, what to do),
# formatted with the file's ``path`` and ``stem``.
_NOT_TAKEN = {
    "folder": ("is a folder", "give the file inside it"),
    "onnx": ("is an ONNX model", "export the PyTorch model instead: " + _SAVE),
    "torch.save": ("is a torch.save file (tensors or a pickled module, not a program)", _EXPORT),
    "pickle": ("is a Python pickle, not an exported program", _EXPORT),
    "zip": ("is a zip archive that torch.export.save did not write", _EXPORT),
    "not zip": ("is not a torch.export archive (not a zip file)", _EXPORT),
    "pt2 name": ("is a torch.export archive without the .pt2 suffix", "rename it {stem}.pt2"),
    "pt2": (
        "is a torch.export archive, not MLIR text",
        "import it first: fusion-compile {path} --compile-to torch -o {stem}.mlir",
    ),
    "bytecode": (
        "is MLIR bytecode, not MLIR text",
        "print it as text: iree-opt {path} -o {stem}.mlir",
    ),
}


def input_file_problem(path: Path, *, mlir_only: bool = False) -> tuple[str, str] | None:
    """(what ``path`` is, what to do) when it is neither a .pt2 of torch.export.save nor
    UTF-8 text; None when it is. ``mlir_only``: MLIR text alone is taken (fusion-opt)."""
    expected = "expected MLIR text" if mlir_only else _EXPECTED
    if path.is_dir():
        kind = "folder"
    elif not path.exists():
        return None  # the front end says so
    else:
        try:
            with path.open("rb") as f:
                head = f.read(4)
            kind = _binary_kind(path, head, mlir_only)
            if kind is None and (mlir_only or path.suffix != ".pt2"):
                return text_problem(path.read_bytes())
        except (OSError, zipfile.BadZipFile) as exc:
            problem = getattr(exc, "strerror", None) or str(exc)
            return f"cannot be read ({problem})", "check the path and its permissions"
    if kind is None:
        return None
    what, todo = _NOT_TAKEN[kind]
    return what, f"{expected}: " + todo.format(path=path, stem=path.with_suffix(""))


def _binary_kind(path: Path, head: bytes, mlir_only: bool) -> str | None:
    """The key in _NOT_TAKEN of a file by its first bytes (and a zip's entry names)."""
    if head in (b"PK\x03\x04", b"PK\x05\x06"):
        names = [n.rpartition("/")[2] for n in zipfile.ZipFile(path).namelist()]
        if "archive_format" not in names:
            return "torch.save" if "data.pkl" in names else "zip"
        if mlir_only:
            return "pt2"
        return None if path.suffix == ".pt2" else "pt2 name"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "pickle"
    if head == b"ML\xefR":
        return "bytecode"
    if path.suffix == ".onnx":
        return "onnx"
    return "not zip" if path.suffix == ".pt2" and not mlir_only else None


def text_problem(data: bytes) -> tuple[str, str] | None:
    """(what is wrong, what to do) when ``data`` is not UTF-8 text; None when it is."""
    try:
        data.decode()
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        return (
            f"is not UTF-8 text: byte 0x{data[exc.start]:02x} at line {line}, column {column}",
            "MLIR text is UTF-8: save the file as UTF-8",
        )
    return None


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
