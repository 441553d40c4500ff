"""One IREE compiler session: its MLIR context, IREE's phases, bytecode output."""

from __future__ import annotations

import shlex
from pathlib import Path

from fusion_compiler import diagnostics
from fusion_compiler.errors import CompileError
from fusion_compiler.ir import Output, Session, ir, set_compile_phases
from fusion_compiler.pipeline import save_reproducer
from fusion_compiler.targets import Target


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
        try:
            invocation.import_module(module)
            set_compile_phases(invocation, compile_from=compile_from, compile_to=compile_to)
            with diagnostics.collect(self.context) as seen:
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

    def to_vmfb(self, module: ir.Operation) -> bytes:
        invocation = self._session.invocation()
        try:
            invocation.import_module(module)
            set_compile_phases(invocation, compile_from="vm", compile_to=None)
            with diagnostics.collect(self.context) as seen:
                ok = invocation.execute()
            if not ok:
                raise CompileError("VM bytecode serialisation", seen)
            output = Output.open_membuffer()
            invocation.output_vm_bytecode(output)
            return bytes(output.map_memory())
        finally:
            invocation.close()

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
