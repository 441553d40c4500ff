"""Every mask spelling of benchmarks/mask_forms_gpu.py (causal in eight ways and with an
offset, padding in four, sliding windows in four, packed documents, chunked attention,
a prefix-LM mask, no mask) gives PyTorch's answer on the CPU and on Vulkan, on fresh
random inputs: the masks the sm_90 kernel computes or skips are checked on the GPU by
that benchmark, these on the targets this machine runs."""

from __future__ import annotations

import dataclasses
import sys

import pytest
import torch
import torch.nn.functional as F
from conftest import ANY_VULKAN, ROOT, rel_error
from test_spirv_attention import needs_glslang, needs_vulkan

import fusion_compiler as fc

sys.path.insert(0, str(ROOT / "benchmarks"))
import mask_forms_gpu as forms  # noqa: E402

pytestmark = pytest.mark.slow  # a compile per spelling and target

N, D = 1024, 32  # keys: two windows, chunks and documents of 512 each
SPELLINGS = [name for name in forms.SPELLINGS if "@" not in name]
TARGETS = {
    "cpu": dict(dtype=torch.float32, bound=1e-4, options={}, device="local-task"),
    "vulkan": dict(
        dtype=torch.float16, bound=3e-3, options={"vulkan_target": ANY_VULKAN}, device="vulkan"
    ),
}


def _spelling(name: str, dtype: torch.dtype) -> forms.Spelling:
    spelling = forms.SPELLINGS[name]
    return dataclasses.replace(
        spelling,
        b=2,
        h=2,
        n=N,
        d=D,
        nq=N // 4 if spelling.nq < spelling.n else N,
        pad=N // 2 if "half" in name else forms.PAD,
        dtype=dtype,
    )


@pytest.mark.parametrize(
    "target", ["cpu", pytest.param("vulkan", marks=[needs_glslang, needs_vulkan])]
)
@pytest.mark.parametrize("name", SPELLINGS)
def test_mask_spelling_gives_pytorchs_answer(name: str, target: str) -> None:
    facts = TARGETS[target]
    spelling = _spelling(name, facts["dtype"])
    torch.manual_seed(0)
    model = forms.Model(spelling).eval()
    module = fc.compile(
        model, example_args=forms._inputs(spelling, "cpu"), target=target, **facts["options"]
    )
    if target == "vulkan":  # every mask proven a band or computed in the shader
        assert not any("read from memory" in r.message for r in module.remarks), module.remarks
    run = fc.load(module, device=facts["device"])
    fresh = forms._inputs(spelling, "cpu")
    with torch.no_grad():
        want = F.scaled_dot_product_attention(
            *(x.double() for x in fresh[:3]), attn_mask=forms._allowed(spelling, fresh)
        )
    got = torch.as_tensor(run(*fresh))
    assert rel_error(got, want) < facts["bound"]
