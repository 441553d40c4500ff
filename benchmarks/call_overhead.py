"""What one attention call costs a Python caller beyond its kernel, on CUDA.

On the CPU machine:  .venv/bin/python benchmarks/call_overhead.py prepare build/calls
On the GPU machine:  python3 benchmarks/call_overhead.py run build/calls OUT

Systems, every one timed the three ways of harness.py: ``ours`` (the sm_90 kernel, its
results written into CUDA tensors torch allocated: fusion-caller-storage, the default),
``ours_via_host`` (the same module without it: IREE allocates each result per call,
handed to torch through DLPack where IREE exports it, else through the host), torch SDPA
with cuDNN and with FlashAttention-2. Then, for each of ours, where a blocking call's time
goes (argument checks and torch's stream sync, result storage, DLPack imports, the invoke
until its results are finished, the conversion of its results) and the memory copies the
profiler sees per call.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import harness
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import fusion_compiler as fc  # noqa: E402

# name -> (B, H, Hkv, Nq, Nk, D, causal), fp16: the cases of the runtime's issue
CASES = {
    "B1_H16_N4096_D128_causal": (1, 16, 16, 4096, 4096, 128, True),
    "B4_H16_N1024_D128_causal": (4, 16, 16, 1024, 1024, 128, True),
    "B4_H12_N512_D64_full": (4, 12, 12, 512, 512, 64, False),
    "decode_B1_H32_KV8_Nk8192_D128": (1, 32, 8, 1, 8192, 128, False),
}
MODULES = ("ours", "ours_via_host")


class SDPA(torch.nn.Module):
    def __init__(self, causal: bool):
        super().__init__()
        self.causal = causal

    def forward(self, q, k, v):
        gqa = q.shape[1] != k.shape[1]
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal, enable_gqa=gqa)


def qkv(case: tuple, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    b, h, hkv, nq, nk, d, _ = case
    shapes = [(b, h, nq, d), (b, hkv, nk, d), (b, hkv, nk, d)]
    return tuple(torch.randn(s, device=device, dtype=torch.float16) for s in shapes)


def prepare(folder: Path, args: argparse.Namespace) -> None:
    from fusion_compiler import targets

    # the sm_90 pipeline as fc.compile runs it, less the result storage
    via_host = [p for p in targets.kernel_pipeline("sm_90") if p != "fusion-caller-storage"]
    options = {
        "ours": {},
        "ours_via_host": {"pipeline": f"builtin.module({','.join(via_host)})"},
    }
    for name, case in CASES.items():
        if not harness.selected(name, args.only):
            continue
        for system in MODULES:
            harness.save_module(
                folder,
                f"{name}.{system}",
                lambda case=case, extra=options[system]: fc.compile(
                    SDPA(case[-1]), qkv(case), target="cuda", cuda_arch="sm_90", **extra
                ),
            )


def breakdown(function, inputs: list[tuple], repeats: int = harness.REPEATS) -> dict:
    """Milliseconds per blocking call in each step of ``Function.__call__``, by the
    runtime's own steps (private: this is the runtime's benchmark)."""
    from fusion_compiler import runtime

    steps = dict.fromkeys(["checks", "storage", "imports", "invoke", "results"], 0.0)
    for i in range(repeats + harness.WARMUP):
        args = inputs[i % len(inputs)]
        t0 = time.perf_counter()
        tensors, on_gpu = function._arguments(args)
        t1 = time.perf_counter()
        storage, kept = function._result_storage(tensors, on_gpu)
        t2 = time.perf_counter()
        views = [runtime._buffer_view(function._to_device(t)) for t in tensors]
        t3 = time.perf_counter()
        results = function._invoke([*views, *storage])
        t4 = time.perf_counter()
        if not kept:
            results = results if isinstance(results, (tuple, list)) else [results]
            [function._to_cuda(r) for r in results]
        torch.cuda.synchronize()
        t5 = time.perf_counter()
        if i >= harness.WARMUP:
            spans = (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)
            for step, seconds in zip(steps, spans, strict=True):
                steps[step] += seconds * 1e3 / repeats
    return steps


def copies(call, inputs: list[tuple], repeats: int = 10) -> dict[str, float]:
    """Copies per call by direction (``Memcpy DtoH``, ``Memcpy HtoD``...), as the
    profiler sees them."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for i in range(repeats):
            call(*inputs[i % len(inputs)])
        torch.cuda.synchronize()
    found: dict[str, float] = {}
    for event in prof.events():
        if event.name.startswith("Memcpy"):
            kind = event.name.split()[1]
            found[kind] = found.get(kind, 0) + 1 / repeats
    return found


def run(folder: Path, out: Path, args: argparse.Namespace) -> list[dict]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from fusion_compiler import runtime

    # IREE's CUDA driver flags, set once per process before the first module loads
    runtime._CUDA_FLAGS = (*runtime._CUDA_FLAGS, *args.cuda_flag)
    records = []
    for name, case in CASES.items():
        if not harness.selected(name, args.only):
            continue
        b, h, _, nq, nk, d, causal = case
        inputs = [qkv(case, "cuda") for _ in range(3)]
        with torch.no_grad():
            reference = SDPA(causal)(*(x.float() for x in inputs[0]))

        def with_backend(backend, causal=causal):
            def sdpa(q, k, v):
                with sdpa_kernel(backend):
                    return SDPA(causal)(q, k, v)

            return sdpa

        systems = {s: harness.module(folder, f"{name}.{s}", "cuda") for s in MODULES}
        systems["torch_sdpa_cudnn"] = with_backend(SDPBackend.CUDNN_ATTENTION)
        systems["torch_sdpa_flash"] = with_backend(SDPBackend.FLASH_ATTENTION)
        fields = dict(case=name, B=b, H=h, Nq=nq, Nk=nk, D=d, causal=causal, dtype="float16")
        fields["cuda_flags"] = " ".join(runtime._CUDA_FLAGS)
        flops = harness.attention_flops(b, h, nq, nk, d, causal and nq == nk)
        for system, call in systems.items():
            record = harness.measure(fields, system, call, inputs, reference, flops, True)
            if "error" not in record:
                record["copies"] = copies(call, inputs)
                if system in MODULES:
                    record["steps_ms"] = breakdown(call, inputs)
            records.append(record)
        harness.write(records, out, f"call_overhead{args.tag}", render)  # so far
    return records


def _copies(found: dict[str, float]) -> str:
    return ", ".join(f"{n:g} {kind}" for kind, n in sorted(found.items())) or "0"


def render(records: list[dict]) -> str:
    flags = records[0].get("cuda_flags", "") if records else ""
    lines = [
        f"IREE CUDA flags: {flags}\n",
        "Per call (ms): device = CUPTI kernel time, loop = back-to-back wall time, call = one "
        "blocking call; over = call - device; copies = memory copies per call, by direction.\n",
        "| case | system | device | loop | call | over | copies | rel. error |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        if "error" in r:
            lines.append(f"| {r['case']} | {r['system']} | failed: {r['error']} | | | | | |")
            continue
        over = r["call_ms"] - r["device_ms"] if r["device_ms"] is not None else math.nan
        lines.append(
            f"| {r['case']} | {r['system']} | {r['device_ms']:.3f} | {r['loop_ms']:.3f} "
            f"| {r['call_ms']:.3f} | {over:.3f} | {_copies(r.get('copies', {}))} "
            f"| {r['rel_err']:.1e} |"
        )
    steps = [r for r in records if "steps_ms" in r]
    if steps:
        names = list(steps[0]["steps_ms"])
        lines += [
            "\nWhere a blocking call of ours goes (ms per call, the runtime's steps):\n",
            "| case | system | " + " | ".join(names) + " | sum |",
            "|---|---|" + "---|" * (len(names) + 1),
        ]
        for r in steps:
            values = [r["steps_ms"][n] for n in names]
            cells = " | ".join(f"{v:.3f}" for v in values)
            lines.append(f"| {r['case']} | {r['system']} | {cells} | {sum(values):.3f} |")
    medians = [r["call_ms"] for r in records if r["system"] == "ours" and "call_ms" in r]
    if medians:
        lines.append(
            f"\nours, median blocking call over the cases: {statistics.median(medians):.3f} ms"
        )
    return "\n".join(lines) + "\n"


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cuda-flag", action="append", default=[], help="an IREE CUDA driver flag to add"
    )
    parser.add_argument("--tag", default="", help="appended to the results' file names")


if __name__ == "__main__":
    sys.exit(harness.main(__doc__.splitlines()[0], prepare, run, options=_options))
