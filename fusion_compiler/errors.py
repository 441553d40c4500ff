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


class InputFileError(FusionCompilerError):
    """A file given as the model or as MLIR is not one the compiler takes (a folder, an
    ONNX model, a torch.save checkpoint, bytes that are not UTF-8 text)."""

    def __init__(self, path: object, problem: str, advice: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{path} {problem}; {advice}")


class OutputPathError(FusionCompilerError):
    """A file or folder the compiler was asked to write cannot be written there."""

    def __init__(self, path: object, problem: str, advice: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"cannot write {path}: {problem}; {advice}")


class PipelineError(FusionCompilerError, ValueError):
    """A pass pipeline that does not parse: an unknown pass, a bad option or value."""

    def __init__(self, element: str, problem: str):
        self.element = element
        self.problem = problem
        super().__init__(f"cannot parse pass pipeline element {element!r}: {problem}")


class TargetError(FusionCompilerError, ValueError):
    """A target architecture the compiler cannot build for."""

    def __init__(self, option: str, value: str, supported: tuple[str, ...]):
        self.option = option
        self.value = value
        self.supported = supported
        super().__init__(f"unsupported {option} {value!r}; supported: {', '.join(supported)}")


class EmptyModuleError(FusionCompilerError):
    """The input holds no function, so there is nothing to compile."""

    def __init__(self, where: str):
        self.where = where
        super().__init__(
            f"{where} holds no function: nothing to compile; give MLIR with a func.func "
            "(the entry point), or a .pt2 saved by torch.export.save"
        )
