"""The second kernel of a split-K matrix product (``matmul.py`` with SPLIT_K > 1): the sum
of its SPLIT_K f32 partial products, then what the elementwise ops after the product make
of it (``epilogues``: inputs L0, L1, ... before ``Out``, ``y`` their expression), stored
in the output's type; each program one (BLOCK_M, BLOCK_N) tile.
"""

import triton
import triton.language as tl


@triton.jit
def matmul_sum(
    Partial,  # f32 (SPLIT_K, M, N)
    # epilogue inputs
    Out,  # (M, N)
    M: tl.constexpr,
    N: tl.constexpr,
    SPLIT_K: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    block_m = tl.program_id(0)
    block_n = tl.program_id(1)
    rows = block_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = block_n * BLOCK_N + tl.arange(0, BLOCK_N)
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    at = rows[:, None] * N + cols[None, :]
    # epilogue loads
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for split in tl.static_range(SPLIT_K):
        acc += tl.load(Partial + split * M * N + at, mask=inside, other=0.0)
    y = acc  # epilogue
    tl.store(Out + at, y.to(Out.dtype.element_ty), mask=inside)
