"""A blocking CUDA call with its transient memory reused against one that allocates it
afresh, interleaved call by call in one process (the difference is a few microseconds,
below the drift between separate runs).

    On the CPU machine:  .venv/bin/python benchmarks/call_overhead.py prepare build/calls
    On the GPU machine:  python3 benchmarks/transient_reuse.py build/calls

Per case of call_overhead.py (its ``ours`` module): the median wall time of 3000 blocking
calls each way, alternating: reuse (``Function.__call__`` as it is) and fresh (the spare
transient memory dropped before the call, so it allocates and imports a new one).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import call_overhead
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import fusion_compiler as fc  # noqa: E402

CALLS = 3000


def main(folder: Path) -> None:
    for name, case in call_overhead.CASES.items():
        function = fc.load(folder / f"{name}.ours.vmfb", device="cuda")["main"]
        inputs = call_overhead.qkv(case, "cuda")
        for _ in range(50):
            function(*inputs)
        torch.cuda.synchronize()
        reuse, fresh = [], []
        for _ in range(CALLS):
            start = time.perf_counter()
            function(*inputs)
            reuse.append(time.perf_counter() - start)
            function._spare_transients.clear()
            start = time.perf_counter()
            function(*inputs)
            fresh.append(time.perf_counter() - start)
        a, b = (statistics.median(t) * 1e6 for t in (reuse, fresh))
        print(f"| {name} | {a:.1f} | {b:.1f} | {b - a:.1f} |")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
