"""Masks on the CPU: the online softmax's key loop bounded by what the mask keeps, from
its values at compile time (chunked local attention, a prefix-LM mask) or from its inputs
per call (a padding mask, packed documents), against the same module without those
bounds and torch, every system timed by harness.timings (back-to-back loop and one
blocking call; no device time on the CPU).

    .venv/bin/python benchmarks/cpu_mask_spans.py OUT [--n 2048,4096]

One step on the CPU: the A/B needs the compiler (the bounds are switched off by replacing
``online_softmax.key_spans`` and ``online_softmax.spans_per_call``). The spellings
are mask_forms_gpu.py's (the masks the GPU suite times), fp32, B1 H4 D64; the padding
pads half the keys, the documents are packed of 512 tokens each. Systems: ours (fc.compile,
target cpu), ours_without_spans (the loop visiting every key block below the causal
bound), torch_eager (the model as written) and torch_sdpa (F.scaled_dot_product_attention
with the case's boolean mask). Outputs checked against SDPA in float64; TFLOP/s counts the
query-key pairs the mask keeps.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import harness
import mask_forms_gpu as forms
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fusion_compiler.passes import online_softmax  # noqa: E402

import fusion_compiler as fc  # noqa: E402

B, H, D = 1, 4, 64
# static masks (bounded at compile time), then masks of inputs (bounded per call)
CASES = (
    "chunked_masked_fill",
    "prefix_lm_masked_fill",
    "padding_half_masked_fill",
    "documents_full_masked_fill",
    "documents_sdpa_bool",
)


def _spelling(name: str, n: int) -> forms.Spelling:
    spelling = dataclasses.replace(forms.SPELLINGS[name], b=B, h=H, n=n, nq=n, d=D)
    return dataclasses.replace(spelling, dtype=torch.float32, pad=n // 2)


def _compiled(model, inputs, spans: bool):
    saved = online_softmax.key_spans, online_softmax.spans_per_call
    if not spans:
        online_softmax.key_spans = lambda *args: None
        online_softmax.spans_per_call = lambda *args: None
    try:
        return fc.load(fc.compile(model, example_args=inputs[0], target="cpu"))
    finally:
        online_softmax.key_spans, online_softmax.spans_per_call = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--n", default="2048,4096")
    args = parser.parse_args()
    records = []
    for n in (int(x) for x in args.n.split(",")):
        for case in CASES:
            spelling = _spelling(case, n)
            torch.manual_seed(0)
            inputs = [forms._inputs(spelling, "cpu") for _ in range(3)]
            model = forms.Model(spelling).eval()
            allowed = forms._allowed(spelling, inputs[0])
            systems = {
                "ours": _compiled(model, inputs, spans=True),
                "ours_without_spans": _compiled(model, inputs, spans=False),
                "torch_eager": model,
                "torch_sdpa": lambda q, k, v, *rest, spelling=spelling: (
                    F.scaled_dot_product_attention(
                        q, k, v, attn_mask=forms._allowed(spelling, (q, k, v, *rest))
                    )
                ),
            }
            with torch.no_grad():
                want = F.scaled_dot_product_attention(
                    *(x.double() for x in inputs[0][:3]), attn_mask=allowed
                )
            pairs = int(allowed.expand(B, 1, n, n).sum())
            for system, call in systems.items():
                with torch.no_grad():
                    error = harness.rel_error(torch.as_tensor(call(*inputs[0])), want)
                    times = harness.timings(call, inputs, cuda=False)
                flops = 4 * H * pairs * D
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
