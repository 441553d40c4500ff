"""Runs pass pipelines that mix our Python passes with upstream and IREE passes.

A textual pipeline cannot name a Python pass, so the pipeline is split here at the top
level: each element is either one of our registered passes, added as a Python pass, or
handed to MLIR's parser as text. Every pipeline run from code goes through
:func:`run_pipeline`, which on failure saves the input IR and names the ``fusion-opt``
command that reproduces the failure.
"""

from __future__ import annotations

import dataclasses
import shlex
import tempfile
import typing
from collections.abc import Callable
from pathlib import Path

from fusion_compiler import diagnostics, passes, remarks
from fusion_compiler.errors import CompileError, Diagnostic, FusionCompilerError, PipelineError
from fusion_compiler.ir import ir, passmanager

_OPEN = {"(": ")", "{": "}", "[": "]", "<": ">"}


def split_pipeline(text: str) -> list[str]:
    """``builtin.module(a,b{x=1},func.func(c))`` -> ``["a", "b{x=1}", "func.func(c)"]``."""
    text = text.strip()
    if text.startswith("builtin.module(") and text.endswith(")"):
        text = text[len("builtin.module(") : -1]
    elements, depth, start, quote = [], [], 0, False
    for i, ch in enumerate(text):
        if ch == '"':
            quote = not quote
        elif quote:
            continue
        elif ch in _OPEN:
            depth.append(_OPEN[ch])
        elif depth and ch == depth[-1]:
            depth.pop()
        elif ch == "," and not depth:
            elements.append(text[start:i].strip())
            start = i + 1
    if depth or quote:
        raise PipelineError(text, "unbalanced brackets or quotes")
    tail = text[start:].strip()
    if tail:
        elements.append(tail)
    return elements


def join_pipeline(elements: list[str]) -> str:
    return f"builtin.module({','.join(elements)})"


def _bool(raw: str) -> bool:
    """MLIR's spellings: ``opt``, ``opt=1``, ``opt=true`` and ``opt=0``, ``opt=false``."""
    spellings = {"": True, "1": True, "true": True, "0": False, "false": False}
    if raw.lower() not in spellings:
        raise ValueError(raw)
    return spellings[raw.lower()]


_OPTION_PARSERS: dict[type, Callable[[str], object]] = {bool: _bool, int: int, float: float}


def _parse_options(element: str, name: str, text: str, options_type: type) -> object:
    """MLIR-style ``key=value key2=value2`` into the pass's frozen options dataclass."""
    fields = {f.name.replace("_", "-"): f for f in dataclasses.fields(options_type)}
    hints = typing.get_type_hints(options_type)
    values: dict[str, object] = {}
    for item in text.split():
        key, _, raw = item.partition("=")
        field = fields.get(key)
        if field is None:
            known = ", ".join(fields) or "none"
            raise PipelineError(element, f"pass {name} has no option {key!r} (options: {known})")
        kind = hints[field.name]
        try:
            values[field.name] = _OPTION_PARSERS.get(kind, str)(raw)
        except ValueError:
            raise PipelineError(
                element, f"option {key} of pass {name} takes {kind.__name__} values, not {raw!r}"
            ) from None
    return options_type(**values)


_BUILT_DIALECTS = ("arith", "linalg", "math", "scf", "tensor", "iree_linalg_ext", "flow", "hal")


def _python_pass(
    element: str, name: str, options_text: str, failures: list[BaseException]
) -> Callable:
    module = passes.get_pass(name)
    options = _parse_options(element, name, options_text, module.Options)

    def run(op, pass_) -> None:
        try:
            # Dialects load lazily, and an op of one not yet loaded is built unregistered
            # (printed generic, unknown to folders): load what our builders create.
            for dialect in _BUILT_DIALECTS:
                op.context.dialects[dialect]
            module.run(op, options)
        except Exception as exc:  # a bug in the pass: fail the pipeline, keep the cause
            failures.append(exc)
            pass_.signal_pass_failure()

    return run


def _build_pass_manager(
    elements: list[str], context: ir.Context
) -> tuple[passmanager.PassManager, list[BaseException]]:
    """One PassManager for the whole pipeline, and the list our passes report crashes into."""
    pm = passmanager.PassManager("builtin.module", context=context)
    failures: list[BaseException] = []
    for element in elements:
        name, _, rest = element.partition("{")
        if passes.is_registered(name):
            options = rest.removesuffix("}")
            pm.add(_python_pass(element, name, options, failures), name=name, argument=name)
            continue
        try:
            pm.add(element)
        except ValueError as exc:
            raise PipelineError(element, _mlir_pipeline_problem(element, str(exc))) from None
    return pm, failures


_MLIR_PREFIXES = ("MLIR Textual PassPipeline Parser:", "<Pass-Options-Parser>:")


def _mlir_pipeline_problem(element: str, message: str) -> str:
    """MLIR's multi-line parser message (with a caret line) as one line, and what to do."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    first = next((line for line in lines if line.startswith(_MLIR_PREFIXES)), lines[0])
    for prefix in _MLIR_PREFIXES:
        first = first.removeprefix(prefix)
    first = first.split(" error: ", 1)[-1].strip()
    if "does not refer to a registered pass" in first:
        ours = [n for n in passes.pass_names() if n in element]
        if ours:
            return (
                f"{first}: our passes ({', '.join(ours)}) run on the module: list them at "
                "the top level of builtin.module(...)"
            )
        return f"{first}; fusion-opt --list-passes lists ours, iree-opt --help IREE's and MLIR's"
    return f"{first}; iree-opt --help lists each pass's options"


def check_pipeline(pipeline: str, context: ir.Context) -> None:
    """Raises PipelineError, naming the element, if ``pipeline`` does not parse."""
    _build_pass_manager(split_pipeline(pipeline), context)


def save_reproducer(module_text: str, step: str, directory: str | Path | None) -> Path:
    base = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="fusion-repro-"))
    base.mkdir(parents=True, exist_ok=True)
    path = base / f"repro-{step}.mlir"
    path.write_text(module_text)
    return path


def run_pipeline(
    module: ir.Operation,
    pipeline: str,
    *,
    print_ir_before_all: bool = False,
    print_ir_after_all: bool = False,
    reproducer_dir: str | Path | None = None,
    filename: str | None = None,
) -> list[Diagnostic]:
    """Runs ``pipeline`` on ``module`` in place; returns the remarks and warnings it emitted.

    On failure raises CompileError with the diagnostics and a reproducer command.
    """
    elements = split_pipeline(pipeline)
    context = module.context
    pm, crashes = _build_pass_manager(elements, context)
    if print_ir_before_all or print_ir_after_all:
        pm.enable_ir_printing(
            print_before_all=print_ir_before_all,
            print_after_all=print_ir_after_all,
            large_elements_limit=16,
        )
    before = module.clone()
    try:
        with diagnostics.collect(context, filename) as seen, remarks.capture(filename) as noted:
            try:
                pm.run(module)
                failed = None
            except ir.MLIRError as exc:
                failed = exc
        if failed is None:
            return noted + seen
        user_errors = [exc for exc in crashes if isinstance(exc, FusionCompilerError)]
        if user_errors:  # a pass said what the user must change: not a compiler bug
            raise user_errors[0]
        errors = seen + [d for d in diagnostics.errors_of(failed, filename) if d not in seen]
        errors += [
            Diagnostic("error", "<pass>", f"internal error: {type(exc).__name__}: {exc}")
            for exc in crashes
        ]
        text = before.get_asm(enable_debug_info=True, assume_verified=True)
        path = save_reproducer(text, "pipeline", reproducer_dir)
        pipeline_text = shlex.quote(join_pipeline(elements))
        command = f"fusion-opt {shlex.quote(str(path))} --pass-pipeline={pipeline_text}"
        error = CompileError(f"pass pipeline {join_pipeline(elements)}", errors, command)
        raise error from (crashes[0] if crashes else None)
    finally:
        before.erase()
