"""Bad input to the CLIs: one line naming what was wrong and where, a non-zero exit, no
traceback; the API raises a FusionCompilerError subclass for the same input."""

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import BIN, ROOT, tool

import fusion_compiler as fc
from fusion_compiler import inputs
from fusion_compiler.errors import (
    EmptyModuleError,
    InputFileError,
    OutputPathError,
    PipelineError,
    TargetError,
)
from fusion_compiler.tools import compile as compile_tool
from fusion_compiler.tools import opt as opt_tool

# A torch-dialect softmax: the front end's import is skipped, so each compile is quick.
SOFTMAX = """func.func @main(%x: !torch.vtensor<[3,5],f32>) -> !torch.vtensor<[3,5],f32> {
  %int1 = torch.constant.int 1
  %none = torch.constant.none
  %y = torch.aten.softmax.int %x, %int1, %none
      : !torch.vtensor<[3,5],f32>, !torch.int, !torch.none -> !torch.vtensor<[3,5],f32>
  return %y : !torch.vtensor<[3,5],f32>
}
"""


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "softmax.mlir"
    path.write_text(SOFTMAX)
    return path


def _fails(result: subprocess.CompletedProcess, *named: str, lines: int | None = 1) -> str:
    """Checks the CLI failed without a traceback, naming ``named``; returns stderr."""
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    for text in named:
        assert text in result.stderr
    if lines is not None:
        assert len(result.stderr.strip().splitlines()) == lines, result.stderr
    return result.stderr


def _with_stdin(name: str, data: bytes, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([str(BIN / name), *args], input=data, capture_output=True)
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode(errors="replace")
    )


# 1. -o into a missing or read-only folder


@pytest.mark.parametrize("name", ["fusion-compile", "fusion-opt"])
def test_output_into_missing_folder(name: str, model: Path, tmp_path: Path) -> None:
    output = tmp_path / "absent" / "out.vmfb"
    _fails(tool(name, str(model), "-o", str(output), check=False), str(output), "absent")
    assert not output.parent.exists()


@pytest.mark.parametrize("name", ["fusion-compile", "fusion-opt"])
def test_output_into_read_only_folder(name: str, model: Path, tmp_path: Path) -> None:
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("this user (root) writes into read-only folders")
        output = folder / "out.vmfb"
        _fails(tool(name, str(model), "-o", str(output), check=False), str(output))
    finally:
        folder.chmod(0o755)


@pytest.mark.parametrize("main", [compile_tool.main, opt_tool.main], ids=["compile", "opt"])
def test_output_into_unwritable_folder_fails_before_compiling(
    main, model: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    # root ignores permission bits: the folder is made unwritable to the check itself
    folder = tmp_path / "read-only"
    folder.mkdir()
    writable = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: Path(p) != folder and writable(p, mode))
    output = folder / "out.vmfb"
    assert main([str(model), "-o", str(output)]) == 1
    err = capsys.readouterr().err
    assert str(output) in err and "permission denied" in err
    assert not output.exists()
    with pytest.raises(OutputPathError) as info:
        inputs.check_output_file(output)
    assert info.value.path == str(output)


# 2. --dump-ir naming a file


def test_dump_ir_names_a_file(model: Path, tmp_path: Path) -> None:
    taken = tmp_path / "notes.txt"
    taken.write_text("mine")
    args = (str(model), "--compile-to", "linalg", "--dump-ir", str(taken))
    _fails(tool("fusion-compile", *args, check=False), str(taken), "--dump-ir")
    assert taken.read_text() == "mine"
    with pytest.raises(OutputPathError) as info:
        fc.compile(SOFTMAX, compile_to="linalg", dump_ir=taken)
    assert info.value.path == str(taken)


# 3. unknown passes and bad options


@pytest.mark.parametrize(
    "element",
    [
        "fusion-detect-attention{bogus=1}",
        "fusion-online-softmax{block-q=abc}",
        "no-such-pass",
        "canonicalize{bogus=1}",
        "func.func(fusion-find-softmax)",
    ],
)
def test_bad_pipeline_element_is_named(element: str, model: Path) -> None:
    pipeline = f"builtin.module({element})"
    _fails(tool("fusion-opt", str(model), f"--pass-pipeline={pipeline}", check=False), element)
    args = (str(model), "--compile-to", "fused", "--pipeline", pipeline)
    _fails(tool("fusion-compile", *args, check=False), element)
    with pytest.raises(PipelineError) as info:
        fc.compile(SOFTMAX, compile_to="fused", pipeline=pipeline)
    assert info.value.element == element


def test_unknown_option_names_the_options_the_pass_has(model: Path) -> None:
    pipeline = "--pass-pipeline=builtin.module(fusion-online-softmax{q=1})"
    _fails(tool("fusion-opt", str(model), pipeline, check=False), "'q'", "block-q", "block-k")


# 4. input that is not UTF-8


def test_input_not_utf8(tmp_path: Path) -> None:
    data = SOFTMAX.encode() + b"// caf\xe9\n"
    path = tmp_path / "latin1.mlir"
    path.write_bytes(data)
    line = f"line {SOFTMAX.count(chr(10)) + 1}, column 7"
    for name in ("fusion-compile", "fusion-opt"):
        _fails(tool(name, str(path), check=False), str(path), "0xe9", line)
    _fails(_with_stdin("fusion-opt", data, "-"), "<stdin>", "0xe9", line)
    with pytest.raises(InputFileError) as info:
        fc.compile(path)
    assert info.value.path == str(path)


# 5. files that are not models: ONNX, a folder, torch.save, pickle, misnamed archives


def _not_models(tmp_path: Path) -> dict[str, Path]:
    files = {
        "onnx": tmp_path / "model.onnx",
        "folder": tmp_path / "folder",
        "torch.save": tmp_path / "weights.pt",
        "torch.save as .pt2": tmp_path / "weights.pt2",
        "pickle": tmp_path / "data.pkl",
        "text as .pt2": tmp_path / "text.pt2",
    }
    files["onnx"].write_bytes(b"\x08\x07\x12\x07pytorch\x1a\x032.0")  # ModelProto's header
    files["folder"].mkdir()
    torch.save({"w": torch.ones(2)}, files["torch.save"])
    torch.save({"w": torch.ones(2)}, files["torch.save as .pt2"])
    files["pickle"].write_bytes(pickle.dumps([1, 2]))
    files["text as .pt2"].write_text(SOFTMAX)
    return files


@pytest.mark.parametrize(
    "kind", ["onnx", "folder", "torch.save", "torch.save as .pt2", "pickle", "text as .pt2"]
)
def test_file_that_is_not_a_model_says_what_it_is(kind: str, tmp_path: Path) -> None:
    path = _not_models(tmp_path)[kind]
    _fails(tool("fusion-compile", str(path), check=False), str(path), ".pt2", "torch.export.save")
    with pytest.raises(InputFileError) as info:
        fc.compile(path)
    assert info.value.path == str(path)
    with pytest.raises(InputFileError):
        fc.compile(str(path))  # a path as text, too


@pytest.mark.parametrize("kind", ["onnx", "folder", "torch.save", "pickle"])
def test_fusion_opt_takes_mlir_text_only(kind: str, tmp_path: Path) -> None:
    path = _not_models(tmp_path)[kind]
    _fails(tool("fusion-opt", str(path), check=False), str(path), "MLIR text")


def test_exported_program_archive_is_named_for_what_it_is(tmp_path: Path) -> None:
    program = torch.export.export(torch.nn.Softmax(dim=-1), (torch.randn(2, 3),))
    archive = tmp_path / "model.zip"
    torch.export.save(program, tmp_path / "model.pt2")
    (tmp_path / "model.pt2").rename(archive)
    _fails(tool("fusion-compile", str(archive), check=False), str(archive), "model.pt2")
    _fails(tool("fusion-opt", str(archive), check=False), str(archive), "--compile-to torch")


# 6. a CUDA architecture IREE does not compile for


def test_unknown_cuda_arch_is_short_and_lists_the_supported(model: Path) -> None:
    args = (str(model), "--target", "cuda", "--cuda-arch", "sm_999")
    err = _fails(tool("fusion-compile", *args, check=False), "sm_999", "sm_80", "sm_90")
    assert len(err) < 500
    with pytest.raises(TargetError) as info:
        fc.compile(SOFTMAX, target="cuda", cuda_arch="h100")  # a name IREE 3.13 aborts on
    assert info.value.value == "h100"
    assert {"sm_80", "sm_86", "sm_89", "sm_90"} <= set(info.value.supported)


def test_unknown_vulkan_target_is_short_and_lists_the_supported(model: Path) -> None:
    args = (str(model), "--target", "vulkan", "--vulkan-target", "bogus")
    err = _fails(tool("fusion-compile", *args, check=False), "bogus", "pascal", "rdna3")
    assert len(err) < 500
    with pytest.raises(TargetError) as info:
        fc.compile(SOFTMAX, target="vulkan", vulkan_target="hopper")  # IREE 3.13 segfaults
    assert info.value.value == "hopper"


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89", "sm_90"])
def test_supported_cuda_archs_still_compile(arch: str) -> None:
    # executable-configurations: where IREE rejects a CUDA target it does not know
    stage = fc.Stage.EXECUTABLE_CONFIGURATIONS
    module = fc.compile(SOFTMAX, target="cuda", cuda_arch=arch, compile_to=stage)
    assert module.stage is stage


# 7. --verify-diagnostics: MLIR's "see current operation" note is not an expectation


VERIFIER_ERROR = """func.func @f(%a: tensor<4xf32>) -> tensor<5xf32> {
  // expected-error @+1 {{are cast incompatible}}
  %0 = "tensor.cast"(%a) : (tensor<4xf32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}
"""


def test_verify_diagnostics_needs_no_expected_op_note(tmp_path: Path) -> None:
    path = tmp_path / "cast.mlir"
    path.write_text(VERIFIER_ERROR)
    result = tool("fusion-opt", str(path), "--verify-diagnostics", check=False)
    assert result.returncode == 0, result.stderr
    unchecked = tool("fusion-opt", str(path), check=False)  # without: MLIR's note, as mlir-opt
    assert unchecked.returncode == 1 and f"{path}:3:8: note:" in unchecked.stderr
    unmet = tmp_path / "unmet.mlir"
    unmet.write_text(VERIFIER_ERROR.replace("are cast incompatible", "something else"))
    missed = tool("fusion-opt", str(unmet), "--verify-diagnostics", check=False)
    _fails(missed, f"{unmet}:2:", "unexpected error", lines=2)
    assert "unexpected note" not in missed.stderr


# 8. dump_ir removes only the files it wrote


def test_dump_ir_keeps_files_it_did_not_write(model: Path, tmp_path: Path) -> None:
    dump = tmp_path / "ir"
    dump.mkdir()
    (dump / "01-notes.mlir").write_text("mine")
    with pytest.raises(OutputPathError) as info:
        fc.compile(SOFTMAX, compile_to="linalg", dump_ir=dump)
    assert info.value.path == str(dump) and "01-notes.mlir" in info.value.problem
    assert (dump / "01-notes.mlir").read_text() == "mine"
    _fails(tool("fusion-compile", str(model), "--dump-ir", str(dump), check=False), str(dump))
    assert (dump / "01-notes.mlir").read_text() == "mine"


def test_dump_ir_replaces_its_own_earlier_dump_only(tmp_path: Path) -> None:
    dump = tmp_path / "ir"
    fc.compile(SOFTMAX, compile_to="linalg", dump_ir=dump)
    assert sorted(p.name for p in dump.glob("*.mlir")) == ["00-torch.mlir", "01-linalg.mlir"]
    (dump / "keep.mlir").write_text("mine")
    (dump / "notes.txt").write_text("mine")
    fc.compile(SOFTMAX, compile_to="torch", dump_ir=dump)  # one file now: 01 is stale
    assert sorted(p.name for p in dump.iterdir() if not p.name.startswith(".")) == [
        "00-torch.mlir",
        "keep.mlir",
        "notes.txt",
    ]


# 9. nothing to compile


@pytest.mark.parametrize("text", ["", "module {}", "module {\n  util.global private @g : i32\n}"])
def test_module_without_function(text: str, tmp_path: Path) -> None:
    with pytest.raises(EmptyModuleError):
        fc.compile(text)
    path = tmp_path / "empty.mlir"
    path.write_text(text)
    _fails(tool("fusion-compile", str(path), check=False), str(path), "func.func")


@pytest.mark.parametrize("args", [["fusion-opt", "--list-passes"], ["fusion-compile", "--help"]])
def test_reader_closing_the_pipe_is_quiet(args: list[str]) -> None:
    """``fusion-opt --list-passes | head -1``: the reader leaves early; no traceback."""
    listing = subprocess.Popen(
        [str(BIN / args[0]), *args[1:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0
    )
    listing.stdout.close()  # the reader is gone before the tool writes
    stderr = listing.stderr.read().decode()
    listing.wait()
    assert stderr == "", stderr


# what still works


def test_help_and_list_passes() -> None:
    assert "--cuda-arch" in tool("fusion-compile", "--help").stdout
    listed = tool("fusion-opt", "--list-passes").stdout
    assert "fusion-detect-attention:" in listed and "fusion-online-softmax:" in listed


_NO_TORCH = """
import sys
import importlib.abc

class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("no torch here")
        return None

sys.meta_path.insert(0, NoTorch())
from fusion_compiler.tools import opt
sys.exit(opt.main(sys.argv[1:]))
"""


def test_fusion_opt_needs_no_torch() -> None:
    """fusion-opt reads, rewrites and prints MLIR text without importing torch."""
    source = ROOT / "lit_tests" / "passes" / "fusion-detect-attention" / "scale.mlir"
    pipeline = "--pass-pipeline=builtin.module(fusion-detect-attention)"
    result = subprocess.run(
        [sys.executable, "-c", _NO_TORCH, str(source), pipeline],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "iree_linalg_ext.attention" in result.stdout
