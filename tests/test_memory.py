"""Memory held by the compiler across compiles in one process, and by one long call.

Each ``fc.compile`` used to leave its MLIR context behind (IREE's session hands it to
Python, whose bindings never destroyed it): 4.0 MB of RSS per compile of the block below.
With the context destroyed once nothing refers to it, growth after warm-up measures
0.0-0.2 MB per compile; the bound sits between the two.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

# compiles many models: left out of the edit loop (-m 'not slow'), run in CI
pytestmark = pytest.mark.slow

COMPILES = 7
WARM_UP = 3  # the first compiles load dialects, passes and torch.export's caches
MB_PER_COMPILE = 1.0

_CHILD = textwrap.dedent(
    f"""
    import gc, json, os, sys
    import torch
    import torch.nn.functional as F
    import fusion_compiler as fc

    def rss_mb():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    class Block(torch.nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    torch.manual_seed(0)
    args = tuple(torch.randn(1, 2, 64, 32) for _ in range(3))
    sizes = []
    for _ in range({COMPILES}):
        mod = fc.compile(Block(), args, target="cpu")
        del mod
        gc.collect()
        sizes.append(rss_mb())
    out = fc.load(fc.compile(Block(), args, target="cpu"))(*args)
    ref = F.scaled_dot_product_attention(*args, is_causal=True)
    error = ((out - ref).norm() / ref.norm()).item()
    print(json.dumps({{"rss_mb": sizes, "rel_error": error}}))
    """
)


def _slope(values: list[float]) -> float:
    """Least-squares growth per step."""
    n = len(values)
    mean_x, mean_y = (n - 1) / 2, sum(values) / n
    num = sum((i - mean_x) * (y - mean_y) for i, y in enumerate(values))
    return num / sum((i - mean_x) ** 2 for i in range(n))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_repeated_compiles_do_not_grow_rss():
    result = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-4000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    growth = _slope(found["rss_mb"][WARM_UP:])
    assert growth < MB_PER_COMPILE, (
        f"RSS grows {growth:.2f} MB per fc.compile (bound {MB_PER_COMPILE}): "
        f"{[round(x) for x in found['rss_mb']]} MB"
    )
    # a context destroyed too early would show here as a crash or a wrong answer
    assert found["rel_error"] < 1e-5


# One causal call of B1 H4 N16384 D64 fp32 on the CPU's default path (local-task), peak
# RSS above the RSS before it, less the output: 387-460 MB while the host enqueued the
# online-softmax loop nest's steps far ahead of the device (O(N²) in flight); 63 MB with
# the host waiting for the previous query block (of which 48 MB are the runtime's
# copies of the inputs), linear in N (benchmarks/results/cpu_memory.md).
LONG = 16384
CALL_MB_BEYOND_OUTPUT = 160

_CALL_CHILD = textwrap.dedent(
    f"""
    import json
    import torch
    import torch.nn.functional as F
    import fusion_compiler as fc

    def status_mb(field):
        with open("/proc/self/status") as f:
            line = next(ln for ln in f if ln.startswith(field + ":"))
        return int(line.split()[1]) / 1024

    class Block(torch.nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    torch.manual_seed(0)
    args = tuple(torch.randn(1, 4, {LONG}, 64) for _ in range(3))
    run = fc.load(fc.compile(Block(), args, target="cpu"))
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    before = status_mb("VmRSS")
    out = run(*args)
    peak = status_mb("VmHWM") - before
    print(json.dumps({{"peak_mb": peak, "out_mb": out.numel() * out.element_size() / 2**20}}))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_long_causal_call_peak_memory_is_linear():
    result = subprocess.run(
        [sys.executable, "-c", _CALL_CHILD], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-4000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    beyond = found["peak_mb"] - found["out_mb"]
    assert beyond < CALL_MB_BEYOND_OUTPUT, (
        f"one N={LONG} causal call peaks {beyond:.0f} MB beyond its output "
        f"(bound {CALL_MB_BEYOND_OUTPUT} MB)"
    )
