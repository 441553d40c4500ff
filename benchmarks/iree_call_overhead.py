"""Host cost of calling an IREE module from Python on the GPU, next to its device time.

    python3 benchmarks/iree_call_overhead.py MODULE.vmfb B H N D [RUNTIME_FLAG ...]

Times, for one attention module with fp16 inputs on the GPU: a blocking call, calls
submitted back to back (``Function.submit``), the host time spent inside submit alone,
and the device time of its kernels (torch's CUPTI profiler sees IREE's launches too).
Runtime flags (e.g. --cuda_allow_inline_execution=true) are applied first.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import iree.runtime as rt
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import fusion_compiler as fc  # noqa: E402

REPEATS = 50


def main(path: str, b: int, h: int, n: int, d: int, *flags: str) -> None:
    if flags:
        rt.flags.parse_flags(*flags)
    function = fc.load(path, device="cuda")["main"]
    args = [torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in range(3)]
    for _ in range(5):
        function(*args)
    start = time.perf_counter()
    for _ in range(REPEATS):
        function(*args)
    blocking = (time.perf_counter() - start) / REPEATS * 1e3
    function.submit(*args).wait()
    start = time.perf_counter()
    inside = 0.0
    for _ in range(REPEATS):
        t = time.perf_counter()
        last = function.submit(*args)
        inside += time.perf_counter() - t
    last.wait()
    pipelined = (time.perf_counter() - start) / REPEATS * 1e3
    # the device time of the module's kernels, as CUPTI sees them
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            last = function.submit(*args)
        last.wait()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    names = sorted({e.name for e in kernels})
    device_ms = sum(e.device_time for e in kernels) / 10 / 1e3
    print(
        f"{Path(path).name} flags={' '.join(flags) or '-'}: blocking {blocking:.3f} ms, "
        f"submitted {pipelined:.3f} ms, host inside submit {inside / REPEATS * 1e3:.3f} ms, "
        f"device {device_ms:.3f} ms in {names}"
    )


if __name__ == "__main__":
    main(sys.argv[1], *(int(x) for x in sys.argv[2:6]), *sys.argv[6:])
