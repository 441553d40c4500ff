"""fusion_compiler's passes, by name.

Each pass lives in its own module with ``NAME``, a frozen ``Options`` dataclass and
``run(module, options)``. The registry imports a pass only when it is used, so listing
passes stays cheap. ``fusion-opt``, the driver, the tests and the README read it; which
passes each target runs is in ``fusion_compiler.targets``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

_MODULES: dict[str, str] = {
    "fusion-additive-mask": "fusion_compiler.passes.additive_mask",
    "fusion-bf16-via-f32": "fusion_compiler.passes.bf16_via_f32",
    "fusion-caller-storage": "fusion_compiler.passes.caller_storage",
    "fusion-decompose-attention": "fusion_compiler.passes.decompose_attention",
    "fusion-detect-attention": "fusion_compiler.passes.detect_attention",
    "fusion-expand-reshapes": "fusion_compiler.passes.expand_reshapes",
    "fusion-find-softmax": "fusion_compiler.passes.find_softmax",
    "fusion-fold-empty": "fusion_compiler.passes.fold_empty",
    "fusion-gather-slices": "fusion_compiler.passes.gather_slices",
    "fusion-guard-masked-rows": "fusion_compiler.passes.guard_masked_rows",
    "fusion-kernel-attention": "fusion_compiler.passes.kernel_attention",
    "fusion-kernel-matvec": "fusion_compiler.passes.kernel_matvec",
    "fusion-kernel-matmul": "fusion_compiler.passes.kernel_matmul",
    "fusion-kernel-concat": "fusion_compiler.passes.kernel_concat",
    "fusion-online-softmax": "fusion_compiler.passes.online_softmax",
    "fusion-private-destinations": "fusion_compiler.passes.private_destinations",
    "fusion-reduction-input-in-memory": "fusion_compiler.passes.reduction_input_in_memory",
    "fusion-schedule": "fusion_compiler.passes.schedule",
    "fusion-spirv-attention": "fusion_compiler.passes.spirv_attention",
    "fusion-tile-and-fuse": "fusion_compiler.passes.tile_and_fuse",
}


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
