"""Kernels that stand alone beside attention: matrix-vector products (``matvec``), matrix
products (``matmul``), concatenations (``concat``). Each is one Triton function in a
file of its own, specialised by a frozen spec dataclass (its ``constants()``, ``grid``,
``output`` and ``to_json()``), compiled ahead of time and cached as the attention kernel
is (``kernel.cached_kernel``), and run under Triton's interpreter for the tests
(``run_interpreted``: ``_main`` in ``interpreter_process``'s child, which writes
CALL.out.pt beside the call's CALL.pt).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import asdict
from pathlib import Path

from fusion_compiler.backends.cache import write_whole
from fusion_compiler.backends.spec import Kernel
from fusion_compiler.backends.triton.kernel import (
    TRITON_TYPES,
    cached_kernel,
    require_triton,
    triton_compile,
    triton_version,
)

_HERE = Path(__file__).parent
_TORCH_TYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}


def compile_standalone(
    name: str, spec, pointers: dict[str, str], options: dict[str, int], source: str | None = None
) -> Kernel:
    """The cubin of function ``name`` of ``name``.py for ``spec``, its pointer parameters
    ``pointers`` (name: our element type), from the cache when it was built before.
    ``source``: a variant of that file generated for ``spec`` (the product's epilogue)."""
    source = source or (_HERE / f"{name}.py").read_text()
    read = [Path(__file__), _HERE / "kernel.py", Path(sys.modules[type(spec).__module__].__file__)]
    parts = [source, *(f.read_text() for f in read), spec.to_json(), f"triton {triton_version()}"]

    def build(directory: Path):  # -> CompiledKernel
        require_triton()  # before the kernel's module imports it
        function = _function(name, source, directory)
        types = {p: f"*{TRITON_TYPES[t]}" for p, t in pointers.items()}
        return triton_compile(function, types, spec.constants(), spec.arch, options)

    return cached_kernel(parts, build, f"{name}-")


def _function(name: str, source: str, directory: Path):
    """Function ``name`` of ``source``: ``name``.py itself, or the generated variant
    written to ``directory`` (Triton reads a kernel's source from its file)."""
    if source == (_HERE / f"{name}.py").read_text():
        return getattr(importlib.import_module(f"{__package__}.{name}"), name)
    path = directory / f"{name}_generated.py"
    write_whole(path, source)
    module_spec = importlib.util.spec_from_file_location(f"fusion_{name}_generated", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return getattr(module, name)


def run_interpreted(name: str, spec, *tensors, source: str | None = None):  # -> torch.Tensor
    """Function ``name`` of ``name``.py (or of the generated ``source``) on ``tensors``
    for ``spec``, on the CPU under Triton's interpreter (``interpreter_process``'s child:
    Triton picks the interpreter when it is imported); its output, of ``spec.output``'s shape and
    type."""
    import tempfile

    import torch

    from fusion_compiler.backends.triton import interpreter_process

    kind = f"{type(spec).__module__}:{type(spec).__qualname__}"
    source = source or (_HERE / f"{name}.py").read_text()
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "call.pt"
        call = {"name": name, "kind": kind, "spec": asdict(spec), "tensors": tensors}
        torch.save({**call, "source": source}, path)
        interpreter_process.run(f"{__name__}:_main", path)
        return torch.load(path.with_suffix(".out.pt"))


def _main(path: Path) -> None:
    import torch
    import triton

    from fusion_compiler.backends.triton.interpret import patch_interpreter

    patch_interpreter()
    # TMA descriptors made in the kernel (matmul) take their scratch from here
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8))
    call = torch.load(path)
    module, kind = call["kind"].split(":")
    spec = getattr(importlib.import_module(module), kind)(**call["spec"])
    shape, dtype = spec.output
    out = torch.empty(shape, dtype=getattr(torch, _TORCH_TYPES[dtype]))
    function = _function(call["name"], call["source"], path.parent)
    function[spec.grid](*call["tensors"], out, **spec.constants())
    torch.save(out, path.with_suffix(".out.pt"))
