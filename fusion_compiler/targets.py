"""Compilation targets by name: IREE flags for the compiler, the device for the runtime."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    name: str
    flags: tuple[str, ...]
    device: str  # the runtime device fc.load uses by default


def get_target(name: str, *, cuda_arch: str = "sm_80", cpu: str = "host") -> Target:
    """``cpu``, ``cuda`` or ``vulkan``. IREE 3.13 has no Hopper entry, so CUDA defaults to sm_80."""
    if name == "cpu":
        return Target(
            "cpu",
            (
                "--iree-hal-target-device=local",
                "--iree-hal-local-target-device-backends=llvm-cpu",
                f"--iree-llvmcpu-target-cpu={cpu}",
            ),
            "local-task",
        )
    if name == "cuda":
        return Target(
            "cuda", ("--iree-hal-target-device=cuda", f"--iree-cuda-target={cuda_arch}"), "cuda"
        )
    if name == "vulkan":
        return Target(
            "vulkan",
            ("--iree-hal-target-device=vulkan", "--iree-vulkan-target=ampere"),
            "vulkan",
        )
    raise ValueError(f"unknown target {name!r}; expected one of: cpu, cuda, vulkan")
