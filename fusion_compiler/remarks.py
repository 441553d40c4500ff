"""Remarks from our passes: what they matched, and why what looked like a match was not.

MLIR's Python bindings emit errors but route remarks only through the optimisation
remark engine, so passes report through this module instead. ``run_pipeline`` opens a
capture around each run; a remark emitted with no capture open is dropped.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from fusion_compiler.diagnostics import render_location
from fusion_compiler.errors import Diagnostic
from fusion_compiler.ir import ir

_capture: contextvars.ContextVar[tuple[list[Diagnostic], str | None] | None] = (
    contextvars.ContextVar("fusion_remarks", default=None)
)


def emit(location: ir.Location, message: str) -> None:
    """Reports ``message`` at ``location`` to the open capture."""
    capture = _capture.get()
    if capture is not None:
        sink, filename = capture
        sink.append(Diagnostic("remark", render_location(location, filename), message))


@contextlib.contextmanager
def capture(filename: str | None = None) -> Iterator[list[Diagnostic]]:
    sink: list[Diagnostic] = []
    token = _capture.set((sink, filename))
    try:
        yield sink
    finally:
        _capture.reset(token)
