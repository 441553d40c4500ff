"""Decoding attention against the card's copy bandwidth: ours and torch SDPA, one timer.

On the CPU machine:  .venv/bin/python benchmarks/decode_bandwidth.py prepare build/decode_bw
On the GPU machine:  python3 benchmarks/decode_bandwidth.py run build/decode_bw OUT

One decoding step of attention, Llama-3-8B's shape (32 query heads over 8 K/V heads of
128, fp16, GQA by repeat_interleave as models write it), at batch 1 to 64 against caches
of 1K to 128K tokens. A decoding step reads its whole cache once, so its speed is the
bytes it moves (K, V, Q and the output) over its device time, as a fraction of what a
plain device copy reaches on the same card in the same run (``copy``: ``y.copy_(x)`` of
1 GiB, read plus written). Each system cycles through enough input sets that they do not
fit in L2 (at least ``L2_CLEAR_BYTES`` of caches), so every call reads its cache from
memory. Systems: ours_sm90 (fc.compile(..., target="cuda", cuda_arch="sm_90"): the
generated kernel, split-KV and packed GQA rows where the batch is small), torch_sdpa
(its own choice of backend, enable_gqa=True), torch_sdpa_flash and torch_sdpa_cudnn;
every system timed the three ways of harness.py and checked against float32 SDPA.
With --tilings (prepare and run), ours_sm90_TILING too: the kernel with other tiles
(``_tiling_pipeline``), in the same run.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from pathlib import Path

import harness
import torch
import torch.nn.functional as F
from attention_peers import Unfused

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import fusion_compiler as fc  # noqa: E402

HEADS, KV_HEADS, D = 32, 8, 128
# (batch, cached tokens)
CASES = [(1, n) for n in (1024, 8192, 32768, 131072)]
CASES += [(16, n) for n in (1024, 8192, 32768)] + [(64, n) for n in (1024, 8192)]
COPY_BYTES = 2**30
L2_CLEAR_BYTES = 512 * 2**20  # the caches a system cycles through, at least (L2: 50-60 MB)


def _name(case: tuple[int, int]) -> str:
    b, n = case
    return f"decode_B{b}_H{HEADS}_KV{KV_HEADS}_Nk{n}_D{D}"


def _inputs(case: tuple[int, int], device: str) -> tuple[torch.Tensor, ...]:
    b, n = case
    shapes = [(b, HEADS, 1, D), (b, KV_HEADS, n, D), (b, KV_HEADS, n, D)]
    return tuple(torch.randn(s, device=device, dtype=torch.float16) for s in shapes)


def _bytes(case: tuple[int, int]) -> int:
    """What a step moves: K and V once, Q in, the output out (fp16)."""
    b, n = case
    return 2 * (2 * b * KV_HEADS * n * D + 2 * b * HEADS * D)


def _tiling_pipeline(tiling: str) -> str:
    """The sm_90 pipeline with ``tiling`` (nBLOCK_NsSTAGESkSPLITS, 0: the schedule's
    choice) as fusion-kernel-attention's options."""
    match = re.fullmatch(r"n(\d+)s(\d+)k(\d+)", tiling)
    if match is None:
        raise SystemExit(f"--tilings: {tiling!r} is not nBLOCK_NsSTAGESkSPLITS")
    block_n, stages, splits = match.groups()
    options = f"arch=sm_90 block-n={block_n} num-stages={stages} splits={splits}"
    return harness.sm90_pipeline("fusion-kernel-attention", options)


def _systems(args: argparse.Namespace) -> dict[str, dict]:
    """Our systems: fc.compile's options for each."""
    systems = {"ours_sm90": dict(target="cuda", cuda_arch="sm_90")}
    for tiling in filter(None, args.tilings.split(",")):
        systems[f"ours_sm90_{tiling}"] = dict(target="cuda", pipeline=_tiling_pipeline(tiling))
    return systems


def prepare(folder: Path, args: argparse.Namespace) -> None:
    for case in CASES:
        if not harness.selected(_name(case), args.only):
            continue
        for system, options in _systems(args).items():
            harness.save_module(
                folder,
                f"{_name(case)}.{system}",
                lambda case=case, options=options: fc.compile(
                    Unfused(False), _inputs(case, "meta"), **options
                ),
            )


def _sdpa(backend=None):
    from torch.nn.attention import sdpa_kernel

    def sdpa(q, k, v):
        attend = functools.partial(F.scaled_dot_product_attention, enable_gqa=True)
        if backend is None:
            return attend(q, k, v)
        with sdpa_kernel(backend):
            return attend(q, k, v)

    return sdpa


def copy_bandwidth() -> dict:
    """The card's copy: ``y.copy_(x)`` of COPY_BYTES, read and written, timed as every
    system is (device time of back-to-back calls)."""
    x = torch.empty(COPY_BYTES // 2, dtype=torch.float16, device="cuda").normal_()
    y = torch.empty_like(x)
    times = harness.timings(lambda a, b: b.copy_(a), [(x, y)], cuda=True)
    return {**times, "gbps": 2 * COPY_BYTES / times["device_ms"] / 1e6}


def run(folder: Path, out: Path, args: argparse.Namespace) -> list[dict]:
    from torch.nn.attention import SDPBackend

    copy = copy_bandwidth()
    records = [{"case": "copy_1GiB", "system": "copy", **copy}]
    print(f"copy: {copy['gbps']:.0f} GB/s", flush=True)
    for case in CASES:
        name = _name(case)
        if not harness.selected(name, args.only):
            continue
        b, n = case
        sets = max(1, -(-L2_CLEAR_BYTES // _bytes(case)))
        inputs = [_inputs(case, "cuda") for _ in range(min(sets, 64))]
        with torch.no_grad():
            reference = _sdpa()(*(x.float() for x in inputs[0]))
        flops = harness.attention_flops(b, HEADS, 1, n, D, False)
        fields = dict(case=name, B=b, H=HEADS, Hkv=KV_HEADS, Nk=n, D=D, input_sets=len(inputs))
        systems = {
            system: harness.module(folder, f"{name}.{system}", "cuda") for system in _systems(args)
        }
        systems |= {
            "torch_sdpa": _sdpa(),
            "torch_sdpa_flash": _sdpa(SDPBackend.FLASH_ATTENTION),
            "torch_sdpa_cudnn": _sdpa(SDPBackend.CUDNN_ATTENTION),
        }
        for system, call in systems.items():
            record = harness.measure(fields, system, call, inputs, reference, flops, True)
            if record.get("device_ms"):
                record["gbps"] = _bytes(case) / record["device_ms"] / 1e6
                record["of_copy"] = record["gbps"] / copy["gbps"]
            records.append(record)
        del inputs
        torch.cuda.empty_cache()
        harness.write(records, out, "decode_bandwidth", render)
    return records


def render(records: list[dict]) -> str:
    """Per case, each system's device time and bandwidth as a fraction of the copy's;
    then every system's three timings."""
    copy = next(r for r in records if r["system"] == "copy")
    lines = [
        f"Copy bandwidth (y.copy_(x), 1 GiB, read + written): {copy['gbps']:.0f} GB/s "
        f"({copy['device_ms']:.3f} ms device).",
        "",
        "| case | system | device ms | GB/s | of the copy's | loop ms | call ms | rel. error |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        if r["system"] == "copy":
            continue
        if "error" in r:
            lines.append(f"| {r['case']} | {r['system']} | failed: {r['error'][:60]} |||||| ")
            continue
        lines.append(
            f"| {r['case']} | {r['system']} | {r['device_ms']:.4f} | {r['gbps']:.0f} | "
            f"{r['of_copy']:.2f} | {r['loop_ms']:.3f} | {r['call_ms']:.3f} | "
            f"{r['rel_err']:.1e} |"
        )
    return "\n".join(lines) + "\n"


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tilings", default="", help="ours with other tiles too: nBLOCK_NsSTAGESkSPLITS,..."
    )


if __name__ == "__main__":
    sys.exit(harness.main(__doc__.splitlines()[0], prepare, run, options=_options))
