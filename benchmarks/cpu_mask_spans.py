"""Static masks on the CPU: the online softmax's key loop bounded by the mask's values
(chunked local attention, a prefix-LM mask) against the same module without those bounds
and torch, every system timed by harness.timings (back-to-back loop and one blocking call;
no device time on the CPU).

    .venv/bin/python benchmarks/cpu_mask_spans.py OUT [--n 2048,4096]

One step on the CPU: the A/B needs the compiler (the bounds are switched off by replacing
``online_softmax.key_spans``). fp32, B1 H4 D64. Systems: ours (fc.compile, target cpu),
ours_without_spans (the same with no bounds from the mask's values: the loop as before),
torch_eager (the model as written) and torch_sdpa (F.scaled_dot_product_attention with the
case's boolean mask). Outputs checked against the model in float64; TFLOP/s counts the
query-key pairs the mask keeps.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import harness
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fusion_compiler.passes import online_softmax  # noqa: E402

import fusion_compiler as fc  # noqa: E402

B, H, D = 1, 4, 64
CHUNK = 512  # keys per chunk, causal within each (Llama 4's chunked attention)
PREFIX = 256  # keys every query sees


def chunked(n: int) -> torch.Tensor:
    rows, cols = torch.arange(n)[:, None], torch.arange(n)[None, :]
    return (cols // CHUNK == rows // CHUNK) & (cols <= rows)


def prefix_lm(n: int) -> torch.Tensor:
    rows, cols = torch.arange(n)[:, None], torch.arange(n)[None, :]
    return (cols <= rows) | (cols < PREFIX)


CASES = {"chunked": chunked, "prefix_lm": prefix_lm}


class Masked(torch.nn.Module):
    """Attention spelled out with the case's mask computed from aranges (masked_fill)."""

    def __init__(self, keep) -> None:
        super().__init__()
        self.keep = keep

    def forward(self, q, k, v):
        s = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
        s = s.masked_fill(~self.keep(q.shape[-2]), float("-inf"))
        return torch.softmax(s, -1) @ v


def _compiled(model, inputs, spans: bool):
    saved = online_softmax.key_spans
    if not spans:
        online_softmax.key_spans = lambda *args: None
    try:
        return fc.load(fc.compile(model, example_args=inputs[0], target="cpu"))
    finally:
        online_softmax.key_spans = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--n", default="2048,4096")
    args = parser.parse_args()
    records = []
    for n in (int(x) for x in args.n.split(",")):
        for case, keep in CASES.items():
            torch.manual_seed(0)
            inputs = [tuple(torch.randn(B, H, n, D) for _ in range(3)) for _ in range(3)]
            model = Masked(keep).eval()
            mask = keep(n)
            systems = {
                "ours": _compiled(model, inputs, spans=True),
                "ours_without_spans": _compiled(model, inputs, spans=False),
                "torch_eager": model,
                "torch_sdpa": lambda q, k, v, m=mask: F.scaled_dot_product_attention(
                    q, k, v, attn_mask=m
                ),
            }
            with torch.no_grad():
                want = model(*(x.double() for x in inputs[0]))
            pairs = int(mask.sum())
            for system, call in systems.items():
                with torch.no_grad():
                    error = harness.rel_error(torch.as_tensor(call(*inputs[0])), want)
                    times = harness.timings(call, inputs, cuda=False)
                flops = 4 * B * H * pairs * D
                records.append(
                    dict(
                        case=f"{case} n{n}",
                        system=system,
                        rel_err=error,
                        tflops=flops / (times["loop_ms"] * 1e-3) / 1e12,
                        **times,
                    )
                )
                print(case, n, system, times, f"err {error:.1e}", flush=True)
    harness.write(records, args.out, "cpu_mask_spans")


if __name__ == "__main__":
    main()
