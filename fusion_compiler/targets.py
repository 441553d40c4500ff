"""Compilation targets by name: IREE flags for the compiler, the device for the runtime,
and the pipeline of our passes each target runs (``pipeline``)."""

from __future__ import annotations

from dataclasses import dataclass

from fusion_compiler.errors import TargetError


@dataclass(frozen=True)
class Target:
    name: str
    flags: tuple[str, ...]
    device: str  # the runtime device fc.load uses by default
    kernel_arch: str | None = None  # generated attention kernels for this arch (sm_90)
    vulkan_target: str | None = None  # IREE's SPIR-V target (Vulkan)


# Architectures that get generated attention kernels; IREE 3.13 has no Hopper target, so
# the rest of the module is compiled for sm_80 (PTX the driver runs on Hopper).
KERNEL_ARCHS = ("sm_90", "sm_90a")
# IREE's SPIR-V target for what is not a generated kernel. "pascal": NVIDIA without
# cooperative matrices. With "ampere" IREE lowers fp16 matmuls to cooperative-matrix
# SPIR-V, and the H200's driver (580) refuses to build those pipelines
# (vkCreateComputePipelines: VK_ERROR_UNKNOWN, benchmarks/results/experiments.md); under
# "pascal" the five example blocks ran correctly in fp16 and fp32 there.
VULKAN_TARGET = "pascal"
# float64 stays float64, as in PyTorch. IREE demotes it to float32 by default, which
# made a model's float64 inputs float32 ones and failed on float64 constants (the
# demotion leaves their dense_resource values float64). Vulkan keeps the demotion: the
# SPIR-V targets need not support float64.
KEEP_F64 = "--iree-input-demote-f64-to-f32=false"


# What IREE 3.13 compiles CUDA for (--iree-cuda-target; each checked by compiling a module
# with iree-compile): any other sm_ fails late, in IREE's executable configuration, with
# a dump of the IR; a name IREE does not know aborts the process. KERNEL_ARCHS get
# generated attention kernels, the rest of their module is compiled for sm_80.
CUDA_ARCHS = (
    *("sm_60", "sm_61", "sm_62", "sm_70", "sm_72", "sm_75", "sm_80", "sm_86", "sm_87", "sm_89"),
    *KERNEL_ARCHS,
    *("sm_120", "sm_121"),
)
# IREE 3.13's --iree-vulkan-target names that compile (tried one by one: an unknown name
# crashes IREE's compiler with SIGSEGV rather than an error).
VULKAN_TARGETS = (
    *("pascal", "volta", "turing", "ampere", "ada"),
    *("rdna1", "rdna2", "rdna3", "rdna4", "cdna1", "cdna2", "cdna3"),
    *("valhall", "valhall1", "valhall2", "valhall3", "valhall4", "adreno"),
    "vp_android_baseline_2022",
)
# The word a Vulkan device's name holds where a target's code is right on it. A target
# fixes the subgroup size IREE's reductions are written for (32 for NVIDIA's names): on
# another device the module runs and its reductions are wrong (Mesa's llvmpipe, subgroups
# of 8: a ViT's output off by 105% under "pascal", right under vp_android_baseline_2022,
# which uses no subgroup operations and so runs anywhere).
VULKAN_VENDORS = {
    **dict.fromkeys(("pascal", "volta", "turing", "ampere", "ada"), "NVIDIA"),
    **dict.fromkeys(("rdna1", "rdna2", "rdna3", "rdna4", "cdna1", "cdna2", "cdna3"), "AMD"),
    **dict.fromkeys(("valhall", "valhall1", "valhall2", "valhall3", "valhall4"), "Mali"),
    "adreno": "Adreno",
}
# What each SPIR-V target's devices compute in and store, as IREE 3.13 describes them:
# the ``compute`` and ``storage`` fields of the target's #iree_gpu.target, read from
# ``iree-compile --iree-hal-target-device=vulkan --iree-vulkan-target=T
# --compile-to=executable-targets`` of a function adding two i64 tensors. A device of a
# target without int64 or fp64 (phones: valhall, adreno, vp_android_baseline_2022) may
# lack shaderInt64/shaderFloat64, and a shader that uses them fails at pipeline creation.
_DESKTOP = ("fp64|fp32|fp16|int64|int32|int16|int8", "b64|b32|b16|b8")
VULKAN_CAPABILITIES = {
    **dict.fromkeys(("pascal", "volta", "turing", "ampere", "ada"), _DESKTOP),
    **dict.fromkeys(("rdna1", "rdna2", "rdna3", "rdna4", "cdna1", "cdna2", "cdna3"), _DESKTOP),
    **dict.fromkeys(
        ("valhall", "valhall1", "valhall2", "valhall3", "valhall4"),
        ("fp32|fp16|int32|int16|int8", "b64|b32|b16|b8"),
    ),
    "adreno": ("fp32|fp16|int32|int16|int8", "b64|b32|b16"),
    "vp_android_baseline_2022": ("fp32|int32", "b32"),
}
# the words each vendor's device names hold (older drivers leave the vendor out)
VENDOR_NAMES = {
    "NVIDIA": ("nvidia", "geforce", "quadro", "tesla", "titan"),
    "AMD": ("amd", "radeon"),
    "Mali": ("mali",),
    "Adreno": ("adreno",),
}
# IREE's names for some of them (architectures and products), taken as they are.
_IREE_CUDA_NAMES = (
    *("pascal", "volta", "turing", "ampere", "ada", "a100"),
    *("rtx3070", "rtx3070ti", "rtx3080", "rtx3080ti", "rtx3090", "rtx3090ti"),
    *("rtx4060", "rtx4070", "rtx4080", "rtx4090"),
)


def get_target(
    name: str,
    *,
    cuda_arch: str = "sm_80",
    cpu: str = "host",
    vulkan_target: str = VULKAN_TARGET,
) -> Target:
    """``cpu``, ``cuda`` or ``vulkan``. IREE 3.13 has no Hopper entry, so CUDA defaults to sm_80.

    ``cuda_arch="sm_90"``: fused attentions become kernels generated for Hopper; IREE
    compiles everything else for sm_80.
    """
    if name == "cpu":
        return Target(
            "cpu",
            (
                "--iree-hal-target-device=local",
                "--iree-hal-local-target-device-backends=llvm-cpu",
                f"--iree-llvmcpu-target-cpu={cpu}",
                KEEP_F64,
            ),
            "local-task",
        )
    if name == "cuda":
        if cuda_arch not in CUDA_ARCHS + _IREE_CUDA_NAMES:
            raise TargetError("CUDA architecture", cuda_arch, CUDA_ARCHS)
        kernel_arch = cuda_arch if cuda_arch in KERNEL_ARCHS else None
        iree_arch = "sm_80" if kernel_arch else cuda_arch
        flags = ("--iree-hal-target-device=cuda", f"--iree-cuda-target={iree_arch}", KEEP_F64)
        return Target("cuda", flags, "cuda", kernel_arch)
    if name == "vulkan":
        if vulkan_target not in VULKAN_TARGETS:
            raise TargetError("Vulkan target", vulkan_target, VULKAN_TARGETS)
        return Target(
            "vulkan",
            ("--iree-hal-target-device=vulkan", f"--iree-vulkan-target={vulkan_target}"),
            "vulkan",
            vulkan_target=vulkan_target,
        )
    raise ValueError(f"unknown target {name!r}; expected one of: cpu, cuda, vulkan")


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
# A concatenation of slices of one tensor (RoPE's rotate_half) read in place, so that
# IREE fuses it with its consumers.
_SLICES = "fusion-gather-slices"
# Attention found, every mask of it (SDPA's boolean ones too) additive, empty ones folded.
_DETECT = ("fusion-detect-attention", *_CLEANUP, "fusion-additive-mask", _EMPTY, _SLICES)
# llvm-cpu cannot link a conversion of an integer to bf16, and llvm-cpu and CUDA drop a
# rounding to bf16 extended again in its dispatch: rounded in integer ops (as PyTorch
# rounds), last: the integer ops it writes would hide a bf16 scale constant from detection.
_BF16 = "fusion-bf16-via-f32"
# llvm-cpu keeps the rows of a producer fused into a reduction's dispatch, and read there
# by more than one op, on the stack, with no bound over a dynamic extent: such a
# reduction (a softmax's, a log-softmax's) reads its input from memory.
_CPU_ROWS = "fusion-reduction-input-in-memory"
# The head split and merge moved into the attention ops IREE lowers (or that are
# decomposed), and the reshapes left behind folded.
_TILE_AND_FUSE = ("fusion-tile-and-fuse", "canonicalize")
# CUDA: results and transient memory in buffers the caller (torch) allocated: IREE's own
# allocation and free of them each call cost 0.1 ms and more (the driver's stream-ordered
# allocations, off, are slower still).
_CALLER_STORAGE = "fusion-caller-storage"
# First: a reshape to a shape computed at run time that regroups dims (bmm's and einsum's
# views at dynamic lengths) as an expand or a collapse, which IREE 3.13 compiles right
# (it miscompiled the reshape on the CPU) and detection sees through.
_RESHAPES = "fusion-expand-reshapes"
# A tensor computed from no input and updated in place (a scatter into an arange) behind
# a barrier: IREE 3.13 merges the copies it makes for two such updates into one buffer.
_PRIVATE = "fusion-private-destinations"
DEFAULT_PIPELINES: dict[str, tuple[str, ...]] = {
    "cpu": (
        *_DETECT,
        *_TILE_AND_FUSE,
        _SAFE_HEAD_DIM,
        _GUARD,
        "fusion-find-softmax",
        _CPU_ROWS,
        _BF16,
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
        _SLICES,
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


def spirv_attention(vulkan_target: str) -> str:
    """fusion-spirv-attention with what ``vulkan_target``'s devices have: 64-bit integers
    and floats, 16-bit types and storage (fp16, int16, b16), 8-bit ones (int8, b8)."""
    compute, storage = (set(field.split("|")) for field in VULKAN_CAPABILITIES[vulkan_target])
    has = {
        "int64": "int64" in compute,
        "fp64": "fp64" in compute,
        "b16": {"fp16", "int16", "b16"} <= compute | storage,
        "b8": {"int8", "b8"} <= compute | storage,
    }
    return f"fusion-spirv-attention{{{' '.join(f'{k}={int(v)}' for k, v in has.items())}}}"


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
    """CUDA on Hopper: each fused attention and each matrix-vector product becomes a
    generated kernel; what the kernels cannot take goes on through the CUDA pipeline's
    own passes."""
    return [
        *_DETECT,
        f"fusion-schedule{{arch={arch}}}",
        f"fusion-kernel-attention{{arch={arch}}}",
        f"fusion-kernel-matvec{{arch={arch}}}",
        f"fusion-kernel-matmul{{arch={arch}}}",
        f"fusion-kernel-concat{{arch={arch}}}",
        *_TILE_AND_FUSE,
        _SAFE_HEAD_DIM,
        _GUARD,
        "fusion-find-softmax",
    ]


def pipeline(
    target: str,
    attention: str = "auto",
    kernel_arch: str | None = None,
    vulkan_target: str = VULKAN_TARGET,
) -> list[str]:
    """Our passes for ``target``; ``attention`` picks who lowers the fused attention.

    "auto": on the CPU our online-softmax rewrite (faster than IREE 3.13's attention op
    there, benchmarks/results/cpu.md); on CUDA generated kernels when
    ``kernel_arch`` is set (e.g. "sm_90"), else IREE's op; on Vulkan generated SPIR-V
    kernels using only what ``vulkan_target``'s devices have (what they cannot take is
    decomposed).
    "iree": IREE's attention op (decomposed where IREE computes it wrongly or cannot).
    """
    if attention not in ATTENTION_MODES:
        raise ValueError(
            f"unknown attention mode {attention!r}; expected one of: {', '.join(ATTENTION_MODES)}"
        )
    if target == "cpu" and attention in ("auto", "online-softmax"):
        return [_RESHAPES, *online_softmax_pipeline(*_CPU_BLOCKS), _CPU_ROWS, _BF16, _PRIVATE]
    if attention == "online-softmax":
        passes = list(ONLINE_SOFTMAX_PIPELINE)
    elif attention == "auto" and kernel_arch is not None and target == "cuda":
        passes = kernel_pipeline(kernel_arch)
    elif attention == "auto" and target == "vulkan":
        kernels = spirv_attention(vulkan_target)
        passes = [kernels if p == "fusion-spirv-attention" else p for p in VULKAN_KERNEL_PIPELINE]
    else:
        passes = list(DEFAULT_PIPELINES[target])
    if target == "cuda":
        return [_RESHAPES, *passes, _BF16, _PRIVATE, _CALLER_STORAGE]
    return [_RESHAPES, *passes, _PRIVATE]
