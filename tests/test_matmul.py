"""fusion-kernel-matmul: activations times a weight matrix (a transformer's projections and
MLP) become a generated sm_90 kernel that reads the weight where it lives.

No GPU here: each model is compiled for sm_90 to the fused stage, the kernel's spec is
read back from its dispatch and the kernel runs under Triton's interpreter against
PyTorch, bf16 too (``patch_interpreter`` mends the interpreter's bf16 products). On the
GPU, benchmarks/matmul_gpu.py and models_gpu.py compare every fp16 output with PyTorch's.
"""

from __future__ import annotations

import pytest
import torch
from conftest import kernel_specs, rel_error
from test_matvec import Projection, RightMatrix

import fusion_compiler as fc
from fusion_compiler.backends.triton.matmul_kernel import MARKER, MatmulSpec, run_interpreted

pytestmark = pytest.mark.slow  # compiles for sm_90 and runs kernels under the interpreter


def _specs(fused: fc.CompiledModule) -> list[MatmulSpec]:
    return kernel_specs(fused, MARKER, MatmulSpec)


class GatedMLP(torch.nn.Module):
    """Llama's MLP with its residual: three products around SiLU(gate) · up."""

    def __init__(self, d: int, f: int):
        super().__init__()
        self.gate = torch.nn.Linear(d, f, bias=False)
        self.up = torch.nn.Linear(d, f, bias=False)
        self.down = torch.nn.Linear(f, d, bias=False)

    def forward(self, x):
        return x + self.down(torch.nn.functional.silu(self.gate(x)) * self.up(x))


def _compile(model, x) -> fc.CompiledModule:
    return fc.compile(model, (x,), target="cuda", cuda_arch="sm_90", compile_to="fused")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_linear_over_a_batch_reads_the_weight_transposed_in_place(dtype) -> None:
    torch.manual_seed(0)
    model = Projection(96, 200).to(dtype).eval()
    x = torch.randn(3, 70, 96).to(dtype)
    (spec,) = _specs(_compile(model, x))
    assert (spec.m, spec.k, spec.n, spec.w_t) == (210, 96, 200, True)
    assert spec.out_dtype == {torch.float16: "f16", torch.bfloat16: "bf16"}[dtype]
    got = run_interpreted(spec, x.reshape(210, 96), model.linear.weight.detach())
    with torch.no_grad():
        want = model.double()(x.double()).reshape(210, 200)
    assert rel_error(got, want) < (3e-3 if dtype == torch.float16 else 2e-2)


def test_right_matrix_and_several_row_blocks() -> None:
    torch.manual_seed(0)
    model = RightMatrix(136, 72).half().eval()
    x = torch.randn(300, 136).half()
    (spec,) = _specs(_compile(model, x))
    assert (spec.m, spec.w_t) == (300, False)
    got = run_interpreted(spec, x, model.weight.detach())
    with torch.no_grad():
        want = model.double()(x.double())
    assert rel_error(got, want) < 3e-3


def test_gated_mlp_takes_three_kernels_and_the_bias_stays_after() -> None:
    mlp = GatedMLP(64, 128).half().eval()
    fused = _compile(mlp, torch.randn(2, 40, 64).half())
    assert [(s.m, s.k, s.n) for s in _specs(fused)] == [(80, 64, 128)] * 2 + [(80, 128, 64)]
    said = [str(r) for r in fused.remarks if "matrix product lowered" in str(r)]
    assert len(said) == 3, fused.remarks
    # a Linear with bias: the product is the kernel's, the bias added after it
    biased = Projection(64, 32, bias=True).half().eval()
    (spec,) = _specs(_compile(biased, torch.randn(5, 64).half()))
    assert (spec.m, spec.n) == (5, 32)


def test_rows_tma_cannot_read_stay_with_iree_and_say_why() -> None:
    fused = _compile(Projection(100, 30).half().eval(), torch.randn(4, 100).half())
    assert _specs(fused) == []
    said = [str(r) for r in fused.remarks if "matrix product left to IREE" in str(r)]
    assert said and "multiple of 8" in said[0], fused.remarks
