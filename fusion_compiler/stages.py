"""The stages a model passes through, shared by the API, the CLIs, IR dumps and tests."""

from __future__ import annotations

import enum


class Stage(str, enum.Enum):
    """A point in the pipeline: our front end and passes, then IREE's phases, then bytecode."""

    TORCH = "torch"  # torch dialect, as the FX importer produced it
    LINALG = "linalg"  # Linalg on tensors, after IREE's torch input pipeline
    FUSED = "fused"  # after fusion_compiler's pass pipeline
    ABI = "abi"
    PREPROCESSING = "preprocessing"
    GLOBAL_OPTIMIZATION = "global-optimization"
    DISPATCH_CREATION = "dispatch-creation"
    FLOW = "flow"
    STREAM = "stream"
    EXECUTABLE_SOURCES = "executable-sources"
    EXECUTABLE_CONFIGURATIONS = "executable-configurations"
    EXECUTABLE_TARGETS = "executable-targets"
    HAL = "hal"
    VM = "vm"
    VMFB = "vmfb"  # the serialised IREE module

    @classmethod
    def parse(cls, name: str | Stage) -> Stage:
        try:
            return cls(name)
        except ValueError:
            names = ", ".join(s.value for s in cls)
            raise ValueError(f"unknown stage {name!r}; expected one of: {names}") from None

    @property
    def iree_phase(self) -> str | None:
        """The iree-compile phase that ends at this stage, if IREE produces it."""
        if self is Stage.LINALG:
            return "input"
        if self in IREE_STAGES:
            return self.value
        return None

    @property
    def index(self) -> int:
        return list(Stage).index(self)


IREE_STAGES: tuple[Stage, ...] = tuple(
    s for s in Stage if Stage.ABI.index <= s.index <= Stage.VM.index
)
