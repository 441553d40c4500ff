"""One IREE compiler session: its MLIR context, IREE's phases, bytecode output."""

from __future__ import annotations

import functools
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from fusion_compiler.errors import CompileError, Diagnostic
from fusion_compiler.ir import (
    Output,
    Session,
    context_pointer,
    destroy_context,
    ir,
    on_diagnostics,
    set_compile_phases,
)
from fusion_compiler.pipeline import save_reproducer
from fusion_compiler.targets import Target

_LOCATED = re.compile(r"^(\S+?:\d+:\d+): (.*)$", re.DOTALL)


def _diagnostic(severity: str, text: str) -> Diagnostic:
    """The compiler renders ``file:line:col: message``; split it back."""
    match = _LOCATED.match(text)
    if match is None:
        return Diagnostic(severity, "<unknown location>", text)
    return Diagnostic(severity, match.group(1), match.group(2))


# A session's context, once taken by Python (``Session.context`` steals it), belongs to
# Python; but IREE 3.13's MLIR bindings wrap a context handed over by pointer
# (``ir.Context._CAPICreate``) without owning it, so its wrapper never destroys it: each
# compile left its MLIRContext behind, with every type, attribute and resource blob of the
# module (4 MB per fc.compile of a small attention block). We destroy each one ourselves,
# once no Python object (module, op, type, session) refers to its wrapper any more.


@dataclass
class _TakenContext:
    context: ir.Context | None
    pointer: int
    # held by the entry alone: the context's count equals its count when so is the context
    probe: object


_taken: list[_TakenContext] = []


@functools.cache
def _bindings_leak_taken_contexts() -> bool:
    """Whether a context taken from a session outlives its Python wrapper (IREE 3.13:
    yes). Where the bindings free it themselves we must not: that would free it twice."""
    try:
        before = ir.Context._get_live_count()
    except AttributeError:  # no way to tell: leave contexts to the bindings
        return False
    session = Session()
    context = session.context
    pointer = context_pointer(context)
    del context
    session.close()
    del session
    leaked = ir.Context._get_live_count() > before
    if leaked:
        destroy_context(pointer)
    return leaked


def _take(context: ir.Context) -> None:
    """Frees the contexts taken before that nothing refers to now; ``context`` joins them."""
    if not _bindings_leak_taken_contexts():
        return
    for entry in list(_taken):
        if sys.getrefcount(entry.context) == sys.getrefcount(entry.probe):
            _taken.remove(entry)
            entry.context = None  # the wrapper goes first; it never touches the context
            destroy_context(entry.pointer)
    _taken.append(_TakenContext(context, context_pointer(context), object()))


class CompilerSession:
    """IREE's compiler for one target; every module we build lives in its context.

    The context is destroyed at a later session's start once nothing refers to it (a
    CompiledModule of an earlier stage keeps its IR, and so its context, alive)."""

    def __init__(self, target: Target, reproducer_dir: str | Path | None = None):
        self.target = target
        self.reproducer_dir = reproducer_dir
        self._session = Session()
        self._session.set_flags("--iree-input-type=auto", *target.flags)
        self.context: ir.Context = self._session.context
        _take(self.context)

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
            try:
                invocation.output_vm_bytecode(output)
            except ValueError:  # the bindings' "failed to generate bytecode": seen says why
                raise CompileError("VM bytecode serialisation", seen) from None
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
    session = Session()
    _take(session.context)
    return session
