"""The sm_90 matrix-vector kernel: ``out[n] = sum_k x[k] · W[k, n]`` for one row x.

A decoding step multiplies one token's activations by every weight matrix: M = 1, so the
product reads each weight once and its time is the time to stream the weights from
memory. Each program takes ``BLOCK_N`` outputs and walks K in ``BLOCK_K`` steps,
accumulating ``BLOCK_N x BLOCK_K`` products in f32 and reducing them once at the end;
with ``SPLIT_K`` > 1, programs share each output's K range and add their parts into an
f32 output with atomics (which must start at zero). W is read through its strides (``SK``
along K, ``SN`` along N), so a transposed weight (PyTorch's (N, K) Linear weight read as
its (K, N) transpose) is read in place. ``matvec_kernel.source`` writes a variant of this
file that computes the elementwise ops after the product (a residual add, SiLU(gate) · up)
before the store (``epilogues``; one program's outputs are its (1, BLOCK_N) tile).
"""

import triton
import triton.language as tl


@triton.jit
def matvec(
    X,  # (K,) the row
    W,  # element (k, n) at k * SK + n * SN
    # epilogue inputs
    Out,  # (N,)
    K: tl.constexpr,
    N: tl.constexpr,
    SK: tl.constexpr,
    SN: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
):
    n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    per_split = tl.cdiv(tl.cdiv(K, SPLIT_K), BLOCK_K) * BLOCK_K
    first = tl.program_id(1) * per_split
    acc = tl.zeros([BLOCK_N, BLOCK_K], tl.float32)
    for start in range(first, tl.minimum(first + per_split, K), BLOCK_K):
        k = start + tl.arange(0, BLOCK_K)
        x = tl.load(X + k, mask=k < K, other=0.0).to(tl.float32)
        w = tl.load(
            W + n[:, None] * SN + k[None, :] * SK,
            mask=(n[:, None] < N) & (k[None, :] < K),
            other=0.0,
        ).to(tl.float32)
        acc += w * x[None, :]
    out = tl.sum(acc, 1)
    if SPLIT_K > 1:
        tl.atomic_add(Out + n, out, mask=n < N, sem="relaxed")
    else:
        y = out  # epilogue
        tl.store(Out + n, tl.reshape(y.to(Out.dtype.element_ty), (BLOCK_N,)), mask=n < N)
