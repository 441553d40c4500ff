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

from fusion_compiler.backends.cache import cache_entry, write_whole
from fusion_compiler.backends.spec import Kernel
from fusion_compiler.backends.triton.spec import HIDDEN_POINTERS
from fusion_compiler.errors import FusionCompilerError

_SOURCE = Path(__file__).with_name("matvec.py")
_TRITON_TYPES = {"f16": "fp16", "bf16": "bf16", "f32": "fp32"}
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
    version = _triton_version()
    key, directory = cache_entry(
        [source, Path(__file__).read_text(), spec.to_json(), f"triton {version}"], "matvec-"
    )
    meta_path, cubin_path = directory / "kernel.json", directory / "kernel.cubin"
    if meta_path.exists() and cubin_path.exists():
        meta = json.loads(meta_path.read_text())
        return Kernel(
            meta["name"], cubin_path.read_bytes(), meta["shared"], meta["threads"], key,
            scratch_bytes=meta["scratch"], hidden_pointers=HIDDEN_POINTERS,
        )  # fmt: skip
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
    except ImportError:
        raise FusionCompilerError(
            "generating an sm_90 kernel needs Triton: "
            "pip install 'fusion-compiler[kernels]', or compile with cuda_arch='sm_80'"
        ) from None
    from fusion_compiler.backends.triton import matvec

    element = f"*{_TRITON_TYPES[spec.dtype]}"
    signature = {"X": element, "W": element, "Out": f"*{_TRITON_TYPES[spec.out_dtype]}"}
    constants = spec.constants()
    aligned = {(i,): [["tt.divisibility", 16]] for i in range(len(signature))}
    signature.update(dict.fromkeys(constants, "constexpr"))
    compiled = triton.compile(
        ASTSource(matvec.matvec, signature, constexprs=constants, attrs=aligned),
        target=GPUTarget("cuda", spec.arch, 32),
        options={"num_warps": spec.num_warps, "num_stages": spec.num_stages},
    )
    kernel = Kernel(
        compiled.metadata.name,
        compiled.asm["cubin"],
        compiled.metadata.shared,
        compiled.metadata.num_warps * 32,
        key,
        scratch_bytes=compiled.metadata.global_scratch_size,
        hidden_pointers=HIDDEN_POINTERS,
    )
    directory.mkdir(parents=True, exist_ok=True)
    write_whole(cubin_path, kernel.binary)
    meta = {
        "name": kernel.name,
        "shared": kernel.shared_bytes,
        "threads": kernel.threads,
        "scratch": kernel.scratch_bytes,
    }
    write_whole(meta_path, json.dumps(meta))  # last: its presence says the cubin is whole
    return kernel


def _triton_version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        return "none"


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
