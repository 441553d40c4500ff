"""Decode steps and 128K-token causal attention on the GPU: ours against torch SDPA.

On the CPU machine:  .venv/bin/python benchmarks/long_context.py prepare build/long
On the GPU machine:  python3 benchmarks/long_context.py run build/long OUT

Decode: one query row (B1, H32, 8 KV heads by repeat_interleave, D128, fp16) against a cache of
Nk = 4096, 32768, 131072 keys. Long context: causal B1 H8 N131072 D128 fp16, whose
unfused score matrix alone would be 8·131072²·2 bytes = 256 GiB. Ours is
target="cuda", cuda_arch="sm_90" (one generated kernel). Every system is timed the three
ways of harness.py. Device memory (``device_mib``): the card's used memory
(cudaMemGetInfo) above the baseline after the first call, inputs included.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import harness
import torch
import torch.nn.functional as F
from attention_peers import Unfused

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
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


def prepare(folder: Path, args: argparse.Namespace) -> None:
    for case in [c for c in DECODE + LONG if harness.selected(_name(c), args.only)]:
        # compiled from small example shapes of the same layout would specialise them:
        # the example has the real sizes (meta tensors are enough for export)
        module = fc.compile(
            Unfused(case[-1]), example_args=_inputs(case, "meta"), target="cuda", cuda_arch="sm_90"
        )
        module.save(folder / f"{_name(case)}.vmfb")
        print(_name(case), module.stats, flush=True)


def _used_bytes() -> int:
    free, total = torch.cuda.mem_get_info()
    return total - free


def run(folder: Path, out: Path, args: argparse.Namespace) -> list[dict]:
    records = []
    for case in [c for c in DECODE + LONG if harness.selected(_name(c), args.only)]:
        b, h, hkv, nq, nk, d, causal = case
        flops = harness.attention_flops(b, h, nq, nk, d, causal)
        inputs = [_inputs(case, "cuda")]
        with torch.no_grad():
            q, k, v = (x.float() for x in inputs[0])
            reference = F.scaled_dot_product_attention(
                q, k, v, is_causal=causal, enable_gqa=h > hkv
            )
            del q, k, v
        sdpa = functools.partial(
            F.scaled_dot_product_attention, is_causal=causal, enable_gqa=h > hkv
        )
        module = folder / f"{_name(case)}.vmfb"
        systems = {  # made when timed, so each one's memory is its own
            "ours_sm90": functools.partial(lambda m: fc.load(m, device="cuda")["main"], module),
            "torch_sdpa": functools.partial(lambda f: f, sdpa),
        }
        fields = dict(case=_name(case), B=b, H=h, Hkv=hkv, Nq=nq, Nk=nk, D=d, causal=causal)
        for system, make in systems.items():
            torch.cuda.empty_cache()
            baseline = _used_bytes()
            call = make()
            call(*inputs[0])
            used = (_used_bytes() - baseline) / 2**20
            record = harness.measure(fields, system, call, inputs, reference, flops, cuda=True)
            records.append({**record, "device_mib": used})
            del call
        harness.write(records, out, "long_context")
    return records


if __name__ == "__main__":
    sys.exit(harness.main(__doc__.splitlines()[0], prepare, run))
