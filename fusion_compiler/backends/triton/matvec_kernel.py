"""The sm_90 matrix-vector kernel (``matvec.py``): its spec, its compile step, and a run
under Triton's interpreter for the tests.

    python -m fusion_compiler.backends.triton.matvec_kernel CALL.pt   (the interpreter's
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

_SOURCE = Path(__file__).with_name("matvec.py")
# the matvec's dispatches carry their spec as JSON under this attribute
MARKER = "fusion.matvec_kernel"


@dataclass(frozen=True, kw_only=True)
class MatvecSpec:
    """out (N,) = x (K,) · W (K, N), W's element (k, n) at k * sk + n * sn."""

    dtype: str  # of x and W: f16 | bf16
    out_dtype: str  # f32 (the product's accumulator), or the type a cast after it wants
    k: int
    n: int
    sk: int
    sn: int
    block_n: int
    block_k: int
    num_warps: int = 4
    num_stages: int = 3
    arch: int = 90

    @property
    def grid(self) -> tuple[int, int, int]:
        return (-(-self.n // self.block_n), 1, 1)

    def constants(self) -> dict[str, object]:
        return {
            "K": self.k,
            "N": self.n,
            "SK": self.sk,
            "SN": self.sn,
            "BLOCK_N": self.block_n,
            "BLOCK_K": self.block_k,
            "SPLIT_K": 1,
        }

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def tiles(k: int, n: int, sk: int) -> tuple[int, int, int, int]:
    """(block_n, block_k, num_warps, num_stages). A weight read along K (PyTorch's
    Linear): 4 outputs per program, K in 128-wide steps, 8 warps, no software pipeline:
    the fastest of 48 tilings on the H200 for every decode projection measured (K2048
    N2048: 7.7 us, 1091 GB/s, cuBLAS 9.4; N11264: 19.1 us, 2413 GB/s, cuBLAS 20.1; N32000:
    41.1 us, 3185 GB/s, cuBLAS 44.8; K5632 N2048: 12.7 us, cuBLAS 15.7; results/
    matvec_h200.md). A weight read along N: wider rows of outputs, so reads coalesce."""
    if sk == 1:
        return 4, 128, 8, 1
    return 64, 64, 4, 3


def compile_matvec(spec: MatvecSpec) -> Kernel:
    """The cubin of ``spec``'s kernel, from the cache when it was built before."""
    source = _SOURCE.read_text()
    read = [Path(__file__), Path(__file__).with_name("kernel.py")]  # its compile step too
    parts = [source, *(f.read_text() for f in read), spec.to_json(), f"triton {triton_version()}"]

    def build(directory: Path):  # -> CompiledKernel
        require_triton()  # before matvec.py imports it
        from fusion_compiler.backends.triton import matvec

        element = f"*{TRITON_TYPES[spec.dtype]}"
        pointers = {"X": element, "W": element, "Out": f"*{TRITON_TYPES[spec.out_dtype]}"}
        options = {"num_warps": spec.num_warps, "num_stages": spec.num_stages}
        return triton_compile(matvec.matvec, pointers, spec.constants(), spec.arch, options)

    return cached_kernel(parts, build, "matvec-")


def run_interpreted(spec: MatvecSpec, x, w):  # tensors -> tensor
    """The kernel on the CPU under Triton's interpreter (a child process: Triton picks the
    interpreter when it is imported): x (K,), w the tensor W's strides index."""
    import subprocess
    import tempfile

    import torch

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "call.pt"
        torch.save({"spec": asdict(spec), "x": x, "w": w}, path)
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        command = [sys.executable, "-m", "fusion_compiler.backends.triton.matvec_kernel", str(path)]
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"interpreted kernel failed:\n{done.stderr[-4000:]}")
        return torch.load(path.with_suffix(".out.pt"))


def _main(path: Path) -> None:
    import torch

    from fusion_compiler.backends.triton import matvec
    from fusion_compiler.backends.triton.interpret import patch_interpreter

    patch_interpreter()
    call = torch.load(path)
    spec = MatvecSpec(**call["spec"])
    dtypes = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
    out = torch.empty(spec.n, dtype=dtypes[spec.out_dtype])
    matvec.matvec[spec.grid](call["x"], call["w"], out, **spec.constants())
    torch.save(out, path.with_suffix(".out.pt"))


if __name__ == "__main__":
    _main(Path(sys.argv[1]))
