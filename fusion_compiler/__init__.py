"""fusion_compiler: finds attention in PyTorch models and compiles it into IREE modules.

``fc.compile`` needs iree-base-compiler; ``fc.load`` needs only iree-base-runtime and
torch. Each is imported on first use: ``import fusion_compiler`` imports neither torch
nor IREE.
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
from fusion_compiler.stages import Stage

if TYPE_CHECKING:
    from fusion_compiler.driver import CompiledModule
    from fusion_compiler.runtime import LoadedModule

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


def load(module, device: str = "local-task", weights=None) -> LoadedModule:
    """See fusion_compiler.runtime.load."""
    from fusion_compiler.runtime import load as _load

    return _load(module, device, weights=weights)


def __getattr__(name: str):
    if name == "CompiledModule":
        from fusion_compiler.driver import CompiledModule

        return CompiledModule
    if name == "LoadedModule":
        from fusion_compiler.runtime import LoadedModule

        return LoadedModule
    raise AttributeError(f"module 'fusion_compiler' has no attribute {name!r}")
