"""The one import shim for IREE's compiler: MLIR bindings, the compiler session, the FX importer.

Nothing else in fusion_compiler imports ``iree.compiler`` directly, so a change of
IREE's Python layout is mended here alone. The runtime side (``fusion_compiler.runtime``)
never imports this module: deploy-only machines have no compiler.
"""

from __future__ import annotations

import ctypes

from iree.compiler import dialects, ir, passmanager, rewrite
from iree.compiler.api import Output, Session
from iree.compiler.api import ctypes_dl as _capi
from iree.compiler.extras.fx_importer import FxImporter

__all__ = [
    "FxImporter",
    "Output",
    "Session",
    "dialects",
    "ir",
    "passmanager",
    "rewrite",
    "set_compile_phases",
]

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
        _capi._dylib.ireeCompilerInvocationSetCompileToPhase(
            invocation._inv_p, compile_to.encode()
        )
