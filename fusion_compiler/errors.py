"""Errors a user can act on: each says what was wrong, where, and what to do."""

from __future__ import annotations

from dataclasses import dataclass


class FusionCompilerError(Exception):
    """Base of every error fusion_compiler raises on purpose."""


@dataclass(frozen=True)
class Diagnostic:
    """One compiler diagnostic, already rendered as ``file:line:col: severity: message``."""

    severity: str  # "error", "warning", "remark", "note"
    location: str
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {self.severity}: {self.message}"


class CompileError(FusionCompilerError):
    """A compiler step failed; carries its diagnostics and a command that reproduces it."""

    def __init__(self, step: str, diagnostics: list[Diagnostic], reproducer: str | None = None):
        self.step = step
        self.diagnostics = diagnostics
        self.reproducer = reproducer
        lines = [f"{step} failed"]
        lines += [f"  {d}" for d in diagnostics] or ["  (the compiler gave no diagnostic)"]
        if reproducer:
            lines.append(f"reproduce with:\n  {reproducer}")
        super().__init__("\n".join(lines))


class UnsupportedOpError(FusionCompilerError):
    """The front end met torch ops it cannot lower to Linalg."""

    def __init__(self, ops: list[tuple[str, str]]):
        self.ops = ops  # (op name, source location)
        listed = "\n".join(f"  {loc}: {name}" for name, loc in ops)
        super().__init__(
            "the model uses operators that cannot be lowered to Linalg:\n"
            f"{listed}\n"
            "Rewrite these lines with supported operators, or keep them out of the exported "
            "module (run them in PyTorch before or after it)."
        )


class MLIRParseError(FusionCompilerError):
    """MLIR text that does not parse or verify."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = diagnostics
        super().__init__("\n".join(str(d) for d in diagnostics))


class ArgumentError(FusionCompilerError, ValueError):
    """A loaded module was called with arguments that do not match its signature."""
