"""The sm_90 matrix product kernel (``matmul.py``): its spec, its tiles, its compile step,
and a run under Triton's interpreter for the tests (``standalone``)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from fusion_compiler.backends import spec as backend_spec
from fusion_compiler.backends.triton import epilogues, standalone

# the matmul's dispatches carry their spec as JSON under this attribute
MARKER = "fusion.matmul_kernel"
# TMA reads and writes rows whose byte strides are multiples of 16
_ALIGN_BYTES = 16


@dataclass(frozen=True, kw_only=True)
class MatmulSpec:
    """out (M, N) = A (M, K) · W (K, N), W given as (N, K) when ``w_t``."""

    dtype: str  # of A and W: f16 | bf16
    out_dtype: str  # f32 (the product's accumulator), or the type a cast after it wants
    m: int
    n: int
    k: int
    w_t: bool
    block_m: int = 128
    block_n: int = 256
    block_k: int = 64
    group_m: int = 8
    num_warps: int = 8
    num_stages: int = 3
    arch: int = 90
    # the elementwise ops after the product, computed before the store: a Triton
    # expression of ``x`` (the product in ``product_dtype``), the output's coordinates and
    # the inputs L0, L1, ... (of ``epilogue_inputs``' element types); None: the product
    epilogue: str | None = None
    epilogue_inputs: tuple[str, ...] = ()
    product_dtype: str | None = None

    def __post_init__(self) -> None:  # read back from JSON: a list
        object.__setattr__(self, "epilogue_inputs", tuple(self.epilogue_inputs))

    @property
    def grid(self) -> tuple[int, int, int]:
        return (-(-self.m // self.block_m) * -(-self.n // self.block_n), 1, 1)

    @property
    def output(self) -> tuple[tuple[int, ...], str]:
        return (self.m, self.n), self.out_dtype

    def constants(self) -> dict[str, object]:
        return {
            "M": self.m,
            "N": self.n,
            "K": self.k,
            "W_T": self.w_t,
            "BLOCK_M": self.block_m,
            "BLOCK_N": self.block_n,
            "BLOCK_K": self.block_k,
            "GROUP_M": self.group_m,
        }

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def aligned(k: int, n: int, out_dtype: str) -> bool:
    """Whether TMA can read rows of K and N elements and write rows of N outputs."""
    out_bytes = 4 if out_dtype == "f32" else 2
    return (
        (2 * k) % _ALIGN_BYTES == 0
        and (2 * n) % _ALIGN_BYTES == 0
        and (out_bytes * n) % _ALIGN_BYTES == 0
    )


def tiles(m: int, n: int) -> dict[str, int]:
    """Tiles by how many of them the output has (H100, fp16, benchmarks/results/
    matmul_h100.md, five tilings per product): 128x256x64 with 8 warps where there are
    about a wave of them or more (Llama-1B's products at 8192 rows: 587-748 TFLOP/s; its
    K/V projection, 128 such tiles, 587 against 474 with 128x128), 128x128x64 where there
    are half a wave of those (GPT-2's 512 rows by 2304 or 3072 outputs), else 64x64x64
    (GPT-2's 768 outputs from K 3072: 168 TFLOP/s against 126); 64-row tiles for a few
    rows (a decoding batch)."""
    if m <= 64:
        return dict(block_m=64, block_n=128, block_k=64, num_warps=4, num_stages=4)
    if -(-m // 128) * -(-n // 256) >= 100:
        return dict(block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3)
    if -(-m // 128) * -(-n // 128) >= 64:
        return dict(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=4)
    return dict(block_m=64, block_n=64, block_k=64, num_warps=4, num_stages=4)


def source(spec: MatmulSpec) -> str | None:
    """``matmul.py`` with ``spec``'s epilogue (None: the file as it is), computed at each
    element of the tile, whose coordinates in the output are ``rows`` and ``cols``."""
    setup = [
        "rows = block_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        "cols = block_n * BLOCK_N + tl.arange(0, BLOCK_N)",
        "inside = (rows[:, None] < M) & (cols[None, :] < N)",
    ]
    return epilogues.kernel_source("matmul", spec, "acc", setup)


def compile_matmul(spec: MatmulSpec) -> backend_spec.Kernel:
    """The cubin of ``spec``'s kernel, from the cache when it was built before."""
    epilogue = {f"L{i}": t for i, t in enumerate(spec.epilogue_inputs)}
    pointers = {"A": spec.dtype, "W": spec.dtype, **epilogue, "Out": spec.out_dtype}
    options = {"num_warps": spec.num_warps, "num_stages": spec.num_stages}
    return standalone.compile_standalone("matmul", spec, pointers, options, source(spec))


def run_interpreted(spec: MatmulSpec, a, w, *epilogue_inputs):  # tensors -> tensor
    """The kernel under Triton's interpreter: a (M, K), w (K, N) or with ``w_t`` (N, K),
    then the epilogue's inputs."""
    return standalone.run_interpreted("matmul", spec, a, w, *epilogue_inputs, source=source(spec))
