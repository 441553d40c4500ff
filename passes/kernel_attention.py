"""fusion-kernel-attention: each fused attention -> a dispatch of a kernel generated for it.

For NVIDIA Hopper (sm_90a: wgmma, which IREE's own NVIDIA code generation does not
emit). Each ``iree_linalg_ext.attention`` gets a FlashAttention-2 kernel specialised to
its dtype, sizes, head dims, K layout, causal offset, mask and score region
(``dialects/kernel_dispatch.py``), compiled ahead of time with Triton and embedded in the
module; a proven causal mask is dropped and its key blocks skipped. An op the kernel
cannot take stays for IREE's code generation, with a remark saying why.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusion_compiler.dialects import flash, kernel_dispatch, linalg_ext
from fusion_compiler.dialects.builders import erase_dead

from fusion_compiler import remarks
from fusion_compiler.ir import ir
from fusion_compiler.kernels.attention import compile_kernel

NAME = "fusion-kernel-attention"

# Tiles per (padded head dim, causal), the fastest found on the H200 by
# benchmarks/kernel_tiles.py (benchmarks/results/kernel_tiles_h200.md):
# (block_m, block_n, num_warps, num_stages). Head dim 256 is not tuned yet.
SCHEDULES: dict[tuple[int, bool], tuple[int, int, int, int]] = {
    (64, False): (64, 128, 4, 2),
    (64, True): (64, 64, 4, 3),
    (128, False): (128, 64, 4, 2),
    (128, True): (64, 64, 4, 3),
    (256, False): (64, 32, 4, 2),
    (256, True): (64, 32, 4, 2),
}


@dataclass(frozen=True)
class Options:
    arch: str = "sm_90"
    block_m: int = 0  # 0: from SCHEDULES
    block_n: int = 0
    num_warps: int = 0
    num_stages: int = 0


def _tiles(head_dim: int, causal: bool, options: Options) -> dict[str, int]:
    padded = min(d for d, _ in SCHEDULES if d >= head_dim)
    block_m, block_n, warps, stages = SCHEDULES[padded, causal]
    return {
        "block_m": options.block_m or block_m,
        "block_n": options.block_n or block_n,
        "num_warps": options.num_warps or warps,
        "num_stages": options.num_stages or stages,
        "arch": int(options.arch.removeprefix("sm_").rstrip("a")),
    }


def lower_attention_to_kernel(op: ir.Operation, spec, symbol: str) -> None:
    """iree_linalg_ext.attention [-> cast] -> flow.dispatch @symbol::@attention.

    The kernel is generated for this op; an output cast is written by the kernel.
    """
    kernel = compile_kernel(spec)
    cast = kernel_dispatch.output_cast(op)
    replaced = cast if cast is not None else op
    result = kernel_dispatch.build_dispatch(op, kernel, spec, symbol, replaced.results[0].type)
    replaced.results[0].replace_all_uses_with(result)
    # the op, its cast, and a causal mask's producers, now computed in the kernel
    erase_dead([replaced, op] if cast is not None else [op])


def run(module: ir.Operation, options: Options) -> None:
    with module.context, module.location:
        _run(module, options)


def _run(module: ir.Operation, options: Options) -> None:
    for n, op in enumerate(linalg_ext.find_all(module)):
        kernel_dispatch.fold_k_transpose(op)
        form = flash.layout(op)
        if isinstance(form, str):
            remarks.emit(op.location, f"attention left to IREE's code generation: {form}")
            continue
        v_dim = ir.RankedTensorType(op.operands[2].type).shape[2]
        head_dim = min(max(linalg_ext.head_dim(op), v_dim), 256)
        tiles = _tiles(head_dim, form.causal_offset is not None, options)
        spec = kernel_dispatch.spec_for(op, form, tiles)
        if isinstance(spec, str):
            remarks.emit(op.location, f"attention left to IREE's code generation: {spec}")
            continue
        location = op.location
        lower_attention_to_kernel(op, spec, f"fusion_attention_{n}")
        causal = f", causal offset {spec.causal_offset}" if spec.causal_offset is not None else ""
        remarks.emit(
            location,
            f"attention lowered to a generated {options.arch} kernel "
            f"({spec.dtype}, D={spec.d}, tiles {spec.block_m}x{spec.block_n}{causal})",
        )
