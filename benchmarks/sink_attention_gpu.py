"""Attention with a sink (GPT-OSS) on the GPU: ours against the same module in torch eager
and under torch.compile; every system timed the three ways of harness.py (device,
back-to-back loop, one blocking call).

On the CPU machine:  .venv/bin/python benchmarks/sink_attention_gpu.py prepare build/sinks
On the GPU machine:  python3 benchmarks/sink_attention_gpu.py run build/sinks OUT

Each case is one prefill, or one decoding step (a query over a cache), at GPT-OSS-20B's
attention shape (64 query heads over 8 K/V heads of 64, fp16), written as transformers'
eager attention writes it: K and V repeated per query head, the scaled scores plus a
causal mask computed from positions (a sliding window of 128 on its sliding layers), the
learned sinks concatenated to every row, the row max subtracted, softmax, the sink column
dropped, P·V. Systems: ours_sm90
(fc.compile(..., target="cuda", cuda_arch="sm_90")), torch_eager and torch_compile (the
same module); torch_sdpa_cudnn_no_sink is SDPA with cuDNN on the same shape, causal (the
window as a boolean mask) and without the sink: not the same computation, a scale for
what an attention of this shape costs. Every output is checked against the module in
float32; TFLOP/s counts the query-key pairs the mask keeps.
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

HEADS, KV_HEADS, D = 64, 8, 64
# name -> (batch, tokens, window (0: none), queries: the last of the tokens)
CASES = {
    "gpt_oss_full_b1_n4096": (1, 4096, 0, 4096),
    "gpt_oss_window128_b1_n4096": (1, 4096, 128, 4096),
    "gpt_oss_full_b4_n1024": (4, 1024, 0, 1024),
    # decoding steps: one query over a cache
    "gpt_oss_decode_b1_n4096": (1, 4096, 0, 1),
    "gpt_oss_decode_b16_n4096": (16, 4096, 0, 1),
    "gpt_oss_decode_window128_b1_n4096": (1, 4096, 128, 1),
}


class SinkAttention(torch.nn.Module):
    """GPT-OSS's eager attention over given Q, K and V, its mask from positions."""

    def __init__(self, window: int):
        super().__init__()
        self.window = window
        self.sinks = torch.nn.Parameter(torch.randn(HEADS))

    def forward(self, q, k, v):
        k = k.repeat_interleave(HEADS // KV_HEADS, dim=1)
        v = v.repeat_interleave(HEADS // KV_HEADS, dim=1)
        scores = torch.matmul(q, k.transpose(2, 3)) * D**-0.5
        keep = _keep(q.shape[-2], k.shape[-2], self.window, q.device)
        scores = scores + torch.where(keep, 0.0, float("-inf")).to(scores.dtype)
        sinks = self.sinks.to(q.dtype).reshape(1, -1, 1, 1).expand(q.shape[0], -1, q.shape[-2], -1)
        logits = torch.cat([scores, sinks], dim=-1)
        logits = logits - logits.max(dim=-1, keepdim=True).values
        probs = F.softmax(logits, dim=-1, dtype=logits.dtype)[..., :-1]
        return torch.matmul(probs, v)


def _keep(nq: int, n: int, window: int, device) -> torch.Tensor:
    """Causal (and a window) for ``nq`` queries, the last of ``n`` tokens."""
    rows = torch.arange(n - nq, n, device=device)[:, None]
    keys = torch.arange(n, device=device)[None, :]
    keep = keys <= rows
    return keep & (keys > rows - window) if window else keep


def _inputs(case: tuple[int, ...], device: str) -> tuple[torch.Tensor, ...]:
    b, n, _, nq = case
    shapes = [(b, HEADS, nq, D), (b, KV_HEADS, n, D), (b, KV_HEADS, n, D)]
    return tuple(torch.randn(s, dtype=torch.float16, device=device) for s in shapes)


def _model(case: tuple[int, ...]) -> SinkAttention:
    torch.manual_seed(0)
    return SinkAttention(case[2]).eval()


def prepare(folder: Path, args: argparse.Namespace) -> None:
    for name, case in CASES.items():
        if not harness.selected(name, args.only):
            continue
        harness.save_module(
            folder,
            f"{name}.ours_sm90",
            lambda case=case: fc.compile(
                _model(case).half(), _inputs(case, "cpu"), target="cuda", cuda_arch="sm_90"
            ),
        )


def _cudnn_no_sink(keep: torch.Tensor) -> Callable:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def sdpa(q, k, v):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=keep, enable_gqa=True)

    return sdpa


def run(folder: Path, out: Path, args: argparse.Namespace) -> list[dict]:
    records = []
    for name, case in CASES.items():
        if not harness.selected(name, args.only):
            continue
        b, n, window, nq = case
        model = _model(case).cuda()
        inputs = [_inputs(case, "cuda") for _ in range(3)]
        with torch.no_grad():
            reference = model(*(x.float() for x in inputs[0]))
        model.half()
        keep = _keep(nq, n, window, "cuda")
        flops = 4 * b * HEADS * D * keep.sum().item()
        fields = dict(case=name, B=b, Nq=nq, N=n, window=window, H=HEADS, KV=KV_HEADS, D=D)
        systems = {
            "ours_sm90": harness.module(folder, f"{name}.ours_sm90", "cuda"),
            "torch_eager": model,
            "torch_compile": torch.compile(model),
            "torch_sdpa_cudnn_no_sink": _cudnn_no_sink(keep),
        }
        for system, call in systems.items():
            records.append(harness.measure(fields, system, call, inputs, reference, flops, True))
        harness.write(records, out, "sink_attention")
    return records


if __name__ == "__main__":
    sys.exit(harness.main(__doc__.splitlines()[0], prepare, run))
