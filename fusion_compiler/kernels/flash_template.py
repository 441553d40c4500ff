# The FlashAttention-2 forward kernel that fusion-kernel-attention specialises for each
# fused attention. This file is a template: the line marked "generated" becomes the
# attention's score region, and every other choice is a ``tl.constexpr`` set at compile
# time.
#
# Every operand is read (and the output written) through a strided view: element
# (batch, row, col) of a (batch = outer x H heads, rows, cols) view lives at
#   (batch // H) * SB + (batch % H) * SH + row * SR + col * SC
# so tensors still in the model's layout, e.g. (B, N, H, D) before a head transpose, or K
# before a transpose, are read where they are, with no copy.
import triton
import triton.language as tl


@triton.jit
def _offsets(
    batch,
    rows,
    cols,
    SB: tl.constexpr,
    SH: tl.constexpr,
    H: tl.constexpr,
    SR: tl.constexpr,
    SC: tl.constexpr,
):
    return (batch // H) * SB + (batch % H) * SH + rows * SR + cols * SC


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
    CAUSAL: tl.constexpr,
    CAUSAL_OFFSET: tl.constexpr,  # keys > row + offset are masked
    HAS_MASK: tl.constexpr,  # an additive mask (batch, N_Q, N_K)
    KV_GROUP: tl.constexpr,  # query heads per K/V head: K and V hold batch // KV_GROUP
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    # strided views (see above): Q (batch, N_Q, D), K (batch // KV_GROUP, N_K, D),
    # V (batch // KV_GROUP, N_K, DV), Mask (batch, N_Q, N_K), Out (batch, N_Q, DV)
    Q_SB: tl.constexpr,
    Q_SH: tl.constexpr,
    Q_H: tl.constexpr,
    Q_SR: tl.constexpr,
    Q_SC: tl.constexpr,
    K_SB: tl.constexpr,
    K_SH: tl.constexpr,
    K_H: tl.constexpr,
    K_SR: tl.constexpr,
    K_SC: tl.constexpr,
    V_SB: tl.constexpr,
    V_SH: tl.constexpr,
    V_H: tl.constexpr,
    V_SR: tl.constexpr,
    V_SC: tl.constexpr,
    M_SB: tl.constexpr,
    M_SH: tl.constexpr,
    M_H: tl.constexpr,
    M_SR: tl.constexpr,
    M_SC: tl.constexpr,
    O_SB: tl.constexpr,
    O_SH: tl.constexpr,
    O_H: tl.constexpr,
    O_SR: tl.constexpr,
    O_SC: tl.constexpr,
):
    start_m = tl.program_id(0)
    batch = tl.program_id(1).to(tl.int64)
    kv_batch = batch // KV_GROUP
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    d = tl.arange(0, D_PAD)
    dv = tl.arange(0, DV_PAD)
    q = tl.load(
        Q + _offsets(batch, rows[:, None], d[None, :], Q_SB, Q_SH, Q_H, Q_SR, Q_SC),
        mask=(rows[:, None] < N_Q) & (d[None, :] < D),
        other=0.0,
    )
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
        k = tl.load(  # (D_PAD, BLOCK_N): K transposed by the view
            K + _offsets(kv_batch, keys[None, :], d[:, None], K_SB, K_SH, K_H, K_SR, K_SC),
            mask=(d[:, None] < D) & (keys[None, :] < N_K),
            other=0.0,
        )
        x = tl.dot(q, k) * QK_SCALE
        x = x  # generated: the score region, on base-2 logits
        if HAS_MASK:
            bias = tl.load(
                Mask + _offsets(batch, rows[:, None], keys[None, :], M_SB, M_SH, M_H, M_SR, M_SC),
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
            V + _offsets(kv_batch, keys[:, None], dv[None, :], V_SB, V_SH, V_H, V_SR, V_SC),
            mask=(keys[:, None] < N_K) & (dv[None, :] < DV),
            other=0.0,
        )
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(
        Out + _offsets(batch, rows[:, None], dv[None, :], O_SB, O_SH, O_H, O_SR, O_SC),
        out.to(Out.dtype.element_ty),
        mask=(rows[:, None] < N_Q) & (dv[None, :] < DV),
    )
