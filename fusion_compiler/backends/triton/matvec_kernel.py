"""The sm_90 matrix-vector kernel (``matvec.py``): its spec, its tiles, its compile step,
and a run under Triton's interpreter for the tests (``standalone``)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from fusion_compiler.backends import spec as backend_spec
from fusion_compiler.backends.triton import epilogues, standalone

# the matvec's dispatches carry their spec as JSON under this attribute
MARKER = "fusion.matvec_kernel"


@dataclass(frozen=True, kw_only=True)
class MatvecSpec(epilogues.EpilogueFields):
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

    @property
    def output(self) -> tuple[tuple[int, ...], str]:
        return (self.n,), self.out_dtype

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


def source(spec: MatvecSpec) -> str | None:
    """``matvec.py`` with ``spec``'s epilogue (None: the file as it is), computed at each of
    a program's outputs: row 0, columns ``n``."""
    setup = [
        "rows = tl.zeros([1], tl.int32)",
        "cols = n",
        "M = 1",
        "inside = cols[None, :] < N",
    ]
    return epilogues.kernel_source("matvec", spec, "out", setup)


def compile_matvec(spec: MatvecSpec) -> backend_spec.Kernel:
    """The cubin of ``spec``'s kernel, from the cache when it was built before."""
    pointers = {"X": spec.dtype, "W": spec.dtype, **spec.epilogue_pointers(), "Out": spec.out_dtype}
    options = {"num_warps": spec.num_warps, "num_stages": spec.num_stages}
    return standalone.compile_standalone("matvec", spec, pointers, options, source(spec))


def run_interpreted(spec: MatvecSpec, x, w, *epilogue_inputs):  # tensors -> tensor
    """The kernel under Triton's interpreter: x (K,), w the tensor W's strides index, then
    the epilogue's inputs."""
    return standalone.run_interpreted("matvec", spec, x, w, *epilogue_inputs, source=source(spec))
