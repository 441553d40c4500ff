"""The sm_90 concatenation kernel (``concat.py``): its spec, its compile step, and a run
under Triton's interpreter for the tests.

    python -m fusion_compiler.backends.triton.concat_kernel CALL.pt   (the interpreter's
    child process: writes CALL.out.pt)
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from fusion_compiler.backends.spec import Kernel
from fusion_compiler.backends.triton.kernel import (
    TRITON_TYPES,
    cached_kernel,
    require_triton,
    triton_compile,
    triton_version,
)

_SOURCE = Path(__file__).with_name("concat.py")
# the concatenations' dispatches carry their spec as JSON under this attribute
MARKER = "fusion.concat_kernel"
BLOCK = 4096  # elements a program copies


@dataclass(frozen=True, kw_only=True)
class ConcatSpec:
    """out (outer, a_row + b_row) = A (outer, a_row) next to B (outer, b_row)."""

    dtype: str
    outer: int
    a_row: int
    b_row: int
    num_warps: int = 4
    arch: int = 90

    @property
    def grid(self) -> tuple[int, int, int]:
        return (-(-(self.a_row + self.b_row) // BLOCK), self.outer, 1)

    def constants(self) -> dict[str, object]:
        return {"A_ROW": self.a_row, "B_ROW": self.b_row, "BLOCK": BLOCK}

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def compile_concat(spec: ConcatSpec) -> Kernel:
    """The cubin of ``spec``'s kernel, from the cache when it was built before."""
    source = _SOURCE.read_text()
    read = [Path(__file__), Path(__file__).with_name("kernel.py")]  # its compile step too
    parts = [source, *(f.read_text() for f in read), spec.to_json(), f"triton {triton_version()}"]

    def build(directory: Path):  # -> CompiledKernel
        require_triton()  # before concat.py imports it
        from fusion_compiler.backends.triton import concat

        element = f"*{TRITON_TYPES[spec.dtype]}"
        pointers = {"A": element, "B": element, "Out": element}
        options = {"num_warps": spec.num_warps, "num_stages": 1}
        return triton_compile(concat.concat, pointers, spec.constants(), spec.arch, options)

    return cached_kernel(parts, build, "concat-")


def run_interpreted(spec: ConcatSpec, a, b):  # tensors -> tensor
    """The kernel on the CPU under Triton's interpreter (a child process: Triton picks the
    interpreter when it is imported)."""
    import subprocess
    import tempfile

    import torch

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "call.pt"
        torch.save({"spec": asdict(spec), "a": a, "b": b}, path)
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        command = [sys.executable, "-m", "fusion_compiler.backends.triton.concat_kernel", str(path)]
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"interpreted kernel failed:\n{done.stderr[-4000:]}")
        return torch.load(path.with_suffix(".out.pt"))


def _main(path: Path) -> None:
    import torch

    from fusion_compiler.backends.triton import concat
    from fusion_compiler.backends.triton.interpret import patch_interpreter

    patch_interpreter()
    call = torch.load(path)
    spec = ConcatSpec(**call["spec"])
    a, b = call["a"], call["b"]
    out = torch.empty(spec.outer, spec.a_row + spec.b_row, dtype=a.dtype)
    concat.concat[spec.grid](a, b, out, **spec.constants())
    torch.save(out, path.with_suffix(".out.pt"))


if __name__ == "__main__":
    _main(Path(sys.argv[1]))
