"""fusion_compiler: finds attention in PyTorch models and compiles it into IREE modules.

``fc.compile`` needs iree-base-compiler; ``fc.load`` needs only iree-base-runtime and
torch, so the compiler is imported on first use of ``compile``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fusion_compiler.errors import (
    ArgumentError,
    CompileError,
    FusionCompilerError,
    MLIRParseError,
    UnsupportedOpError,
)
from fusion_compiler.runtime import LoadedModule, load
from fusion_compiler.stages import Stage

if TYPE_CHECKING:
    from fusion_compiler.driver import CompiledModule

__all__ = [
    "ArgumentError",
    "CompileError",
    "CompiledModule",
    "FusionCompilerError",
    "LoadedModule",
    "MLIRParseError",
    "Stage",
    "UnsupportedOpError",
    "compile",
    "load",
]


def compile(model, example_args=(), **options) -> CompiledModule:  # noqa: A001
    """See fusion_compiler.driver.compile."""
    from fusion_compiler.driver import compile as _compile

    return _compile(model, example_args, **options)


def __getattr__(name: str):
    if name == "CompiledModule":
        from fusion_compiler.driver import CompiledModule

        return CompiledModule
    raise AttributeError(f"module 'fusion_compiler' has no attribute {name!r}")
