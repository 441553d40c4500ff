"""Bad input gets an error that says what was wrong, where, and what to do."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import tool
from models import SDPABlock

import fusion_compiler as fc

THIS_FILE = Path(__file__).name


@pytest.fixture(scope="module")
def sdpa_run():
    model = SDPABlock().eval()
    return fc.load(fc.compile(model, example_args=(torch.randn(2, 16, 64),)))


def test_wrong_shape_names_argument_and_expected_shape(sdpa_run) -> None:
    expected = r"argument 0 \(`x`\) .*\(2, 17, 64\).*expected \(2, 16, 64\) float32"
    with pytest.raises(fc.ArgumentError, match=expected):
        sdpa_run(torch.randn(2, 17, 64))


def test_wrong_dtype_names_argument_and_expected_dtype(sdpa_run) -> None:
    expected = r"argument 0 .*float16.*expected \(2, 16, 64\) float32"
    with pytest.raises(fc.ArgumentError, match=expected):
        sdpa_run(torch.randn(2, 16, 64).half())


def test_wrong_argument_count_and_type(sdpa_run) -> None:
    x = torch.randn(2, 16, 64)
    with pytest.raises(fc.ArgumentError, match="takes 1 tensor argument"):
        sdpa_run(x, x)
    with pytest.raises(fc.ArgumentError, match=r"argument 0 \(`x`\) is a list"):
        sdpa_run([1.0, 2.0])


class _UsesFFT(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        spectrum = torch.fft.fft(x).real  # UNSUPPORTED-LINE
        return torch.softmax(x, -1) + spectrum


def test_unsupported_op_names_op_and_model_source_line() -> None:
    line = next(
        i
        for i, text in enumerate(Path(__file__).read_text().splitlines(), 1)
        if "UNSUPPORTED-LINE" in text and "torch.fft" in text
    )
    with pytest.raises(fc.UnsupportedOpError) as info:
        fc.compile(_UsesFFT(), example_args=(torch.randn(2, 8),))
    ((name, location),) = info.value.ops
    # its result is complex: refused where the complex values enter, with what to do
    assert name.startswith("torch.aten.fft_fft, a torch.complex64 result")
    assert location.split(":")[:2] == [str(Path(__file__)), str(line)]
    assert f"{THIS_FILE}:{line}" in str(info.value)


def test_malformed_mlir_text_gives_line_and_column() -> None:
    text = "func.func @f() -> i32 {\n  %0 = arith.constant 1 : i32\n  return %1 : i32\n}\n"
    with pytest.raises(fc.MLIRParseError) as info:
        fc.compile(text)
    (diag,) = info.value.diagnostics
    assert diag.location.endswith(":3:10") and "undeclared SSA value" in diag.message


def test_fusion_compile_reports_malformed_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @f() {\n  return %x : f32\n}\n")
    result = tool("fusion-compile", str(bad), "-o", str(tmp_path / "m.vmfb"), check=False)
    assert result.returncode == 1
    assert f"{bad}:2:" in result.stderr and "Traceback" not in result.stderr


def test_failing_pipeline_saves_reproducer_that_fails_the_same_way(tmp_path: Path) -> None:
    # Verifying the torch backend contract on IREE's Linalg fails: a real failing pass.
    pipeline = "builtin.module(fusion-find-softmax,torch-verify-linalg-on-tensors-backend-contract)"
    with pytest.raises(fc.CompileError) as info:
        fc.compile(
            SDPABlock(), example_args=(torch.randn(1, 4, 64),), pipeline=pipeline, dump_ir=tmp_path
        )
    command = info.value.reproducer
    assert command.startswith("fusion-opt ") and "--pass-pipeline=" in command
    assert "reproduce with" in str(info.value)
    repro = subprocess.run(
        command,
        shell=True,
        capture_output=True,
        text=True,
        env={"PATH": str(Path(sys.executable).parent)},
    )
    assert repro.returncode == 1
    assert "failed" in repro.stderr


def test_unknown_target_and_stage() -> None:
    with pytest.raises(ValueError, match="unknown target 'tpu'"):
        fc.compile("module {}", target="tpu")
    with pytest.raises(ValueError, match="unknown stage 'lowered'"):
        fc.compile("module {}", compile_to="lowered")


def test_module_without_example_inputs() -> None:
    with pytest.raises(fc.FusionCompilerError, match="needs example inputs"):
        fc.compile(SDPABlock())


def test_example_inputs_the_model_cannot_take_name_the_model_line() -> None:
    with pytest.raises(fc.FusionCompilerError) as info:
        fc.compile(SDPABlock(), example_args=(torch.randn(2, 16, 48),))  # the block takes 64
    message = str(info.value)
    assert "could not trace SDPABlock with example_args ((2, 16, 48) float32)" in message
    assert "models.py:" in message and "Check the example inputs" in message
    assert "Traceback" not in message


def test_missing_files_and_unknown_device(tmp_path: Path) -> None:
    with pytest.raises(fc.FusionCompilerError, match="no such file"):
        fc.compile(str(tmp_path / "absent.pt2"))
    with pytest.raises(fc.FusionCompilerError, match="unknown model file type"):
        (tmp_path / "m.onnx.mlir.txt").write_text("")
        fc.compile(tmp_path / "m.onnx.mlir.txt")
    with pytest.raises(fc.FusionCompilerError, match="no such file"):
        fc.load(tmp_path / "absent.vmfb")
    with pytest.raises(fc.FusionCompilerError, match="not a loadable IREE module"):
        fc.load(b"not a module")
    module = fc.compile(SDPABlock().eval(), example_args=(torch.randn(1, 4, 64),))
    with pytest.raises(fc.FusionCompilerError, match="cannot open IREE device 'tpu'"):
        fc.load(module, device="tpu")
