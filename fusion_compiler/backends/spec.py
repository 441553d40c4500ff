"""What every kernel backend is given: one attention as a kernel sees it, and a binary.

A ``Problem`` fixes the attention itself (element types, sizes, head dims, the strided
views its operands are read through, the causal offset, the mask's kind, the scale). Each
backend extends it with its own typed choices: ``triton.spec.TritonSpec`` (tiles, warps,
split-KV, persistent programs, a mask computed in the kernel), ``vulkan.spec.VulkanSpec``
(keys per shared-memory block). A ``Kernel`` is a compiled binary and what launching it
needs. Nothing here imports a backend: this module is read without the compiler.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import ClassVar

# (SB, SH, H, SR, SC) of a strided operand: element (batch, row, col) at
# (batch // H) * SB + (batch % H) * SH + row * SR + col * SC. A stride is a number, or an
# expression of n_q and n_k (e.g. "n_q * 64") when a sequence length is dynamic.
Stride = int | str
View = tuple[Stride, Stride, int, Stride, Stride]


def product(*factors: Stride) -> Stride:
    """A stride times another: a number while every factor is one, else an expression."""
    numbers = [f for f in factors if isinstance(f, int)]
    value = 1
    for f in numbers:
        value *= f
    names = [f for f in factors if isinstance(f, str)]
    if not names:
        return value
    return " * ".join([*names, *([str(value)] if value != 1 else [])])


def contiguous_strides(sizes: list[Stride]) -> list[Stride]:
    """The strides of a row-major tensor of ``sizes`` (numbers or expressions)."""
    strides: list[Stride] = [1] * len(sizes)
    for i in reversed(range(len(sizes) - 1)):
        strides[i] = product(strides[i + 1], sizes[i + 1])
    return strides


def contiguous(rows: Stride, cols: Stride) -> View:
    """The view of a contiguous (batch, rows, cols) tensor."""
    return (product(rows, cols), 0, 1, cols, 1)


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One attention, as every kernel sees it: sizes and choices are all compile-time.

    A backend's spec adds its own fields and says how its kernel is bound and launched:
    ``pointers``, ``grid_for`` and ``block_m`` (query rows per program).
    """

    target: ClassVar[str]  # the HAL target its kernels are for: "cuda" | "vulkan"

    dtype: str  # element type of Q, K and V: f16 | bf16 | f32
    mask_dtype: str | None  # element type of a mask the kernel reads, None without one
    batch: int
    n_q: int  # -1: dynamic, read at run time
    n_k: int
    d: int
    dv: int
    views: tuple[View, ...]  # Q, K, V, mask, output
    causal_offset: int | None
    qk_scale: float  # scale · log2(e)
    out_dtype: str | None = None  # of the output, when not ``dtype`` (f32 in upcast models)
    kv_group: int = 1  # query heads per K/V head (GQA): K and V hold batch // kv_group
    # mask values at or below this swamp the score they are added to in the mask's type
    # (fp16: finfo.min): the logit is then the fill alone, as in PyTorch; None: the mask
    # holds no such fill (the kernel then skips the test)
    mask_swamps: float | None = None
    # the mask replaces the score where it is -inf (``masked_fill``), not added to it: a
    # NaN or inf score there is dropped
    mask_replaces: bool = False
    # keys < row + window_start are masked too (a sliding window; ``causal.Band``'s lower
    # bound); the kernels that take one skip the key blocks before it; None: no such bound
    window_start: int | None = None
    # where Q, K and V start in the tensors they are read from, in elements: slices of
    # one tensor (a fused QKV projection split in three) read in place, not copied
    offsets: tuple[int, int, int] = (0, 0, 0)

    def __post_init__(self) -> None:  # views read back from JSON are lists
        object.__setattr__(self, "views", tuple(tuple(v) for v in self.views))
        object.__setattr__(self, "offsets", tuple(self.offsets))

    @property
    def dynamic(self) -> bool:
        return self.n_q < 0 or self.n_k < 0

    def bounds_said(self) -> str:
        """What a remark says of the key bounds the kernel skips blocks by."""
        upper, lower = self.causal_offset, self.window_start
        if lower is None:
            return f", causal offset {upper}" if upper is not None else ""
        if upper is None:
            return f", keys before row{lower:+d} skipped"
        return f", sliding window of {upper - lower + 1} keys, causal offset {upper}"

    @property
    def pointers(self) -> list[str]:
        """The kernel's buffer parameters, in order (IREE binds them in this order)."""
        raise NotImplementedError

    def grid_for(self, n_q: int) -> tuple[int, int, int]:
        """The launch grid over ``n_q`` query rows."""
        raise NotImplementedError

    @property
    def grid(self) -> tuple[int, int, int]:
        """The launch grid of a static spec (a dynamic one: ``grid_for`` its n_q)."""
        return self.grid_for(self.n_q)

    def to_json(self) -> str:
        """The spec as JSON, its target included (``from_json`` reads it back)."""
        return json.dumps({"target": self.target, **asdict(self)}, sort_keys=True)


@dataclass
class MaskCode:
    """An attention's mask as code of the kernel's coordinates (``triton.mask``,
    ``vulkan.mask``): computed in the kernel from the tensors it starts from."""

    expr: str
    inputs: list = field(default_factory=list)  # the ir.Values of the tensors it reads
    types: list[str] = field(default_factory=list)  # their types, as the kernel names them
    # whether the mask computes -inf somewhere (a select or fill of it): such a mask
    # can empty whole tiles, which a block map then skips
    makes_neg_inf: bool = False
    # the kernel batches that see one mask: the mask reads the batch only as batch // g
    # (heads folded into the batch: g = H), or 0 where it does not read the batch
    batch_group: int = 1
    reads_rows: bool = True  # whether the mask varies with the query row
    # lines that set ``low`` and ``high``, the least and most it adds over a tile (a
    # block map's classes without every (row, key)); None: none are known
    bounds: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Kernel:
    name: str
    binary: bytes  # a cubin, or SPIR-V for target "vulkan"
    shared_bytes: int  # dynamic shared memory to request (0: none)
    threads: int
    source_hash: str
    target: str = "cuda"
    scratch_bytes: int = 0  # global scratch per program (TMA descriptors made on the GPU)
    # pointer parameters the kernel compiler adds after ours (Triton: global and profile
    # scratch)
    hidden_pointers: int = 0
