"""The benchmark harness checks each system's output and times every system alike."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import harness  # noqa: E402


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
