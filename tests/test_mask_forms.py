"""Every mask spelling of benchmarks/mask_forms_gpu.py (causal in eight ways and with an
offset, padding in four, sliding windows in four, packed documents, chunked attention,
a prefix-LM mask, no mask) gives PyTorch's answer on the CPU and on Vulkan, on fresh
random inputs: the masks the sm_90 kernel computes or skips are checked on the GPU by
that benchmark, these on the targets this machine runs. Five spellings share a module,
each on its own inputs and with its own number of heads."""

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


def _spelling(name: str, dtype: torch.dtype, h: int = 2) -> forms.Spelling:
    spelling = forms.SPELLINGS[name]
    return dataclasses.replace(
        spelling,
        b=2,
        h=h,
        n=N,
        d=D,
        nq=N // 4 if spelling.nq < spelling.n else N,
        pad=N // 2 if "half" in name else forms.PAD,
        dtype=dtype,
    )


# Spellings compiled side by side into one module: a compile cost a hundred times the
# run, and IREE compiles the dispatches they share once (six spellings on the CPU: 12.4 s
# one by one, 4.0 s together).
GROUP = 5
GROUPS = [SPELLINGS[i : i + GROUP] for i in range(0, len(SPELLINGS), GROUP)]


class _SideBySide(torch.nn.Module):
    """The spellings' models, each on its own inputs (``counts`` of them, in order)."""

    def __init__(self, models: list[torch.nn.Module], counts: list[int]):
        super().__init__()
        self.models = torch.nn.ModuleList(models)
        self.counts = counts

    def forward(self, *args):
        outputs, start = [], 0
        for model, count in zip(self.models, self.counts, strict=True):
            outputs.append(model(*args[start : start + count]))
            start += count
        return tuple(outputs)


@pytest.mark.parametrize(
    "target", ["cpu", pytest.param("vulkan", marks=[needs_glslang, needs_vulkan])]
)
@pytest.mark.parametrize("names", GROUPS, ids=["+".join(g) for g in GROUPS])
def test_mask_spellings_give_pytorchs_answer(names: list[str], target: str) -> None:
    facts = TARGETS[target]
    # heads of their own: attentions of one shape side by side share their output's
    # buffer on the online-softmax path (test_wrong_answers: a known wrong answer)
    spellings = [_spelling(name, facts["dtype"], h=2 + i) for i, name in enumerate(names)]
    torch.manual_seed(0)
    models = [forms.Model(spelling).eval() for spelling in spellings]
    examples = [forms._inputs(spelling, "cpu") for spelling in spellings]
    module = fc.compile(
        _SideBySide(models, [len(x) for x in examples]),
        example_args=tuple(x for example in examples for x in example),
        target=target,
        **facts["options"],
    )
    assert module.stats["attention_ops"] == len(names), module.remarks
    if target == "vulkan":  # every mask proven a band or computed in the shader
        assert not any("read from memory" in r.message for r in module.remarks), module.remarks
    run = fc.load(module, device=facts["device"])
    fresh = [forms._inputs(spelling, "cpu") for spelling in spellings]
    got = run(*(x for inputs in fresh for x in inputs))
    for name, spelling, inputs, result in zip(names, spellings, fresh, got, strict=True):
        with torch.no_grad():
            want = F.scaled_dot_product_attention(
                *(x.double() for x in inputs[:3]), attn_mask=forms._allowed(spelling, inputs)
            )
        assert rel_error(torch.as_tensor(result), want) < facts["bound"], name
