"""Compilation targets by name: IREE flags for the compiler, the device for the runtime."""

from __future__ import annotations

from dataclasses import dataclass

from fusion_compiler.errors import TargetError


@dataclass(frozen=True)
class Target:
    name: str
    flags: tuple[str, ...]
    device: str  # the runtime device fc.load uses by default
    kernel_arch: str | None = None  # generated attention kernels for this arch (sm_90)


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
        )
    raise ValueError(f"unknown target {name!r}; expected one of: cpu, cuda, vulkan")
