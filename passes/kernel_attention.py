"""fusion-kernel-attention: each fused attention -> a dispatch of a kernel generated for it.

For NVIDIA Hopper (sm_90a: wgmma, which IREE's own NVIDIA code generation does not
emit). Each ``iree_linalg_ext.attention`` gets a FlashAttention-2 kernel specialised to
its dtype, sizes, head dims, K layout, causal offset, mask and score region
(``backends/plan.py``), compiled ahead of time with Triton (``backends/triton``) and
embedded in the module (``backends/dispatch.py``); a proven causal mask is dropped and
its key blocks skipped. Tiles come from fusion-schedule; full attention over short rows
that the producer-warp kernel (``backends/triton/warp_specialized.py``) can take is
re-tiled for it unless the pass options set tiles.
An op the kernel cannot take stays for IREE's code generation, with a remark saying why.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from fusion_compiler.dialects import linalg_ext
from fusion_compiler.dialects.builders import erase_dead
from fusion_compiler.passes import schedule

from fusion_compiler import remarks
from fusion_compiler.backends import dispatch
from fusion_compiler.backends.plan import KernelPlan, block_map_summary, plan_kernel
from fusion_compiler.backends.spec import Kernel
from fusion_compiler.backends.triton import schedules
from fusion_compiler.backends.triton.kernel import compile_kernel, with_producer_warp
from fusion_compiler.backends.triton.spec import TritonSpec
from fusion_compiler.ir import ir

NAME = "fusion-kernel-attention"
# shared memory a block may use, by architecture (sm_90: 227 KiB)
# the tiles of warp_specialized.py's kernel (TritonSpec.warp_specialized), for how many programs fit
_PRODUCER_WARP_TILES = schedules.Tiles(64, 64, 4, 3)


@dataclass(frozen=True)
class Options:
    arch: str = "sm_90"
    block_m: int = 0  # 0: fusion-schedule's choice
    block_n: int = 0
    num_warps: int = 0
    num_stages: int = 0
    splits: int = 0  # split-KV programs per row block; 0: fusion-schedule's choice


def _tiles(op: ir.Operation, options: Options) -> dict[str, int]:
    """fusion-schedule's tiles for ``op`` (chosen here if it did not run), with the
    pass options' overrides."""
    tiles = schedule.read(op)
    if tiles is None:
        tiles = schedule.choose(op, options.arch).tiles  # the op's layout was checked
    return {
        "block_m": options.block_m or tiles.block_m,
        "block_n": options.block_n or tiles.block_n,
        "num_warps": options.num_warps or tiles.num_warps,
        "num_stages": options.num_stages or tiles.num_stages,
        "splits": options.splits or tiles.splits,
        "pack_gqa": bool(tiles.pack_gqa),
        "persistent": 0 if options.splits > 1 else tiles.persistent,
        "arch": int(options.arch.removeprefix("sm_").rstrip("a")),
    }


def _fitting(spec: TritonSpec) -> tuple[TritonSpec, Kernel] | str:
    """``spec`` and its attention kernel, with fewer pipeline stages where the compiled
    kernel needs more shared memory than a block may have (the schedule's estimate
    counts Q, K and V only: a mask's tiles can take more); or why none fits."""
    limit = schedules.block_shared_bytes(spec.arch)
    kernel = compile_kernel(spec, "attention")
    while kernel.shared_bytes > limit and spec.num_stages > 1:
        spec = dataclasses.replace(spec, num_stages=spec.num_stages - 1)
        kernel = compile_kernel(spec, "attention")
    if kernel.shared_bytes > limit:
        return f"the kernel needs {kernel.shared_bytes} bytes of shared memory, above {limit}"
    return spec, kernel


def lower_attention_to_kernel(op: ir.Operation, plan: KernelPlan, symbol: str) -> TritonSpec | str:
    """iree_linalg_ext.attention [-> cast] [-> head transpose] -> flow.dispatch @symbol.

    The kernel is generated for this op; it reads Q, K, V where the model left them and
    writes the output cast and in the layout the model goes on with. The spec it was
    built from (stages reduced to fit shared memory), or why there is none (the op stays).
    """
    fitted = _fitting(plan.spec)
    if isinstance(fitted, str):
        return fitted
    spec, kernel = fitted
    plan = dataclasses.replace(plan, spec=spec)
    kernels = {"attention": kernel}
    if spec.splits > 1:
        kernels["combine"] = compile_kernel(spec, "combine")
    if spec.block_map:
        kernels["block_classes"] = compile_kernel(spec, "block_classes")
        kernels["block_lists"] = compile_kernel(spec, "block_lists")
    output = dispatch.build_dispatch(op, kernels, plan, symbol)
    # the op and what it replaced, and producers only the kernel's views still read
    erase_dead([output.replaced, op] if output.replaced != op else [op])
    return spec


def run(module: ir.Operation, options: Options) -> None:
    with module.context, module.location:
        _run(module, options)


def _with_sinks(module: ir.Operation) -> dict:
    """Each attention with a sink (an online_attention started from it, divided by its
    sum) as a plain attention op taking the division's place, to lower as any other;
    plain op -> (online_attention, division, the sink's logits) to add it back with."""
    found = {}
    for online in linalg_ext.find_all(module, linalg_ext.ONLINE_ATTENTION):
        normalising, sink = linalg_ext.normaliser(online), linalg_ext.sink_start(online)
        if normalising is not None and sink is not None:
            plain = linalg_ext.plain_attention(online, normalising)
            found[plain] = (online, normalising, sink)
    return found


def _sink_plan(plan: KernelPlan, sink: ir.Value) -> KernelPlan:
    """``plan`` adding the sink to each row's online softmax at the end (the template's
    kernel; with split-KV, split 0's)."""
    return dataclasses.replace(plan, spec=dataclasses.replace(plan.spec, sink=True), sink=sink)


def _run(module: ir.Operation, options: Options) -> None:
    sinks = _with_sinks(module)
    for n, op in enumerate(linalg_ext.find_all(module)):
        with_sink = sinks.get(op)
        linalg_ext.fold_k_transpose(op)
        form = linalg_ext.layout(op, allow_dynamic=True)
        plan = form if isinstance(form, str) else plan_kernel(op, form, tiles=_tiles(op, options))
        if with_sink is not None and not isinstance(plan, str):
            plan = _sink_plan(plan, with_sink[2])
        if isinstance(plan, str):
            _leave(op, with_sink, plan)
            continue
        if not (options.block_m or options.block_n or options.num_warps or options.num_stages):
            resident = schedules.resident_programs(_PRODUCER_WARP_TILES, plan.spec.d, options.arch)
            plan = dataclasses.replace(plan, spec=with_producer_warp(plan.spec, resident))
        location = op.location
        found = block_map_summary(op, plan.spec) if plan.spec.block_map else ""
        spec = lower_attention_to_kernel(op, plan, f"fusion_attention_{n}")
        if isinstance(spec, str):
            _leave(op, with_sink, spec)
            continue
        if with_sink is not None:  # the online_attention and its division, now unread
            erase_dead([with_sink[1], with_sink[0]])
        causal = spec.bounds_said()
        split = f", split-KV {spec.splits}" if spec.splits > 1 else ""
        split += ", GQA heads packed" if spec.pack_gqa else ""
        split += f", {spec.persistent} persistent programs" if spec.persistent else ""
        split += ", a producer warp" if spec.warp_specialized else ""
        split += ", a sink" if spec.sink else ""
        split += f", {found}" if found else ""
        split += f", its mask read from memory ({plan.mask_read})" if plan.mask_read else ""
        remarks.emit(
            location,
            f"attention lowered to a generated {options.arch} kernel "
            f"({spec.dtype}, D={spec.d}, tiles {spec.block_m}x{spec.block_n}{causal}{split})",
        )


def _leave(op: ir.Operation, with_sink: tuple | None, why: str) -> None:
    """``op`` left to IREE's code generation, with a remark; a plain op standing for an
    attention with a sink gives its place back to the online_attention's division."""
    remarks.emit(op.location, f"attention left to IREE's code generation: {why}")
    if with_sink is not None:
        op.results[0].replace_all_uses_with(with_sink[1].results[0])
        op.erase()
