"""fusion_compiler's passes, by name.

Each pass lives in its own module with ``NAME``, a frozen ``Options`` dataclass and
``run(module, options)``. The registry imports a pass only when it is used, so listing
passes stays cheap. ``fusion-opt``, the driver, the tests and the README read it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

_MODULES: dict[str, str] = {
    "fusion-additive-mask": "fusion_compiler.passes.additive_mask",
    "fusion-bf16-via-f32": "fusion_compiler.passes.bf16_via_f32",
    "fusion-decompose-attention": "fusion_compiler.passes.decompose_attention",
    "fusion-detect-attention": "fusion_compiler.passes.detect_attention",
    "fusion-find-softmax": "fusion_compiler.passes.find_softmax",
    "fusion-fold-empty": "fusion_compiler.passes.fold_empty",
    "fusion-guard-masked-rows": "fusion_compiler.passes.guard_masked_rows",
    "fusion-kernel-attention": "fusion_compiler.passes.kernel_attention",
    "fusion-online-softmax": "fusion_compiler.passes.online_softmax",
    "fusion-schedule": "fusion_compiler.passes.schedule",
    "fusion-softmax-input-in-memory": "fusion_compiler.passes.softmax_input_in_memory",
    "fusion-spirv-attention": "fusion_compiler.passes.spirv_attention",
    "fusion-tile-and-fuse": "fusion_compiler.passes.tile_and_fuse",
}

# What ``fc.compile`` runs between the Linalg and the fused stage, per target. Each
# difference answers a measured limit of IREE 3.13's code generation: llvm-cpu and CUDA
# compute iree_linalg_ext.attention wrongly when the head dim (the QK contraction) is
# above 128; SPIR-V cannot lower it at all.
_SAFE_HEAD_DIM = "fusion-decompose-attention{above-head-dim=128}"
# What is left for IREE's attention op gets PyTorch's answer on rows whose keys are all
# masked (after the decomposition, which gives it on its own).
_GUARD = "fusion-guard-masked-rows"
# With dynamic shapes, tensor.dim ops keep the replaced scores alive until their sizes
# are read from the operands instead.
_CLEANUP = ("resolve-ranked-shaped-type-result-dims", "canonicalize", "cse")
# An attention with an extent of 0 is zeros (IREE 3.13's compiler stops on it with SIGFPE).
_EMPTY = "fusion-fold-empty"
# Attention found, every mask of it (SDPA's boolean ones too) additive, empty ones folded.
_DETECT = ("fusion-detect-attention", *_CLEANUP, "fusion-additive-mask", _EMPTY)
# llvm-cpu cannot link a conversion of an integer to bf16: made through f32 (as PyTorch
# rounds it), on the CPU only (the GPU targets convert directly).
_CPU_BF16 = "fusion-bf16-via-f32"
# llvm-cpu keeps the rows of a producer fused into a softmax's dispatch on the stack, with
# no bound over a dynamic extent: such a softmax reads its input from memory.
_CPU_SOFTMAX = "fusion-softmax-input-in-memory"
# The head split and merge moved into the attention ops IREE lowers (or that are
# decomposed), and the reshapes left behind folded.
_TILE_AND_FUSE = ("fusion-tile-and-fuse", "canonicalize")
DEFAULT_PIPELINES: dict[str, tuple[str, ...]] = {
    "cpu": (
        _CPU_BF16,
        *_DETECT,
        *_TILE_AND_FUSE,
        _SAFE_HEAD_DIM,
        _GUARD,
        "fusion-find-softmax",
        _CPU_SOFTMAX,
    ),
    "cuda": (
        *_DETECT,
        *_TILE_AND_FUSE,
        _SAFE_HEAD_DIM,
        _GUARD,
        "fusion-find-softmax",
    ),
    "vulkan": (
        "fusion-additive-mask",
        _EMPTY,
        "fusion-decompose-attention",
        "fusion-find-softmax",
    ),
}


# attention="online-softmax": our FlashAttention-2 loop nest instead of IREE's op, on
# every target (it needs none of IREE's attention code generation).
# What the rewrite leaves to IREE's op (dynamic shapes) needs the same head-dim guard.
ONLINE_SOFTMAX_PIPELINE: tuple[str, ...] = (
    *_DETECT,
    "fusion-online-softmax",
    _SAFE_HEAD_DIM,
    _GUARD,
    "fusion-find-softmax",
)
ATTENTION_MODES = ("auto", "iree", "online-softmax")
# On the CPU, blocks sized to the batch (``online_softmax.blocks``: 256x256 or 128x128)
# run faster than the pass's 64x64 default (128x128 8%-61% faster, fewer dispatches per
# key block; B1 H8 D64 fp32, 2 threads: benchmarks/results/cpu_2threads.md and cpu.md).
_CPU_BLOCKS = (0, 0)


def online_softmax_pipeline(block_q: int, block_k: int) -> list[str]:
    """ONLINE_SOFTMAX_PIPELINE with these blocks (0: sized to the batch)."""
    blocks = f"fusion-online-softmax{{block-q={block_q} block-k={block_k}}}"
    return [blocks if p == "fusion-online-softmax" else p for p in ONLINE_SOFTMAX_PIPELINE]


# Vulkan: each fused attention becomes a generated SPIR-V kernel; what it cannot take is
# decomposed, as IREE's SPIR-V code generation cannot lower the attention op.
VULKAN_KERNEL_PIPELINE: tuple[str, ...] = (
    *_DETECT,
    "fusion-spirv-attention",
    *_TILE_AND_FUSE,
    "fusion-decompose-attention",
    "fusion-find-softmax",
)


def kernel_pipeline(arch: str) -> list[str]:
    """CUDA on Hopper: each fused attention becomes a generated kernel; what the kernel
    cannot take goes on through the CUDA pipeline's own passes."""
    return [
        *_DETECT,
        f"fusion-schedule{{arch={arch}}}",
        f"fusion-kernel-attention{{arch={arch}}}",
        *_TILE_AND_FUSE,
        _SAFE_HEAD_DIM,
        _GUARD,
        "fusion-find-softmax",
    ]


def default_pipeline(
    target: str, attention: str = "auto", kernel_arch: str | None = None
) -> list[str]:
    """Our passes for ``target``; ``attention`` picks who lowers the fused attention.

    "auto": on the CPU our online-softmax rewrite (faster than IREE 3.13's attention op
    there, benchmarks/results/cpu.md); on CUDA generated kernels when
    ``kernel_arch`` is set (e.g. "sm_90"), else IREE's op; on Vulkan generated SPIR-V
    kernels (what they cannot take is decomposed).
    "iree": IREE's attention op (decomposed where IREE computes it wrongly or cannot).
    """
    if attention not in ATTENTION_MODES:
        raise ValueError(
            f"unknown attention mode {attention!r}; expected one of: {', '.join(ATTENTION_MODES)}"
        )
    if target == "cpu" and attention in ("auto", "online-softmax"):
        return [_CPU_BF16, *online_softmax_pipeline(*_CPU_BLOCKS), _CPU_SOFTMAX]
    if attention == "online-softmax":
        return list(ONLINE_SOFTMAX_PIPELINE)
    if attention == "auto" and kernel_arch is not None and target == "cuda":
        return kernel_pipeline(kernel_arch)
    if attention == "auto" and target == "vulkan":
        return list(VULKAN_KERNEL_PIPELINE)
    return list(DEFAULT_PIPELINES[target])


def pass_names() -> list[str]:
    return sorted(_MODULES)


def is_registered(name: str) -> bool:
    return name in _MODULES


def get_pass(name: str) -> ModuleType:
    """The module implementing pass ``name``."""
    try:
        return importlib.import_module(_MODULES[name])
    except KeyError:
        raise KeyError(
            f"no fusion_compiler pass named {name!r}; registered: {', '.join(pass_names())}"
        ) from None


def summary(name: str) -> str:
    """The first line of the pass module's docstring, without the leading ``name:``."""
    lines = (get_pass(name).__doc__ or "").strip().splitlines()
    return lines[0].removeprefix(f"{name}:").strip() if lines else ""
