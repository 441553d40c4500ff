"""The product kernel's tiles, split-K and persistent programs on every product shape of
the model suite, against cuBLAS (run on the GPU machine: Triton JIT there, the kernels
compiled in parallel first). Results: benchmarks/results/matmul_tiles_h100.md (whose
`q` column came from an earlier revision of this script, with a constant trip count).

    python3 benchmarks/matmul_tiles_gpu.py

Columns: t = the product kernel, one tile per program; p = the persistent kernel below
(Triton's tutorial's loop); c = the product kernel with PROGRAMS (its persistent form)."""

import itertools
import sys
import time

sys.path.insert(0, ".")
from concurrent.futures import ProcessPoolExecutor

import torch
import triton
import triton.language as tl
from triton.testing import do_bench

from fusion_compiler.backends.triton.matmul import matmul
from fusion_compiler.backends.triton.matmul_sum import matmul_sum

SMS = 132


@triton.jit
def _pid(tile, per_group, row_blocks, GROUP_M: tl.constexpr):
    first = tile // per_group * GROUP_M
    rows_in_group = tl.minimum(row_blocks - first, GROUP_M)
    return first + (tile % per_group) % rows_in_group, (tile % per_group) // rows_in_group


@triton.jit
def persistent(
    A,
    W,
    Out,
    M: tl.constexpr,
    N: tl.constexpr,
    K: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    PROGRAMS: tl.constexpr,
    SUBTILE: tl.constexpr,
):
    row_blocks = tl.cdiv(M, BLOCK_M)
    column_blocks = tl.cdiv(N, BLOCK_N)
    tiles = row_blocks * column_blocks
    per_group = GROUP_M * column_blocks
    a = tl.make_tensor_descriptor(A, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    w = tl.make_tensor_descriptor(W, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    if SUBTILE:
        out = tl.make_tensor_descriptor(
            Out, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N // 2]
        )
    else:
        out = tl.make_tensor_descriptor(
            Out, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N]
        )
    tile_c = tl.program_id(0) - PROGRAMS
    for tile in tl.range(tl.program_id(0), tiles, PROGRAMS, flatten=True):
        bm, bn = _pid(tile, per_group, row_blocks, GROUP_M)
        acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        for k in range(0, K, BLOCK_K):
            acc = tl.dot(a.load([bm * BLOCK_M, k]), w.load([bn * BLOCK_N, k]).T, acc)
        tile_c += PROGRAMS
        bm, bn = _pid(tile_c, per_group, row_blocks, GROUP_M)
        if SUBTILE:
            acc = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            acc0, acc1 = tl.split(acc)
            out.store([bm * BLOCK_M, bn * BLOCK_N], acc0.to(Out.dtype.element_ty))
            out.store([bm * BLOCK_M, bn * BLOCK_N + BLOCK_N // 2], acc1.to(Out.dtype.element_ty))
        else:
            out.store([bm * BLOCK_M, bn * BLOCK_N], acc.to(Out.dtype.element_ty))


SHAPES = {  # (M, K, N)
    "llama512_q_o": (512, 2048, 2048),
    "llama512_kv": (512, 2048, 512),
    "llama512_gate": (512, 2048, 8192),
    "llama512_down": (512, 8192, 2048),
    "llama512_qkv": (512, 2048, 3072),
    "bert_qkv1": (4096, 768, 768),
    "bert_fc": (4096, 768, 3072),
    "bert_proj": (4096, 3072, 768),
    "bert_qkv3": (4096, 768, 2304),
    "vit_qkv1": (6304, 768, 768),
    "vit_fc": (6304, 768, 3072),
    "vit_proj": (6304, 3072, 768),
    "whisper_qkv1": (1500, 768, 768),
    "whisper_fc": (1500, 768, 3072),
    "whisper_proj": (1500, 3072, 768),
    "gpt2_512_qkv": (512, 768, 2304),
    "gpt2_512_fc": (512, 768, 3072),
    "gpt2_512_proj": (512, 3072, 768),
    "llama8k_q_o": (8192, 2048, 2048),
    "llama8k_kv": (8192, 2048, 512),
    "llama8k_gate": (8192, 2048, 8192),
    "llama8k_down": (8192, 8192, 2048),
}
# name: (persistent, BM, BN, BK, warps, stages, split, subtile)
VARIANTS = {
    "t128x256w8s3": (0, 128, 256, 64, 8, 3, 1, 0),
    "t128x128w8s4": (0, 128, 128, 64, 8, 4, 1, 0),
    "t64x128w4s4": (0, 64, 128, 64, 4, 4, 1, 0),
    "t64x64w4s4": (0, 64, 64, 64, 4, 4, 1, 0),
    "t128x128s2": (0, 128, 128, 64, 8, 4, 2, 0),
    "t128x128s4": (0, 128, 128, 64, 8, 4, 4, 0),
    "p128x256w8s3": (1, 128, 256, 64, 8, 3, 1, 0),
    "p128x256w8s4sub": (1, 128, 256, 64, 8, 4, 1, 1),
    "p128x128w8s4": (1, 128, 128, 64, 8, 4, 1, 0),
    "c128x256w8s3": (3, 128, 256, 64, 8, 3, 1, 0),
    "c128x128w8s4": (3, 128, 128, 64, 8, 4, 1, 0),
}


def alloc(size, alignment, stream):
    return torch.empty(size, device="cuda", dtype=torch.int8)


def launch(shape, v, a, w, out, partial):
    M, K, N = shape
    pers, bm, bn, bk, warps, stages, split, sub = v
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    if pers >= 2:
        progs = min(SMS, tiles) if pers >= 3 else 0
        matmul[(progs or tiles, 1, 1)](
            a, w, out, M, N, K, True, bm, bn, bk, 8, 1, progs, num_warps=warps, num_stages=stages
        )
    elif pers:
        progs = min(SMS, tiles)
        persistent[(progs,)](
            a, w, out, M, N, K, bm, bn, bk, 8, progs, bool(sub), num_warps=warps, num_stages=stages
        )
    elif split == 1:
        matmul[(tiles, 1, 1)](
            a, w, out, M, N, K, True, bm, bn, bk, 8, 1, num_warps=warps, num_stages=stages
        )
    else:
        matmul[(tiles, split, 1)](
            a, w, partial, M, N, K, True, bm, bn, bk, 8, split, num_warps=warps, num_stages=stages
        )
        matmul_sum[(triton.cdiv(M, 64), triton.cdiv(N, 128), 1)](
            partial, out, M, N, split, 64, 128, num_warps=4
        )


def tensors(shape):
    M, K, N = shape
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16, generator=g)
    w = torch.randn(N, K, device="cuda", dtype=torch.float16, generator=g) / K**0.5
    return (
        a,
        w,
        torch.empty(M, N, device="cuda", dtype=torch.float16),
        torch.empty(4, M, N, device="cuda", dtype=torch.float32),
    )


def warm(job):
    name, vname = job
    triton.set_allocator(alloc)
    try:
        launch(SHAPES[name], VARIANTS[vname], *tensors(SHAPES[name]))
        torch.cuda.synchronize()
        return None
    except Exception as e:
        return f"{name} {vname}: {type(e).__name__}: {str(e)[:200]}"


if __name__ == "__main__":
    import multiprocessing as mp

    t0 = time.time()
    jobs = list(itertools.product(SHAPES, VARIANTS))
    with ProcessPoolExecutor(14, mp_context=mp.get_context("spawn")) as pool:
        bad = {
            j
            for j, e in zip(jobs, pool.map(warm, jobs), strict=True)
            if e and not print("WARMFAIL", e)
        }
    print(f"warm {time.time() - t0:.0f} s", flush=True)
    triton.set_allocator(alloc)
    print("MM shape cublas " + " ".join(VARIANTS))
    for name, shape in SHAPES.items():
        a, w, out, partial = tensors(shape)
        ref = torch.nn.functional.linear(a, w).float()
        flops = 2 * shape[0] * shape[1] * shape[2]
        cub = do_bench(lambda a=a, w=w: torch.nn.functional.linear(a, w), warmup=10, rep=40)
        row = [f"{cub * 1e3:.1f}"]
        for vname, v in VARIANTS.items():
            if (name, vname) in bad:
                row.append("fail")
                continue
            out.zero_()
            launch(shape, v, a, w, out, partial)
            err = ((out.float() - ref).norm() / ref.norm()).item()
            if not err < 1e-2:
                row.append(f"ERR{err:.0e}")
                continue
            t = do_bench(
                lambda s=shape, v=v, a=a, w=w, o=out, p=partial: launch(s, v, a, w, o, p),
                warmup=10,
                rep=40,
            )
            row.append(f"{t * 1e3:.1f}")
        print("MM", name, *row, flush=True)
    print(f"total {time.time() - t0:.0f} s")
