import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
BIN = Path(sys.executable).parent
# The tests build their kernels into a cache of their own, never the user's (the tools
# they start inherit it); a test that needs an empty cache sets its own.
os.environ.setdefault("FUSION_COMPILER_CACHE", str(ROOT / "build" / "test-cache"))


def rel_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """‖got − want‖ / ‖want‖, in float64."""
    got, want = got.double(), want.double()
    assert torch.isfinite(got).all(), "output has NaN or Inf"
    return ((got - want).norm() / want.norm()).item()


def tool(name: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Runs one of our console scripts from the interpreter's environment."""
    result = subprocess.run([str(BIN / name), *args], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"{name} {' '.join(args)} failed:\n{result.stderr}")
    return result


def pytest_collection_modifyitems(config, items):
    # The long profiles run only when asked for by name: ``pytest -m slow``.
    if "slow" not in (config.option.markexpr or ""):
        skip_slow = pytest.mark.skip(reason="long profile: run with -m slow")
        for item in items:
            if "slow" in item.keywords:
                item.add_marker(skip_slow)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
