"""The sm_90 concatenation kernel (``concat.py``): its spec, its compile step, and a run
under Triton's interpreter for the tests (``standalone``)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from fusion_compiler.backends import spec as backend_spec
from fusion_compiler.backends.triton import standalone

# the concatenations' dispatches carry their spec as JSON under this attribute
MARKER = "fusion.concat_kernel"
BLOCK = 4096  # elements a program copies


@dataclass(frozen=True, kw_only=True)
class ConcatSpec:
    """out (outer, a_row + b_row) = A (outer, a_row) next to B (outer, b_row)."""

    dtype: str
    outer: int
    a_row: int
    b_row: int
    num_warps: int = 4
    arch: int = 90

    @property
    def grid(self) -> tuple[int, int, int]:
        return (-(-(self.a_row + self.b_row) // BLOCK), self.outer, 1)

    @property
    def output(self) -> tuple[tuple[int, ...], str]:
        return (self.outer, self.a_row + self.b_row), self.dtype

    def constants(self) -> dict[str, object]:
        return {"A_ROW": self.a_row, "B_ROW": self.b_row, "BLOCK": BLOCK}

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def compile_concat(spec: ConcatSpec) -> backend_spec.Kernel:
    """The cubin of ``spec``'s kernel, from the cache when it was built before."""
    pointers = {"A": spec.dtype, "B": spec.dtype, "Out": spec.dtype}
    options = {"num_warps": spec.num_warps, "num_stages": 1}
    return standalone.compile_standalone("concat", spec, pointers, options)


def run_interpreted(spec: ConcatSpec, a, b):  # tensors -> tensor
    """The kernel under Triton's interpreter: a (outer, a_row), b (outer, b_row)."""
    return standalone.run_interpreted("concat", spec, a, b)
