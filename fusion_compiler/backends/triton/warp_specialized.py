# Attention on sm_90 with a producer warp: the warp-specialized kernel that
# fusion-kernel-attention uses for persistent causal attention (with or without a sliding
# window), and full attention over short rows, over contiguous D128 operands
# (``TritonSpec.warp_specialized``), written in Gluon (Triton's explicit-layout dialect).
#
# Persistent programs, two per multiprocessor, take the (64-row block, batch) tiles in the
# order of the FlashAttention-2 template (``template.attention``: longest first, a
# snake over the programs, odd programs reversed over short rows) when causal; full
# attention's tiles, all alike, batch by batch, so that the programs running at once
# read the same few batches' K and V (from L2). In each program:
# - a producer warp issues every K and V load, as TMA copies into a ring of STAGES slots
#   that it keeps filled across tiles, so the next tile's first key blocks load while
#   this tile's last ones are computed (the template's loop refills its pipeline at every
#   tile);
# - one warpgroup computes: Q stays in registers (QK^T's A operand), the next tile's
#   loaded during the current one, and the output leaves through shared memory by a TMA
#   store that runs while the next tile starts.
# With BLOCK_MAP (a mask computed in the kernel that can empty whole tiles: padding,
# documents), each tile visits only the key blocks the template's ``block_lists`` listed
# for its row block, those with no mask work first; on the others the warpgroup adds the
# mask, ``_bias``, whose body ``kernel.kernel_source`` fills with the spec's expression.
# Operands are (batch, rows, D) row-major (K and V: batch // KV_GROUP of them); D and the
# rows are multiples of the 64-row block.
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_init,
    warpgroup_mma_wait,
)

from fusion_compiler.backends.triton.tiles import _tile_of, _tile_row_block

PRODUCER_REGISTERS = gl.constexpr(24)  # the producer warp's registers; the warpgroup takes the rest


@gluon.jit
def _next_step(step, rounds, programs, DESYNC: gl.constexpr, TILES: gl.constexpr):
    """The first step from ``step`` on that has a tile: only the last round lacks tiles,
    so at most one step of a program has none."""
    return gl.where(_tile_of(step, rounds, programs, DESYNC) >= TILES, step + 1, step)


@gluon.jit
def _tile_at(step, rounds, programs, DESYNC: gl.constexpr, TILES: gl.constexpr):
    """The tile of a step from ``_next_step`` (TILES: none left)."""
    return gl.where(step >= rounds, TILES, _tile_of(step, rounds, programs, DESYNC))


@gluon.jit
def _tile_batch(tile, BATCH: gl.constexpr, TILES: gl.constexpr, CAUSAL: gl.constexpr):
    """A tile's batch: causal tiles go longest first over every batch (``_tile_row_block``),
    full ones batch by batch (H100, B·H 256 N512 D128: over every batch at once, each
    round of tiles read 64 MB of K and V, more than L2 holds)."""
    if CAUSAL:
        return tile % BATCH
    return tile // (TILES // BATCH)


@gluon.jit
def _row_block(tile, BATCH: gl.constexpr, TILES: gl.constexpr, CAUSAL: gl.constexpr):
    """A tile's row block, in the order of ``_tile_batch``."""
    if CAUSAL:
        return _tile_row_block(tile, BATCH, TILES)
    return tile % (TILES // BATCH)


@gluon.jit
def _key_blocks(tile, N: gl.constexpr, BATCH: gl.constexpr, TILES: gl.constexpr,
                BLOCK: gl.constexpr, CAUSAL: gl.constexpr, WINDOW: gl.constexpr,
                WINDOW_START: gl.constexpr):  # fmt: skip
    """The first key block a tile visits and the one after its last: up to the diagonal
    when causal, from the block of the first row's first key in the window."""
    if CAUSAL:
        row_block = _tile_row_block(tile, BATCH, TILES)
        last = row_block + 1
        if WINDOW:
            first = gl.maximum(row_block * BLOCK + WINDOW_START, 0) // BLOCK
        else:
            first = gl.to_tensor(0)
        return first, last
    else:
        return gl.to_tensor(0), gl.to_tensor(N // BLOCK)


@gluon.jit
def _first_row(tile, N: gl.constexpr, BATCH: gl.constexpr, BLOCK: gl.constexpr,
               TILES: gl.constexpr, CAUSAL: gl.constexpr):  # fmt: skip
    """The row of a tile's first query in the (batch * N, D) view of Q and the output."""
    batch = _tile_batch(tile, BATCH, TILES, CAUSAL)
    return batch * N + _row_block(tile, BATCH, TILES, CAUSAL) * BLOCK


@gluon.jit
def _map_entry(Map, tile, BATCH: gl.constexpr, TILES: gl.constexpr, CAUSAL: gl.constexpr,
               BLOCK_MAP: gl.constexpr, MAP_GROUP: gl.constexpr, MAP_ROWS: gl.constexpr,
               KEY_BLOCKS: gl.constexpr):  # fmt: skip
    """A tile's entry of the block map (``block_lists``; past the last tile: the last
    tile's): its counts of key blocks with no mask work and with some, and the entry's
    offset in the map, where the first are listed from the front and the second from the
    back of KEY_BLOCKS slots after the counts. Without a map: zeros, never read."""
    if BLOCK_MAP:
        tile = gl.minimum(tile, TILES - 1)
        entry = _tile_batch(tile, BATCH, TILES, CAUSAL) // MAP_GROUP
        if MAP_ROWS:
            entry = entry * (TILES // BATCH) + _row_block(tile, BATCH, TILES, CAUSAL)
        entry = entry * (2 + KEY_BLOCKS)
        return gl.load(Map + entry), gl.load(Map + entry + 1), entry
    else:
        return gl.to_tensor(0), gl.to_tensor(0), gl.to_tensor(0)


@gluon.jit
def _visits(tile, plain, masked, N: gl.constexpr, BATCH: gl.constexpr, TILES: gl.constexpr,
            BLOCK: gl.constexpr, CAUSAL: gl.constexpr, WINDOW: gl.constexpr,
            WINDOW_START: gl.constexpr, BLOCK_MAP: gl.constexpr):  # fmt: skip
    """A tile's visits: the first and the one after the last. With a map, visit i is the
    map's i-th key block (``_visited_block``) of the ``plain`` and ``masked`` counts of
    its entry (``_map_entry``); without, key block i of ``_key_blocks``."""
    if BLOCK_MAP:
        return gl.to_tensor(0), plain + masked
    else:
        return _key_blocks(tile, N, BATCH, TILES, BLOCK, CAUSAL, WINDOW, WINDOW_START)


@gluon.jit
def _visited_block(Map, entry, i, plain, BLOCK_MAP: gl.constexpr, KEY_BLOCKS: gl.constexpr):
    """The key block of a tile's visit ``i`` (``_visits``): block i without a map; with
    one, the entry's ``plain`` blocks with no mask work, then those with some."""
    if BLOCK_MAP:
        return gl.load(Map + entry + gl.where(i < plain, 2 + i, 1 + KEY_BLOCKS - (i - plain)))
    else:
        return i


@gluon.jit
def _bias(L0, L1, L2, L3, batch, rows, keys, n_q, n_k):
    """The computed mask at (batch, rows[:, None], keys[None, :]): the spec's expression
    of the mask's inputs L0-L3, in Gluon, put here by ``kernel.kernel_source``."""
    return 0.0  # the mask's expression


@gluon.jit
def _masked(x, L0, L1, L2, L3, batch, rows, keys, QK_SCALE: gl.constexpr, N: gl.constexpr,
            CAUSAL: gl.constexpr, WINDOW: gl.constexpr, WINDOW_START: gl.constexpr,
            HAS_MASK: gl.constexpr):  # fmt: skip
    """A block's unscaled base-2 logits ``x`` at (rows, keys) of ``batch`` with the
    computed mask and the causal and window bounds applied, as the template's
    ``_key_block`` does with LATE_SCALE."""
    bias = _bias(L0, L1, L2, L3, batch, rows, keys, N, N).to(gl.float32)
    shift = bias * (1.4426950408889634 / QK_SCALE)
    if HAS_MASK == 1:
        x = x + shift
    else:
        # a fill at or below HAS_MASK swamps the score: the logit is the fill alone, kept
        # finite at -FLT_MAX/2 (see the template's ``_key_block``)
        if HAS_MASK < -1e30:
            shift = gl.where(bias == float("-inf"), shift, gl.maximum(shift, -1.7014117e38))
        x = gl.where(bias <= HAS_MASK, shift, x + shift)
    if CAUSAL:
        x = gl.where(keys[None, :] <= rows[:, None], x, float("-inf"))
    if WINDOW:
        x = gl.where(keys[None, :] >= rows[:, None] + WINDOW_START, x, float("-inf"))
    return x


@gluon.jit
def _softmax_step(x, m_i, l_i, acc, QK_SCALE: gl.constexpr, dtype: gl.constexpr,
                  o_layout: gl.constexpr):  # fmt: skip
    """One online-softmax step on a block's base-2 logits ``x`` (unscaled: the scale
    goes inside exp2's FMA): P in PV's A-operand layout, and the running max, sum and
    rescaled accumulator."""
    m_new = gl.maximum(m_i, gl.max(x, 1) * QK_SCALE)
    p = gl.exp2(x * QK_SCALE - m_new[:, None])
    alpha = gl.exp2(m_i - m_new)
    l_i = l_i * alpha + gl.sum(p, 1)
    acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    return gl.convert_layout(p.to(dtype), p_layout), m_new, l_i, acc


@gluon.jit
def _producer(
    k_desc,
    v_desc,
    k_smem,
    v_smem,
    k_ready,
    v_ready,
    kv_empty,
    Map,
    N: gl.constexpr,
    BATCH: gl.constexpr,
    KV_GROUP: gl.constexpr,
    BLOCK: gl.constexpr,
    STAGES: gl.constexpr,
    TILES: gl.constexpr,
    CAUSAL: gl.constexpr,
    WINDOW: gl.constexpr,
    WINDOW_START: gl.constexpr,
    DESYNC: gl.constexpr,
    BLOCK_MAP: gl.constexpr,
    MAP_GROUP: gl.constexpr,
    MAP_ROWS: gl.constexpr,
    KEY_BLOCKS: gl.constexpr,
):
    """Loads the key blocks of every tile of this program, in order, into the ring."""
    programs = gl.num_programs(0)
    rounds = gl.cdiv(TILES, programs)
    c = 0  # key blocks loaded so far: slot c % STAGES, its use c // STAGES
    step = _next_step(gl.to_tensor(0), rounds, programs, DESYNC, TILES)
    tile = _tile_at(step, rounds, programs, DESYNC, TILES)
    for _ in range(0, rounds):
        if tile < TILES:
            base = (_tile_batch(tile, BATCH, TILES, CAUSAL) // KV_GROUP) * N
            plain, masked, entry = _map_entry(
                Map, tile, BATCH, TILES, CAUSAL, BLOCK_MAP, MAP_GROUP, MAP_ROWS, KEY_BLOCKS
            )
            first, last = _visits(
                tile, plain, masked, N, BATCH, TILES, BLOCK, CAUSAL, WINDOW, WINDOW_START,
                BLOCK_MAP,
            )  # fmt: skip
            for i in range(first, last):
                j = _visited_block(Map, entry, i, plain, BLOCK_MAP, KEY_BLOCKS)
                s = c % STAGES
                # a slot is free once the warpgroup's PV of its last use is done (the
                # first use of each slot: the parity before the barrier's first phase)
                mbarrier.wait(kv_empty.index(s), ((c // STAGES) & 1) ^ 1)
                mbarrier.expect(k_ready.index(s), k_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(
                    k_desc, [base + j * BLOCK, 0], k_ready.index(s), k_smem.index(s)
                )
                mbarrier.expect(v_ready.index(s), v_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(
                    v_desc, [base + j * BLOCK, 0], v_ready.index(s), v_smem.index(s)
                )
                c += 1
        step = _next_step(step + 1, rounds, programs, DESYNC, TILES)
        tile = _tile_at(step, rounds, programs, DESYNC, TILES)


@gluon.jit
def _load_q(Q, tile, N: gl.constexpr, D: gl.constexpr, BATCH: gl.constexpr,
            BLOCK: gl.constexpr, TILES: gl.constexpr, CAUSAL: gl.constexpr,
            layout: gl.constexpr):  # fmt: skip
    """Q of a tile into registers, in wgmma's A-operand layout (past the last tile: the
    last tile's, unused)."""
    first = _first_row(gl.minimum(tile, TILES - 1), N, BATCH, BLOCK, TILES, CAUSAL)
    rows = first + gl.arange(0, BLOCK, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, D, layout=gl.SliceLayout(0, layout))
    return gl.load(Q + rows[:, None].to(gl.int64) * D + cols[None, :])


@gluon.jit
def _compute(
    Q,
    L0,
    L1,
    L2,
    L3,
    Map,
    o_desc,
    o_smem,
    k_smem,
    v_smem,
    k_ready,
    v_ready,
    kv_empty,
    QK_SCALE: gl.constexpr,
    N: gl.constexpr,
    D: gl.constexpr,
    BATCH: gl.constexpr,
    BLOCK: gl.constexpr,
    STAGES: gl.constexpr,
    TILES: gl.constexpr,
    CAUSAL: gl.constexpr,
    WINDOW: gl.constexpr,
    WINDOW_START: gl.constexpr,
    DESYNC: gl.constexpr,
    BLOCK_MAP: gl.constexpr,
    HAS_MASK: gl.constexpr,
    MAP_GROUP: gl.constexpr,
    MAP_ROWS: gl.constexpr,
    KEY_BLOCKS: gl.constexpr,
):
    """The online softmax of every tile of this program over the ring's key blocks."""
    dtype: gl.constexpr = o_smem.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK, 16]
    )
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, D, 16]
    )
    # Q stays in registers as QK^T's A operand (H200, N1024 D128: causal 44.3 against 45.0
    # us with Q in shared memory, full 71.2 against 72.0)
    q_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=2)
    row_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    rows = gl.arange(0, BLOCK, layout=gl.SliceLayout(1, s_layout))
    keys = gl.arange(0, BLOCK, layout=gl.SliceLayout(0, s_layout))
    programs = gl.num_programs(0)
    rounds = gl.cdiv(TILES, programs)
    c = 0  # key blocks consumed so far, as the producer counts them
    step = _next_step(gl.to_tensor(0), rounds, programs, DESYNC, TILES)
    tile = _tile_at(step, rounds, programs, DESYNC, TILES)
    q = _load_q(Q, tile, N, D, BATCH, BLOCK, TILES, CAUSAL, q_layout)
    # the map's counts load a tile ahead, as Q does (H100, half of every sequence padded:
    # the warpgroup waited on them at every tile)
    plain, masked, entry = _map_entry(
        Map, tile, BATCH, TILES, CAUSAL, BLOCK_MAP, MAP_GROUP, MAP_ROWS, KEY_BLOCKS
    )
    for _ in range(0, rounds):
        next_step = _next_step(step + 1, rounds, programs, DESYNC, TILES)
        next_tile = _tile_at(next_step, rounds, programs, DESYNC, TILES)
        next_q = _load_q(Q, next_tile, N, D, BATCH, BLOCK, TILES, CAUSAL, q_layout)
        next_plain, next_masked, next_entry = _map_entry(
            Map, next_tile, BATCH, TILES, CAUSAL, BLOCK_MAP, MAP_GROUP, MAP_ROWS, KEY_BLOCKS
        )
        if tile < TILES:
            # with a window or a mask, a row may see no key of the first block: the lowest
            # finite max keeps its exp2 at 0 there (-inf - -inf would be NaN)
            if WINDOW or BLOCK_MAP:
                m_i = gl.full([BLOCK], -3.4028234663852886e38, gl.float32, layout=row_layout)
            else:
                m_i = gl.full([BLOCK], float("-inf"), gl.float32, layout=row_layout)
            l_i = gl.full([BLOCK], 0.0, gl.float32, layout=gl.SliceLayout(1, s_layout))
            acc = warpgroup_mma_init(gl.zeros([BLOCK, D], gl.float32, layout=o_layout))
            first, blocks = _visits(
                tile, plain, masked, N, BATCH, TILES, BLOCK, CAUSAL, WINDOW, WINDOW_START,
                BLOCK_MAP,
            )  # fmt: skip
            row_block = _row_block(tile, BATCH, TILES, CAUSAL)
            for j in range(first, blocks):  # with a map: the j-th listed block
                s = c % STAGES
                phase = (c // STAGES) & 1
                mbarrier.wait(k_ready.index(s), phase)
                x = warpgroup_mma(
                    q,
                    k_smem.index(s).permute((1, 0)),
                    gl.zeros([BLOCK, BLOCK], gl.float32, layout=s_layout),
                    use_acc=False,
                    is_async=True,
                )
                x, acc = warpgroup_mma_wait(0, deps=[x, acc])
                # the previous block's PV is done: its slot goes back to the producer
                mbarrier.arrive(kv_empty.index((c + STAGES - 1) % STAGES), pred=j > first)
                if BLOCK_MAP:
                    if j >= plain:  # a block that needs the mask: which one, from the map
                        block = _visited_block(Map, entry, j, plain, BLOCK_MAP, KEY_BLOCKS)
                        batch = _tile_batch(tile, BATCH, TILES, CAUSAL).to(gl.int64)
                        x = _masked(
                            x, L0, L1, L2, L3, batch, row_block * BLOCK + rows,
                            block * BLOCK + keys, QK_SCALE, N, CAUSAL, WINDOW, WINDOW_START,
                            HAS_MASK,
                        )  # fmt: skip
                elif CAUSAL:
                    if j == blocks - 1:  # the diagonal block
                        x = gl.where(keys[None, :] <= rows[:, None], x, float("-inf"))
                if WINDOW and not BLOCK_MAP:  # the blocks some row's window starts after
                    if j * BLOCK < row_block * BLOCK + BLOCK - 1 + WINDOW_START:
                        key = (j - row_block) * BLOCK + keys[None, :]  # from the first row
                        x = gl.where(key >= rows[:, None] + WINDOW_START, x, float("-inf"))
                p, m_i, l_i, acc = _softmax_step(x, m_i, l_i, acc, QK_SCALE, dtype, o_layout)
                mbarrier.wait(v_ready.index(s), phase)
                acc = warpgroup_mma(p, v_smem.index(s), acc, is_async=True)
                c += 1
            acc = warpgroup_mma_wait(0, deps=[acc])
            # (a tile the map lists no key block for consumed none)
            mbarrier.arrive(kv_empty.index((c + STAGES - 1) % STAGES), pred=blocks > first)
            if BLOCK_MAP:  # 0 on a row with no key (l = 0), as SDPA gives
                inv = gl.where(l_i > 0, 1.0 / l_i, 0.0)
            else:
                inv = 1.0 / l_i
            inv = gl.convert_layout(inv, gl.SliceLayout(1, o_layout))
            tma.store_wait(0)  # the previous tile's output has left o_smem
            o_smem.store((acc * inv[:, None]).to(dtype))
            fence_async_shared()
            out_row = _first_row(tile, N, BATCH, BLOCK, TILES, CAUSAL)
            tma.async_copy_shared_to_global(o_desc, [out_row, 0], o_smem)
        step = next_step
        tile = next_tile
        q = next_q
        plain = next_plain
        masked = next_masked
        entry = next_entry
    tma.store_wait(0)


@gluon.jit
def attention(
    Q,
    K,
    V,
    Mask,  # not read (no mask), bound as in the FlashAttention-2 template
    L0,  # with BLOCK_MAP, the computed mask's inputs; those it lacks are None
    L1,
    L2,
    L3,
    Map,  # with BLOCK_MAP, the int32 block map from ``block_lists``
    Sizes,  # not read (static sizes)
    Out,
    QK_SCALE: gl.constexpr,  # scale * log2(e)
    N: gl.constexpr,  # rows of Q, K and V per batch
    D: gl.constexpr,
    BATCH: gl.constexpr,
    KV_GROUP: gl.constexpr,  # query heads per K/V head
    BLOCK: gl.constexpr,
    STAGES: gl.constexpr,
    TILES: gl.constexpr,
    CAUSAL: gl.constexpr,
    WINDOW: gl.constexpr,  # keys before row + WINDOW_START are masked too (causal only)
    WINDOW_START: gl.constexpr,
    DESYNC: gl.constexpr,  # odd programs take their tiles shortest first
    BLOCK_MAP: gl.constexpr,  # visit the key blocks Map lists (a computed mask)
    HAS_MASK: gl.constexpr,  # as the template's: 1 additive, below 0 the swamping fill
    MAP_GROUP: gl.constexpr,  # with BLOCK_MAP: consecutive batches that share a map entry
    MAP_ROWS: gl.constexpr,  # with BLOCK_MAP: an entry per row block (else one for all)
    KEY_BLOCKS: gl.constexpr,  # with BLOCK_MAP: key blocks per map entry
):
    dtype: gl.constexpr = Q.dtype.element_ty
    layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK, D], dtype)
    kv_rows: gl.constexpr = BATCH // KV_GROUP * N
    k_desc = tma.make_tensor_descriptor(K, [kv_rows, D], [D, 1], [BLOCK, D], layout)
    v_desc = tma.make_tensor_descriptor(V, [kv_rows, D], [D, 1], [BLOCK, D], layout)
    o_desc = tma.make_tensor_descriptor(Out, [BATCH * N, D], [D, 1], [BLOCK, D], layout)
    o_smem = gl.allocate_shared_memory(dtype, [BLOCK, D], layout)  # the output's way out
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK, D], layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK, D], layout)
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(kv_empty.index(i), count=1)
    fence_async_shared()
    gl.warp_specialize(
        [
            (
                _compute,
                (Q, L0, L1, L2, L3, Map, o_desc, o_smem, k_smem, v_smem, k_ready, v_ready,
                 kv_empty, QK_SCALE, N, D, BATCH, BLOCK, STAGES, TILES, CAUSAL, WINDOW,
                 WINDOW_START, DESYNC, BLOCK_MAP, HAS_MASK, MAP_GROUP, MAP_ROWS, KEY_BLOCKS),
            ),
            (
                _producer,
                (k_desc, v_desc, k_smem, v_smem, k_ready, v_ready, kv_empty, Map, N, BATCH,
                 KV_GROUP, BLOCK, STAGES, TILES, CAUSAL, WINDOW, WINDOW_START, DESYNC,
                 BLOCK_MAP, MAP_GROUP, MAP_ROWS, KEY_BLOCKS),
            ),
        ],
        [1],
        [PRODUCER_REGISTERS],
    )  # fmt: skip
