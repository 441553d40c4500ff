"""One IREE compiler session: its MLIR context, IREE's phases, bytecode output."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from fusion_compiler.errors import CompileError, Diagnostic
from fusion_compiler.ir import Output, Session, ir, on_diagnostics, set_compile_phases
from fusion_compiler.pipeline import save_reproducer
from fusion_compiler.targets import Target

_LOCATED = re.compile(r"^(\S+?:\d+:\d+): (.*)$", re.DOTALL)


def _diagnostic(severity: str, text: str) -> Diagnostic:
    """The compiler renders ``file:line:col: message``; split it back."""
    match = _LOCATED.match(text)
    if match is None:
        return Diagnostic(severity, "<unknown location>", text)
    return Diagnostic(severity, match.group(1), match.group(2))


class CompilerSession:
    """IREE's compiler for one target; every module we build lives in its context."""

    def __init__(self, target: Target, reproducer_dir: str | Path | None = None):
        self.target = target
        self.reproducer_dir = reproducer_dir
        self._session = Session()
        self._session.set_flags("--iree-input-type=auto", *target.flags)
        self.context: ir.Context = self._session.context

    def run_phases(
        self, module: ir.Operation, compile_from: str | None, compile_to: str
    ) -> ir.Operation:
        """Runs IREE's phases after ``compile_from`` up to ``compile_to`` on ``module``."""
        before = module.clone()
        invocation = self._session.invocation()
        seen: list[Diagnostic] = []
        keep_alive = on_diagnostics(invocation, lambda s, t: seen.append(_diagnostic(s, t)))
        try:
            invocation.import_module(module)
            set_compile_phases(invocation, compile_from=compile_from, compile_to=compile_to)
            ok = invocation.execute()
            if not ok:
                raise CompileError(
                    f"IREE phase {compile_to!r} for target {self.target.name}",
                    [d for d in seen if d.severity in ("error", "note")],
                    self._reproducer(before, compile_from, compile_to),
                )
            return invocation.export_module()
        finally:
            before.erase()
            invocation.close()
            del keep_alive

    def to_vmfb(self, module: ir.Operation) -> bytes:
        invocation = self._session.invocation()
        seen: list[Diagnostic] = []
        keep_alive = on_diagnostics(invocation, lambda s, t: seen.append(_diagnostic(s, t)))
        try:
            invocation.import_module(module)
            set_compile_phases(invocation, compile_from="vm", compile_to=None)
            if not invocation.execute():
                raise CompileError("VM bytecode serialisation", seen)
            output = Output.open_membuffer()
            invocation.output_vm_bytecode(output)
            return bytes(output.map_memory())
        finally:
            invocation.close()
            del keep_alive

    def _reproducer(self, module: ir.Operation, compile_from: str | None, compile_to: str) -> str:
        text = module.get_asm(enable_debug_info=True, assume_verified=True)
        path = save_reproducer(text, compile_to, self.reproducer_dir)
        args = ["iree-compile", str(path), "--iree-input-type=auto", *self.target.flags]
        if compile_from:
            args.append(f"--compile-from={compile_from}")
        args += [f"--compile-to={compile_to}", "-o", f"{compile_to}.mlir"]
        return shlex.join(args)


def new_session() -> Session:
    """A compiler session with no target: ``.context`` has every IREE dialect and pass."""
    return Session()
