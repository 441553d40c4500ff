# The FlashAttention-2 forward kernel that fusion-kernel-attention specialises for each
# fused attention. This file is a template: the line marked "generated" becomes the
# attention's score region, and every other choice is a ``tl.constexpr`` set at compile
# time.
#
# Every operand is read (and the output written) through a strided view: element
# (batch, row, col) of a (batch = outer x H heads, rows, cols) view lives at
#   (batch // H) * SB + (batch % H) * SH + row * SR + col * SC
# so tensors still in the model's layout, e.g. (B, N, H, D) before a head transpose, or K
# before a transpose, are read where they are, with no copy. The strides are generated
# (numbers, or expressions of n_q and n_k when the sequence lengths are dynamic).
import triton
import triton.language as tl


@triton.jit
def _q_offsets(batch, rows, cols, n_q, n_k):
    return 0  # generated: Q view


@triton.jit
def _k_offsets(batch, rows, cols, n_q, n_k):
    return 0  # generated: K view


@triton.jit
def _v_offsets(batch, rows, cols, n_q, n_k):
    return 0  # generated: V view


@triton.jit
def _m_offsets(batch, rows, cols, n_q, n_k):
    return 0  # generated: M view


@triton.jit
def _o_offsets(batch, rows, cols, n_q, n_k):
    return 0  # generated: O view


@triton.jit
def attention(
    Q,
    K,
    V,
    Mask,  # generated: mask inputs
    Sizes,  # int32 (n_q, n_k) when DYNAMIC; otherwise not read
    Out,
    QK_SCALE: tl.constexpr,  # scale * log2(e): exp2 with the scale folded in
    N_Q: tl.constexpr,
    N_K: tl.constexpr,
    D: tl.constexpr,
    D_PAD: tl.constexpr,
    DV: tl.constexpr,
    DV_PAD: tl.constexpr,
    CAUSAL: tl.constexpr,
    CAUSAL_OFFSET: tl.constexpr,  # keys > row + offset are masked
    HAS_MASK: tl.constexpr,  # an additive mask (batch, N_Q, N_K), read or computed
    KV_GROUP: tl.constexpr,  # query heads per K/V head: K and V hold batch // KV_GROUP
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    DYNAMIC: tl.constexpr,  # sequence lengths read from Sizes at run time
):
    start_m = tl.program_id(0)
    batch = tl.program_id(1).to(tl.int64)
    kv_batch = batch // KV_GROUP
    if DYNAMIC:
        n_q = tl.load(Sizes)
        n_k = tl.load(Sizes + 1)
    else:
        n_q = N_Q
        n_k = N_K
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    d = tl.arange(0, D_PAD)
    dv = tl.arange(0, DV_PAD)
    q = tl.load(
        Q + _q_offsets(batch, rows[:, None], d[None, :], n_q, n_k),
        mask=(rows[:, None] < n_q) & (d[None, :] < D),
        other=0.0,
    )
    m_i = tl.full([BLOCK_M], -3.4028234663852886e38, tl.float32)  # lowest finite
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, DV_PAD], tl.float32)
    hi = n_k
    if CAUSAL:  # key blocks above the diagonal are never visited
        hi = tl.minimum(n_k, tl.maximum(0, (start_m + 1) * BLOCK_M + CAUSAL_OFFSET))
    # blocks below the diagonal and inside n_k need no element mask
    unmasked = (n_k // BLOCK_N) * BLOCK_N
    if CAUSAL:
        unmasked = tl.minimum(
            unmasked, tl.maximum(0, (start_m * BLOCK_M + CAUSAL_OFFSET + 1) // BLOCK_N * BLOCK_N)
        )
    for start_n in range(0, hi, BLOCK_N):
        keys = start_n + cols
        k = tl.load(  # (D_PAD, BLOCK_N): K transposed by the view
            K + _k_offsets(kv_batch, keys[None, :], d[:, None], n_q, n_k),
            mask=(d[:, None] < D) & (keys[None, :] < n_k),
            other=0.0,
        )
        x = tl.dot(q, k) * QK_SCALE
        x = x  # generated: the score region, on base-2 logits
        if HAS_MASK:
            inside = (rows[:, None] < n_q) & (keys[None, :] < n_k)
            bias = tl.load(Mask + _m_offsets(batch, rows[:, None], keys[None, :], n_q, n_k), mask=inside, other=0.0)  # noqa: E501 - generated: mask
            x += bias.to(tl.float32) * 1.4426950408889634
        if start_n >= unmasked:
            visible = keys[None, :] < n_k
            if CAUSAL:
                visible = visible & (keys[None, :] <= rows[:, None] + CAUSAL_OFFSET)
            x = tl.where(visible, x, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(x, 1))
        p = tl.math.exp2(x - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(
            V + _v_offsets(kv_batch, keys[:, None], dv[None, :], n_q, n_k),
            mask=(keys[:, None] < n_k) & (dv[None, :] < DV),
            other=0.0,
        )
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(
        Out + _o_offsets(batch, rows[:, None], dv[None, :], n_q, n_k),
        out.to(Out.dtype.element_ty),
        mask=(rows[:, None] < n_q) & (dv[None, :] < DV),
    )
