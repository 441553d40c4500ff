"""Triton 3.6's conversion of a wgmma accumulator to the A operand of a wgmma, checked on
the GPU (Gluon, no IREE): S = Q K^T by wgmma with instructions of N = SN, P = S in fp16,
O = P V by wgmma, P given in registers (``convert_layout``) or through shared memory;
over one key block and over three in the attention loop's pattern of asynchronous
products and waits. Against torch in float32.

The two-consumer attention kernel (``kernels/two_consumers.py``) was wrong with one
n128 instruction per 128-key score block, where the score layout equals the output's
(``benchmarks/results/two_consumers_h100.md``); this says whether the conversion alone
is. On the GPU machine:  python3 benchmarks/layout_conversion_gpu.py
"""

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    warpgroup_mma,
    warpgroup_mma_init,
    warpgroup_mma_wait,
)


@gluon.jit
def products(Q, K, V, Out, SN: gl.constexpr, D: gl.constexpr, BN: gl.constexpr,
             NB: gl.constexpr, VIA_SMEM: gl.constexpr):  # fmt: skip
    """O = sum_j fp16(Q K_j^T) V_j over NB key blocks, with the attention loop's
    asynchronous products and waits; P in registers or through shared memory."""
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, SN, 16]
    )
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, D, 16]
    )
    blocked: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    q_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=2)
    r = gl.arange(0, 64, layout=gl.SliceLayout(1, q_layout))
    c = gl.arange(0, D, layout=gl.SliceLayout(0, q_layout))
    q = gl.load(Q + r[:, None] * D + c[None, :])
    kl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BN, D], gl.float16)
    pl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, BN], gl.float16)
    rb = gl.arange(0, BN, layout=gl.SliceLayout(1, blocked))
    cb = gl.arange(0, D, layout=gl.SliceLayout(0, blocked))
    k_smem = gl.allocate_shared_memory(gl.float16, [NB, BN, D], kl)
    v_smem = gl.allocate_shared_memory(gl.float16, [NB, BN, D], kl)
    p_smem = gl.allocate_shared_memory(gl.float16, [64, BN], pl)
    for j in gl.static_range(NB):
        k_smem.index(j).store(gl.load(K + (j * BN + rb[:, None]) * D + cb[None, :]))
        v_smem.index(j).store(gl.load(V + (j * BN + rb[:, None]) * D + cb[None, :]))
    fence_async_shared()
    acc = warpgroup_mma_init(gl.zeros([64, D], gl.float32, layout=o_layout))
    for j in range(NB):
        x = warpgroup_mma(
            q,
            k_smem.index(j).permute((1, 0)),
            gl.zeros([64, BN], gl.float32, layout=s_layout),
            use_acc=False,
            is_async=True,
        )
        x, acc = warpgroup_mma_wait(0, deps=[x, acc])
        if VIA_SMEM:
            p_smem.store(x.to(gl.float16))
            fence_async_shared()
            acc = warpgroup_mma(p_smem, v_smem.index(j), acc, is_async=True)
        else:
            p_layout: gl.constexpr = gl.DotOperandLayout(
                operand_index=0, parent=o_layout, k_width=2
            )
            p = gl.convert_layout(x.to(gl.float16), p_layout)
            acc = warpgroup_mma(p, v_smem.index(j), acc, is_async=True)
    acc = warpgroup_mma_wait(0, deps=[acc])
    ro = gl.arange(0, 64, layout=gl.SliceLayout(1, o_layout))
    co = gl.arange(0, D, layout=gl.SliceLayout(0, o_layout))
    gl.store(Out + ro[:, None] * D + co[None, :], acc)


def _error(got: torch.Tensor, want: torch.Tensor) -> str:
    return f"{((got - want).norm() / want.norm()).item():.2e}"


def main() -> None:
    torch.manual_seed(0)
    print("| key blocks | D | score N (instruction) | key block | P via | rel. error |")
    print("|---|---|---|---|---|---|")
    for d in (64, 128):
        for sn, bn in ((64, 128), (128, 128), (64, 64)):
            for blocks in (1, 3):
                for via in (0, 1):
                    q = torch.randn(64, d, device="cuda").half() / 4
                    k = torch.randn(blocks * bn, d, device="cuda").half() / 4
                    v = torch.randn(blocks * bn, d, device="cuda").half()
                    out = torch.empty(64, d, device="cuda")
                    products[(1,)](q, k, v, out, sn, d, bn, blocks, via, num_warps=4)
                    want = sum(
                        (q.float() @ k[j * bn : (j + 1) * bn].float().T).half().float()
                        @ v[j * bn : (j + 1) * bn].float()
                        for j in range(blocks)
                    )
                    how = "shared memory" if via else "registers"
                    print(f"| {blocks} | {d} | {sn} | {bn} | {how} | {_error(out, want)} |")


if __name__ == "__main__":
    main()
