"""Attention against every peer, every system timed the same three ways (harness.py).

On the CPU machine:  .venv/bin/python benchmarks/attention_peers.py prepare build/peers
On the GPU machine:  python3 benchmarks/attention_peers.py run build/peers OUT
On the CPU alone:    .venv/bin/python benchmarks/attention_peers.py run --cpu build/peers-cpu OUT
                     (compiles and runs here; no prepare)

Systems: ours_sm90 (the attention written as models write it: matmul, scale, a causal
mask from arange/compare, softmax in f32, matmul, GQA by repeat_interleave; fused by
fusion-detect-attention and lowered to a kernel generated for sm_90a), ours (the same
fused op compiled by IREE's attention code generation for sm_80), iree_sdpa (IREE alone
on F.scaled_dot_product_attention), torch SDPA flash (FlashAttention-2) and cuDNN,
torch.compile and eager of the same unfused code. On the CPU: ours (online softmax, the
CPU default), ours with IREE's attention op, iree_sdpa, torch eager and torch SDPA.
Each output is checked against float32 PyTorch (float64 on the CPU) in the same run.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import harness
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import fusion_compiler as fc  # noqa: E402

# (B, H, Hkv, N, D): each in fp16 and bf16, full and causal
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
CPU_CASES = [
    (1, 8, 8, n, 64, torch.float32, causal) for n in (512, 1024, 2048) for causal in (False, True)
]
# the IREE modules: system -> (model class, CUDA arch)
MODULES = {
    "ours_sm90": ("Unfused", "sm_90"),
    "ours": ("Unfused", "sm_80"),
    "iree_sdpa": ("SDPA", "sm_80"),
}
SYSTEMS = [
    "ours_sm90",
    "ours",
    "iree_sdpa",
    "torch_sdpa_flash",
    "torch_sdpa_cudnn",
    "torch_compile_unfused",
    "torch_eager_unfused",
]


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


def name(case) -> str:
    b, h, hkv, n, d, dtype, causal = case
    kv = f"_KV{hkv}" if hkv != h else ""
    kind = "causal" if causal else "full"
    return f"B{b}_H{h}{kv}_N{n}_D{d}_{str(dtype).removeprefix('torch.')}_{kind}"


def qkv(case, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    b, h, hkv, n, d, dtype, _ = case
    shapes = [(b, h, n, d), (b, hkv, n, d), (b, hkv, n, d)]
    return tuple(torch.randn(s, device=device, dtype=dtype) for s in shapes)


def _fields(case) -> dict:
    b, h, hkv, n, d, dtype, causal = case
    return dict(
        case=name(case),
        dtype=str(dtype).removeprefix("torch."),
        B=b,
        H=h,
        Hkv=hkv,
        Nq=n,
        Nk=n,
        D=d,
        causal=causal,
    )


def _selected(cases: list, args: argparse.Namespace) -> list:
    """The cases ``--only`` selects."""
    return [c for c in cases if harness.selected(name(c), args.only)]


def prepare(folder: Path, args: argparse.Namespace) -> None:
    """Compiles every case for each IREE system."""
    for case in _selected(CASES, args):
        for system, (model, arch) in MODULES.items():
            module = fc.compile(
                globals()[model](case[-1]), qkv(case), target="cuda", cuda_arch=arch
            )
            module.save(folder / f"{name(case)}.{system}.vmfb")
            print(name(case), system, module.stats, flush=True)


def _gpu_systems(case, folder: Path) -> dict:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    causal = case[-1]
    unfused = Unfused(causal).cuda()

    def flash(q, k, v):
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return SDPA(causal)(q, k, v)

    def cudnn(q, k, v):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return SDPA(causal)(q, k, v)

    systems = {
        system: fc.load(folder / f"{name(case)}.{system}.vmfb", device="cuda")["main"]
        for system in MODULES
    }
    systems.update(
        torch_sdpa_flash=flash,
        torch_sdpa_cudnn=cudnn,
        torch_compile_unfused=torch.compile(unfused),
        torch_eager_unfused=unfused,
    )
    return systems


def _cpu_systems(case) -> dict:
    causal = case[-1]
    systems = {}
    for system, model, options in (
        ("ours", Unfused(causal), {}),  # the CPU default: our online-softmax loop nest
        ("ours_iree_op", Unfused(causal), {"attention": "iree"}),
        ("iree_sdpa", SDPA(causal), {"pipeline": "builtin.module()"}),  # no pass of ours
    ):
        systems[system] = fc.load(fc.compile(model, qkv(case), target="cpu", **options))["main"]
    systems.update(torch_sdpa=SDPA(causal), torch_eager_unfused=Unfused(causal))
    return systems


def run(folder: Path, out: Path, args: argparse.Namespace) -> list[dict]:
    cuda = not args.cpu
    records = []
    for case in _selected(CPU_CASES if args.cpu else CASES, args):
        b, h, _, n, d, _, causal = case
        device = "cuda" if cuda else "cpu"
        inputs = [qkv(case, device) for _ in range(3)]
        with torch.no_grad():
            exact = torch.float32 if cuda else torch.float64
            reference = SDPA(causal)(*(x.to(exact) for x in inputs[0]))
        flops = harness.attention_flops(b, h, n, n, d, causal)
        systems = _gpu_systems(case, folder) if cuda else _cpu_systems(case)
        for system, call in systems.items():
            records.append(
                harness.measure(_fields(case), system, call, inputs, reference, flops, cuda)
            )
        harness.write(records, out, "peers_cpu" if args.cpu else "peers", render)  # so far
    return records


def render(records: list[dict]) -> str:
    """The three timings per system, then TFLOP/s (device time) with ours_sm90's ratios."""
    by_case = harness.by_case(records)
    systems = [s for s in SYSTEMS if any(s in c for c in by_case.values())] or sorted(
        {r["system"] for r in records}
    )

    def tflops(case: str, system: str) -> float | None:
        return by_case.get(case, {}).get(system, {}).get("tflops")

    head = [*systems, "/ flash", "/ cuDNN", "/ IREE alone"]
    lines = ["| case | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    for case, found in by_case.items():
        cells = []
        for system in systems:
            value = tflops(case, system)
            cells.append(f"{value:.0f}" if value else ("failed" if system in found else "-"))
        ours = tflops(case, "ours_sm90")
        for peer in ("torch_sdpa_flash", "torch_sdpa_cudnn", "iree_sdpa"):
            other = tflops(case, peer)
            cells.append(f"{ours / other:.2f}x" if ours and other else "-")
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    return (
        "TFLOP/s from device time (4·B·H·N²·D / t, halved for causal):\n\n"
        + "\n".join(lines)
        + "\n\nEvery system, the three timings (ms):\n\n"
        + harness.table(records)
    )


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cpu", action="store_true", help="the CPU cases, compiled here")


if __name__ == "__main__":
    sys.exit(harness.main(__doc__.splitlines()[0], prepare, run, options=_options))
