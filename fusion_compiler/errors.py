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


# What to do about an operator a known library emits, by the operator's name.
_MOE_EXPERTS = (
    "transformers' grouped_mm experts (its default for mixture-of-experts layers) count "
    "tokens per expert and multiply groups of data-dependent sizes; export the model "
    'after model.set_experts_implementation("batched_mm") (or from_pretrained(..., '
    'experts_implementation="batched_mm")), whose experts are batched matrix products'
)
_ADVICE = {
    "torch.transformers.grouped_mm_fallback": _MOE_EXPERTS,
    "torch.aten.histc": _MOE_EXPERTS,
}


class UnsupportedOpError(FusionCompilerError):
    """The front end met torch ops it cannot lower to Linalg."""

    def __init__(self, ops: list[tuple[str, str]]):
        self.ops = ops  # (op name, source location)
        listed = "\n".join(f"  {loc}: {name}" for name, loc in ops)
        advice = dict.fromkeys(_ADVICE[name] for name, _ in ops if name in _ADVICE)
        super().__init__(
            "the model uses operators that cannot be lowered to Linalg:\n"
            f"{listed}\n"
            + "".join(f"For these: {text}.\n" for text in advice)
            + "Rewrite these lines with supported operators, or keep them out of the exported "
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


class WrongDeviceError(FusionCompilerError):
    """A module compiled for one vendor's Vulkan devices, loaded on another's, where
    IREE's code for its target computes wrong results."""

    def __init__(self, target: str, vendor: str, device: str):
        self.target = target
        self.vendor = vendor
        self.device = device
        super().__init__(
            f"the module was compiled with vulkan_target={target!r}, for {vendor} GPUs, and "
            f"the Vulkan device here is {device!r}: IREE's reductions for that target assume "
            f"{vendor}'s subgroup size and give wrong results on other devices. Compile for "
            "this device's target (fc.compile(..., vulkan_target=...); "
            "'vp_android_baseline_2022' runs on any Vulkan device)."
        )


class EmptyModuleError(FusionCompilerError):
    """The input holds no function, so there is nothing to compile."""

    def __init__(self, where: str):
        self.where = where
        super().__init__(
            f"{where} holds no function: nothing to compile; give MLIR with a func.func "
            "(the entry point), or a .pt2 saved by torch.export.save"
        )


class ExampleInputError(FusionCompilerError, ValueError):
    """``example_args`` that torch.export cannot trace the model with as given."""

    def __init__(self, index: int | None, problem: str, advice: str):
        self.index = index  # position in example_args; None for example_args as a whole
        self.problem = problem
        where = "example_args" if index is None else f"example_args[{index}]"
        super().__init__(f"{where} {problem}; {advice}")


class TrainingModeError(FusionCompilerError):
    """The model is in training mode and holds layers that behave differently there."""

    def __init__(self, model: str, modules: list[tuple[str, str]]):
        self.modules = modules  # (qualified name, class name)
        listed = ", ".join(f"{name or '<the model>'!r} ({kind})" for name, kind in modules)
        super().__init__(
            f"{model} is in training mode, where {listed} compute what they do not in "
            "inference (batch statistics and their running update, random dropout); a "
            "compiled module runs inference: call model.eval() before fc.compile"
        )


class DimensionMismatchError(ArgumentError):
    """Dynamic dimensions the module was exported with as equal (or derived from one
    another) do not agree in a call."""

    def __init__(self, function: str, index: int, dim: int, got: int, expected: int, rule: str):
        self.function = function
        self.index = index
        self.dim = dim
        self.got = got
        self.expected = expected
        self.rule = rule  # e.g. "args[1].shape[2]" or "2 * args[1].shape[2]"
        super().__init__(
            f"{function}: argument {index} has size {got} in dim {dim}, expected {expected}: "
            f"args[{index}].shape[{dim}] == {rule} in the exported program; give tensors "
            "whose dims agree, or export with dynamic_shapes that leave them independent"
        )


class DimensionRangeError(ArgumentError):
    """A dynamic dimension of a call is outside the range the module was exported for
    (``torch.export.Dim(min=, max=)``)."""

    def __init__(
        self, function: str, index: int, dim: int, got: int, low: int | None, high: int | None
    ):
        self.function = function
        self.index = index
        self.dim = dim
        self.got = got
        self.low, self.high = low, high
        bounds = f"{low if low is not None else 0}..{high if high is not None else 'inf'}"
        super().__init__(
            f"{function}: argument {index} has size {got} in dim {dim}, outside the range "
            f"{bounds} the module was exported for; export with a Dim whose min and max "
            "include it"
        )


class ModuleFileError(FusionCompilerError):
    """What ``fc.load`` was given is not a module it can load (a folder, a file it cannot
    read, bytes that are not an IREE module)."""

    def __init__(self, path: object, problem: str, advice: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{path}: {problem}; {advice}")


class DamagedFileError(FusionCompilerError):
    """A file whose bytes differ from those written: a checksum it carries does not match."""

    def __init__(self, path: object, part: str, advice: str):
        self.path = str(path)
        self.part = part  # what the failing checksum covers
        super().__init__(
            f"{path}: {part} does not match its checksum (the file is damaged); {advice}"
        )
