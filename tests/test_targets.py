"""CUDA and Vulkan modules compile on a machine without a GPU; running them is GPU-marked."""

import shutil

import pytest
import torch
from conftest import rel_error
from models import ExplicitAttentionBlock, SDPABlock

import fusion_compiler as fc


@pytest.mark.parametrize("model", [SDPABlock, ExplicitAttentionBlock])
def test_cuda_compiles(model) -> None:
    module = fc.compile(model().eval(), example_args=(torch.randn(1, 16, 64),), target="cuda")
    assert module.vmfb and module.stats["dispatches"] > 0


@pytest.mark.skipif(shutil.which("glslangValidator") is None, reason="no glslangValidator")
@pytest.mark.parametrize("model", [SDPABlock, ExplicitAttentionBlock])
def test_vulkan_compiles_attention_as_a_generated_kernel(model) -> None:
    # SDPA's attention (IREE's own lowering of it) and the written-out one alike
    module = fc.compile(model().eval(), example_args=(torch.randn(1, 16, 64),), target="vulkan")
    assert module.vmfb and module.stats["attention_ops"] == 1
    assert any("generated Vulkan kernel" in r.message for r in module.remarks)


@pytest.mark.parametrize("model", [SDPABlock, ExplicitAttentionBlock])
def test_vulkan_iree_mode_compiles_attention_decomposed(model) -> None:
    # IREE 3.13's SPIR-V code generation cannot lower iree_linalg_ext.attention, so
    # attention="iree" on Vulkan decomposes it (SDPA's included).
    module = fc.compile(
        model().eval(), example_args=(torch.randn(1, 16, 64),), target="vulkan", attention="iree"
    )
    assert module.vmfb and module.stats["attention_ops"] == 0


def test_vulkan_attention_op_failure_names_the_model_line() -> None:
    with pytest.raises(fc.CompileError) as info:
        fc.compile(
            SDPABlock().eval(),
            example_args=(torch.randn(1, 16, 64),),
            target="vulkan",
            pipeline="builtin.module(fusion-find-softmax)",
        )
    assert info.value.step.startswith("IREE phase")
    assert any("models.py:" in d.location for d in info.value.diagnostics)
    assert "iree-compile" in info.value.reproducer


@pytest.mark.gpu
def test_cuda_runs_and_matches_pytorch() -> None:
    model = SDPABlock(causal=True).eval()
    run = fc.load(
        fc.compile(model, example_args=(torch.randn(2, 64, 64),), target="cuda"), device="cuda"
    )
    x = torch.randn(2, 64, 64)
    with torch.no_grad():
        assert rel_error(run(x), model(x)) < 1e-4
