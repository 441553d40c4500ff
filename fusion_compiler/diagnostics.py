"""Turns MLIR diagnostics into ``file:line:col: severity: message`` records."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

from fusion_compiler.errors import Diagnostic
from fusion_compiler.ir import ir, set_global_flags

_FILE_LINE_COL = re.compile(r'"([^"]*)":(\d+):(\d+)')
_SEVERITIES = {
    ir.DiagnosticSeverity.ERROR: "error",
    ir.DiagnosticSeverity.WARNING: "warning",
    ir.DiagnosticSeverity.NOTE: "note",
    ir.DiagnosticSeverity.REMARK: "remark",
}


def render_location(location: ir.Location | str, filename: str | None = None) -> str:
    """``loc("m.py":12:0)`` -> ``m.py:12:0``; ``filename`` replaces the parser's ``-``."""
    match = _FILE_LINE_COL.search(str(location))
    if match is None:
        return "<unknown location>"
    path, line, col = match.groups()
    if path == "-" and filename:
        path = filename
    return f"{path}:{line}:{col}"


def to_diagnostics(diagnostic, filename: str | None = None) -> list[Diagnostic]:
    """One MLIR diagnostic and its notes, in order."""
    out = [
        Diagnostic(
            _SEVERITIES.get(diagnostic.severity, "error"),
            render_location(diagnostic.location, filename),
            diagnostic.message,
        )
    ]
    for note in diagnostic.notes:
        out += to_diagnostics(note, filename)
    return out


@contextlib.contextmanager
def collect(context: ir.Context, filename: str | None = None) -> Iterator[list[Diagnostic]]:
    """Captures every diagnostic emitted in ``context`` while the block runs."""
    captured: list[Diagnostic] = []

    def handler(diagnostic) -> bool:
        captured.extend(to_diagnostics(diagnostic, filename))
        return True

    handle = context.attach_diagnostic_handler(handler)
    try:
        yield captured
    finally:
        handle.detach()


def errors_of(exc: ir.MLIRError, filename: str | None = None) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for d in exc.error_diagnostics:
        out += to_diagnostics(d, filename)
    return out


_GLOBAL_FLAGS_SET = False


def omit_op_notes() -> None:
    """Stops MLIR from adding a "see current operation" note to an op's diagnostics, as
    mlir-opt does under --verify-diagnostics (``printOpOnDiagnostic(false)``), so a test
    expects the diagnostics a pass reports, not MLIR's dump of the op.

    A process-wide flag of the compiler library, read when a context is made: call it
    before the first session. The library takes its flags once per process.
    """
    global _GLOBAL_FLAGS_SET
    if not _GLOBAL_FLAGS_SET:
        set_global_flags("fusion-opt", "--mlir-print-op-on-diagnostic=false")
        _GLOBAL_FLAGS_SET = True
