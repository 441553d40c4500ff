"""Fused attention on Vulkan (the H200's Vulkan driver): the generated SPIR-V kernel against
torch SDPA on CUDA, every system timed the three ways of harness.py.

On the CPU machine:  .venv/bin/python benchmarks/vulkan_attention.py prepare build/vk
On the GPU machine:  python3 benchmarks/vulkan_attention.py run build/vk OUT
(the Vulkan loader set up as vulkan_variants_h200.md says; the runtime wheel on PYTHONPATH)

Causal fp16 attention written out (B1 H8 D64, the mask from an arange compare, softmax in
f32) at N = 1024 ... 32768 and one full case, compiled for target="vulkan". Systems:
ours_vulkan (one generated SPIR-V kernel per attention, fusion-spirv-attention),
ours_online_softmax (at the two smallest N: our loop nest as host-side loops of IREE
dispatches, 256x256 blocks), torch_sdpa (F.scaled_dot_product_attention in fp16 on
CUDA, torch's choice of backend: what a user of the same GPU would run instead). Our
modules take inputs already on the device (as the torch peer takes CUDA tensors) and
return the result on the host. CUPTI does not see Vulkan, so ours have no device time:
compare loop and call times, and TFLOP/s from loop time (the table's first part). Each
output is checked against float32 SDPA on CUDA; ``device_mib``: the card's used memory
(nvidia-smi) after a module's calls above what it was with the module loaded and its
inputs on the device (its results and scratch).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import harness
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
# system -> (the cases it runs, fc.compile options)
MODULES = {
    "ours_vulkan": (CASES, {}),
    "ours_online_softmax": (
        [(1024, True), (4096, True)],
        {
            "pipeline": "builtin.module(fusion-detect-attention,"
            "fusion-online-softmax{block-q=256 block-k=256})"
        },
    ),
}
SYSTEMS = [*MODULES, "torch_sdpa"]


def name(n: int, causal: bool) -> str:
    return f"B1_H{H}_N{n}_D{D}_float16_{'causal' if causal else 'full'}"


def _model(n: int, causal: bool) -> torch.nn.Module:
    return Attention(H, n, n, D, mask="causal-iota" if causal else None, upcast=True).eval()


def _selected(cases: list, args: argparse.Namespace) -> list:
    return [c for c in cases if harness.selected(name(*c), args.only)]


def prepare(folder: Path, args: argparse.Namespace) -> None:
    for system, (cases, options) in MODULES.items():
        for n, causal in _selected(cases, args):
            harness.save_module(
                folder,
                f"{name(n, causal)}.{system}",
                lambda n=n, causal=causal, options=options: fc.compile(
                    _model(n, causal), example_args=_meta(n), target="vulkan", **options
                ),
            )


def _meta(n: int) -> tuple[torch.Tensor, ...]:
    return tuple(torch.empty(1, H, n, D, dtype=torch.float16, device="meta") for _ in range(3))


def _resident(function) -> tuple:
    """``function`` (a loaded module's) as a call on inputs already on its device, and
    what puts an input set there; a module that did not load stays as it is."""
    from fusion_compiler.runtime import Function

    if not isinstance(function, Function):
        return function, lambda inputs: inputs

    def call(*arrays):
        return function._to_torch(function._function(*arrays))

    return call, lambda inputs: tuple(function._to_device(x.cpu()) for x in inputs)


def run(folder: Path, out: Path, args: argparse.Namespace) -> list[dict]:
    records = []
    for n, causal in _selected(CASES, args):
        inputs = [
            tuple(torch.randn(1, H, n, D, dtype=torch.float16, device="cuda") for _ in range(3))
            for _ in range(3)
        ]
        with torch.no_grad():
            q, k, v = (x.float() for x in inputs[0])
            reference = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            del q, k, v
        flops = harness.attention_flops(1, H, n, n, D, causal)
        fields = dict(case=name(n, causal), B=1, H=H, Nq=n, Nk=n, D=D, causal=causal)
        for system, (cases, _) in MODULES.items():
            if (n, causal) not in cases:
                continue
            call, upload = _resident(
                harness.module(folder, f"{name(n, causal)}.{system}", "vulkan")
            )
            on_device = [upload(x) for x in inputs]
            before = used_mib()
            record = harness.measure(fields, system, call, on_device, reference, flops, True)
            if "error" not in record:
                record["device_mib"] = used_mib() - before
            records.append(record)
            del call, upload, on_device
            torch.cuda.empty_cache()

        def sdpa(q, k, v, causal=causal):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        records.append(harness.measure(fields, "torch_sdpa", sdpa, inputs, reference, flops, True))
        harness.write(records, out, "vulkan", render)  # so far
    return records


def render(records: list[dict]) -> str:
    """Loop time and TFLOP/s from it per system (Vulkan has no CUPTI device time), ours
    against torch SDPA, then every system's three timings."""
    by_case = harness.by_case(records)
    head = [f"{s} loop ms" for s in SYSTEMS] + ["TFLOP/s (ours_vulkan, loop)"]
    head += ["ours_vulkan / torch_sdpa loop time", "ours_vulkan device MiB"]
    lines = ["| case | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    for case, found in by_case.items():
        ok = {s: r for s, r in found.items() if "error" not in r}
        cells = [
            f"{ok[s]['loop_ms']:.3f}" if s in ok else ("failed" if s in found else "-")
            for s in SYSTEMS
        ]
        ours, peer = ok.get("ours_vulkan"), ok.get("torch_sdpa")
        cells.append(f"{ours['tflops']:.1f}" if ours else "-")
        cells.append(f"{ours['loop_ms'] / peer['loop_ms']:.1f}x" if ours and peer else "-")
        cells.append(str(ours.get("device_mib", "-")) if ours else "-")
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    return (
        "Loop time per call (ms; ours: inputs on the device, the result to the host):\n\n"
        + "\n".join(lines)
        + "\n\nEvery system, the three timings (ms; TFLOP/s from device time where there is"
        " one, else loop time):\n\n" + harness.table(records)
    )


if __name__ == "__main__":
    sys.exit(harness.main(__doc__.splitlines()[0], prepare, run))
