"""fusion-kernel-matmul: activations times a weight matrix (a transformer's projections and
MLP) become a generated sm_90 kernel that reads the weight where it lives.

No GPU here: each model is compiled for sm_90 to the fused stage, the kernel's spec is
read back from its dispatch and the kernel runs under Triton's interpreter against
PyTorch, bf16 too (``patch_interpreter`` mends the interpreter's bf16 products). On the
GPU, benchmarks/matmul_gpu.py and models_gpu.py compare every fp16 output with PyTorch's.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from conftest import kernel_specs, rel_error
from test_matvec import Projection, RightMatrix

import fusion_compiler as fc
from fusion_compiler.backends.triton import epilogues, matmul_kernel
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


def test_gated_mlp_in_three_kernels_with_silu_up_and_the_residual_in_epilogues() -> None:
    """Llama's MLP: up's product; gate's with SiLU(gate) · up computed before its store
    (reading up's result); down's with the residual added before its store."""
    torch.manual_seed(0)
    mlp = GatedMLP(64, 128).half().eval()
    x = torch.randn(2, 40, 64).half()
    fused = _compile(mlp, x)
    up, gate, down = sorted(_specs(fused), key=lambda s: (s.epilogue is not None, s.k))
    assert [(s.m, s.k, s.n) for s in (up, gate, down)] == [(80, 64, 128)] * 2 + [(80, 128, 64)]
    assert up.epilogue is None and gate.epilogue_inputs == down.epilogue_inputs == ("f16",)
    said = [str(r) for r in fused.remarks if "computed before its store" in str(r)]
    assert len(said) == 2, fused.remarks
    rows = x.reshape(80, 64)
    weights = {name: getattr(mlp, name).weight.detach() for name in ("gate", "up", "down")}
    hidden = run_interpreted(gate, rows, weights["gate"], run_interpreted(up, rows, weights["up"]))
    got = run_interpreted(down, hidden, weights["down"], x)
    with torch.no_grad():
        want = mlp.double()(x.double()).reshape(80, 64)
    assert rel_error(got, want) < 3e-3


class Residual(torch.nn.Module):
    """x + act(x W^T + b): GPT-2's and BERT's projections with what follows them."""

    def __init__(self, d: int, act: str = "none"):
        super().__init__()
        self.linear = torch.nn.Linear(d, d)
        self.act = act

    def forward(self, x):
        y = self.linear(x)
        if self.act == "new_gelu":  # GPT-2's, written out
            y = 0.5 * y * (1 + torch.tanh(0.7978845608 * (y + 0.044715 * torch.pow(y, 3.0))))
        elif self.act in ("gelu", "tanh"):  # BERT's and ViT's; the tanh approximation
            y = torch.nn.functional.gelu(y, approximate="none" if self.act == "gelu" else "tanh")
        return x + y


@pytest.mark.parametrize(
    ("dtype", "act"),
    [
        (torch.float16, "none"),
        (torch.bfloat16, "none"),
        (torch.float16, "new_gelu"),
        (torch.float16, "gelu"),
        (torch.bfloat16, "tanh"),
    ],
)
def test_bias_activation_and_residual_computed_before_the_store(dtype, act) -> None:
    """The elementwise ops after a product (bias, an activation, the residual add, through
    the reshape back to (B, N, D)) are the kernel's: one dispatch in all."""
    torch.manual_seed(0)
    model = Residual(96, act).to(dtype).eval()
    x = torch.randn(3, 40, 96).to(dtype)
    flow = fc.compile(model, (x,), target="cuda", cuda_arch="sm_90", compile_to="flow")
    assert flow.stats["dispatches"] == 1, flow.remarks
    (spec,) = _specs(flow)
    assert spec.epilogue is not None and len(spec.epilogue_inputs) == 2
    bias = model.linear.bias.detach()
    # the epilogue's inputs, in its order: the bias (96,) and the residual (3, 40, 96)
    inputs = [bias, x] if "L0 + (" in spec.epilogue and _first_is_bias(spec) else [x, bias]
    got = run_interpreted(spec, x.reshape(120, 96), model.linear.weight.detach(), *inputs)
    with torch.no_grad():
        want = model.double()(x.double()).reshape(120, 96)
    assert rel_error(got, want) < (3e-3 if dtype == torch.float16 else 2e-2)


class DownProjection(torch.nn.Module):
    """r + GELU(x W^T + b) with a long K and few outputs: Llama's down projection at few
    rows, which fills too few tiles without split-K."""

    def __init__(self, k: int, n: int):
        super().__init__()
        self.linear = torch.nn.Linear(k, n)

    def forward(self, x, r):
        return r + torch.nn.functional.gelu(self.linear(x))


def _interpreted_down_projection(spec: MatmulSpec, model, x, r):
    """(the interpreted kernel's output, PyTorch's in float64) of ``DownProjection``;
    the bias and the residual passed in the order the epilogue reads them."""
    bias = model.linear.bias.detach()
    inputs = [bias, r] if "tl.load(L0 + (cols" in spec.epilogue else [r, bias]
    rows = x.shape[0] * x.shape[1]
    got = run_interpreted(spec, x.reshape(rows, -1), model.linear.weight.detach(), *inputs)
    with torch.no_grad():
        want = model.double()(x.double(), r.double()).reshape(rows, -1)
    return got, want


def test_few_tiles_over_a_long_k_split_it_and_sum_with_the_epilogue() -> None:
    """Two output tiles (136 columns: the second ragged) over K = 4104 (the last share
    ragged too): four programs share each tile's K, writing f32 partial products that a
    second kernel adds before the bias, GELU and residual."""
    torch.manual_seed(0)
    model = DownProjection(4104, 136).half().eval()
    x, r = torch.randn(1, 72, 4104).half(), torch.randn(1, 72, 136).half()
    flow = fc.compile(model, (x, r), target="cuda", cuda_arch="sm_90", compile_to="flow")
    (spec,) = _specs(flow)
    assert (spec.m, spec.k, spec.n, spec.split_k) == (72, 4104, 136, 4), spec
    assert flow.stats["dispatches"] == 2, flow.remarks  # the partial products, their sum
    assert any("split-K 4" in str(r) for r in flow.remarks), flow.remarks
    assert rel_error(*_interpreted_down_projection(spec, model, x, r)) < 3e-3


def test_persistent_programs_take_every_tile_with_its_epilogue() -> None:
    """Three persistent programs over 5 x 4 tiles (the last row and column ragged, the
    last round two programs' only): every tile once, with its bias, GELU and residual."""
    torch.manual_seed(0)
    model = DownProjection(160, 200).half().eval()
    x, r = torch.randn(1, 300, 160).half(), torch.randn(1, 300, 200).half()
    flow = fc.compile(model, (x, r), target="cuda", cuda_arch="sm_90", compile_to="flow")
    (spec,) = _specs(flow)
    spec = dataclasses.replace(spec, block_m=64, block_n=64, programs=3)
    assert spec.grid == (3, 1, 1)
    assert rel_error(*_interpreted_down_projection(spec, model, x, r)) < 3e-3


def test_the_epilogue_loads_are_issued_before_the_k_loop() -> None:
    """The bias and the residual are loaded before the product's K loop, so that their
    latency overlaps it (each once, however often the expression reads them); the
    interpreted kernel above runs this source."""
    model = Residual(96, "gelu").half().eval()
    flow = fc.compile(
        model, (torch.randn(3, 40, 96).half(),), target="cuda", cuda_arch="sm_90", compile_to="flow"
    )
    (spec,) = _specs(flow)
    text = matmul_kernel.source(spec)
    loop = text.index("for step in range(0, PER_SPLIT, BLOCK_K)")
    assert text.count("tl.load(") == 2 and "tl.load(" not in text[loop:]
    assert text.index("e0 = tl.load(") < text.index("e1 = tl.load(") < loop


def test_a_load_that_reads_the_product_stays_after_the_loop() -> None:
    code = "tl.load(L0 + rows) + tl.load(L1 + (x > 0).to(tl.int32)) * tl.load(L0 + rows)"
    assert epilogues.hoisted_loads(code) == (
        "e0 + tl.load(L1 + (x > 0).to(tl.int32)) * e0",
        ["tl.load(L0 + rows)"],
    )


def test_over_large_tiles_only_a_bias_is_loaded_before_the_loop() -> None:
    """A whole tile of an input held across the K loop costs 128 registers a thread at
    128x256: there only loads of one row or column are issued early."""
    code = "tl.load(L0 + rows[:, None] * 8 + cols[None, :]) + tl.load(L1 + cols[None, :])"
    assert epilogues.hoisted_loads(code, whole_tiles=False) == (
        "tl.load(L0 + rows[:, None] * 8 + cols[None, :]) + e0",
        ["tl.load(L1 + cols[None, :])"],
    )
    spec = MatmulSpec(
        dtype="f16", out_dtype="f16", m=8192, n=1024, k=256, w_t=True,
        epilogue="x * tl.load(L0 + rows[:, None] * 1024 + cols[None, :])",
        epilogue_inputs=("f16",),
    )  # fmt: skip
    text = matmul_kernel.source(spec)  # 128x256 tiles
    assert "tl.load(" in text[text.index("for step in range(0, PER_SPLIT, BLOCK_K)") :]


def _first_is_bias(spec: MatmulSpec) -> bool:
    """Whether the epilogue reads L0 at one coordinate (the bias), not three."""
    start = spec.epilogue.index("tl.load(L0 + ")
    read = spec.epilogue[start : spec.epilogue.index(", mask=", start)]
    return read.count("rows[") == 1 and "* 3840" not in read


def test_rows_tma_cannot_read_stay_with_iree_and_say_why() -> None:
    fused = _compile(Projection(100, 30).half().eval(), torch.randn(4, 100).half())
    assert _specs(fused) == []
    said = [str(r) for r in fused.remarks if "matrix product left to IREE" in str(r)]
    assert said and "multiple of 8" in said[0], fused.remarks


class Compared(torch.nn.Module):
    """A product's bias, then a compare: the epilogue stops at the last float."""

    def __init__(self, d: int):
        super().__init__()
        self.linear = torch.nn.Linear(d, d)

    def forward(self, x):
        return self.linear(x) > 0


@pytest.mark.parametrize("rows", [48, 1])  # the product kernel and the one-row kernel
def test_an_epilogue_ends_at_the_last_float_result(rows) -> None:
    """A compare (an i1 result) after the bias stays with IREE; the bias is the kernel's."""
    model = Compared(64).half().eval()
    fused = _compile(model, torch.randn(2 if rows > 1 else 1, rows, 64).half())
    said = [str(r) for r in fused.remarks if "computed before its store" in str(r)]
    assert len(said) == 1 and "the 1 elementwise op(s)" in said[0], fused.remarks
    assert "arith.cmpf" in fused.mlir


def test_bf16_epilogue_rounds_to_nearest_even_as_pytorch() -> None:
    """The interpreter's bf16 arithmetic (patch_interpreter) rounds each op to nearest
    even, as the GPU and PyTorch do: exact products of small integers plus a bias that
    needs rounding give PyTorch's bits."""
    torch.manual_seed(0)
    model = Projection(64, 64, bias=True).bfloat16().eval()
    with torch.no_grad():
        model.linear.weight.copy_(torch.randint(-2, 3, (64, 64)).bfloat16())
        model.linear.bias.copy_((torch.rand(64) * 0.03).bfloat16())
    x = torch.randint(-2, 3, (2, 40, 64)).bfloat16()
    (spec,) = _specs(_compile(model, x))
    assert spec.epilogue_inputs == ("bf16",)
    rows = x.reshape(80, 64)
    got = run_interpreted(spec, rows, model.linear.weight.detach(), model.linear.bias.detach())
    with torch.no_grad():
        want = model(x).reshape(80, 64)
    assert torch.equal(got, want)


def test_a_cubin_cuobjdump_cannot_read_is_a_clear_error() -> None:
    """The stack (register spills) of a kernel is read from its cubin with Triton's
    cuobjdump; bytes that are no cubin give an error that says so, not a traceback from
    subprocess."""
    from fusion_compiler.backends.spec import Kernel
    from fusion_compiler.backends.triton.kernel import stack_bytes
    from fusion_compiler.errors import FusionCompilerError

    with pytest.raises(FusionCompilerError, match="cuobjdump failed.*not one cuobjdump reads"):
        stack_bytes(Kernel("truncated", b"not a cubin", 0, 0, "key"))
