"""fusion-kernel-matvec: one row times a weight matrix (a decoding step's projections)
becomes a generated sm_90 kernel that reads the weight where it lives.

No GPU here: each model is compiled for sm_90 to the fused stage, the kernel's spec is
read back from its dispatch and the kernel runs under Triton's interpreter against
PyTorch.
"""

from __future__ import annotations

import pytest
import torch
from conftest import kernel_specs, rel_error

import fusion_compiler as fc
from fusion_compiler.backends.triton.matvec_kernel import MARKER, MatvecSpec, run_interpreted

pytestmark = pytest.mark.slow  # compiles for sm_90 and runs kernels under the interpreter


def _specs(fused: fc.CompiledModule) -> list[MatvecSpec]:
    return kernel_specs(fused, MARKER, MatvecSpec)


class Projection(torch.nn.Module):
    """A Linear (PyTorch's (N, K) weight), on one token as a decoding step has them."""

    def __init__(self, k: int, n: int, bias: bool = False):
        super().__init__()
        self.linear = torch.nn.Linear(k, n, bias=bias)

    def forward(self, x):
        return self.linear(x)


class RightMatrix(torch.nn.Module):
    """x @ W with W held (K, N): read along N."""

    def __init__(self, k: int, n: int):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(k, n) * 0.05)

    def forward(self, x):
        return x @ self.weight


@pytest.mark.parametrize(("k", "n"), [(96, 200), (300, 40)])
@pytest.mark.parametrize("dtype", [torch.float16])
def test_linear_on_one_token_reads_the_weight_transposed_in_place(k, n, dtype) -> None:
    torch.manual_seed(0)
    model = Projection(k, n).to(dtype).eval()
    x = torch.randn(1, 1, k).to(dtype)
    fused = fc.compile(model, (x,), target="cuda", cuda_arch="sm_90", compile_to="fused")
    (spec,) = _specs(fused)
    assert (spec.k, spec.n, spec.sk, spec.sn, spec.out_dtype) == (k, n, 1, k, "f16")
    got = run_interpreted(spec, x.reshape(k), model.linear.weight.detach())
    with torch.no_grad():
        want = model.double()(x.double()).reshape(n)
    assert rel_error(got, want) < 3e-3


def test_right_matrix_is_read_along_its_rows() -> None:
    torch.manual_seed(0)
    model = RightMatrix(130, 70).half().eval()
    x = torch.randn(1, 130).half()
    fused = fc.compile(model, (x,), target="cuda", cuda_arch="sm_90", compile_to="fused")
    (spec,) = _specs(fused)
    assert (spec.sk, spec.sn) == (70, 1)
    got = run_interpreted(spec, x.reshape(130), model.weight.detach())
    with torch.no_grad():
        want = model.double()(x.double()).reshape(70)
    assert rel_error(got, want) < 3e-3


def test_more_than_one_row_stays_with_iree() -> None:
    model = Projection(64, 64).half().eval()
    x = torch.randn(2, 1, 64).half()
    fused = fc.compile(model, (x,), target="cuda", cuda_arch="sm_90", compile_to="fused")
    assert _specs(fused) == []
