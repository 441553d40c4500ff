"""The sm_90 concatenation kernel: ``out = concat(A, B)`` along one dim.

Seen from the concatenated dim, each tensor is (OUTER, rows of its own length): A's row
of A_ROW elements, then B's of B_ROW, make one output row. A transformer decoding with a
growing KV cache (transformers' DynamicCache) concatenates each layer's cache with the
new token's keys and values every step: the output's rows are longer than A's, so the
copy is strided, and IREE 3.13 makes it a "slow_memcpy" dispatch (H200: 0.4 TB/s, 10 of a
16 ms Llama-1B decoding step at batch 16, benchmarks/results/models_h200.md). Each
program copies BLOCK elements of one output row with wide loads and stores.
"""

import triton
import triton.language as tl


@triton.jit
def concat(
    A,  # (OUTER, A_ROW)
    B,  # (OUTER, B_ROW)
    Out,  # (OUTER, A_ROW + B_ROW)
    A_ROW: tl.constexpr,
    B_ROW: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(1).to(tl.int64)
    col = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    in_a = col < A_ROW
    in_b = (col >= A_ROW) & (col < A_ROW + B_ROW)
    a = tl.load(A + row * A_ROW + col, mask=in_a)
    b = tl.load(B + row * B_ROW + (col - A_ROW), mask=in_b)
    tl.store(Out + row * (A_ROW + B_ROW) + col, tl.where(in_a, a, b), mask=in_a | in_b)
