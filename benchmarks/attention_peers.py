"""Attention against every peer on one GPU, in one process: the start of the harness.

On the CPU machine:  .venv/bin/python benchmarks/attention_peers.py prepare build/peers
On the GPU machine:  python3 benchmarks/attention_peers.py run build/peers OUT_DIR

Systems, per case: ours (the attention written out as matmul/softmax/matmul, fused by
fusion-detect-attention, IREE's attention op for CUDA sm_80), IREE alone on SDPA
(IREE's own lowering of F.scaled_dot_product_attention, its default configuration),
torch eager unfused, torch SDPA flash, torch SDPA cuDNN, torch.compile of the unfused
code. Each is timed with CUDA events around single calls after warm-up, median of the
repetitions, rotating three input sets; IREE modules are called on device-resident
buffers (inputs imported through DLPack, result left on the device). Each output is
checked against float32 PyTorch in the same run. Writes ``<gpu>.json`` (one record
per case and system) and a Markdown table. TFLOP/s = 4·B·H·Nq·Nk·D / t, halved for
causal.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import fusion_compiler as fc  # noqa: E402

# (B, H, N, D, dtype, causal)
CASES = [
    (1, 16, 4096, 128, torch.float16, False),
    (1, 16, 4096, 128, torch.float16, True),
    (4, 16, 1024, 128, torch.float16, False),
    (1, 32, 4096, 64, torch.bfloat16, True),
]
REPEATS = 20


class Unfused(torch.nn.Module):
    def __init__(self, causal: bool, n: int):
        super().__init__()
        self.causal = causal
        self.register_buffer("keep", torch.ones(n, n, dtype=torch.bool).tril())

    def forward(self, q, k, v):
        s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        if self.causal:
            s = s.masked_fill(~self.keep, float("-inf"))
        return torch.softmax(s.float(), dim=-1).to(q.dtype) @ v


class SDPA(torch.nn.Module):
    def __init__(self, causal: bool):
        super().__init__()
        self.causal = causal

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)


def _name(case) -> str:
    b, h, n, d, dtype, causal = case
    return (
        f"B{b}_H{h}_N{n}_D{d}_{str(dtype).removeprefix('torch.')}_{'causal' if causal else 'full'}"
    )


def prepare(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for case in CASES:
        b, h, n, d, dtype, causal = case
        example = tuple(torch.randn(b, h, n, d).to(dtype) for _ in range(3))
        for system, model in (("ours", Unfused(causal, n)), ("iree_sdpa", SDPA(causal))):
            module = fc.compile(model, example_args=example, target="cuda")
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
    """A callable on device-resident buffers, and one that returns a torch tensor."""
    function = fc.load(path, device="cuda")["main"]
    raw = function._function

    def on_device(*tensors):
        torch.cuda.current_stream().synchronize()
        return raw(*[function._to_device(t) for t in tensors])  # DLPack, no copy

    def checked(*tensors):
        return function(*tensors)

    return on_device, checked


def run(folder: Path, out: Path) -> int:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    out.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.get_device_name().replace(" ", "_")
    records = []
    for case in CASES:
        b, h, n, d, dtype, causal = case
        inputs = [
            tuple(torch.randn(b, h, n, d, device="cuda", dtype=dtype) for _ in range(3))
            for _ in range(3)
        ]
        with torch.no_grad():
            ref = SDPA(causal)(*(x.float() for x in inputs[0]))
        flops = 4 * b * h * n * n * d / (2 if causal else 1)
        unfused = Unfused(causal, n).cuda()
        compiled = torch.compile(unfused)

        def flash(q, k, v, causal=causal):
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        def cudnn(q, k, v, causal=causal):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        systems = {
            "torch_eager_unfused": (unfused, unfused),
            "torch_sdpa_flash": (flash, flash),
            "torch_sdpa_cudnn": (cudnn, cudnn),
            "torch_compile_unfused": (compiled, compiled),
        }
        for system in ("ours", "iree_sdpa"):
            systems[system] = _iree_system(folder / f"{_name(case)}.{system}.vmfb")
        for system, (timed, checked) in systems.items():
            record = dict(
                case=_name(case),
                dtype=str(dtype).removeprefix("torch."),
                B=b,
                H=h,
                Hkv=h,
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
                    ms = _events_ms(timed, inputs)
                record.update(ms=ms, tflops=flops / ms / 1e9, rel_err=error)
            except Exception as exc:  # a system that cannot run this case is a result
                record.update(
                    ms=None, tflops=None, rel_err=None, error=str(exc).splitlines()[0][:200]
                )
            records.append(record)
            print(json.dumps(record), flush=True)
    (out / f"{gpu}.json").write_text(json.dumps(records, indent=1))
    lines = ["| case | system | ms | TFLOP/s | rel. error |", "|---|---|---|---|---|"]
    for r in records:
        if r["ms"] is None:
            lines.append(f"| {r['case']} | {r['system']} | failed: {r['error']} | | |")
        else:
            lines.append(
                f"| {r['case']} | {r['system']} | {r['ms']:.3f} | {r['tflops']:.0f} "
                f"| {r['rel_err']:.1e} |"
            )
    (out / f"{gpu}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    command, folder = sys.argv[1], Path(sys.argv[2])
    if command == "prepare":
        prepare(folder)
    else:
        sys.exit(run(folder, Path(sys.argv[3])))
