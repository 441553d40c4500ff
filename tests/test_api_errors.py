"""Malformed input through the Python API: never a crash or a raw torch/IREE/Python error,
always a FusionCompilerError naming what was wrong, where, and what to do; and where
PyTorch gives a result, the compiled module gives the same."""

from __future__ import annotations

import struct
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import BIN, rel_error
from models import ExplicitAttentionBlock, SDPABlock
from torch.export import Dim

import fusion_compiler as fc
from fusion_compiler.errors import (
    DamagedFileError,
    DimensionMismatchError,
    DimensionRangeError,
    ExampleInputError,
    InputFileError,
    ModuleFileError,
    TrainingModeError,
)
from fusion_compiler.runtime import check_intact, seal

THIS_FILE = str(Path(__file__))


def _line_of(marker: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if marker in text and "_line_of" not in text)


class _Attention(torch.nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


# --- 1. unregistered ops in MLIR text -----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "name", "where"),
    [
        ('"foo.bar"() : () -> ()\n', "foo.bar", "1:1"),
        (
            "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
            '  %0 = "mydialect.op"(%a) : (tensor<4xf32>) -> tensor<4xf32>\n'
            "  return %0 : tensor<4xf32>\n"
            "}\n",
            "mydialect.op",
            "2:8",
        ),
    ],
)
def test_unregistered_op_refused_with_its_location(text: str, name: str, where: str) -> None:
    with pytest.raises(fc.MLIRParseError) as info:
        fc.compile(text)
    (diag,) = info.value.diagnostics
    assert diag.severity == "error" and diag.location == f"<input>:{where}"
    assert f"unregistered operation '{name}'" in diag.message


def test_unregistered_op_in_a_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "m.mlir"
    path.write_text('func.func @main() {\n  "foo.bar"() : () -> ()\n  return\n}\n')
    with pytest.raises(fc.MLIRParseError) as info:
        fc.compile(path)
    assert [d.location for d in info.value.diagnostics] == [f"{path}:2:3"]


def test_serialiser_failure_is_a_compile_error() -> None:
    # What parse now refuses reached IREE's serialiser, whose failure was a bare ValueError.
    from fusion_compiler.compiler import CompilerSession
    from fusion_compiler.ir import ir
    from fusion_compiler.targets import get_target

    session = CompilerSession(get_target("cpu"))
    module = ir.Module.parse('"foo.bar"() : () -> ()', session.context)
    vm = session.run_phases(module.operation, None, "vm")
    with pytest.raises(fc.CompileError) as info:
        session.to_vmfb(vm)
    assert info.value.step == "VM bytecode serialisation"
    assert any("foo.bar" in d.message for d in info.value.diagnostics)


# --- 2. altered .vmfb ---------------------------------------------------------------------

_LOAD_AND_CALL = """
import sys
import torch
import fusion_compiler as fc
from fusion_compiler.errors import DamagedFileError
data = open(sys.argv[1], "rb").read()
for offset in map(int, sys.argv[2:]):
    altered = bytearray(data)
    altered[offset] ^= 0x5A
    try:
        fc.load(bytes(altered))(torch.randn(1, 4, 64))
        print(offset, "ran", flush=True)
    except DamagedFileError as exc:
        print(offset, "refused", exc.part, flush=True)
"""


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> tuple[torch.nn.Module, fc.CompiledModule, Path]:
    torch.manual_seed(0)
    model = SDPABlock().eval()
    module = fc.compile(model, example_args=(torch.randn(1, 4, 64),))
    path = module.save(tmp_path_factory.mktemp("vmfb") / "m.vmfb")
    return model, module, path


def _data_start(data: bytes, info: zipfile.ZipInfo) -> int:
    """Where a ZIP entry's bytes begin: after its local header's name and extra field."""
    name_size, extra_size = struct.unpack_from("<HH", data, info.header_offset + 26)
    return info.header_offset + 30 + name_size + extra_size


def _offsets(path: Path) -> dict[str, int]:
    """A byte in each part of a module: ZIP header, FlatBuffer, constants, executable, end."""
    data = path.read_bytes()
    offsets = {"zip header": 6, "last byte": len(data) - 1, "seal prefix": len(data) - 80}
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            kind = "executable" if info.filename.endswith(".so") else info.filename
            offsets[kind] = _data_start(data, info) + info.file_size // 2
    return offsets


def test_altered_vmfb_refused_at_load_in_a_fresh_process(compiled) -> None:
    _, _, path = compiled
    offsets = _offsets(path)
    assert {"module.fb", "executable"} <= offsets.keys()
    result = subprocess.run(
        [sys.executable, "-c", _LOAD_AND_CALL, str(path), *map(str, offsets.values())],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"crashed ({result.returncode}):\n{result.stderr[-2000:]}"
    outcome = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    for part, offset in offsets.items():
        assert outcome[str(offset)].startswith("refused"), (part, outcome)


def test_every_altered_byte_of_a_saved_module_is_caught(compiled) -> None:
    _, _, path = compiled
    data = path.read_bytes()
    for offset in range(0, len(data), 41):
        altered = bytearray(data)
        altered[offset] ^= 0x01
        with pytest.raises(DamagedFileError):
            check_intact(bytes(altered), "m.vmfb")
    with pytest.raises(DamagedFileError):
        check_intact(data[: len(data) // 2], "m.vmfb")  # a truncated copy
    check_intact(data, "m.vmfb")


def test_saved_module_stays_a_zip_and_loads(compiled) -> None:
    model, module, path = compiled
    with zipfile.ZipFile(path) as archive:
        assert archive.testzip() is None and archive.comment.startswith(b"fusion_compiler")
    assert seal(path.read_bytes()) == path.read_bytes()
    x = torch.randn(1, 4, 64)
    with torch.no_grad():
        assert rel_error(fc.load(path)(x), model(x)) < 1e-5


def test_unsealed_module_checked_by_irees_crcs(compiled, tmp_path: Path) -> None:
    _, module, _ = compiled
    raw = tmp_path / "raw.vmfb"
    raw.write_bytes(module.vmfb)  # IREE's bytes, no seal
    altered = bytearray(module.vmfb)
    altered[_offsets(raw)["executable"]] ^= 0x5A
    with pytest.raises(DamagedFileError) as info:
        fc.load(bytes(altered))
    assert "module_linked" in info.value.part and "CRC-32" in info.value.part


def test_plain_iree_compile_module_loads(tmp_path: Path) -> None:
    source = tmp_path / "add.mlir"
    source.write_text(
        "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = arith.addf %a, %a : tensor<4xf32>\n"
        "  return %0 : tensor<4xf32>\n"
        "}\n"
    )
    out = tmp_path / "add.vmfb"
    subprocess.run(
        [
            str(BIN / "iree-compile"),
            str(source),
            "--iree-hal-target-device=local",
            "--iree-hal-local-target-device-backends=llvm-cpu",
            "--iree-llvmcpu-target-cpu=host",
            "-o",
            str(out),
        ],
        check=True,
    )
    x = torch.randn(4)
    assert torch.equal(fc.load(out)(x), x + x)


# --- 3. compile-time inputs ---------------------------------------------------------------


def test_bare_tensor_example_args_is_one_argument() -> None:
    # A tensor can only be one argument: taken as the 1-tuple, as torch.onnx.export does.
    model = SDPABlock().eval()
    x = torch.randn(1, 4, 64)
    with torch.no_grad():
        assert rel_error(fc.load(fc.compile(model, example_args=x))(x), model(x)) < 1e-5
        assert rel_error(fc.load(fc.compile(model, example_args=[x]))(x), model(x)) < 1e-5


def test_example_args_as_dict_points_to_example_kwargs() -> None:
    with pytest.raises(ExampleInputError) as info:
        fc.compile(SDPABlock(), example_args={"x": torch.randn(1, 4, 64)})
    assert info.value.index is None and "example_kwargs" in str(info.value)


def test_meta_example_args_stand_for_real_ones() -> None:
    model = SDPABlock().eval()
    module = fc.compile(model, example_args=(torch.empty(2, 4, 64, device="meta"),))
    x = torch.randn(2, 4, 64)
    with torch.no_grad():
        assert rel_error(fc.load(module)(x), model(x)) < 1e-5


def test_damaged_and_foreign_pt2(tmp_path: Path) -> None:
    program = torch.export.export(SDPABlock().eval(), (torch.randn(1, 4, 64),))
    good = tmp_path / "good.pt2"
    torch.export.save(program, good)
    data = bytearray(good.read_bytes())
    with zipfile.ZipFile(good) as archive:
        weight = next(i for i in archive.infolist() if "/data/weights/" in i.filename)
    data[_data_start(bytes(data), weight) + 5] ^= 0xFF
    damaged = tmp_path / "damaged.pt2"
    damaged.write_bytes(bytes(data))
    with pytest.raises(DamagedFileError) as info:
        fc.compile(damaged)
    assert info.value.path == str(damaged) and weight.filename in info.value.part
    garbage = tmp_path / "garbage.pt2"
    garbage.write_bytes(b"not a zip" * 10)
    with pytest.raises(InputFileError) as info:
        fc.compile(garbage)
    assert info.value.path == str(garbage)


def test_training_mode_layers_say_call_eval() -> None:
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8), torch.nn.Dropout(0.1)
    )
    with pytest.raises(TrainingModeError) as info:
        fc.compile(model.train(), example_args=(torch.randn(4, 8),))
    assert info.value.modules == [("1", "BatchNorm1d"), ("2", "Dropout")]
    assert "model.eval()" in str(info.value)
    # the same in training mode where it computes as in inference: compiled
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.0)).train()
    x = torch.randn(4, 8)
    with torch.no_grad():
        assert rel_error(fc.load(fc.compile(model, example_args=(x,)))(x), model(x)) < 1e-5


class _ReturnsNone(torch.nn.Module):
    def forward(self, x):
        return None


class _ReturnsTensorAndNone(torch.nn.Module):
    def forward(self, x):
        return x * 2, None


class _MultiheadAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)  # (output, None)


def test_forward_returning_none_returns_none() -> None:
    x = torch.randn(2, 3, 16)
    assert fc.load(fc.compile(_ReturnsNone(), example_args=(x,)))(x) is None
    for model in (_ReturnsTensorAndNone(), _MultiheadAttention().eval()):
        with torch.no_grad():
            want = model(x)
        got = fc.load(fc.compile(model, example_args=(x,)))(x)
        assert isinstance(got, tuple) and len(got) == 2 and got[1] is None
        assert want[1] is None and rel_error(got[0], want[0]) < 1e-5


# --- 4. call time -------------------------------------------------------------------------


class _TiedLengths(torch.nn.Module):
    def forward(self, q, k, v, w):
        return F.scaled_dot_product_attention(q, k, v) + w[:, :, :8].sum()


@pytest.fixture(scope="module")
def tied_run():
    """_TiedLengths compiled with K and V of one length n in 5..512, w of 2n."""
    n = Dim("n", min=5, max=512)
    q, k, v = torch.randn(2, 4, 8, 32), torch.randn(2, 4, 16, 32), torch.randn(2, 4, 16, 32)
    w = torch.randn(2, 4, 32, 1)
    module = fc.compile(
        _TiedLengths(), example_args=(q, k, v, w), dynamic_shapes=({}, {2: n}, {2: n}, {2: 2 * n})
    )
    return fc.load(module)


def test_kv_lengths_that_differ_are_refused(tied_run) -> None:
    run = tied_run
    q = torch.randn(2, 4, 8, 32)
    k, v, w = torch.randn(2, 4, 10, 32), torch.randn(2, 4, 10, 32), torch.randn(2, 4, 20, 1)
    assert rel_error(run(q, k, v, w), _TiedLengths()(q, k, v, w)) < 1e-5
    with pytest.raises(DimensionMismatchError) as info:
        run(q, k, torch.randn(2, 4, 12, 32), w)
    error = info.value
    assert (error.index, error.dim, error.got, error.expected) == (2, 2, 12, 10)
    assert error.rule == "args[1].shape[2]"
    with pytest.raises(DimensionMismatchError) as info:
        run(q, k, v, torch.randn(2, 4, 18, 1))
    error = info.value
    assert (error.index, error.dim, error.got, error.expected) == (3, 2, 18, 20)
    assert error.rule == "2 * args[1].shape[2]"
    with pytest.raises(DimensionMismatchError):
        run["main"].submit(q, k, torch.randn(2, 4, 12, 32), w)


def test_lengths_outside_the_exported_range_are_refused(tied_run) -> None:
    """``Dim(min=5, max=512)``: torch's exported module refuses 4 and 513; so do we."""
    run = tied_run
    q = torch.randn(2, 4, 8, 32)
    for length, fits in ((4, False), (5, True), (512, True), (513, False)):
        k, v = torch.randn(2, 4, length, 32), torch.randn(2, 4, length, 32)
        w = torch.randn(2, 4, 2 * length, 1)
        if fits:
            assert rel_error(run(q, k, v, w), _TiedLengths()(q, k, v, w)) < 1e-5
            continue
        with pytest.raises(DimensionRangeError) as info:
            run(q, k, v, w)
        error = info.value
        assert (error.index, error.dim, error.got, error.low, error.high) == (1, 2, length, 5, 512)
        assert "5..512" in str(error)


class _Double(torch.nn.Module):
    def forward(self, x):
        return x * 2


def test_numpy_arrays_of_any_layout_or_byte_order() -> None:
    run = fc.load(fc.compile(_Double(), example_args=(torch.randn(4, 8),)))
    a = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    read_only = np.frombuffer(a.tobytes(), np.float32).reshape(4, 8)
    for array in (a[::-1], a[:, ::-1], a.astype(">f4"), np.asfortranarray(a), read_only):
        np.testing.assert_array_equal(run(array).numpy(), array.astype(np.float32) * 2)
    with pytest.raises(fc.ArgumentError, match=r"argument 0 \(`x`\) is a numpy array of object"):
        run(np.empty((4, 8), dtype=object))
    with pytest.raises(fc.ArgumentError, match=r"argument 0 \(`x`\) is on the meta device"):
        run(torch.empty(4, 8, device="meta"))


def test_tensors_of_any_view_or_grad_and_a_wrong_shape_by_its_index() -> None:
    """A call reads a tensor that requires grad, a strided view and a torch.Size of a
    static input alike; a wrong shape or dtype is refused with the argument's index."""
    run = fc.load(fc.compile(_Double(), example_args=(torch.randn(4, 8),)))
    x = torch.randn(8, 4)
    for arg in (x.t(), x.t().clone().requires_grad_(), x.t().contiguous()):
        torch.testing.assert_close(run(arg), arg.detach() * 2)
    shape_of_x = r"argument 0 \(`x`\) has shape/dtype"
    with pytest.raises(fc.ArgumentError, match=shape_of_x + r" \(8, 4\) float32"):
        run(x)
    with pytest.raises(fc.ArgumentError, match=shape_of_x + r" \(4, 8\) float16"):
        run(x.t().half())
    with pytest.raises(fc.ArgumentError, match=shape_of_x + r" \(4, 8, 1\)"):
        run(x.t()[..., None])


def test_a_dropped_module_is_freed_at_once() -> None:
    """Nothing of a loaded module is left for the cycle collector: its device memory goes
    when the caller drops it (IREE's SystemContext refers to itself through its bound
    modules; on Vulkan a process ran out of device memory after ten modules)."""
    import gc

    compiled = fc.compile(_Double(), example_args=(torch.randn(4, 8),))
    gc.collect()
    gc.disable()
    try:
        run = fc.load(compiled)
        for function in (run, run["main"]):
            function(torch.randn(4, 8))
        del run, function
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        left = [type(o).__module__ for o in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert not [m for m in left if m.startswith(("iree", "fusion_compiler"))], left


def test_load_of_a_folder(tmp_path: Path) -> None:
    (tmp_path / "m.vmfb").write_bytes(b"")
    with pytest.raises(ModuleFileError) as info:
        fc.load(tmp_path)
    assert info.value.path == str(tmp_path) and info.value.problem == "is a folder"
    assert "m.vmfb" in str(info.value)


# --- 5. threads ---------------------------------------------------------------------------


def test_two_threads_compile_at_once() -> None:
    torch.manual_seed(0)
    jobs = [(SDPABlock().eval(), torch.randn(1, 8, 64)), (ExplicitAttentionBlock().eval(),)]
    jobs[1] += (torch.randn(2, 4, 64),)
    results: list[object] = [None, None]
    start = threading.Barrier(2)

    def work(i: int) -> None:
        model, x = jobs[i]
        start.wait()
        try:
            results[i] = fc.load(fc.compile(model, example_args=(x,)))(x)
        except Exception as exc:  # reported below, in the test's thread
            results[i] = exc

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for (model, x), got in zip(jobs, results, strict=True):
        assert isinstance(got, torch.Tensor), got
        with torch.no_grad():
            assert rel_error(got, model(x)) < 1e-5


# --- 6. only the failing op ---------------------------------------------------------------


class _Cummax(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = torch.cummax(self.proj(x), -1).values  # CUMMAX-LINE
        return torch.softmax(y, -1)


class _Uint16Constant(torch.nn.Module):
    def forward(self, x):
        return x + torch.ones(8, dtype=torch.uint16).float()  # UINT16-LINE


def test_unsupported_op_error_names_only_the_failing_op() -> None:
    with pytest.raises(fc.UnsupportedOpError) as info:
        fc.compile(_Cummax().eval(), example_args=(torch.randn(4, 8),))
    assert info.value.ops == [("torch.aten.cummax", f"{THIS_FILE}:{_line_of('CUMMAX-LINE')}:0")]


def test_importer_failure_names_the_node_and_its_line() -> None:
    with pytest.raises(fc.UnsupportedOpError) as info:
        fc.compile(_Uint16Constant(), example_args=(torch.randn(4, 8),))
    ((name, location),) = info.value.ops
    assert name.startswith("torch.aten.ones") and "uint16" in name
    assert location == f"{THIS_FILE}:{_line_of('UINT16-LINE')}:0"


# --- 7. zero-size dims --------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(0, 4, 16, 32), (2, 0, 16, 32)], ids=["batch", "heads"])
def test_zero_size_batch_or_heads_gives_pytorchs_empty_result(shape) -> None:
    q, k, v = torch.randn(shape), torch.randn(shape), torch.randn(shape)
    got = fc.load(fc.compile(_Attention(), example_args=(q, k, v)))(q, k, v)
    want = _Attention()(q, k, v)
    assert got.shape == want.shape and got.dtype == want.dtype and got.numel() == 0


class ByteLookup(torch.nn.Module):
    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return ids.to(torch.int32) * 2


def test_unsigned_byte_input_is_taken_as_exported_and_int8_is_refused() -> None:
    """MLIR's integers are signless: a uint8 input reaches the module as i8, and its
    signature asked callers for int8 (their uint8 refused, an int8 taken and read as
    unsigned); the front end records the input as unsigned."""
    ids = torch.tensor([[0, 7, 200, 255]], dtype=torch.uint8)
    run = fc.load(fc.compile(ByteLookup(), example_args=(ids,)))
    assert torch.equal(torch.as_tensor(run(ids)), ByteLookup()(ids))
    with pytest.raises(fc.ArgumentError, match=r"argument 0 \(`ids`\) has shape/dtype"):
        run(ids.to(torch.int8))


class ByteResults(torch.nn.Module):
    """uint8 in, uint8 out (beside a float result)."""

    def forward(self, pixels: torch.Tensor, scale: torch.Tensor):
        return pixels + 1, pixels.float() * scale, pixels & 0x0F


def test_unsigned_byte_results_come_back_unsigned() -> None:
    """IREE returns a uint8 result as int8 (its integers are signless): 201 came back as
    -55; the front end records the results of an unsigned type and the runtime views
    them as such."""
    pixels = torch.tensor([[0, 7, 200, 255]], dtype=torch.uint8)
    scale = torch.rand(4)
    got = fc.load(fc.compile(ByteResults(), example_args=(pixels, scale)))(pixels, scale)
    for g, w in zip(got, ByteResults()(pixels, scale), strict=True):
        assert g.dtype == w.dtype and torch.equal(g, w)
