"""Fused attention on Vulkan (the H200's Vulkan driver): generated SPIR-V kernel vs the rest.

On the CPU machine:   .venv/bin/python benchmarks/vulkan_attention.py prepare build/vk
On the GPU machine:   python3 benchmarks/vulkan_attention.py run build/vk OUT_DIR
(Vulkan loader set up as FINDINGS.md says; the runtime wheel on PYTHONPATH.)

Causal fp16 attention written out (B=1, H=8, D=64, the mask from iota/compare) at
N = 1024 ... 32768 and one full case, compiled for target="vulkan": attention="auto"
(one generated SPIR-V kernel per attention, fusion-spirv-attention) and, at the two
smallest N, attention="online-softmax" (our loop nest, as host-side loops of IREE
dispatches, 256x256 blocks). ``run`` times blocking calls on device-resident inputs
(median of 5 after a warm-up; wall clock, including the call's host cost), checks each
output against torch SDPA in float32 on CUDA, and times torch SDPA (fp16, CUDA events,
median of 20) in the same process; device memory: the card's used memory after the
calls above the baseline before loading (nvidia-smi; inputs included).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
from cases import used_mib  # noqa: E402
from variants import Attention  # noqa: E402

import fusion_compiler as fc  # noqa: E402

H, D = 8, 64
CASES = [(1024, True), (4096, True), (16384, True), (32768, True), (4096, False)]
ONLINE = [(1024, True), (4096, True)]  # the online-softmax loop nest, for comparison
_BLOCKS = "builtin.module(fusion-detect-attention,fusion-online-softmax{block-q=256 block-k=256})"


def _name(n: int, causal: bool, system: str) -> str:
    return f"N{n}_{'causal' if causal else 'full'}.{system}"


def _model(n: int, causal: bool) -> torch.nn.Module:
    return Attention(H, n, n, D, mask="causal-iota" if causal else None, upcast=True).eval()


def prepare(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for system, cases, options in (
        ("ours_vulkan", CASES, {}),
        ("ours_online_softmax", ONLINE, dict(pipeline=_BLOCKS)),
    ):
        for n, causal in cases:
            example = tuple(
                torch.empty(1, H, n, D, dtype=torch.float16, device="meta") for _ in range(3)
            )
            module = fc.compile(_model(n, causal), example_args=example, target="vulkan", **options)
            module.save(folder / f"{_name(n, causal, system)}.vmfb")
            print(_name(n, causal, system), module.stats, flush=True)


def _sdpa_ms(q, k, v, causal: bool) -> float:
    for _ in range(3):
        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    times = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def run(folder: Path, out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    records = []
    for system, cases in (("ours_vulkan", CASES), ("ours_online_softmax", ONLINE)):
        for n, causal in cases:
            flops = 4 * H * n * n * D / (2 if causal else 1)
            q, k, v = (torch.randn(1, H, n, D, dtype=torch.float16) for _ in range(3))
            before = used_mib()
            try:
                loaded = fc.load(folder / f"{_name(n, causal, system)}.vmfb", device="vulkan")
            except Exception as exc:  # a driver refusing a pipeline is a result: record it
                records.append(dict(case=_name(n, causal, system), failed=str(exc)[:300]))
                print(json.dumps(records[-1]), flush=True)
                continue
            function = loaded["main"]
            arrays = [function._to_device(x) for x in (q, k, v)]
            raw = function._function
            result = raw(*arrays)  # warm-up; the inputs stay on the device
            got = function._to_torch(result)
            times = []
            for _ in range(5):
                start = time.perf_counter()
                raw(*arrays).to_host()
                times.append((time.perf_counter() - start) * 1e3)
            ms = statistics.median(times)
            mib = used_mib() - before
            qc, kc, vc = (x.cuda() for x in (q, k, v))
            want = F.scaled_dot_product_attention(
                qc.float(), kc.float(), vc.float(), is_causal=causal
            )
            error = ((got.float().cuda() - want).norm() / want.norm()).item()
            sdpa = _sdpa_ms(qc, kc, vc, causal)
            record = dict(
                case=f"B1_H{H}_N{n}_D{D}_float16_{'causal' if causal else 'full'}",
                system=system,
                ms=ms,
                tflops=flops / ms / 1e9,
                rel_err=error,
                device_mib=mib,
                torch_sdpa_ms=sdpa,
                torch_sdpa_tflops=flops / sdpa / 1e9,
            )
            records.append(record)
            print(json.dumps(record), flush=True)
            del loaded, function, arrays, raw, result, got, qc, kc, vc, want
            torch.cuda.empty_cache()
    (out / "vulkan_attention.json").write_text(json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    command, folder = sys.argv[1], Path(sys.argv[2])
    sys.exit(prepare(folder) if command == "prepare" else run(folder, Path(sys.argv[3])))
