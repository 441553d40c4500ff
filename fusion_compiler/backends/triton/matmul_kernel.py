"""The sm_90 matrix product kernel (``matmul.py``, with ``matmul_sum.py`` after a split-K
one): its spec, its tiles, its compile step, and a run under Triton's interpreter for the
tests (``standalone``)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace

from fusion_compiler.backends import spec as backend_spec
from fusion_compiler.backends.triton import epilogues, standalone
from fusion_compiler.backends.triton.schedules import multiprocessors

# the matmul's dispatches carry their spec as JSON under this attribute
MARKER = "fusion.matmul_kernel"
# TMA reads and writes rows whose byte strides are multiples of 16
_ALIGN_BYTES = 16
_MAX_SPLIT = 4
# split-K only over at least this K: a shorter product costs about what the second
# dispatch (the sum) does
_SPLIT_MIN_K = 4096
# the largest tile whose epilogue inputs are all loaded before the K loop; past it, only
# those of one row or column (a bias)
_HOISTED_TILE = 128 * 128


@dataclass(frozen=True, kw_only=True)
class MatmulSpec(epilogues.EpilogueFields):
    """out (M, N) = A (M, K) · W (K, N), W given as (N, K) when ``w_t``; the elementwise
    ops after the product in its epilogue fields."""

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
    split_k: int = 1  # > 1: programs sharing each tile's K, their sum by ``matmul_sum``
    programs: int = 0  # > 0: persistent, this many programs take the tiles in turn
    arch: int = 90

    @property
    def grid(self) -> tuple[int, int, int]:
        tiles = -(-self.m // self.block_m) * -(-self.n // self.block_n)
        return (self.programs or tiles, self.split_k, 1)

    @property
    def output(self) -> tuple[tuple[int, ...], str]:
        """What ``matmul`` writes: the output, or split-K's partial products."""
        if self.split_k > 1:
            return (self.split_k, self.m, self.n), "f32"
        return (self.m, self.n), self.out_dtype

    def product(self) -> MatmulSpec:
        """The spec ``matmul`` is compiled for: split-K's partial products carry no
        epilogue (``matmul_sum`` computes it)."""
        if self.split_k == 1:
            return self
        return replace(self, epilogue=None, epilogue_inputs=(), product_dtype=None)

    def sum(self) -> SumSpec:
        """The ``matmul_sum`` kernel after a split-K product."""
        return SumSpec(
            m=self.m,
            n=self.n,
            split_k=self.split_k,
            out_dtype=self.out_dtype,
            epilogue=self.epilogue,
            epilogue_inputs=self.epilogue_inputs,
            product_dtype=self.product_dtype,
            arch=self.arch,
        )

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
            "SPLIT_K": self.split_k,
            "PROGRAMS": self.programs,
        }

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


@dataclass(frozen=True, kw_only=True)
class SumSpec(epilogues.EpilogueFields):
    """``matmul_sum``: the sum of a split-K product's ``split_k`` partial products (f32),
    then its epilogue, in ``out_dtype``."""

    m: int
    n: int
    split_k: int
    out_dtype: str
    block_m: int = 64
    block_n: int = 128
    num_warps: int = 4
    arch: int = 90

    @property
    def grid(self) -> tuple[int, int, int]:
        return (-(-self.m // self.block_m), -(-self.n // self.block_n), 1)

    @property
    def output(self) -> tuple[tuple[int, ...], str]:
        return (self.m, self.n), self.out_dtype

    def constants(self) -> dict[str, object]:
        return {
            "M": self.m,
            "N": self.n,
            "SPLIT_K": self.split_k,
            "BLOCK_M": self.block_m,
            "BLOCK_N": self.block_n,
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


def tilings(m: int, n: int, k: int) -> list[dict[str, int]]:
    """Tiles by how many of them the output has (H100, fp16; benchmarks/results/
    matmul_h100.md, matmul_tiles_h100.md and matmul_tilings_h100.md), best first: the
    pass takes the first whose kernel fits (no register spills, shared memory within a
    block's). At least a wave of 128x128 tiles: persistent programs, one per
    multiprocessor, each taking every 132nd tile, so that a tile's store overlaps the
    next one's loads: 128x256x64 with 8 warps (alone, BERT's and ViT's products with
    their bias 10-26% faster than at 128x128), or 128x128x64 where those fill the last
    round of tiles better (ViT's 768 outputs at 6304 rows: 69 us against 80; the
    non-persistent kernel's 84), and where 128x256 does not fit: an epilogue whose
    next tile's accumulator lives beside it spills (GELU's erf: 255 registers and 80
    bytes of stack, ViT and Whisper 9-12% slower), BERT's fc2 with its residual needs 240
    KB of shared memory. BERT's, ViT's and Llama's products are 8-24% faster persistent
    than one tile per program. Fewer: one tile per program, 128x128 where there are half
    a wave of those (GPT-2's 512 rows by 2304 or 3072 outputs), 64x128 where those fit in
    one wave (Llama-1B's 512 rows by 2048 outputs: 128 tiles, 13.1 us against 15.4),
    else 64x64x64 (GPT-2's 768 outputs from K 3072: 168 TFLOP/s against 126); 64-row
    tiles for a few rows (a decoding batch). Where 128x128 tiles fill at most half the
    multiprocessors over a K of 4096 or more (Llama-1B's down projection at 512 rows: 64
    tiles, K 8192), split-K: as many programs share each tile's K as fit in one wave,
    each at least 16 steps of K."""
    if m <= 64:
        return [dict(block_m=64, block_n=128, block_k=64, num_warps=4, num_stages=4)]
    sms = multiprocessors("sm_90")
    wide = dict(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=4)
    widest = dict(block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3)
    count = -(-m // 128) * -(-n // 128)
    pairs = -(-m // 128) * -(-n // 256)
    if count >= sms:
        used_128 = _filled(count, sms) * n / (-(-n // 128) * 128)
        used_256 = _filled(pairs, sms) * n / (-(-n // 256) * 256)  # padding does nothing
        persistent_128 = {**wide, "programs": sms}
        if used_128 > used_256 + 0.05:
            return [persistent_128]
        return [{**widest, "programs": min(sms, pairs)}, persistent_128]
    split = min(_MAX_SPLIT, sms // count, k // (16 * 64))
    if count <= sms // 2 and split > 1 and k >= _SPLIT_MIN_K and split * m * n < 2**31:
        return [{**wide, "split_k": split}]
    if count >= 64:
        halves = -(-m // 64) * -(-n // 128)
        if halves <= sms:  # one round of 64x128 tiles, where 128x128 left half of it idle
            return [dict(block_m=64, block_n=128, block_k=64, num_warps=4, num_stages=4)]
        return [wide]
    return [dict(block_m=64, block_n=64, block_k=64, num_warps=4, num_stages=4)]


def _filled(tiles: int, programs: int) -> float:
    """The share of ``programs`` x rounds that ``tiles`` keeps busy."""
    return tiles / (-(-tiles // programs) * programs)


def source(spec: MatmulSpec) -> str | None:
    """``matmul.py`` with ``spec``'s epilogue (None: the file as it is), computed at each
    element of the tile, whose coordinates in the output are ``rows`` and ``cols``."""
    setup = [
        "rows = block_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        "cols = block_n * BLOCK_N + tl.arange(0, BLOCK_N)",
        "inside = (rows[:, None] < M) & (cols[None, :] < N)",
    ]
    # a whole tile of an input held across the K loop: 128 more registers a thread at
    # 128x256 (ptxas: Llama's gate with SiLU(gate)·up 181 -> 255, the most there is);
    # persistent, the next tile's accumulator lives beside it (BERT's fc2 at 128x128:
    # 255 registers and spills, 198 without)
    whole_tiles = spec.block_m * spec.block_n <= _HOISTED_TILE and not spec.programs
    return epilogues.kernel_source("matmul", spec, "acc", setup, whole_tiles)


def sum_source(spec: SumSpec) -> str | None:
    """``matmul_sum.py`` with ``spec``'s epilogue (None: the file as it is)."""
    return epilogues.kernel_source("matmul_sum", spec, "acc", [])


def compile_matmul(spec: MatmulSpec) -> backend_spec.Kernel:
    """The cubin of ``spec``'s ``matmul`` (``spec.product()``), from the cache when it
    was built before."""
    spec = spec.product()
    pointers = {"A": spec.dtype, "W": spec.dtype, **spec.epilogue_pointers(), "Out": spec.output[1]}
    options = {"num_warps": spec.num_warps, "num_stages": spec.num_stages}
    return standalone.compile_standalone("matmul", spec, pointers, options, source(spec))


def compile_sum(spec: SumSpec) -> backend_spec.Kernel:
    """The cubin of ``spec``'s ``matmul_sum``."""
    pointers = {"Partial": "f32", **spec.epilogue_pointers(), "Out": spec.out_dtype}
    options = {"num_warps": spec.num_warps, "num_stages": 1}
    return standalone.compile_standalone("matmul_sum", spec, pointers, options, sum_source(spec))


def run_interpreted(spec: MatmulSpec, a, w, *epilogue_inputs):  # tensors -> tensor
    """The kernel (and after a split-K one, ``matmul_sum``) under Triton's interpreter:
    a (M, K), w (K, N) or with ``w_t`` (N, K), then the epilogue's inputs."""
    if spec.split_k == 1:
        return standalone.run_interpreted(
            "matmul", spec, a, w, *epilogue_inputs, source=source(spec)
        )
    product = spec.product()
    partial = standalone.run_interpreted("matmul", product, a, w, source=source(product))
    total = spec.sum()
    return standalone.run_interpreted(
        "matmul_sum", total, partial, *epilogue_inputs, source=sum_source(total)
    )
