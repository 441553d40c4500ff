# The FlashAttention-2 forward kernel that fusion-kernel-attention specialises for each
# fused attention. This file is a template: the line marked "generated" becomes the
# attention's score region, and every other choice is a ``tl.constexpr`` set at compile
# time. With SPLITS > 1 (split-KV, for too few row blocks to fill the GPU, as in decoding)
# each row block's keys are shared by SPLITS programs and ``combine`` merges their results.
#
# Every operand is read (and the output written) through a strided view: element
# (batch, row, col) of a (batch = outer x H heads, rows, cols) view lives at
#   (batch // H) * SB + (batch % H) * SH + row * SR + col * SC
# so tensors still in the model's layout, e.g. (B, N, H, D) before a head transpose, or K
# before a transpose, are read where they are, with no copy. The strides are generated
# (numbers, or expressions of n_q and n_k when the sequence lengths are dynamic). With
# TMA_KV, K and V are read through TMA tensor descriptors made from the same views
# (generated: a 4-d (outer, H, rows, cols) descriptor, and its tile at a batch and row).
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
def _k_descriptor(K, BLOCK_N: tl.constexpr, D_PAD: tl.constexpr):
    return K  # generated: K descriptor


@triton.jit
def _v_descriptor(V, BLOCK_N: tl.constexpr, D_PAD: tl.constexpr):
    return V  # generated: V descriptor


@triton.jit
def _k_tile(K, batch, start_n, BLOCK_N: tl.constexpr, D_PAD: tl.constexpr):
    return 0  # generated: K tile


@triton.jit
def _v_tile(V, batch, start_n, BLOCK_N: tl.constexpr, D_PAD: tl.constexpr):
    return 0  # generated: V tile


@triton.jit
def attention(
    Q,
    K,
    V,
    Mask,  # generated: mask inputs
    Sizes,  # int32 (n_q, n_k) when DYNAMIC; otherwise not read
    Out,  # the output; with SPLITS > 1, the f32 partial results that ``combine`` merges
    QK_SCALE: tl.constexpr,  # scale * log2(e): exp2 with the scale folded in
    LATE_SCALE: tl.constexpr,  # no score function: QK_SCALE applied inside exp2's FMA
    N_Q: tl.constexpr,
    N_K: tl.constexpr,
    D: tl.constexpr,
    D_PAD: tl.constexpr,
    DV: tl.constexpr,
    DV_PAD: tl.constexpr,
    CAUSAL: tl.constexpr,
    CAUSAL_OFFSET: tl.constexpr,  # keys > row + offset are masked
    HAS_MASK: tl.constexpr,  # a mask (batch, N_Q, N_K), read or computed; see Spec.constants
    KV_GROUP: tl.constexpr,  # query heads per K/V head: K and V hold batch // KV_GROUP
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    DYNAMIC: tl.constexpr,  # sequence lengths read from Sizes at run time
    SPLITS: tl.constexpr,  # programs sharing one row block's keys (split-KV), 1: none
    GROUP: tl.constexpr,  # KV_GROUP to pack the rows of the heads sharing K/V, else 1
    LOOPS: tl.constexpr,  # 2: the key blocks that need an element mask in a second loop
    BATCH: tl.constexpr,
    TILES: tl.constexpr,  # > 0: persistent programs share these (row block, batch) tiles
    DESYNC: tl.constexpr,  # persistent: odd programs take their tiles shortest first
    TMA_KV: tl.constexpr,  # K and V read through TMA descriptors (static sizes)
):
    if TMA_KV:  # K and V become descriptors of the same views
        K = _k_descriptor(K, BLOCK_N, D_PAD)
        V = _v_descriptor(V, BLOCK_N, DV_PAD)
    if DYNAMIC:
        n_q = tl.load(Sizes)
        n_k = tl.load(Sizes + 1)
    else:
        n_q = N_Q
        n_k = N_K
    if TILES > 0:
        # persistent (causal, static sizes): tile t is row block M - 1 - t // BATCH of
        # batch t % BATCH, so the longest rows come first over all batches; the programs
        # take them in a snake order (round r: program p takes r * P + p, or P - 1 - p on
        # odd rounds), which evens out the total each program does. With DESYNC, odd
        # programs take their rounds in reverse, shortest tiles first: neighbouring
        # programs share a multiprocessor, and so start and finish their tiles (Q load,
        # pipeline fill, store) at different times. Each tile's Q is loaded while the
        # program works on the tile before (H200, causal N1024 D128: 1% faster).
        programs = tl.num_programs(0)
        rounds = tl.cdiv(TILES, programs)
        tile = _tile_of(0, rounds, programs, DESYNC)
        q = _load_tile_q(Q, tile, n_q, n_k, D, D_PAD, BLOCK_M, BATCH, TILES)
        for step in range(0, rounds):
            next_tile = _tile_of(step + 1, rounds, programs, DESYNC)
            next_q = _load_tile_q(Q, next_tile, n_q, n_k, D, D_PAD, BLOCK_M, BATCH, TILES)
            if tile < TILES:
                _row_block(
                    Q, K, V,
                    Mask,  # generated: mask inputs
                    Out, _tile_row_block(tile, BATCH, TILES), tile % BATCH, 0, n_q, n_k, q, True,
                    QK_SCALE, LATE_SCALE, N_Q, D, D_PAD, DV, DV_PAD, CAUSAL, CAUSAL_OFFSET,
                    HAS_MASK, KV_GROUP, BLOCK_M, BLOCK_N, SPLITS, GROUP, LOOPS, BATCH, TMA_KV,
                )  # fmt: skip
            tile, q = next_tile, next_q
    else:
        if CAUSAL:  # the longest row blocks first, so the last programs to start are short
            start_m = tl.num_programs(0) - 1 - tl.program_id(0)
        else:
            start_m = tl.program_id(0)
        _row_block(
            Q, K, V,
            Mask,  # generated: mask inputs
            Out, start_m, tl.program_id(1), tl.program_id(2), n_q, n_k, 0, False,
            QK_SCALE, LATE_SCALE, N_Q, D, D_PAD, DV, DV_PAD, CAUSAL, CAUSAL_OFFSET,
            HAS_MASK, KV_GROUP, BLOCK_M, BLOCK_N, SPLITS, GROUP, LOOPS, BATCH, TMA_KV,
        )  # fmt: skip


@triton.jit
def _tile_of(step, rounds, programs, DESYNC: tl.constexpr):
    """The tile a persistent program takes at ``step`` (see ``attention``); past its
    last step, a number outside [0, TILES)."""
    round = step
    if DESYNC:
        if tl.program_id(0) % 2 == 1:
            round = rounds - 1 - step
    if round % 2 == 0:
        tile = round * programs + tl.program_id(0)
    else:
        tile = round * programs + programs - 1 - tl.program_id(0)
    return tile


@triton.jit
def _tile_row_block(tile, BATCH: tl.constexpr, TILES: tl.constexpr):
    """The row block of persistent tile ``tile`` (the longest first, see ``attention``)."""
    return TILES // BATCH - 1 - tile // BATCH


@triton.jit
def _load_q(Q, batch, rows, n_q, n_k, D: tl.constexpr, D_PAD: tl.constexpr):
    d = tl.arange(0, D_PAD)
    return tl.load(
        Q + _q_offsets(batch, rows[:, None], d[None, :], n_q, n_k),
        mask=(rows[:, None] < n_q) & (d[None, :] < D),
        other=0.0,
    )


@triton.jit
def _load_tile_q(
    Q,
    tile,
    n_q,
    n_k,
    D: tl.constexpr,
    D_PAD: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BATCH: tl.constexpr,
    TILES: tl.constexpr,
):
    """Q of a persistent program's tile (past the last: a tile in range, unused). Rows
    are never packed here: persistent programs run without GROUP (schedules.fit)."""
    tile = tl.minimum(tl.maximum(tile, 0), TILES - 1)
    rows = _tile_row_block(tile, BATCH, TILES) * BLOCK_M + tl.arange(0, BLOCK_M)
    return _load_q(Q, (tile % BATCH).to(tl.int64), rows, n_q, n_k, D, D_PAD)


@triton.jit
def _row_block(
    Q,
    K,
    V,
    Mask,  # generated: mask inputs
    Out,
    start_m,  # the row block
    program_batch,  # the batch, or with GROUP > 1 the K/V batch
    split,  # which of the SPLITS key ranges
    n_q,
    n_k,
    loaded_q,  # with Q_LOADED, this row block's Q
    Q_LOADED: tl.constexpr,
    QK_SCALE: tl.constexpr,
    LATE_SCALE: tl.constexpr,
    N_Q: tl.constexpr,
    D: tl.constexpr,
    D_PAD: tl.constexpr,
    DV: tl.constexpr,
    DV_PAD: tl.constexpr,
    CAUSAL: tl.constexpr,
    CAUSAL_OFFSET: tl.constexpr,
    HAS_MASK: tl.constexpr,
    KV_GROUP: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SPLITS: tl.constexpr,
    GROUP: tl.constexpr,
    LOOPS: tl.constexpr,
    BATCH: tl.constexpr,
    TMA_KV: tl.constexpr,
):
    # GROUP > 1: the rows of one query row's heads side by side (packed row r: query row
    # r // GROUP of head r % GROUP of the group), so K and V are read once per group
    packed = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rows = packed // GROUP
    if GROUP > 1:  # batch: a column, one head per row
        kv_batch = program_batch.to(tl.int64)
        batch = (kv_batch * KV_GROUP + packed % KV_GROUP)[:, None]
    else:
        batch = program_batch.to(tl.int64)
        kv_batch = batch // KV_GROUP
    dv = tl.arange(0, DV_PAD)
    if Q_LOADED:
        q = loaded_q
    else:
        q = _load_q(Q, batch, rows, n_q, n_k, D, D_PAD)
    m_i = tl.full([BLOCK_M], -3.4028234663852886e38, tl.float32)  # lowest finite
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, DV_PAD], tl.float32)
    lo = 0
    hi = n_k
    first_row = start_m * BLOCK_M // GROUP
    last_row = ((start_m + 1) * BLOCK_M - 1) // GROUP
    if CAUSAL:  # key blocks above the diagonal are never visited
        hi = tl.minimum(n_k, tl.maximum(0, last_row + 1 + CAUSAL_OFFSET))
    if SPLITS > 1:  # this program's share of the key blocks
        chunk = tl.cdiv(tl.cdiv(hi, BLOCK_N), SPLITS) * BLOCK_N
        lo = split * chunk
        hi = tl.minimum(hi, lo + chunk)
    # blocks below the diagonal and inside n_k need no element mask: with LOOPS = 2 they
    # come first, in a loop of their own
    unmasked = (n_k // BLOCK_N) * BLOCK_N
    if CAUSAL:
        unmasked = tl.minimum(
            unmasked, tl.maximum(0, (first_row + CAUSAL_OFFSET + 1) // BLOCK_N * BLOCK_N)
        )
    if CAUSAL or SPLITS > 1:
        middle = tl.maximum(lo, tl.minimum(unmasked, hi))
    else:  # static sizes: constant trip counts
        middle = unmasked
    for loop in tl.static_range(LOOPS):
        if LOOPS == 1:
            first, last = lo, hi
        elif loop == 0:
            first, last = lo, middle
        else:
            first, last = middle, hi
        for start_n in range(first, last, BLOCK_N):
            m_i, l_i, acc = _key_block(
                K, V,
                Mask,  # generated: mask inputs
                q, m_i, l_i, acc, start_n, unmasked, rows, batch, kv_batch, n_q, n_k,
                QK_SCALE, LATE_SCALE, D, D_PAD, DV, DV_PAD, CAUSAL, CAUSAL_OFFSET, HAS_MASK,
                BLOCK_N, TMA_KV,
            )  # fmt: skip
    if SPLITS > 1:
        # this split's rows, normalised, and their log2-sum-exp2 (-inf: it saw no key)
        seen = l_i > 0
        out = acc / tl.where(seen, l_i, 1.0)[:, None]
        lse = tl.where(seen, m_i + tl.math.log2(tl.where(seen, l_i, 1.0)), -float("inf"))
        row = (split * BATCH + batch) * N_Q + rows[:, None]  # (BLOCK_M, 1)
        tl.store(Out + row * DV_PAD + dv[None, :], out, mask=rows[:, None] < n_q)
        lse_base = Out + SPLITS * BATCH * N_Q * DV_PAD
        tl.store(lse_base + row, lse[:, None], mask=rows[:, None] < n_q)
    else:
        # 0 on a row with no key (l = 0), as SDPA gives; H200, causal N1024 D128: a
        # reciprocal 1% faster than a division
        out = acc * tl.where(l_i > 0, 1.0 / l_i, 0.0)[:, None]
        tl.store(
            Out + _o_offsets(batch, rows[:, None], dv[None, :], n_q, n_k),
            out.to(Out.dtype.element_ty),
            mask=(rows[:, None] < n_q) & (dv[None, :] < DV),
        )


@triton.jit
def _key_block(
    K,
    V,
    Mask,  # generated: mask inputs
    q,
    m_i,
    l_i,
    acc,
    start_n,  # the key block's first key
    unmasked,  # keys from here on need an element mask
    rows,
    batch,
    kv_batch,
    n_q,
    n_k,
    QK_SCALE: tl.constexpr,
    LATE_SCALE: tl.constexpr,
    D: tl.constexpr,
    D_PAD: tl.constexpr,
    DV: tl.constexpr,
    DV_PAD: tl.constexpr,
    CAUSAL: tl.constexpr,
    CAUSAL_OFFSET: tl.constexpr,
    HAS_MASK: tl.constexpr,
    BLOCK_N: tl.constexpr,
    TMA_KV: tl.constexpr,
):
    """One step of the online softmax: the running max, sum and output accumulator of
    the rows after the key block at ``start_n``."""
    keys = start_n + tl.arange(0, BLOCK_N)
    d = tl.arange(0, D_PAD)
    dv = tl.arange(0, DV_PAD)
    if TMA_KV:  # a (BLOCK_N, D_PAD) tile; rows past n_k and columns past D read as 0
        k = _k_tile(K, kv_batch.to(tl.int32), start_n, BLOCK_N, D_PAD).T
    else:
        k = tl.load(  # (D_PAD, BLOCK_N): K transposed by the view
            K + _k_offsets(kv_batch, keys[None, :], d[:, None], n_q, n_k),
            mask=(d[:, None] < D) & (keys[None, :] < n_k),
            other=0.0,
        )
    # with LATE_SCALE, x stays unscaled (base-2 logits / QK_SCALE) until exp2, where
    # the scale and the max's subtraction are one FMA (H200: 1-2% faster)
    x = tl.dot(q, k)
    if not LATE_SCALE:
        x = x * QK_SCALE
    x = x  # generated: the score region, on base-2 logits
    if HAS_MASK != 0:
        inside = (rows[:, None] < n_q) & (keys[None, :] < n_k)
        bias = tl.load(Mask + _m_offsets(batch, rows[:, None], keys[None, :], n_q, n_k), mask=inside, other=0.0)  # noqa: E501 - generated: mask
        bias = bias.to(tl.float32)
        if LATE_SCALE:
            shift = bias * (1.4426950408889634 / QK_SCALE)
        else:
            shift = bias * 1.4426950408889634
        if HAS_MASK == 1:
            x += shift
        else:
            # a fill at or below HAS_MASK (finfo.min of the mask's type) swamps the score
            # it is added to (fp16: s + -65504 rounds to -65504): the logit is the fill
            # alone, kept finite at -FLT_MAX/2 (finfo(f32).min overflows once scaled), so
            # a row of nothing but fills gets PyTorch's equal weights; -inf stays -inf,
            # whatever the score (masked_fill's mask takes this test at the lowest f32)
            if HAS_MASK < -1e30:  # f32 and bf16 fills; an fp16 one stays finite scaled
                shift = tl.where(bias == -float("inf"), shift, tl.maximum(shift, -1.7014117e38))
            x = tl.where(bias <= HAS_MASK, shift, x + shift)
    # a run-time test, though false in a first loop of two: measured 4-6% faster
    # on the H200, as Triton then waits for K before the first dot and for V only
    # before the second (a compile-time test gets one wait for both)
    if start_n >= unmasked:
        visible = keys[None, :] < n_k
        if CAUSAL:
            visible = visible & (keys[None, :] <= rows[:, None] + CAUSAL_OFFSET)
        x = tl.where(visible, x, -float("inf"))
    if LATE_SCALE:
        m_new = tl.maximum(m_i, tl.max(x, 1) * QK_SCALE)
        p = tl.math.exp2(x * QK_SCALE - m_new[:, None])
    else:
        m_new = tl.maximum(m_i, tl.max(x, 1))
        p = tl.math.exp2(x - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    if TMA_KV:
        v = _v_tile(V, kv_batch.to(tl.int32), start_n, BLOCK_N, DV_PAD)
    else:
        v = tl.load(
            V + _v_offsets(kv_batch, keys[:, None], dv[None, :], n_q, n_k),
            mask=(keys[:, None] < n_k) & (dv[None, :] < DV),
            other=0.0,
        )
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return m_new, l_i, acc


@triton.jit
def combine(
    Partial,  # attention's SPLITS partial results (f32), then their log-sum-exps
    Out,
    N_Q: tl.constexpr,
    DV: tl.constexpr,
    DV_PAD: tl.constexpr,
    SPLITS: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    # Merges the split-KV partial results of ``attention`` into the output: each split's
    # rows weighted by exp2 of its log-sum-exp, as one more online-softmax step.
    batch = tl.program_id(1).to(tl.int64)
    batches = tl.num_programs(1)
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    dv = tl.arange(0, DV_PAD)
    inside = rows < N_Q
    top = tl.full([BLOCK_M], -3.4028234663852886e38, tl.float32)  # lowest finite
    total = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, DV_PAD], tl.float32)
    lse_base = Partial + SPLITS * batches * N_Q * DV_PAD
    for split in range(SPLITS):
        row = (split * batches + batch) * N_Q + rows
        lse = tl.load(lse_base + row, mask=inside, other=-float("inf"))
        partial = tl.load(Partial + row[:, None] * DV_PAD + dv[None, :], mask=inside[:, None])
        new_top = tl.maximum(top, lse)
        alpha = tl.math.exp2(top - new_top)
        weight = tl.math.exp2(lse - new_top)
        total = total * alpha + weight
        acc = acc * alpha[:, None] + weight[:, None] * partial
        top = new_top
    out = acc / tl.where(total > 0, total, 1.0)[:, None]  # 0 on a row with no key
    tl.store(
        Out + _o_offsets(batch, rows[:, None], dv[None, :], N_Q, 0),
        out.to(Out.dtype.element_ty),
        mask=inside[:, None] & (dv[None, :] < DV),
    )
