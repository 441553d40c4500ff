"""fusion-autotune: measures the generated attention kernel's tiles on this machine's GPU.

    fusion-autotune [--table PATH] [--only KEY_SUBSTRING] [--repeats N]

For each shape class (head dim 64/128, causal or not, key lengths 1024/4096/16384,
fp16 on sm_90), times every tile choice of a small space with the kernel source that
fusion-kernel-attention compiles ahead of time (Triton JIT here; CUDA events around 10
back-to-back launches, median of the repetitions),
checks each output against PyTorch, and writes the fastest per class to the schedule
table (default: fusion_compiler/backends/triton/schedules.json, read by fusion-schedule).
Needs a GPU, torch with CUDA and Triton; not the IREE compiler.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import statistics
import sys
import tempfile
from pathlib import Path

from fusion_compiler.backends.triton import schedules
from fusion_compiler.backends.triton.kernel import load_source
from fusion_compiler.tools.cli import entry_point

SPACE = [
    schedules.Tiles(m, n, w, s)
    for m, n, w, s in itertools.product((64, 128), (64, 128), (4, 8), (2, 3))
]
CLASSES = [
    schedules.ShapeClass("sm_90", "f16", d, causal, n)
    for d in (64, 128)
    for causal in (False, True)
    for n in (1024, 4096, 16384)
]
# Launches between one pair of events: timing single launches let the host's launch cost
# pick the tiles of short kernels (measured: at N <= 4096 causal, tiles chosen that way
# ran 12-16% slower inside the module than the ones chosen by device time).
_LAUNCHES = 10


def _batch(shape: schedules.ShapeClass) -> int:
    """B·H for a class: enough row blocks to fill the GPU at every key length."""
    return {1024: 64, 4096: 32, 16384: 16}[shape.n]


def time_ms(call, repeats: int) -> float:
    """Median over ``repeats`` of CUDA-event time per launch of ``call``, launched
    _LAUNCHES times between each pair of events, after 3 warm-up calls."""
    import torch

    for _ in range(3):
        call()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(_LAUNCHES):
            call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / _LAUNCHES)
    return statistics.median(times)


def use_torch_scratch() -> None:
    """Gives Triton's launcher torch's CUDA allocator for the global scratch of kernels
    that make TMA descriptors on the GPU (``TritonSpec.tma_kv``)."""
    import torch
    import triton

    def allocate(size: int, _alignment: int, _stream) -> torch.Tensor:
        return torch.empty(size, dtype=torch.int8, device="cuda")  # 512-byte aligned

    triton.set_allocator(allocate)


def kernel_ms(run, calls: int) -> float:
    """Device time per call of the CUDA kernels that ``run`` launches (``calls`` calls,
    finished before it returns), as CUPTI records them through torch's profiler, which
    sees IREE's launches too."""
    import torch

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        run()
    kernels = [e for e in profile.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return sum(e.device_time for e in kernels) / calls / 1e3


def tune(shape: schedules.ShapeClass, repeats: int, progress) -> dict | None:
    import torch
    import torch.nn.functional as F

    batch, n, d = _batch(shape), shape.n, shape.d
    q, k, v = (torch.randn(batch, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=shape.causal)
    flops = 4 * batch * n * n * d / (2 if shape.causal else 1)
    best = None
    for tiles in SPACE:
        if schedules.shared_bytes(tiles, d) > 227 * 1024:
            progress(f"{shape.key} {tiles}: skipped (shared memory)")
            continue
        spec = schedules.plain_spec(tiles, batch, n, d, shape.causal)
        out = torch.empty_like(q)
        with tempfile.TemporaryDirectory() as directory:
            kernel = load_source(spec, Path(directory))

            def call(kernel=kernel, spec=spec, out=out):
                kernel[spec.grid](
                    q,
                    k,
                    v,
                    q,  # no mask
                    q,  # static sizes
                    out,
                    num_warps=spec.num_warps,
                    num_stages=spec.num_stages,
                    **spec.constants(),
                )

            try:
                call()
                error = ((out.float() - want).norm() / want.norm()).item()
                ms = time_ms(call, repeats)
            except Exception as exc:  # out of resources: a result, not a failure
                progress(f"{shape.key} {tiles}: failed ({str(exc).splitlines()[0][:60]})")
                continue
        tflops = flops / ms / 1e9
        ok = error < 3e-3
        progress(f"{shape.key} {tiles}: {tflops:.0f} TFLOP/s, rel. error {error:.1e}")
        if ok and (best is None or tflops > best["tflops"]):
            best = {"tiles": tiles.__dict__, "tflops": round(tflops), "rel_err": error}
    return best


@entry_point
def main(argv: list[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(prog="fusion-autotune", description=__doc__.splitlines()[0])
    parser.add_argument("--table", type=Path, default=schedules.TABLE)
    parser.add_argument("--only", default="", help="tune the classes whose key contains this")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("fusion-autotune: no CUDA GPU here", file=sys.stderr)
        return 1
    use_torch_scratch()
    table = schedules.load_table(args.table)
    classes = [c for c in CLASSES if args.only in c.key]
    total, done = len(classes) * len(SPACE), [0]

    def progress(line: str) -> None:
        done[0] += 1
        print(f"[{done[0]:>4}/{total}] {line}", file=sys.stderr, flush=True)

    gpu = torch.cuda.get_device_name()
    for shape in classes:
        best = tune(shape, args.repeats, progress)
        if best is not None:
            best.update(gpu=gpu, date=datetime.date.today().isoformat())
            table[shape.key] = best
            print(f"{shape.key}: {best['tiles']} {best['tflops']} TFLOP/s", flush=True)
        args.table.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")  # so far
    return 0


if __name__ == "__main__":
    sys.exit(main())
