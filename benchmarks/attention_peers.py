"""Attention against every peer on one GPU, in one process: the start of the harness.

On the CPU machine:  .venv/bin/python benchmarks/attention_peers.py prepare build/peers [SYSTEM ...]
On the GPU machine:  python3 benchmarks/attention_peers.py run build/peers OUT_DIR
CPU section (compiles and runs here): .venv/bin/python benchmarks/attention_peers.py cpu OUT_DIR

Systems, per case: ours_sm90 (the attention written out as matmul/softmax/matmul, fused
by fusion-detect-attention, lowered by fusion-kernel-attention to a generated sm_90a
kernel), ours (the same, IREE's attention op for CUDA sm_80), IREE alone on SDPA
(IREE's own lowering of F.scaled_dot_product_attention, its default configuration),
torch eager unfused, torch SDPA flash, torch SDPA cuDNN, torch.compile of the unfused
code. Torch systems are timed with CUDA events around single calls after warm-up,
median of the repetitions, rotating three input sets; IREE modules by the device time
of their kernels (CUPTI, through torch's profiler) over calls submitted back to back
on device-resident buffers (inputs imported through DLPack, results left on the
device), and apart from that by the wall time of a blocking Python call (``call_ms``).
Each output is checked against float32 PyTorch in the same run. Writes ``<gpu>.json`` (one record
per case and system) and a Markdown table. TFLOP/s = 4·B·H·Nq·Nk·D / t, halved for
causal.
"""

from __future__ import annotations

import functools
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import fusion_compiler as fc  # noqa: E402
from fusion_compiler.tools.autotune import kernel_ms  # noqa: E402

# (B, H, Hkv, N, D, dtype, causal): the grid of the CUDA benchmark issue
_SHAPES = [
    (4, 16, 16, 1024, 128),
    (1, 16, 16, 4096, 128),
    (1, 16, 16, 16384, 128),
    (1, 32, 32, 4096, 64),
    (1, 8, 8, 65536, 128),
    (1, 32, 8, 8192, 128),
]
CASES = [
    (b, h, hkv, n, d, dtype, causal)
    for b, h, hkv, n, d in _SHAPES
    for dtype in (torch.float16, torch.bfloat16)
    for causal in (False, True)
]
REPEATS = 20


class Unfused(torch.nn.Module):
    """Attention as models write it: causal from arange/compare, GQA by repeat_interleave."""

    def __init__(self, causal: bool):
        super().__init__()
        self.causal = causal

    def forward(self, q, k, v):
        groups = q.shape[1] // k.shape[1]
        if groups > 1:
            k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        if self.causal:
            n = s.shape[-1]
            rows = torch.arange(n, device=s.device)[:, None]
            s = s.masked_fill(torch.arange(n, device=s.device)[None, :] > rows, float("-inf"))
        return torch.softmax(s.float(), dim=-1).to(q.dtype) @ v


class SDPA(torch.nn.Module):
    def __init__(self, causal: bool):
        super().__init__()
        self.causal = causal

    def forward(self, q, k, v):
        gqa = q.shape[1] != k.shape[1]
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal, enable_gqa=gqa)


def _name(case) -> str:
    b, h, hkv, n, d, dtype, causal = case
    kv = f"_KV{hkv}" if hkv != h else ""
    kind = "causal" if causal else "full"
    return f"B{b}_H{h}{kv}_N{n}_D{d}_{str(dtype).removeprefix('torch.')}_{kind}"


def _qkv(case, device="cpu"):
    b, h, hkv, n, d, dtype, _ = case
    shapes = [(b, h, n, d), (b, hkv, n, d), (b, hkv, n, d)]
    return tuple(torch.randn(s, device=device, dtype=dtype) for s in shapes)


def prepare(folder: Path, only: list[str]) -> None:
    """Compiles every case for each IREE system (those in ``only`` when it is given)."""
    folder.mkdir(parents=True, exist_ok=True)
    for case in CASES:
        causal = case[-1]
        example = _qkv(case)
        for system, model, arch in (
            ("ours", Unfused(causal), "sm_80"),
            ("ours_sm90", Unfused(causal), "sm_90"),
            ("iree_sdpa", SDPA(causal), "sm_80"),
        ):
            if only and system not in only:
                continue
            module = fc.compile(model, example_args=example, target="cuda", cuda_arch=arch)
            module.save(folder / f"{_name(case)}.{system}.vmfb")
            print(_name(case), system, module.stats)


def _events_ms(fn, inputs: list[tuple]) -> float:
    for args in inputs:  # warm-up
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for i in range(REPEATS):
        args = inputs[i % len(inputs)]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _iree_system(path: Path):
    """A timer and a checked call for one IREE module on device-resident tensors.

    The time is the module's device time per call: the durations of its kernels as
    CUPTI records them (torch's profiler sees IREE's launches too) over calls submitted
    back to back, as CUDA events time the torch systems' kernels. The host-side cost of
    a Python call is recorded apart (``call_ms``, a blocking call, median).
    """
    function = fc.load(path, device="cuda")["main"]

    def timer(inputs: list[tuple]) -> float:
        for args in inputs:  # warm-up
            function.submit(*args)
        function.submit(*inputs[0]).wait()

        def back_to_back() -> None:
            for i in range(REPEATS):
                last = function.submit(*inputs[i % len(inputs)])
            last.wait()

        return kernel_ms(back_to_back, REPEATS)

    timer.call_ms = functools.partial(_wall_ms, function)
    return timer, function


def run(folder: Path, out: Path) -> int:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    out.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.get_device_name().replace(" ", "_")
    records = []
    for case in CASES:
        b, h, hkv, n, d, dtype, causal = case
        inputs = [_qkv(case, "cuda") for _ in range(3)]
        with torch.no_grad():
            ref = SDPA(causal)(*(x.float() for x in inputs[0]))
        flops = 4 * b * h * n * n * d / (2 if causal else 1)
        unfused = Unfused(causal).cuda()
        compiled = torch.compile(unfused)

        def flash(q, k, v, causal=causal):
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                return SDPA(causal)(q, k, v)

        def cudnn(q, k, v, causal=causal):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return SDPA(causal)(q, k, v)

        systems = {
            name: (functools.partial(_events_ms, fn), fn)
            for name, fn in (
                ("torch_eager_unfused", unfused),
                ("torch_sdpa_flash", flash),
                ("torch_sdpa_cudnn", cudnn),
                ("torch_compile_unfused", compiled),
            )
        }
        for system in ("ours_sm90", "ours", "iree_sdpa"):
            systems[system] = _iree_system(folder / f"{_name(case)}.{system}.vmfb")
        for system, (timer, checked) in systems.items():
            records.append(_record(case, system, timer, checked, inputs, ref, flops))
            print(json.dumps(records[-1]), flush=True)
            (out / f"{gpu}.json").write_text(json.dumps(records, indent=1))  # so far
    _write(records, out, gpu)
    return 0


def _record(case, system: str, timer, checked, inputs, ref, flops: float) -> dict:
    """One system on one case: output checked against ``ref``, then timed."""
    b, h, hkv, n, d, dtype, causal = case
    record = dict(
        case=_name(case),
        dtype=str(dtype).removeprefix("torch."),
        B=b,
        H=h,
        Hkv=hkv,
        Nq=n,
        Nk=n,
        D=d,
        causal=causal,
        system=system,
    )
    try:
        with torch.no_grad():
            got = checked(*inputs[0])
            error = ((got.float() - ref).norm() / ref.norm()).item()
            ms = timer(inputs)
        record.update(ms=ms, tflops=flops / ms / 1e9, rel_err=error)
        if hasattr(timer, "call_ms"):
            record.update(call_ms=timer.call_ms(inputs))
    except Exception as exc:  # a system that cannot run this case is a result
        record.update(ms=None, tflops=None, rel_err=None, error=str(exc).splitlines()[0][:200])
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return record


def _write(records: list[dict], out: Path, name: str) -> None:
    (out / f"{name}.json").write_text(json.dumps(records, indent=1))
    lines = ["| case | system | ms | TFLOP/s | rel. error |", "|---|---|---|---|---|"]
    for r in records:
        if r["ms"] is None:
            lines.append(f"| {r['case']} | {r['system']} | failed: {r['error']} | | |")
        else:
            lines.append(
                f"| {r['case']} | {r['system']} | {r['ms']:.3f} | {r['tflops']:.3g} "
                f"| {r['rel_err']:.1e} |"
            )
    (out / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


# The CPU section: small shapes, fp32, compiled and run in the same process.
CPU_CASES = [
    (1, 8, 8, n, 64, torch.float32, causal) for n in (512, 1024, 2048) for causal in (False, True)
]


def _wall_ms(fn, inputs: list[tuple]) -> float:
    for args in inputs:  # warm-up
        fn(*args)
    times = []
    for i in range(REPEATS):
        start = time.perf_counter()
        fn(*inputs[i % len(inputs)])
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def run_cpu(out: Path) -> int:
    """Ours (IREE's attention op, and the online-softmax rewrite) against IREE alone on
    SDPA, torch eager unfused and torch SDPA, on this machine's CPU; wall clock, median."""
    out.mkdir(parents=True, exist_ok=True)
    threads = torch.get_num_threads()
    name = f"cpu_{threads}threads"
    records = []
    for case in CPU_CASES:
        b, h, hkv, n, d, dtype, causal = case
        inputs = [_qkv(case) for _ in range(3)]
        with torch.no_grad():
            ref = SDPA(causal)(*(x.double() for x in inputs[0])).float()
        flops = 4 * b * h * n * n * d / (2 if causal else 1)
        unfused, sdpa = Unfused(causal), SDPA(causal)
        systems = {
            "torch_eager_unfused": unfused,
            "torch_sdpa": sdpa,
        }
        for system, model, options in (
            ("ours", Unfused(causal), {"attention": "iree"}),
            ("ours_online_softmax", Unfused(causal), {"attention": "online-softmax"}),
            ("iree_sdpa", SDPA(causal), {"pipeline": "builtin.module()"}),  # no pass of ours
        ):
            module = fc.compile(model, example_args=inputs[0], target="cpu", **options)
            systems[system] = fc.load(module)["main"]
        for system, fn in systems.items():
            timer = functools.partial(_wall_ms, fn)
            records.append(_record(case, system, timer, fn, inputs, ref, flops))
            print(json.dumps(records[-1]), flush=True)
    _write(records, out, name)
    return 0


if __name__ == "__main__":
    command, folder = sys.argv[1], Path(sys.argv[2])
    if command == "prepare":  # prepare FOLDER [SYSTEM ...]
        prepare(folder, sys.argv[3:])
    elif command == "cpu":
        sys.exit(run_cpu(folder))
    else:
        sys.exit(run(folder, Path(sys.argv[3])))
