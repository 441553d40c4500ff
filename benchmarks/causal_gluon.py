"""Causal attention in Gluon, timed against the FlashAttention-2 template's kernel.

    python3 benchmarks/causal_gluon.py [OUT.md]   # on the GPU machine (Triton 3.6)

Two Gluon kernels over short rows, where the template's kernel (N1024 D128) stopped at
0.79 of full attention's TFLOP/s because about 2.3 us of each (row block, head) tile did
not shrink with its key blocks (``results/causal_schedules_h200.md``):
- ``attention`` here (an experiment): one ring of K/V stages filled by TMA over all the
  key blocks a persistent program takes, the loads issued by the computing warps;
- ``fusion_compiler.kernels.flash_ws.attention``, the compiler's kernel since: the loads
  issued by a producer warp, Q in registers, the output by TMA store; also timed on
  full attention.
Same tiles (64x64, 4 warps, 3 stages), persistent programs and tile order as the
template's persistent kernel. Contiguous fp16 (batch, n, 128) operands, n a multiple of
64; kernel time as CUPTI records it, median of 5 rounds of 100 launches, three input sets
rotated; outputs checked against float32 PyTorch.
"""

from __future__ import annotations

import functools
import itertools
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from causal_schedules import _kernel_ms, _launch_next  # noqa: E402
from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import (  # noqa: E402
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_init,
    warpgroup_mma_wait,
)

from fusion_compiler.kernels import flash_ws, schedules  # noqa: E402
from fusion_compiler.kernels.attention import WS_MAX_REGISTERS, load_source  # noqa: E402
from fusion_compiler.kernels.flash_template import _tile_row_block  # noqa: E402
from fusion_compiler.kernels.flash_ws import _next_step, _softmax_step, _tile_at  # noqa: E402
from fusion_compiler.tools.autotune import use_torch_scratch  # noqa: E402

_PROGRAMS = 264  # two per multiprocessor, as the generated kernel's persistent schedule


@gluon.jit
def _issue(
    k_desc,
    v_desc,
    k_smem,
    v_smem,
    k_bar,
    v_bar,
    stage,
    tile,
    block,
    N: gl.constexpr,
    BATCH: gl.constexpr,
    TILES: gl.constexpr,
    BLOCK: gl.constexpr,
):
    """Loads key block ``block`` of ``tile`` into ``stage`` (nothing past the last tile)."""
    valid = tile < TILES
    row = (tile % BATCH) * N + block * BLOCK
    mbarrier.expect(k_bar.index(stage), k_desc.block_type.nbytes, pred=valid)
    tma.async_copy_global_to_shared(
        k_desc, [row, 0], k_bar.index(stage), k_smem.index(stage), pred=valid
    )
    mbarrier.expect(v_bar.index(stage), v_desc.block_type.nbytes, pred=valid)
    tma.async_copy_global_to_shared(
        v_desc, [row, 0], v_bar.index(stage), v_smem.index(stage), pred=valid
    )


@gluon.jit
def _advance(
    p_step,
    p_tile,
    p_block,
    rounds,
    programs,
    DESYNC: gl.constexpr,
    BATCH: gl.constexpr,
    TILES: gl.constexpr,
):
    """The producer's next (step, tile, block) in this program's flat order of key blocks."""
    p_block = p_block + 1
    done = p_block > _tile_row_block(p_tile, BATCH, TILES)
    n_step = _next_step(p_step + 1, rounds, programs, DESYNC, TILES)
    n_tile = _tile_at(n_step, rounds, programs, DESYNC, TILES)
    return (
        gl.where(done, n_step, p_step),
        gl.where(done, n_tile, p_tile),
        gl.where(done, 0, p_block),
    )


@gluon.jit
def attention(
    Q,
    K,
    V,
    Out,
    QK_SCALE: gl.constexpr,
    N: gl.constexpr,
    D: gl.constexpr,
    BATCH: gl.constexpr,
    BLOCK: gl.constexpr,
    STAGES: gl.constexpr,
    TILES: gl.constexpr,
    DESYNC: gl.constexpr,
):
    dtype: gl.constexpr = Q.dtype.element_ty
    smem_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK, D], dtype)
    q_desc = tma.make_tensor_descriptor(Q, [BATCH * N, D], [D, 1], [BLOCK, D], smem_layout)
    k_desc = tma.make_tensor_descriptor(K, [BATCH * N, D], [D, 1], [BLOCK, D], smem_layout)
    v_desc = tma.make_tensor_descriptor(V, [BATCH * N, D], [D, 1], [BLOCK, D], smem_layout)
    qk_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK, 16]
    )
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, D, 16]
    )
    q_smem = gl.allocate_shared_memory(dtype, [BLOCK, D], smem_layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK, D], smem_layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK, D], smem_layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    k_bar = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_bar = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar.index(0), count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_bar.index(i), count=1)
        mbarrier.init(v_bar.index(i), count=1)
    fence_async_shared()

    programs = gl.num_programs(0)
    rounds = gl.cdiv(TILES, programs)
    # the first tile's Q, and the first STAGES - 1 key blocks of the flat order
    step = _next_step(gl.to_tensor(0), rounds, programs, DESYNC, TILES)
    tile = _tile_at(step, rounds, programs, DESYNC, TILES)
    mbarrier.expect(q_bar.index(0), q_desc.block_type.nbytes, pred=tile < TILES)
    tma.async_copy_global_to_shared(
        q_desc,
        [(tile % BATCH) * N + _tile_row_block(tile, BATCH, TILES) * BLOCK, 0],
        q_bar.index(0),
        q_smem,
        pred=tile < TILES,
    )
    p_step = step
    p_tile = tile
    p_block = gl.to_tensor(0)
    for i in gl.static_range(STAGES - 1):
        _issue(
            k_desc, v_desc, k_smem, v_smem, k_bar, v_bar, i, p_tile, p_block, N, BATCH, TILES, BLOCK
        )
        p_step, p_tile, p_block = _advance(
            p_step, p_tile, p_block, rounds, programs, DESYNC, BATCH, TILES
        )

    rows_1d = gl.arange(0, BLOCK, layout=gl.SliceLayout(1, qk_layout))
    cols_1d = gl.arange(0, BLOCK, layout=gl.SliceLayout(0, qk_layout))
    out_rows = gl.arange(0, BLOCK, layout=gl.SliceLayout(1, o_layout))
    out_cols = gl.arange(0, D, layout=gl.SliceLayout(0, o_layout))
    c = gl.to_tensor(0)  # key blocks consumed by this program
    n = gl.to_tensor(0)  # tiles done
    for _ in range(0, rounds):
        if tile < TILES:
            rb = _tile_row_block(tile, BATCH, TILES)
            mbarrier.wait(q_bar.index(0), n & 1)
            m_i = gl.full([BLOCK], float("-inf"), gl.float32, layout=gl.SliceLayout(1, qk_layout))
            l_i = gl.full([BLOCK], 0.0, gl.float32, layout=gl.SliceLayout(1, qk_layout))
            acc = warpgroup_mma_init(gl.zeros([BLOCK, D], gl.float32, layout=o_layout))
            for j in range(0, rb + 1):
                s = c % STAGES
                phase = (c // STAGES) & 1
                mbarrier.wait(k_bar.index(s), phase)
                qk = warpgroup_mma(
                    q_smem,
                    k_smem.index(s).permute((1, 0)),
                    gl.zeros([BLOCK, BLOCK], gl.float32, layout=qk_layout),
                    use_acc=False,
                    is_async=True,
                )
                # this block's QK^T and the previous block's PV done: the previous block's
                # stage takes the block STAGES - 1 ahead
                qk, acc = warpgroup_mma_wait(0, deps=[qk, acc])
                if j == rb:  # the diagonal block; Q is free: the next tile's Q loads
                    qk = gl.where(cols_1d[None, :] <= rows_1d[:, None], qk, float("-inf"))
                    next_step = _next_step(step + 1, rounds, programs, DESYNC, TILES)
                    next_tile = _tile_at(next_step, rounds, programs, DESYNC, TILES)
                    more = next_tile < TILES
                    mbarrier.expect(q_bar.index(0), q_desc.block_type.nbytes, pred=more)
                    tma.async_copy_global_to_shared(
                        q_desc,
                        [
                            (next_tile % BATCH) * N
                            + _tile_row_block(next_tile, BATCH, TILES) * BLOCK,
                            0,
                        ],
                        q_bar.index(0),
                        q_smem,
                        pred=more,
                    )
                p16, m_i, l_i, acc = _softmax_step(qk, m_i, l_i, acc, QK_SCALE, dtype, o_layout)
                mbarrier.wait(v_bar.index(s), phase)
                acc = warpgroup_mma(p16, v_smem.index(s), acc, is_async=True)
                # while PV runs: the previous block's stage (its PV is done) takes the block
                # STAGES - 1 ahead
                _issue(
                    k_desc,
                    v_desc,
                    k_smem,
                    v_smem,
                    k_bar,
                    v_bar,
                    (c + STAGES - 1) % STAGES,
                    p_tile,
                    p_block,
                    N,
                    BATCH,
                    TILES,
                    BLOCK,
                )
                p_step, p_tile, p_block = _advance(
                    p_step, p_tile, p_block, rounds, programs, DESYNC, BATCH, TILES
                )
                c += 1
            acc = warpgroup_mma_wait(0, deps=[acc])
            inv = gl.convert_layout(1.0 / l_i, gl.SliceLayout(1, o_layout))
            out = (acc * inv[:, None]).to(dtype)
            rows = (tile % BATCH) * N + rb * BLOCK + out_rows
            gl.store(Out + rows[:, None].to(gl.int64) * D + out_cols[None, :], out)
            n += 1
        step = _next_step(step + 1, rounds, programs, DESYNC, TILES)
        tile = _tile_at(step, rounds, programs, DESYNC, TILES)


def _gluon_launch(batch: int, n: int, d: int, desync: bool):
    """``attention`` over (batch, n, d) operands, called like the generated kernel."""
    constants = dict(
        QK_SCALE=d**-0.5 * 1.4426950408889634,
        N=n,
        D=d,
        BATCH=batch,
        BLOCK=64,
        STAGES=3,
        TILES=batch * n // 64,
        DESYNC=desync,
    )
    launch = attention[(_PROGRAMS,)]
    return lambda q, k, v, _mask, _sizes, out: launch(q, k, v, out, num_warps=4, **constants)


def _producer_warp_launch(batch: int, n: int, d: int, causal: bool):
    """``flash_ws.attention`` (the compiler's kernel for persistent attention over
    contiguous D128 operands), launched as compile_kernel builds it."""
    tiles = schedules.Tiles(64, 64, 4, 3, persistent=_PROGRAMS)
    constants = schedules.plain_spec(tiles, batch, n, d, causal).ws_constants()
    launch = flash_ws.attention[(_PROGRAMS,)]
    return lambda q, k, v, mask, sizes, out: launch(
        q, k, v, mask, sizes, out, num_warps=4, maxnreg=WS_MAX_REGISTERS, **constants
    )


def main(out_path: Path | None) -> None:
    import torch
    import torch.nn.functional as F

    use_torch_scratch()
    lines = ["| case | kernel | ms | TFLOP/s | / full | rel. err |", "|---|---|---|---|---|---|"]
    for batch, n, d in ((64, 1024, 128), (16, 4096, 128)):
        sets = [[torch.randn(batch, n, d, device="cuda", dtype=torch.float16) for _ in range(3)]]
        sets += [[torch.randn_like(x) for x in sets[0]] for _ in range(2)]
        q, k, v = sets[0]
        want = {
            c: F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=c)
            for c in (False, True)
        }
        full_shape = schedules.ShapeClass.of("sm_90", "f16", d, False, n)
        causal_shape = schedules.ShapeClass.of("sm_90", "f16", d, True, n)
        full_tiles = schedules.choose(full_shape)[0]
        causal_tiles = schedules.fit(schedules.choose(causal_shape)[0], causal_shape, batch, n, n)
        desync = n <= 2048  # as the generated kernel
        variants = [
            ("full, generated kernel", False, full_tiles, None),
            ("causal, generated kernel (Triton)", True, causal_tiles, None),
            ("causal, Gluon, one K/V ring across tiles", True, None, desync),
            # the compiler's kernel since 2026-12-01 (Spec.warp_specialized); full
            # attention through it for comparison (the template's kernel does full)
            ("full, Gluon, producer warp (flash_ws.py)", False, None, "ws"),
            ("causal, Gluon, producer warp (flash_ws.py)", True, None, "ws"),
        ]
        full_ms = None
        with tempfile.TemporaryDirectory() as directory:
            for label, causal, tiles, gluon_desync in variants:
                if tiles is not None:
                    spec = schedules.plain_spec(tiles, batch, n, d, causal)
                    folder = Path(directory) / label.split(",")[0]
                    folder.mkdir()
                    kernel = load_source(spec, folder)
                    launch = functools.partial(
                        kernel[spec.grid],
                        num_warps=spec.num_warps,
                        num_stages=spec.num_stages,
                        **spec.constants(),
                    )
                elif gluon_desync == "ws":
                    launch = _producer_warp_launch(batch, n, d, causal)
                else:
                    launch = _gluon_launch(batch, n, d, gluon_desync)
                out = torch.empty_like(q)
                ms = _kernel_ms(functools.partial(_launch_next, launch, itertools.cycle(sets), out))
                launch(q, k, v, q, q, out)
                error = ((out.float() - want[causal]).norm() / want[causal].norm()).item()
                tflops = 4 * batch * n * n * d / (2 if causal else 1) / ms / 1e9
                if full_ms is None:  # the generated kernel's full attention
                    full_ms = ms
                # causal: of the generated full kernel's TFLOP/s; full: its time over this
                ratio = f"{(0.5 if causal else 1.0) * full_ms / ms:.2f}"
                name = f"B·H {batch} N{n} D{d}"
                lines.append(
                    f"| {name} | {label} | {ms:.4f} | {tflops:.0f} | {ratio} | {error:.1e} |"
                )
                print(lines[-1], flush=True)
    if out_path:
        out_path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else None)
