import contextlib
import importlib
import io
import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
BIN = Path(sys.executable).parent
# The tests build their kernels into a cache of their own, never the user's (the tools
# they start inherit it); a test that needs an empty cache sets its own.
os.environ.setdefault("FUSION_COMPILER_CACHE", str(ROOT / "build" / "test-cache"))


# The SPIR-V target of the modules the tests run on this machine's Vulkan device (Mesa's
# llvmpipe in CI): the default, NVIDIA's "pascal", assumes subgroups of 32 and fc.load
# refuses other devices; this one uses no subgroup operations and runs anywhere.
ANY_VULKAN = "vp_android_baseline_2022"


def rel_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """‖got − want‖ / ‖want‖, in float64."""
    got, want = got.double(), want.double()
    assert torch.isfinite(got).all(), "output has NaN or Inf"
    return ((got - want).norm() / want.norm()).item()


# Our console scripts, called in this process (a subprocess costs 5-10 s of imports on
# the 2-core machine); what is not ours (iree-compile) runs as a program.
_MAINS = {
    "fusion-compile": "fusion_compiler.tools.compile",
    "fusion-opt": "fusion_compiler.tools.opt",
    "fusion-autotune": "fusion_compiler.tools.autotune",
}


def kernel_specs(fused, marker: str, spec_type) -> list:
    """The specs (``spec_type``) of a module's dispatches of stand-alone kernels, read
    back from each dispatch's ``marker`` attribute (their JSON)."""
    import json

    from fusion_compiler.compiler import new_session
    from fusion_compiler.ir import ir

    with new_session().context:
        module = ir.Module.parse(fused.mlir)
        found = []

        def visit(op):
            if op.name == "flow.dispatch" and marker in op.attributes:
                found.append(spec_type(**json.loads(ir.StringAttr(op.attributes[marker]).value)))
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
    return found


def _in_process(name: str, args: tuple[str, ...]) -> subprocess.CompletedProcess:
    """``name args`` as its console script runs it: its exit status, stdout and stderr,
    and what escaped ``main`` printed as the interpreter prints it (a traceback)."""
    main = importlib.import_module(_MAINS[name]).main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(list(args))
        except SystemExit as exc:  # argparse's usage errors and --help
            status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception:  # noqa: BLE001 - the interpreter would print it and exit 1
            traceback.print_exc()
            status = 1
    return subprocess.CompletedProcess([name, *args], status or 0, out.getvalue(), err.getvalue())


def tool(name: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Runs one of our console scripts (in this process) or another program."""
    # --verify-diagnostics sets a flag of the compiler library for the whole process
    if name in _MAINS and "--verify-diagnostics" not in args:
        result = _in_process(name, args)
    else:
        result = subprocess.run([str(BIN / name), *args], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"{name} {' '.join(args)} failed:\n{result.stderr}")
    return result


def pytest_collection_modifyitems(config, items):
    # The long profiles run only when asked for by name: ``pytest -m long``.
    if "long" not in (config.option.markexpr or ""):
        skip_long = pytest.mark.skip(reason="long profile: run with -m long")
        for item in items:
            if "long" in item.keywords:
                item.add_marker(skip_long)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
