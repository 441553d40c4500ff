"""Sliding-window attention at the sizes models use it, on the sm_90 kernel, against
torch SDPA (cuDNN, and torch's choice) and FlexAttention; every system timed the three
ways of harness.py (device, back-to-back loop, one blocking call).

On the CPU machine:  .venv/bin/python benchmarks/sliding_window_gpu.py prepare build/sliding_window
On the GPU machine:  python3 benchmarks/sliding_window_gpu.py run build/sliding_window OUT

Each case (``CASES``) is one prefill, fp16, D128: each query sees its own key and the
``window - 1`` before it, written as transformers' eager path writes it (an arange
compare, ``torch.where`` with ``finfo.min``). Systems: ours_sm90 (fc.compile of that
model, cuda_arch="sm_90"), torch_sdpa_cudnn and torch_sdpa (SDPA with the window as a
boolean attn_mask, under cuDNN and under torch's choice), torch_flex
(``torch.compile(flex_attention)`` with the window as its ``mask_mod`` and a
``BlockMask``). Every output is checked against float32 SDPA with the mask; TFLOP/s counts
the query-key pairs the window keeps.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import harness
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import fusion_compiler as fc  # noqa: E402

D = 128
# name -> (batch, heads, tokens, window): Mistral-7B's 4096 window over an 8K and a 16K
# prompt, Gemma 3's 1024 local window over 4K
CASES = {
    "mistral_n8192_w4096": (1, 32, 8192, 4096),
    "mistral_n16384_w4096": (1, 32, 16384, 4096),
    "gemma3_b4_n4096_w1024": (4, 16, 4096, 1024),
}


class SlidingWindow(torch.nn.Module):
    def __init__(self, window: int):
        super().__init__()
        self.window = window

    def forward(self, q, k, v):
        s = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
        rows = torch.arange(q.shape[-2], device=q.device)[:, None]
        cols = torch.arange(k.shape[-2], device=q.device)[None, :]
        keep = (cols <= rows) & (cols > rows - self.window)
        s = torch.where(keep, s, torch.finfo(s.dtype).min)
        return torch.softmax(s.float(), dim=-1).to(v.dtype) @ v


def _keep(n: int, window: int, device: str) -> torch.Tensor:
    rows = torch.arange(n, device=device)[:, None]
    cols = torch.arange(n, device=device)[None, :]
    return (cols <= rows) & (cols > rows - window)


def _inputs(case: tuple[int, ...], device: str) -> tuple[torch.Tensor, ...]:
    b, h, n, _ = case
    return tuple(torch.randn(b, h, n, D, dtype=torch.float16, device=device) for _ in range(3))


def prepare(folder: Path, args: argparse.Namespace) -> None:
    for name, case in CASES.items():
        if not harness.selected(name, args.only):
            continue
        harness.save_module(
            folder,
            f"{name}.ours_sm90",
            lambda case=case: fc.compile(
                SlidingWindow(case[3]).eval(),
                _inputs(case, "cpu"),
                target="cuda",
                cuda_arch="sm_90",
            ),
        )


def _sdpa(keep: torch.Tensor, backend=None) -> Callable:
    from torch.nn.attention import sdpa_kernel

    def sdpa(q, k, v):
        if backend is None:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)

    return sdpa


def _flex(n: int, window: int) -> Callable:
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    def keep(b, h, q_idx, kv_idx):
        return (kv_idx <= q_idx) & (kv_idx > q_idx - window)

    block_mask = create_block_mask(keep, None, None, n, n, device="cuda")
    compiled = torch.compile(flex_attention)
    return lambda q, k, v: compiled(q, k, v, block_mask=block_mask)


def run(folder: Path, out: Path, args: argparse.Namespace) -> list[dict]:
    from torch.nn.attention import SDPBackend

    records = []
    for name, case in CASES.items():
        if not harness.selected(name, args.only):
            continue
        b, h, n, window = case
        inputs = [_inputs(case, "cuda") for _ in range(3)]
        keep = _keep(n, window, "cuda")
        with torch.no_grad():
            reference = F.scaled_dot_product_attention(
                *(x.float() for x in inputs[0]), attn_mask=keep
            )
        flops = 4 * b * h * D * keep.sum().item()
        fields = dict(case=name, B=b, H=h, N=n, window=window, D=D)
        systems = {
            "ours_sm90": harness.module(folder, f"{name}.ours_sm90", "cuda"),
            "torch_sdpa_cudnn": _sdpa(keep, SDPBackend.CUDNN_ATTENTION),
            "torch_sdpa": _sdpa(keep),
            "torch_flex": _flex(n, window),
        }
        for system, call in systems.items():
            records.append(harness.measure(fields, system, call, inputs, reference, flops, True))
        harness.write(records, out, "sliding_window", render)  # so far
    return records


def _ms(value: float | None) -> str:
    return "failed" if value is None else f"{value:.3f}"


def _ratio(ours: float | None, theirs: float | None) -> str:
    return "-" if ours is None or theirs is None else f"{ours / theirs:.2f}"


def render(records: list[dict]) -> str:
    by_case = harness.by_case(records)
    lines = [
        "| case | ours device ms | cuDNN | flex | ours / cuDNN time | ours / flex time |",
        "|---|---|---|---|---|---|",
    ]
    for case, found in by_case.items():
        ms = {s: (r.get("device_ms") if "error" not in r else None) for s, r in found.items()}
        ours, cudnn, flex = (ms.get(s) for s in ("ours_sm90", "torch_sdpa_cudnn", "torch_flex"))
        lines.append(
            f"| {case} | {_ms(ours)} | {_ms(cudnn)} | {_ms(flex)} | {_ratio(ours, cudnn)} "
            f"| {_ratio(ours, flex)} |"
        )
    return (
        "Device time (ms):\n\n"
        + "\n".join(lines)
        + "\n\nEvery system, the three timings (ms):\n\n"
        + harness.table(records)
    )


if __name__ == "__main__":
    sys.exit(harness.main(__doc__.splitlines()[0], prepare, run))
