# The FlashAttention-2 forward kernel that fusion-kernel-attention specialises for each
# fused attention. This file is a template: the line marked "generated" becomes the
# attention's score region, and every other choice is a ``tl.constexpr`` set at compile
# time.
import triton
import triton.language as tl


@triton.jit
def attention(
    Q,
    K,
    V,
    Mask,
    Out,
    QK_SCALE: tl.constexpr,  # scale * log2(e): exp2 with the scale folded in
    N_Q: tl.constexpr,
    N_K: tl.constexpr,
    D: tl.constexpr,
    D_PAD: tl.constexpr,
    DV: tl.constexpr,
    DV_PAD: tl.constexpr,
    K_TRANSPOSED: tl.constexpr,  # K stored (batch, D, N_K)
    CAUSAL: tl.constexpr,
    CAUSAL_OFFSET: tl.constexpr,  # keys > row + offset are masked
    HAS_MASK: tl.constexpr,  # an additive mask tensor (batch, N_Q, N_K)
    KV_GROUP: tl.constexpr,  # query heads per K/V head: K and V hold batch // KV_GROUP
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    start_m = tl.program_id(0)
    batch = tl.program_id(1).to(tl.int64)
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    d = tl.arange(0, D_PAD)
    dv = tl.arange(0, DV_PAD)
    q = tl.load(
        Q + batch * N_Q * D + rows[:, None] * D + d[None, :],
        mask=(rows[:, None] < N_Q) & (d[None, :] < D),
        other=0.0,
    )
    k_base = K + (batch // KV_GROUP) * N_K * D
    v_base = V + (batch // KV_GROUP) * N_K * DV
    m_i = tl.full([BLOCK_M], -3.4028234663852886e38, tl.float32)  # lowest finite
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, DV_PAD], tl.float32)
    hi = N_K
    if CAUSAL:  # key blocks above the diagonal are never visited
        hi = tl.minimum(N_K, tl.maximum(0, (start_m + 1) * BLOCK_M + CAUSAL_OFFSET))
    # blocks below the diagonal and inside N_K need no element mask
    unmasked = (N_K // BLOCK_N) * BLOCK_N
    if CAUSAL:
        unmasked = tl.minimum(
            unmasked, tl.maximum(0, (start_m * BLOCK_M + CAUSAL_OFFSET + 1) // BLOCK_N * BLOCK_N)
        )
    for start_n in range(0, hi, BLOCK_N):
        keys = start_n + cols
        if K_TRANSPOSED:
            k = tl.load(
                k_base + d[:, None] * N_K + keys[None, :],
                mask=(d[:, None] < D) & (keys[None, :] < N_K),
                other=0.0,
            )
        else:
            k = tl.load(
                k_base + keys[None, :] * D + d[:, None],
                mask=(d[:, None] < D) & (keys[None, :] < N_K),
                other=0.0,
            )
        x = tl.dot(q, k) * QK_SCALE
        x = x  # generated: the score region, on base-2 logits
        if HAS_MASK:
            bias = tl.load(
                Mask + batch * N_Q * N_K + rows[:, None] * N_K + keys[None, :],
                mask=(rows[:, None] < N_Q) & (keys[None, :] < N_K),
                other=0.0,
            )
            x += bias.to(tl.float32) * 1.4426950408889634
        if start_n >= unmasked:
            visible = keys[None, :] < N_K
            if CAUSAL:
                visible = visible & (keys[None, :] <= rows[:, None] + CAUSAL_OFFSET)
            x = tl.where(visible, x, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(x, 1))
        p = tl.math.exp2(x - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(
            v_base + keys[:, None] * DV + dv[None, :],
            mask=(keys[:, None] < N_K) & (dv[None, :] < DV),
            other=0.0,
        )
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(
        Out + batch * N_Q * DV + rows[:, None] * DV + dv[None, :],
        out.to(Out.dtype.element_ty),
        mask=(rows[:, None] < N_Q) & (dv[None, :] < DV),
    )
