"""Decode steps and 128K-token causal attention on the GPU: ours against torch SDPA.

On the CPU machine:  .venv/bin/python benchmarks/long_context.py prepare build/long
On the GPU machine:  python3 benchmarks/long_context.py run build/long OUT_DIR

Decode: one query row (B1, H32, 8 KV heads by repeat_interleave, D128, fp16) against a cache of
Nk = 4096, 32768, 131072 keys. Long context: causal B1 H8 N131072 D128 fp16, whose
unfused score matrix alone would be 8·131072²·2 bytes = 256 GiB. Ours is
target="cuda", cuda_arch="sm_90" (one generated kernel), timed by its kernel's device
time (CUPTI) as in attention_peers.py; torch SDPA by CUDA events. Device memory: the
card's used memory (cudaMemGetInfo) above the baseline after the call, inputs included.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from attention_peers import Unfused, _events_ms, _iree_system  # noqa: E402

import fusion_compiler as fc  # noqa: E402

DECODE = [(1, 32, 8, 1, nk, 128, False) for nk in (4096, 32768, 131072)]
LONG = [(1, 8, 8, 131072, 131072, 128, True)]


def _name(case) -> str:
    b, h, hkv, nq, nk, d, causal = case
    return f"B{b}_H{h}_KV{hkv}_Nq{nq}_Nk{nk}_D{d}_{'causal' if causal else 'full'}"


def _inputs(case, device: str = "cpu"):
    b, h, hkv, nq, nk, d, _ = case
    shapes = [(b, h, nq, d), (b, hkv, nk, d), (b, hkv, nk, d)]
    return tuple(torch.randn(s, device=device, dtype=torch.float16) for s in shapes)


def prepare(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for case in DECODE + LONG:
        # compiled from small example shapes of the same layout would specialise them:
        # the example has the real sizes (meta tensors are enough for export)
        example = tuple(
            torch.empty(x.shape, dtype=x.dtype, device="meta") for x in _inputs(case, "meta")
        )
        module = fc.compile(
            Unfused(case[-1]), example_args=example, target="cuda", cuda_arch="sm_90"
        )
        module.save(folder / f"{_name(case)}.vmfb")
        print(_name(case), module.stats, flush=True)


def _used_bytes() -> int:
    free, total = torch.cuda.mem_get_info()
    return total - free


def run(folder: Path, out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    records = []
    for case in DECODE + LONG:
        b, h, hkv, nq, nk, d, causal = case
        flops = 4 * b * h * nq * nk * d / (2 if causal else 1)
        torch.cuda.empty_cache()
        baseline = _used_bytes()
        inputs = [_inputs(case, "cuda")]
        timer, call = _iree_system(folder / f"{_name(case)}.vmfb")
        got = call(*inputs[0])
        ours_bytes = _used_bytes() - baseline
        ms = timer(inputs)
        q, k, v = inputs[0]
        groups = h // hkv
        want = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=groups > 1)
        error = ((got.float() - want.float()).norm() / want.float().norm()).item()
        records.append(
            dict(
                case=_name(case),
                system="ours_sm90",
                ms=ms,
                tflops=flops / ms / 1e9,
                rel_err=error,
                device_mib=ours_bytes / 2**20,
            )
        )
        del got, timer, call
        torch.cuda.empty_cache()

        sdpa = functools.partial(F.scaled_dot_product_attention, is_causal=causal)
        sdpa_ms = _events_ms(functools.partial(sdpa, enable_gqa=groups > 1), inputs)
        records.append(
            dict(case=_name(case), system="torch_sdpa", ms=sdpa_ms, tflops=flops / sdpa_ms / 1e9)
        )
        for r in records[-2:]:
            print(json.dumps(r), flush=True)
        del inputs, q, k, v, want
    (out / "long_context.json").write_text(json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    command, folder = sys.argv[1], Path(sys.argv[2])
    sys.exit(prepare(folder) if command == "prepare" else run(folder, Path(sys.argv[3])))
