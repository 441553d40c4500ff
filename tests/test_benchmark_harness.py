"""The benchmark harness checks each system's output and times every system alike."""

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import harness  # noqa: E402
import readme_table  # noqa: E402


def _inputs() -> list[tuple[torch.Tensor, ...]]:
    return [(torch.randn(64, 64), torch.randn(64, 64)) for _ in range(3)]


def test_record_has_the_three_timings_and_the_error() -> None:
    inputs = _inputs()
    reference = inputs[0][0] @ inputs[0][1]
    record = harness.measure(
        {"case": "mm"}, "torch", torch.matmul, inputs, reference, 2 * 64**3, cuda=False
    )
    assert record["device_ms"] is None  # no CUPTI on the CPU
    assert record["loop_ms"] > 0 and record["call_ms"] > 0
    assert record["rel_err"] < 1e-6
    assert record["tflops"] == 2 * 64**3 / record["loop_ms"] / 1e9


def test_wrong_output_is_measured_as_wrong() -> None:
    inputs = _inputs()
    reference = inputs[0][0] @ inputs[0][1]
    record = harness.measure({"case": "mm"}, "off", torch.add, inputs, reference, 1.0, cuda=False)
    assert record["rel_err"] > 0.5


def test_system_that_fails_is_a_record_with_its_error(tmp_path: Path) -> None:
    def fails(a, b):
        raise RuntimeError("CUDA out of memory\nmore detail")

    inputs = _inputs()
    record = harness.measure({"case": "mm"}, "ours", fails, inputs, inputs[0][0], 1.0, cuda=False)
    assert record["error"] == "CUDA out of memory"
    harness.write([record], tmp_path, "t")
    assert "failed: CUDA out of memory" in (tmp_path / "t.md").read_text()


def test_module_that_does_not_compile_is_a_record_saying_so(tmp_path: Path) -> None:
    def build():
        raise RuntimeError("iree-compile failed\n  model.py:3: error: no lowering\nmore")

    harness.save_module(tmp_path, "case.ours", build)
    assert not (tmp_path / "case.ours.vmfb").exists()
    inputs = _inputs()
    call = harness.module(tmp_path, "case.ours", "local-task")
    record = harness.measure({"case": "c"}, "ours", call, inputs, inputs[0][0], 1.0, cuda=False)
    # the step and its first diagnostic
    assert record["error"] == (
        "does not compile: iree-compile failed: model.py:3: error: no lowering"
    )


def test_module_not_prepared_is_a_record_saying_so(tmp_path: Path) -> None:
    inputs = _inputs()
    call = harness.module(tmp_path, "absent.ours", "local-task")
    record = harness.measure({"case": "c"}, "ours", call, inputs, inputs[0][0], 1.0, cuda=False)
    assert "run prepare first" in record["error"]


def test_prepared_module_runs_as_the_system(tmp_path: Path) -> None:
    import fusion_compiler as fc

    class MatMul(torch.nn.Module):
        def forward(self, a, b):
            return a @ b

    inputs = _inputs()
    harness.save_module(tmp_path, "mm.ours", lambda: fc.compile(MatMul(), inputs[0]))
    assert "dispatches" in json.loads((tmp_path / "mm.ours.json").read_text())["stats"]
    call = harness.module(tmp_path, "mm.ours", "local-task")
    reference = inputs[0][0] @ inputs[0][1]
    record = harness.measure({"case": "mm"}, "ours", call, inputs, reference, 1.0, cuda=False)
    assert record["rel_err"] < 1e-5


def test_readme_table_is_the_one_the_results_give() -> None:
    """The README's benchmark table is what readme_table.py writes from the records."""
    assert readme_table.main(["--check"]) == 0


@pytest.mark.parametrize("spec", readme_table.TABLES, ids=lambda t: t.results.stem)
def test_readme_table_shows_every_case_and_system(spec) -> None:
    records = json.loads(spec.results.read_text())
    rows = readme_table.table(spec, records).splitlines()[2:]
    assert len(rows) == len(spec.cases)
    assert all(row.count("/") >= len(spec.systems) and "| - |" not in row for row in rows)
