"""What is given to the compiler, checked before anything reads it: output paths, input
files (a .pt2, MLIR text, or what they are when they are neither) and MLIR text, parsed
and verified. Needs no torch: ``fusion-opt`` works on MLIR text alone.
"""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path

import numpy as np

from fusion_compiler import diagnostics
from fusion_compiler.errors import Diagnostic, MLIRParseError, OutputPathError
from fusion_compiler.ir import ir


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


def make_folder(folder: Path, what: str) -> None:
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


def names_a_file(text: str) -> bool:
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


# a blob of the builtin dialect's resources: name: "0x<alignment, 4 bytes><data>"
_MAX_BLOB_HEX = 1 << 26  # 32 MiB of bytes
_BLOB = re.compile(r'([A-Za-z_][\w.$-]*)\s*:\s*"0x([0-9A-Fa-f]{8,})"')


def resource_blobs(text: str) -> dict[str, np.ndarray]:
    """The bytes of each ``dense_resource`` blob at the end of MLIR text (its
    ``dialect_resources`` section), by name, for ``linalg.resources``."""
    start = text.rfind("{-#")
    section = text[start:] if start >= 0 and "dialect_resources" in text[start:] else ""
    return {
        name: np.frombuffer(bytes.fromhex(data[8:]), np.uint8)  # after the alignment
        for name, data in _BLOB.findall(section)
        if len(data) <= _MAX_BLOB_HEX  # weights: never read by the passes
    }


def parse(text: str, context: ir.Context, filename: str = "<input>") -> ir.Module:
    """Parses and verifies MLIR text; malformed text raises MLIRParseError with line:col.

    IREE's context takes ops of dialects it does not know (verified as opaque), which no
    pass can lower and IREE's compiler crashes on (segfaults): they are refused here."""
    try:
        module = ir.Module.parse(text, context)
    except ir.MLIRError as exc:
        raise MLIRParseError(diagnostics.errors_of(exc, filename)) from None
    unknown = _unregistered_ops(module.operation, filename)
    if unknown:
        raise MLIRParseError(unknown)
    with diagnostics.collect(context, filename) as seen:
        valid = module.operation.verify()
    if not valid or any(d.severity == "error" for d in seen):
        raise MLIRParseError([d for d in seen if d.severity in ("error", "note")])
    return module


def _unregistered_ops(module: ir.Operation, filename: str) -> list[Diagnostic]:
    """An error for each op that no dialect in the context defines."""
    context = module.context
    found: list[Diagnostic] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if not context.is_registered_operation(op.name):
            found.append(
                Diagnostic(
                    "error",
                    diagnostics.render_location(op.location, filename),
                    f"unregistered operation '{op.name}': no dialect of the compiler defines "
                    "it, so nothing can lower it; write it with ops of func, arith, math, "
                    "tensor, linalg or torch",
                )
            )
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return found
