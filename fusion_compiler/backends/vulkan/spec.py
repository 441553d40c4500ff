"""The Vulkan attention shader's spec: the attention (``backends.spec.Problem``) and the
shader's own choices: the score function as GLSL and the keys per shared-memory block."""

from __future__ import annotations

from dataclasses import dataclass

from fusion_compiler.backends.spec import Problem

WORKGROUP = 64  # query rows per workgroup, one per invocation


def block_n(d: int, dv: int) -> int:
    """Keys per shared-memory block: K and V blocks in float32 within 16 KiB (Vulkan's
    guaranteed minimum of shared memory)."""
    return max(4, min(32, 4096 // (d + dv)))


@dataclass(frozen=True)
class Capabilities:
    """What a Vulkan target's devices have besides 32-bit types (``targets.VULKAN_CAPABILITIES``):
    the shader uses nothing else."""

    int64: bool = True  # 64-bit integers (shaderInt64)
    fp64: bool = True  # 64-bit floats (shaderFloat64)
    b16: bool = True  # fp16 and int16 values, 16-bit storage buffers
    b8: bool = True  # int8 values, 8-bit storage buffers


EVERYTHING = Capabilities()  # NVIDIA's and AMD's targets


@dataclass(frozen=True, kw_only=True)
class VulkanSpec(Problem):
    """One attention and the compute shader generated for it."""

    target = "vulkan"

    score: str  # the score region: a GLSL expression of ``x``, base 2
    block_n: int  # keys per shared-memory block (``block_n``)
    # the mask computed in the shader: a GLSL expression of batch, row, key and the
    # buffers l0, l1, ... (their GLSL element types in ``mask_inputs``), instead of read
    mask_expr: str | None = None
    mask_inputs: tuple[str, ...] = ()
    # the target's ``Capabilities``: without int64 the mask is printed with 32-bit
    # integers; without 16- or 8-bit storage, buffers of such elements are read as words
    int64: bool = True
    b16: bool = True
    b8: bool = True

    def __post_init__(self) -> None:  # read back from JSON: lists
        super().__post_init__()
        object.__setattr__(self, "mask_inputs", tuple(self.mask_inputs))

    @property
    def block_m(self) -> int:
        return WORKGROUP

    @property
    def pointers(self) -> list[str]:
        """The shader's bindings, in order: the mask read (Q again without one) or the
        tensors a computed mask reads; the sizes only while dynamic."""
        masks = [f"L{i}" for i in range(len(self.mask_inputs))] if self.mask_expr else ["Mask"]
        return ["Q", "K", "V", *masks, *(["Sizes"] if self.dynamic else []), "Out"]

    def grid_for(self, n_q: int) -> tuple[int, int, int]:
        return (-(-n_q // WORKGROUP), self.batch, 1)
