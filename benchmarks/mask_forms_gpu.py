"""What a padding mask's spelling costs the sm_90 kernel: the same attention, three forms.

- ``sdpa-bool``: ``F.scaled_dot_product_attention(attn_mask=keep)`` (the mask adds -inf);
- ``masked_fill``: ``s.masked_fill(~keep, -inf)`` (the mask replaces the score: a NaN or
  inf score at a masked key is dropped, as PyTorch drops it);
- ``additive``: ``s + where(keep, 0, -inf)`` (the mask adds, as written).

On the CPU machine:
    .venv/bin/python benchmarks/mask_forms_gpu.py prepare build/mask_forms
on the GPU machine (runtime only):
    python3 benchmarks/mask_forms_gpu.py run build/mask_forms
prints CUPTI kernel time per call of each module (back-to-back calls) and checks each
against PyTorch, also with NaN keys at the masked positions.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHAPE = (4, 16, 2048, 128)  # B, H, N, D
PAD = 300  # keys masked at the end of every sequence


class Form(torch.nn.Module):
    def __init__(self, form: str):
        super().__init__()
        self.form = form

    def forward(self, q, k, v, keep):
        mask = keep[:, None, None, :]
        if self.form == "sdpa-bool":
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        s = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
        if self.form == "masked_fill":
            s = s.masked_fill(~mask, float("-inf"))
        else:
            s = s + torch.zeros_like(s).masked_fill(~mask, float("-inf"))
        return torch.softmax(s.float(), dim=-1).to(q.dtype) @ v


FORMS = ("sdpa-bool", "masked_fill", "additive")


def _inputs(device: str):
    b, h, n, d = SHAPE
    q, k, v = (torch.randn(b, h, n, d, dtype=torch.float16, device=device) for _ in range(3))
    keep = torch.ones(b, n, dtype=torch.bool, device=device)
    keep[:, n - PAD :] = False
    return q, k, v, keep


def prepare(folder: Path) -> None:
    import fusion_compiler as fc

    folder.mkdir(parents=True, exist_ok=True)
    example = _inputs("cpu")
    specs = {}
    for form in FORMS:
        module = fc.compile(Form(form), example, target="cuda", cuda_arch="sm_90")
        module.save(folder / f"{form}.vmfb")
        specs[form] = module.stats
    (folder / "index.json").write_text(json.dumps(specs))


def run(folder: Path) -> int:
    import fusion_compiler as fc
    from fusion_compiler.tools.autotune import kernel_ms

    q, k, v, keep = _inputs("cuda")
    poisoned = k.clone()
    poisoned[:, :, -PAD:] = float("nan")
    b, h, n, d = SHAPE
    flops = 4 * b * h * n * (n - PAD) * d
    print("| form | kernel ms (CUPTI) | TFLOP/s (kept keys) | rel. error | NaN masked: finite |")
    print("|---|---|---|---|---|")
    for form in FORMS:
        call = fc.load(folder / f"{form}.vmfb", device="cuda")
        want = Form(form)(q.double(), k.double(), v.double(), keep)
        got = call(q, k, v, keep).double()
        error = ((got - want).norm() / want.norm()).item()
        finite = bool(torch.isfinite(call(q, poisoned, v, keep)).all())
        for _ in range(5):
            call(q, k, v, keep)
        torch.cuda.synchronize()

        def calls(call=call) -> None:
            for _ in range(50):
                call(q, k, v, keep)
            torch.cuda.synchronize()

        ms = kernel_ms(calls, 50)
        print(f"| {form} | {ms:.3f} | {flops / ms / 1e9:.0f} | {error:.1e} | {finite} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["prepare", "run"])
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    if args.step == "prepare":
        prepare(args.folder)
        return 0
    return run(args.folder)


if __name__ == "__main__":
    sys.exit(main())
