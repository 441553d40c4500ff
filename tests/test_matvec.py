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


class DecodeMLP(torch.nn.Module):
    """Llama's MLP on one token, with its residual: three one-row products."""

    def __init__(self, d: int, f: int):
        super().__init__()
        self.gate = torch.nn.Linear(d, f, bias=False)
        self.up = torch.nn.Linear(d, f, bias=False)
        self.down = torch.nn.Linear(f, d, bias=False)

    def forward(self, x):
        return x + self.down(torch.nn.functional.silu(self.gate(x)) * self.up(x))


def test_one_token_products_compute_what_follows_them_before_their_store() -> None:
    """A decoding step's MLP: SiLU(gate) · up in gate's kernel (reading up's result) and
    the residual in down's: three dispatches, no elementwise one."""
    torch.manual_seed(0)
    mlp = DecodeMLP(64, 192).half().eval()
    x = torch.randn(1, 1, 64).half()
    flow = fc.compile(mlp, (x,), target="cuda", cuda_arch="sm_90", compile_to="flow")
    assert flow.stats["dispatches"] == 3, flow.remarks
    up, gate, down = sorted(_specs(flow), key=lambda s: (s.epilogue is not None, s.k))
    assert up.epilogue is None and gate.epilogue_inputs == down.epilogue_inputs == ("f16",)
    weights = {name: getattr(mlp, name).weight.detach() for name in ("gate", "up", "down")}
    row = x.reshape(64)
    hidden = run_interpreted(gate, row, weights["gate"], run_interpreted(up, row, weights["up"]))
    got = run_interpreted(down, hidden, weights["down"], x)
    with torch.no_grad():
        want = mlp.double()(x.double()).reshape(64)
    assert rel_error(got, want) < 3e-3
