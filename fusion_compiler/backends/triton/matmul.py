"""The sm_90 matrix product kernel: ``out (M, N) = A (M, K) · W (K, N)``.

A transformer's projections and MLP multiply every token's activations by a weight matrix;
IREE 3.13 has no Hopper target, so its code for these products is sm_80's ``mma.sync``
(Llama-3.2-1B's MLP at about 140 TFLOP/s on the H200, benchmarks/results/models_h200.md).
This kernel reads A, W and writes the output through TMA descriptors and multiplies with
wgmma: each program takes one (BLOCK_M, BLOCK_N) tile of the output and walks K in
BLOCK_K steps through a software pipeline of ``num_stages``; programs are ordered in
groups of GROUP_M row blocks so that neighbouring programs share W's tiles in L2. With
``W_T``, W is given as PyTorch's (N, K) Linear weight and read transposed in place. The
f32 accumulator is written in the output's type (a cast after the product, folded in).
Where the output has too few tiles to keep the multiprocessors busy, SPLIT_K programs
share each tile's K and write their f32 partial products, which ``matmul_sum.py`` adds.
With PROGRAMS, the kernel is persistent: that many programs take the tiles in turn, and
one tile's store overlaps the next one's first loads.
``matmul_kernel.source`` writes a variant of this file that computes what the elementwise
ops after the product make of it (a bias, an activation, a residual add) before the store
(``epilogues``): inputs L0, L1, ... come before ``Out`` and ``y`` is their expression; its
loads are issued before the K loop, so that they arrive while the tile is computed.
"""

import triton
import triton.language as tl


@triton.jit
def matmul(
    A,  # (M, K), rows contiguous
    W,  # (K, N), or with W_T (N, K)
    # epilogue inputs
    Out,  # (M, N), or with SPLIT_K > 1 the f32 partial products (SPLIT_K, M, N)
    M: tl.constexpr,
    N: tl.constexpr,
    K: tl.constexpr,
    W_T: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr,  # > 1: program 1 takes this share of K (split-K)
    PROGRAMS: tl.constexpr = 0,  # > 0: persistent, this many programs take the tiles in turn
):
    row_blocks = tl.cdiv(M, BLOCK_M)
    column_blocks = tl.cdiv(N, BLOCK_N)
    a = tl.make_tensor_descriptor(A, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    if W_T:
        w = tl.make_tensor_descriptor(
            W, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K]
        )
    else:
        w = tl.make_tensor_descriptor(
            W, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N]
        )
    if SPLIT_K > 1:  # this share of the product, for ``matmul_sum``
        out = tl.make_tensor_descriptor(
            Out, shape=[SPLIT_K, M, N], strides=[M * N, N, 1], block_shape=[1, BLOCK_M, BLOCK_N]
        )
    else:
        out = tl.make_tensor_descriptor(
            Out, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N]
        )
    # persistent (PROGRAMS): each program takes every PROGRAMS-th tile; else its own, in
    # a loop of one constant trip
    if PROGRAMS:
        start = tl.program_id(0)
        last = (M + BLOCK_M - 1) // BLOCK_M * ((N + BLOCK_N - 1) // BLOCK_N)
        stride = PROGRAMS
    else:
        start = 0
        last = 1
        stride = 1
    # the store's tile from a counter of its own, not the loop's (as Triton's persistent
    # matmul tutorial: the flattened loop's prologue and epilogue do not share a value)
    stored = tl.program_id(0) - PROGRAMS
    for trip in tl.range(start, last, stride, flatten=PROGRAMS > 0):
        program = trip if PROGRAMS else tl.program_id(0)
        block_m, block_n = _tile(program, row_blocks, column_blocks, GROUP_M)
        # split-K: program 1 takes its share of K, a constant trip count (a loop of run-time
        # bounds keeps ptxas from pipelining wgmma: 'wgmma.mma_async instructions are
        # serialized'); past K, TMA reads zeros
        PER_SPLIT: tl.constexpr = (K + SPLIT_K * BLOCK_K - 1) // (SPLIT_K * BLOCK_K) * BLOCK_K
        first = tl.program_id(1) * PER_SPLIT
        # epilogue loads
        acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        for step in range(0, PER_SPLIT, BLOCK_K):
            k = first + step
            x = a.load([block_m * BLOCK_M, k])
            if W_T:
                y = w.load([block_n * BLOCK_N, k]).T
            else:
                y = w.load([k, block_n * BLOCK_N])
            acc = tl.dot(x, y, acc)
        if SPLIT_K > 1:
            at = [tl.program_id(1), block_m * BLOCK_M, block_n * BLOCK_N]
            out.store(at, tl.reshape(acc, [1, BLOCK_M, BLOCK_N]))
        else:
            if PROGRAMS:
                stored += PROGRAMS
                block_m, block_n = _tile(stored, row_blocks, column_blocks, GROUP_M)
            y = acc  # epilogue
            out.store([block_m * BLOCK_M, block_n * BLOCK_N], y.to(Out.dtype.element_ty))


@triton.jit
def _tile(program, row_blocks, column_blocks, GROUP_M: tl.constexpr):
    """The (row block, column block) of tile ``program``: tiles go in groups of GROUP_M
    row blocks, so that neighbouring programs share W's tiles in L2."""
    per_group = GROUP_M * column_blocks
    first = program // per_group * GROUP_M
    rows_in_group = tl.minimum(row_blocks - first, GROUP_M)
    return first + (program % per_group) % rows_in_group, (program % per_group) // rows_in_group
