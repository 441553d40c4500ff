"""Attention on sm_90 with two consumer warpgroups sharing each K/V stage: an experiment
against ``warp_specialized.py`` (one consumer warpgroup over 64-row tiles, two programs per
multiprocessor, each loading its own K and V), as FlashAttention-3 lays out its forward
pass: 128-row Q tiles, 64 rows per warpgroup, one persistent program per multiprocessor,
a producer warp filling a ring of K/V stages that both warpgroups read (each stage is
freed when both are done with it), half the K/V traffic per query row. ``SCORE_N`` is
the N of the score product's wgmma instructions (64 with 128-key blocks: two per block).
``P_SMEM`` stages P through shared memory (PV's A operand read from there, not registers).
``PINGPONG``
orders the two warpgroups' QK^T products turn by turn (two mbarriers), so one's softmax
runs under the other's product. Full and causal attention, no mask, D a multiple of 16,
N a multiple of 128, contiguous (batch, rows, D) operands.

``benchmarks/two_consumers_gpu.py`` times it on the GPU machine against the producer-warp
kernel and cuDNN; it is not in the compiler's pipeline.
"""

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

from fusion_compiler.backends.triton.warp_specialized import (
    _next_step,
    _row_block,
    _softmax_step,
    _tile_at,
    _tile_batch,
)


@gluon.jit
def _blocks(
    tile,
    N: gl.constexpr,
    BATCH: gl.constexpr,
    TILES: gl.constexpr,
    BLOCK_N: gl.constexpr,
    CAUSAL: gl.constexpr,
):
    if CAUSAL:
        return (_row_block(tile, BATCH, TILES, CAUSAL) + 1) * 128 // BLOCK_N
    else:
        return gl.to_tensor(N // BLOCK_N)


@gluon.jit
def _producer(
    k_desc,
    v_desc,
    k_smem,
    v_smem,
    k_ready,
    v_ready,
    kv_empty,
    N: gl.constexpr,
    BATCH: gl.constexpr,
    KV_GROUP: gl.constexpr,
    BLOCK_N: gl.constexpr,
    STAGES: gl.constexpr,
    TILES: gl.constexpr,
    CAUSAL: gl.constexpr,
    DESYNC: gl.constexpr,
):
    programs = gl.num_programs(0)
    rounds = gl.cdiv(TILES, programs)
    c = 0
    step = _next_step(gl.to_tensor(0), rounds, programs, DESYNC, TILES)
    tile = _tile_at(step, rounds, programs, DESYNC, TILES)
    for _ in range(0, rounds):
        if tile < TILES:
            base = (_tile_batch(tile, BATCH, TILES, CAUSAL) // KV_GROUP) * N
            for j in range(0, _blocks(tile, N, BATCH, TILES, BLOCK_N, CAUSAL)):
                s = c % STAGES
                mbarrier.wait(kv_empty.index(s), ((c // STAGES) & 1) ^ 1)
                mbarrier.expect(k_ready.index(s), k_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(
                    k_desc, [base + j * BLOCK_N, 0], k_ready.index(s), k_smem.index(s)
                )
                mbarrier.expect(v_ready.index(s), v_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(
                    v_desc, [base + j * BLOCK_N, 0], v_ready.index(s), v_smem.index(s)
                )
                c += 1
        step = _next_step(step + 1, rounds, programs, DESYNC, TILES)
        tile = _tile_at(step, rounds, programs, DESYNC, TILES)


@gluon.jit
def _first_row(
    tile,
    HALF: gl.constexpr,
    N: gl.constexpr,
    BATCH: gl.constexpr,
    TILES: gl.constexpr,
    CAUSAL: gl.constexpr,
    BLOCK_M: gl.constexpr,
):
    tile = gl.minimum(tile, TILES - 1)
    batch = _tile_batch(tile, BATCH, TILES, CAUSAL)
    return batch * N + _row_block(tile, BATCH, TILES, CAUSAL) * 2 * BLOCK_M + HALF * BLOCK_M


@gluon.jit
def _load_q(Q, first, D: gl.constexpr, BLOCK_M: gl.constexpr, layout: gl.constexpr):
    rows = first + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, D, layout=gl.SliceLayout(0, layout))
    return gl.load(Q + rows[:, None].to(gl.int64) * D + cols[None, :])


@gluon.jit
def _consumer(
    HALF: gl.constexpr,
    Q,
    o_desc,
    o_smem,
    k_smem,
    v_smem,
    k_ready,
    v_ready,
    kv_empty,
    turn,
    p_smem,
    QK_SCALE: gl.constexpr,
    N: gl.constexpr,
    D: gl.constexpr,
    BATCH: gl.constexpr,
    BLOCK_M: gl.constexpr,
    BLOCK_N: gl.constexpr,
    STAGES: gl.constexpr,
    TILES: gl.constexpr,
    CAUSAL: gl.constexpr,
    DESYNC: gl.constexpr,
    PINGPONG: gl.constexpr,
    SCORE_N: gl.constexpr,
    P_SMEM: gl.constexpr,
):
    dtype: gl.constexpr = o_smem.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, SCORE_N, 16]
    )
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, D, 16]
    )
    q_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=2)
    row_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    rows = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
    keys = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    programs = gl.num_programs(0)
    rounds = gl.cdiv(TILES, programs)
    c = 0
    g = 0  # gemm turns taken (ping-pong)
    step = _next_step(gl.to_tensor(0), rounds, programs, DESYNC, TILES)
    tile = _tile_at(step, rounds, programs, DESYNC, TILES)
    q = _load_q(Q, _first_row(tile, HALF, N, BATCH, TILES, CAUSAL, BLOCK_M), D, BLOCK_M, q_layout)
    for _ in range(0, rounds):
        next_step = _next_step(step + 1, rounds, programs, DESYNC, TILES)
        next_tile = _tile_at(next_step, rounds, programs, DESYNC, TILES)
        next_q = _load_q(
            Q, _first_row(next_tile, HALF, N, BATCH, TILES, CAUSAL, BLOCK_M), D, BLOCK_M, q_layout
        )
        if tile < TILES:
            m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, layout=row_layout)
            l_i = gl.full([BLOCK_M], 0.0, gl.float32, layout=row_layout)
            acc = warpgroup_mma_init(gl.zeros([BLOCK_M, D], gl.float32, layout=o_layout))
            first_key = (
                _row_block(tile, BATCH, TILES, CAUSAL) * 2 * BLOCK_M + HALF * BLOCK_M
            )  # this group's first row, in keys
            blocks = _blocks(tile, N, BATCH, TILES, BLOCK_N, CAUSAL)
            for j in range(0, blocks):
                s = c % STAGES
                phase = (c // STAGES) & 1
                mbarrier.wait(k_ready.index(s), phase)
                if PINGPONG:
                    mbarrier.wait(turn.index(HALF), (g & 1) ^ (1 - HALF))
                x = warpgroup_mma(
                    q,
                    k_smem.index(s).permute((1, 0)),
                    gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=s_layout),
                    use_acc=False,
                    is_async=True,
                )
                if PINGPONG:
                    mbarrier.arrive(turn.index(1 - HALF))
                    g += 1
                x, acc = warpgroup_mma_wait(0, deps=[x, acc])
                mbarrier.arrive(kv_empty.index((c + STAGES - 1) % STAGES), pred=j > 0)
                if CAUSAL:
                    if j * BLOCK_N + BLOCK_N - 1 > first_key:
                        x = gl.where(
                            j * BLOCK_N + keys[None, :] <= first_key + rows[:, None],
                            x,
                            float("-inf"),
                        )
                if P_SMEM:  # P through shared memory: PV's A operand read from there
                    m_new = gl.maximum(m_i, gl.max(x, 1) * QK_SCALE)
                    p = gl.exp2(x * QK_SCALE - m_new[:, None])
                    alpha = gl.exp2(m_i - m_new)
                    l_i = l_i * alpha + gl.sum(p, 1)
                    acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
                    m_i = m_new
                    p_smem.store(p.to(dtype))
                    fence_async_shared()
                    mbarrier.wait(v_ready.index(s), phase)
                    acc = warpgroup_mma(p_smem, v_smem.index(s), acc, is_async=True)
                else:
                    p, m_i, l_i, acc = _softmax_step(x, m_i, l_i, acc, QK_SCALE, dtype, o_layout)
                    mbarrier.wait(v_ready.index(s), phase)
                    acc = warpgroup_mma(p, v_smem.index(s), acc, is_async=True)
                c += 1
            acc = warpgroup_mma_wait(0, deps=[acc])
            mbarrier.arrive(kv_empty.index((c + STAGES - 1) % STAGES), pred=blocks > 0)
            inv = gl.convert_layout(1.0 / l_i, gl.SliceLayout(1, o_layout))
            tma.store_wait(0)
            o_smem.store((acc * inv[:, None]).to(dtype))
            fence_async_shared()
            tma.async_copy_shared_to_global(
                o_desc, [_first_row(tile, HALF, N, BATCH, TILES, CAUSAL, BLOCK_M), 0], o_smem
            )
        step = next_step
        tile = next_tile
        q = next_q
    tma.store_wait(0)


@gluon.jit
def attention2(
    Q,
    K,
    V,
    Out,
    QK_SCALE: gl.constexpr,
    N: gl.constexpr,
    D: gl.constexpr,
    BATCH: gl.constexpr,
    KV_GROUP: gl.constexpr,
    BLOCK_M: gl.constexpr,
    BLOCK_N: gl.constexpr,
    STAGES: gl.constexpr,
    TILES: gl.constexpr,
    CAUSAL: gl.constexpr,
    DESYNC: gl.constexpr,
    PINGPONG: gl.constexpr,
    CONSUMER_REGS: gl.constexpr,
    SCORE_N: gl.constexpr = 64,
    P_SMEM: gl.constexpr = False,
):
    dtype: gl.constexpr = Q.dtype.element_ty
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, D], dtype)
    o_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, D], dtype)
    kv_rows: gl.constexpr = BATCH // KV_GROUP * N
    k_desc = tma.make_tensor_descriptor(K, [kv_rows, D], [D, 1], [BLOCK_N, D], kv_layout)
    v_desc = tma.make_tensor_descriptor(V, [kv_rows, D], [D, 1], [BLOCK_N, D], kv_layout)
    o_desc = tma.make_tensor_descriptor(Out, [BATCH * N, D], [D, 1], [BLOCK_M, D], o_layout)
    o_smem0 = gl.allocate_shared_memory(dtype, [BLOCK_M, D], o_layout)
    o_smem1 = gl.allocate_shared_memory(dtype, [BLOCK_M, D], o_layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, D], kv_layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, D], kv_layout)
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    P_COLS: gl.constexpr = BLOCK_N if P_SMEM else 16  # (16: unused)
    p_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, P_COLS], dtype)
    p_smem0 = gl.allocate_shared_memory(dtype, [BLOCK_M, P_COLS], p_layout)
    p_smem1 = gl.allocate_shared_memory(dtype, [BLOCK_M, P_COLS], p_layout)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(kv_empty.index(i), count=2)
    mbarrier.init(turn.index(0), count=1)
    mbarrier.init(turn.index(1), count=1)
    fence_async_shared()
    gl.warp_specialize(
        [
            (
                _consumer,
                (
                    gl.constexpr(0),
                    Q,
                    o_desc,
                    o_smem0,
                    k_smem,
                    v_smem,
                    k_ready,
                    v_ready,
                    kv_empty,
                    turn,
                    p_smem0,
                    QK_SCALE,
                    N,
                    D,
                    BATCH,
                    BLOCK_M,
                    BLOCK_N,
                    STAGES,
                    TILES,
                    CAUSAL,
                    DESYNC,
                    PINGPONG,
                    SCORE_N,
                    P_SMEM,
                ),
            ),
            (
                _consumer,
                (
                    gl.constexpr(1),
                    Q,
                    o_desc,
                    o_smem1,
                    k_smem,
                    v_smem,
                    k_ready,
                    v_ready,
                    kv_empty,
                    turn,
                    p_smem1,
                    QK_SCALE,
                    N,
                    D,
                    BATCH,
                    BLOCK_M,
                    BLOCK_N,
                    STAGES,
                    TILES,
                    CAUSAL,
                    DESYNC,
                    PINGPONG,
                    SCORE_N,
                    P_SMEM,
                ),
            ),
            (
                _producer,
                (
                    k_desc,
                    v_desc,
                    k_smem,
                    v_smem,
                    k_ready,
                    v_ready,
                    kv_empty,
                    N,
                    BATCH,
                    KV_GROUP,
                    BLOCK_N,
                    STAGES,
                    TILES,
                    CAUSAL,
                    DESYNC,
                ),
            ),
        ],
        [4, 1],
        [CONSUMER_REGS, 24],
    )
