"""Models compiled for the CPU through the API and the CLI match PyTorch on fresh inputs."""

from pathlib import Path

import pytest
import torch
from conftest import rel_error, tool
from models import ExplicitAttentionBlock, MultiheadAttentionBlock, SDPABlock

import fusion_compiler as fc
from fusion_compiler import targets
from fusion_compiler.targets import get_target

# (model factory, fused attention ops after our passes, softmaxes left in the IR)
MODELS = {
    "mha": (MultiheadAttentionBlock, 1, 0),
    "sdpa": (lambda: SDPABlock(causal=False), 1, 0),
    "sdpa_causal": (lambda: SDPABlock(causal=True), 1, 0),
    "explicit": (ExplicitAttentionBlock, 1, 0),
}


def _model(name: str) -> torch.nn.Module:
    torch.manual_seed(hash(name) % 1000)
    return MODELS[name][0]().eval()


def _check(run, model: torch.nn.Module, shape: tuple[int, ...]) -> None:
    x = torch.randn(shape)  # fresh: not the example the model was exported with
    with torch.no_grad():
        want = model(x)
    assert rel_error(run(x), want) < 1e-4
    assert rel_error(run(x.numpy()), want) < 1e-4  # numpy in, torch out


@pytest.mark.parametrize("name", MODELS)
def test_api_compile_and_run(name: str) -> None:
    model = _model(name)
    shape = (2, 37, 64)
    module = fc.compile(model, example_args=(torch.randn(shape),), target="cpu")
    _, attention_ops, softmax_ops = MODELS[name]
    assert module.stage is fc.Stage.VMFB
    assert module.stats["attention_ops"] == attention_ops
    assert module.stats["softmax_ops"] == softmax_ops
    assert module.stats["dispatches"] > 0
    _check(fc.load(module, device="local-task"), model, shape)


@pytest.mark.parametrize("name", MODELS)
def test_cli_compiles_saved_pt2(name: str, tmp_path: Path) -> None:
    model = _model(name)
    shape = (1, 20, 64)
    program = torch.export.export(model, (torch.randn(shape),))
    torch.export.save(program, tmp_path / "model.pt2")
    vmfb = tmp_path / "m.vmfb"
    result = tool(
        "fusion-compile",
        str(tmp_path / "model.pt2"),
        "--target",
        "cpu",
        "-o",
        str(vmfb),
        "--dump-ir",
        str(tmp_path / "ir"),
    )
    assert "attention_ops=" in result.stderr
    _check(fc.load(str(vmfb)), model, shape)
    _check(fc.load(vmfb.read_bytes()), model, shape)


def test_exported_program_and_pt2_path_through_api(tmp_path: Path) -> None:
    model = _model("explicit")
    shape = (3, 9, 64)
    program = torch.export.export(model, (torch.randn(shape),))
    _check(fc.load(fc.compile(program)), model, shape)
    torch.export.save(program, tmp_path / "m.pt2")
    module = fc.compile(str(tmp_path / "m.pt2"))
    module.save(tmp_path / "m.vmfb")
    _check(fc.load(tmp_path / "m.vmfb"), model, shape)


def test_dump_ir_writes_every_stage_in_order(tmp_path: Path) -> None:
    fc.compile(_model("explicit"), example_args=(torch.randn(1, 8, 64),), dump_ir=tmp_path)
    names = sorted(p.name for p in tmp_path.glob("*.mlir") if not p.name.startswith("repro"))
    numbers = [int(n[:2]) for n in names]
    assert numbers == list(range(len(names)))
    stages = [n[3:-5] for n in names]
    ours = [p.partition("{")[0] for p in targets.pipeline("cpu")]
    assert stages[: len(ours) + 3] == ["torch", "linalg", *ours, "fused"]
    iree = [s.value for s in fc.Stage if fc.Stage.ABI.index <= s.index <= fc.Stage.VM.index]
    assert stages[len(ours) + 3 :] == iree
    assert "torch.aten.softmax" in (tmp_path / "00-torch.mlir").read_text()


@pytest.mark.parametrize("stage", ["torch", "linalg", "fused", "flow"])
def test_compile_to_stops_at_stage(stage: str, tmp_path: Path) -> None:
    module = fc.compile(_model("sdpa"), example_args=(torch.randn(1, 8, 64),), compile_to=stage)
    assert module.stage.value == stage and module.vmfb is None
    marker = {
        "torch": "torch.aten",
        "linalg": "iree_linalg_ext.attention",
        "fused": "fusion.online_softmax",  # the CPU's default: our FlashAttention-2 loops
        "flow": "flow.dispatch",
    }[stage]
    assert marker in module.mlir
    with pytest.raises(fc.FusionCompilerError, match="no bytecode"):
        fc.load(module)


def test_saved_stage_keeps_every_constant_for_iree_compile(tmp_path: Path) -> None:
    """``mod.mlir`` elides the weights to stay readable; ``mod.save`` writes them, so the
    file compiles with iree-compile and runs to PyTorch's numbers."""
    model = _model("explicit")
    fused = fc.compile(model, example_args=(torch.randn(1, 8, 64),), compile_to="fused")
    source, module = fused.save(tmp_path / "fused.mlir"), tmp_path / "m.vmfb"
    flags = get_target("cpu").flags
    tool("iree-compile", "--compile-from=input", str(source), "-o", str(module), *flags)
    x = torch.randn(1, 8, 64)
    with torch.no_grad():
        assert rel_error(fc.load(module)(x), model(x)) < 1e-5


def test_linalg_mlir_text_compiles_and_runs() -> None:
    text = """
    func.func @scaled_softmax(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
      %e = tensor.empty() : tensor<4x16xf32>
      %y = linalg.softmax dimension(1) ins(%x : tensor<4x16xf32>)
             outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
      return %y : tensor<4x16xf32>
    }
    """
    module = fc.compile(text)
    assert module.stats["softmax_ops"] == 1
    run = fc.load(module)
    x = torch.randn(4, 16)
    assert rel_error(run["scaled_softmax"](x), torch.softmax(x, 1)) < 1e-5
    with pytest.raises(fc.ArgumentError, match=r"argument 0 .* expected \(4, 16\) float32"):
        run["scaled_softmax"](torch.randn(4, 15))


class _Attention(torch.nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.softmax(q @ k.transpose(-1, -2), -1) @ v


def test_same_example_tensor_for_several_arguments_keeps_them_distinct() -> None:
    # torch.export alone would specialise on the aliasing and read only one argument.
    x = torch.randn(2, 5, 8)
    run = fc.load(fc.compile(_Attention(), example_args=(x, x, x)))
    q, k, v = torch.randn(3, 2, 5, 8)
    assert rel_error(run(q, k, v), _Attention()(q, k, v)) < 1e-5
    with pytest.raises(fc.ArgumentError, match=r"takes 3 tensor argument\(s\)"):
        run(q, k)


def test_submitted_calls_run_in_order_without_waiting() -> None:
    model = SDPABlock(causal=True).eval()
    run = fc.load(fc.compile(model, example_args=(torch.randn(2, 32, 64),)))
    inputs = [torch.randn(2, 32, 64) for _ in range(4)]
    pending = [run["main"].submit(x) for x in inputs]  # queued back to back
    with torch.no_grad():
        for call, x in zip(pending, inputs, strict=True):
            assert rel_error(call.result(), model(x)) < 1e-4


class _Reduces(torch.nn.Module):
    def forward(self, x: torch.Tensor, scale: torch.Tensor):
        return (x * scale).sum(), x * scale


@pytest.mark.parametrize("as_numpy", [False, True])
def test_zero_dim_tensors_keep_their_shape(as_numpy: bool) -> None:
    """A 0-d result (a loss, a sum) comes back 0-d, and a 0-d numpy argument is taken as
    0-d; both came out 1-d."""
    x, scale = torch.randn(5), torch.randn(())
    run = fc.load(fc.compile(_Reduces(), (x, scale)))
    x, scale = torch.randn(5), torch.randn(())
    total, scaled = run(x, scale.numpy() if as_numpy else scale)
    want_total, want_scaled = _Reduces()(x, scale)
    assert total.shape == want_total.shape == ()
    assert rel_error(total, want_total) < 1e-5 and rel_error(scaled, want_scaled) < 1e-6


class _Float64(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.randn(6, dtype=torch.float64))

    def forward(self, x: torch.Tensor, y: torch.Tensor):
        return x * self.w.float(), (y * self.w).softmax(0)


def test_float64_stays_float64() -> None:
    """float64 inputs, constants and results are float64, as in PyTorch (IREE's default
    demotion to float32 made the inputs float32 and failed on a float64 buffer)."""
    model = _Float64()
    run = fc.load(fc.compile(model, (torch.randn(6), torch.randn(6, dtype=torch.float64))))
    x, y = torch.randn(6), torch.randn(6, dtype=torch.float64)
    got, want = run(x, y), model(x, y)
    assert [t.dtype for t in got] == [torch.float32, torch.float64]
    assert rel_error(got[0], want[0]) < 1e-6 and rel_error(got[1], want[1]) < 1e-12
