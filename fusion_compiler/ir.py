"""The one import shim for IREE's compiler: MLIR bindings, the compiler session, the FX importer.

Nothing else in fusion_compiler imports ``iree.compiler`` directly, so a change of
IREE's Python layout is mended here alone. The runtime side (``fusion_compiler.runtime``)
never imports this module: deploy-only machines have no compiler. The FX importer, which
imports torch (about 2 s), is imported when first read: ``fusion-opt`` and the passes on
MLIR text need no torch.
"""

from __future__ import annotations

import ctypes

from iree.compiler import dialects, ir, passmanager, rewrite
from iree.compiler.api import Output, Session
from iree.compiler.api import ctypes_dl as _capi
from iree.compiler.dialects import arith, linalg, math, scf, tensor  # noqa: F401

__all__ = [
    "Output",
    "Session",
    "dialects",
    "ir",
    "passmanager",
    "rewrite",
    "context_pointer",
    "destroy_context",
    "on_diagnostics",
    "set_compile_phases",
    "set_global_flags",
]


def __getattr__(name: str):
    if name in ("FxImporter", "FxImporterHooks", "RefTracker", "TORCH_DTYPE_TO_MLIR_TYPE_ASM"):
        from iree.compiler.extras import fx_importer

        return getattr(fx_importer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The compiler's C API can resume and stop at a named phase (iree-compile's
# --compile-from/--compile-to), but iree.compiler.api does not wrap these two calls.
_PHASE_FUNCTIONS = (
    "ireeCompilerInvocationSetCompileFromPhase",
    "ireeCompilerInvocationSetCompileToPhase",
)
for _name in _PHASE_FUNCTIONS:
    _fn = getattr(_capi._dylib, _name)
    _fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    _fn.restype = None


def set_compile_phases(invocation, *, compile_from: str | None, compile_to: str | None) -> None:
    """Restricts an invocation's pipeline to the phases (compile_from, compile_to]."""
    if compile_from is not None:
        _capi._dylib.ireeCompilerInvocationSetCompileFromPhase(
            invocation._inv_p, compile_from.encode()
        )
    if compile_to is not None:
        _capi._dylib.ireeCompilerInvocationSetCompileToPhase(invocation._inv_p, compile_to.encode())


# Diagnostics of an invocation come through a C callback: ctypes releases the GIL while
# the compiler runs, so a Python handler on the MLIR context must not be used there.
_DIAGNOSTIC_CALLBACK = ctypes.CFUNCTYPE(
    None, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p
)
_capi._dylib.ireeCompilerInvocationEnableCallbackDiagnostics.argtypes = [
    ctypes.c_void_p,
    ctypes.c_int,
    _DIAGNOSTIC_CALLBACK,
    ctypes.c_void_p,
]
_capi._dylib.ireeCompilerInvocationEnableCallbackDiagnostics.restype = None
# iree_compiler_diagnostic_severity_t
_SEVERITY = {0: "note", 1: "warning", 2: "error", 3: "remark"}


def on_diagnostics(invocation, handler) -> object:
    """Sends each diagnostic of ``invocation`` to ``handler(severity, text)``.

    Returns the C callback, which the caller must keep alive while the invocation runs.
    """

    def forward(severity: int, message: bytes, size: int, user_data) -> None:
        handler(_SEVERITY.get(severity, "error"), message[:size].decode(errors="replace"))

    callback = _DIAGNOSTIC_CALLBACK(forward)
    _capi._dylib.ireeCompilerInvocationEnableCallbackDiagnostics(
        invocation._inv_p, 0, callback, None
    )
    return callback


# Contexts and global options, which iree.compiler.api does not wrap either.
_capi._dylib.mlirContextDestroy.argtypes = [ctypes.c_void_p]
_capi._dylib.mlirContextDestroy.restype = None
_pointer_of = ctypes.pythonapi.PyCapsule_GetPointer
_pointer_of.argtypes = [ctypes.py_object, ctypes.c_char_p]
_pointer_of.restype = ctypes.c_void_p


def context_pointer(context: ir.Context) -> int:
    """The MLIRContext a Python context wraps."""
    return _pointer_of(context._CAPIPtr, _capi.MLIR_PYTHON_CAPSULE_CONTEXT)


def destroy_context(pointer: int) -> None:
    """Destroys the MLIRContext at ``pointer``; no wrapper of it may be used again."""
    _capi._dylib.mlirContextDestroy(pointer)


def set_global_flags(program: str, *flags: str) -> None:
    """Sets the compiler's process-wide (LLVM command-line) options, as ``program`` would
    parse them; once per process."""
    _capi._initializeGlobalCL(program, *flags)
