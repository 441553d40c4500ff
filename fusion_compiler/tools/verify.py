"""``--verify-diagnostics`` for fusion-opt, as in mlir-opt.

Each ``// expected-remark {{text}}`` (or ``-error``, ``-warning``, ``-note``; with an
optional ``@+N``, ``@-N``, ``@above`` or ``@below``) names a diagnostic that must be
reported on that line with ``text`` in its message. Any diagnostic not expected, and
any expectation not met, is an error. A note is a diagnostic of its own, as in
mlir-opt; MLIR's "see current operation" note is not made at all under
``--verify-diagnostics`` (``diagnostics.omit_op_notes``, mlir-opt's
``printOpOnDiagnostic(false)``), so a test expects only what the passes report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fusion_compiler.errors import Diagnostic

_EXPECTED = re.compile(
    r"expected-(error|warning|remark|note)\s*(@(?:[+-]\d+|above|below))?\s*\{\{(.*?)\}\}"
)


@dataclass
class Expectation:
    severity: str
    line: int
    text: str
    source_line: int
    met: bool = False


def expectations(text: str) -> list[Expectation]:
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for match in _EXPECTED.finditer(line):
            severity, offset, message = match.groups()
            target = number
            if offset in ("@above", "@below"):
                target += -1 if offset == "@above" else 1
            elif offset:
                target += int(offset[1:]) * (1 if offset[1] == "+" else -1)
            found.append(Expectation(severity, target, message, number))
    return found


def check(text: str, filename: str, seen: list[Diagnostic]) -> list[str]:
    """Problems found, as ``file:line: error: ...`` lines; empty when all is as expected."""
    expected = expectations(text)
    problems = []
    for diag in seen:
        line = _line_of(diag)
        match = next(
            (
                e
                for e in expected
                if not e.met
                and e.line == line
                and e.severity == diag.severity
                and e.text in diag.message
            ),
            None,
        )
        if match is None:
            problems.append(f"{diag.location}: error: unexpected {diag.severity}: {diag.message}")
        else:
            match.met = True
    for e in expected:
        if not e.met:
            problems.append(
                f"{filename}:{e.source_line}: error: expected {e.severity} "
                f"on line {e.line} was not produced: {e.text}"
            )
    return problems


def _line_of(diag: Diagnostic) -> int | None:
    parts = diag.location.rsplit(":", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None
