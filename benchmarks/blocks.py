"""A whole Llama block on the GPU: ours against torch eager and torch.compile, every system
timed the three ways of harness.py (device, back-to-back loop, one blocking call).

On the CPU machine:  .venv/bin/python benchmarks/blocks.py prepare build/blocks
On the GPU machine:  python3 benchmarks/blocks.py run build/blocks OUT

The block is examples/models.py's DecoderLayer (RMSNorm, RoPE, GQA by repeat_interleave,
a causal mask buffer with masked_fill, softmax in f32, SiLU MLP) at dim 1024, 8 heads of
128, 2 KV heads, fp16, on B4 N2048 tokens. Weights come from a seed on both machines (the
modules hold theirs); each system's output is checked against the block in float32.
TFLOP/s counts the block's matmuls and its attention (causal: halved).
Systems: ours_sm90 (fc.compile, cuda_arch="sm_90": attention as a generated kernel,
the rest by IREE), iree_alone (the same export, none of our passes, IREE for sm_80),
torch_eager, torch_compile (torch.compile of the block, default mode).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import harness
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
from models import DecoderLayer  # noqa: E402

import fusion_compiler as fc  # noqa: E402

# name -> (B, N, dim, heads, kv heads)
CASES = {"llama_B4_N2048_d1024_H8_KV2_fp16": (4, 2048, 1024, 8, 2)}
# system -> fc.compile options
MODULES = {
    "ours_sm90": {"cuda_arch": "sm_90"},
    "iree_alone": {"cuda_arch": "sm_80", "pipeline": "builtin.module()"},
}


def _block(case: tuple) -> torch.nn.Module:
    _, n, dim, heads, kv_heads = case
    torch.manual_seed(0)
    return DecoderLayer(dim, heads, kv_heads, max_len=n).eval()


def _x(case: tuple, device: str, dtype: torch.dtype = torch.float16) -> torch.Tensor:
    b, n, dim, _, _ = case
    return torch.randn(b, n, dim, device=device, dtype=dtype)


def prepare(folder: Path, args: argparse.Namespace) -> None:
    for name, case in CASES.items():
        if not harness.selected(name, args.only):
            continue
        model = _block(case).half()
        for system, options in MODULES.items():
            module = fc.compile(model, (_x(case, "cpu"),), target="cuda", **options)
            module.save(folder / f"{name}.{system}.vmfb")
            print(name, system, module.stats, flush=True)


def run(folder: Path, out: Path, args: argparse.Namespace) -> list[dict]:
    records = []
    for name, case in CASES.items():
        if not harness.selected(name, args.only):
            continue
        b, n, dim, heads, kv_heads = case
        inputs = [(_x(case, "cuda"),) for _ in range(3)]
        with torch.no_grad():
            reference = _block(case).cuda()(inputs[0][0].float())
        model = _block(case).half().cuda()
        # the modules found: each holds the block's weights, so they may travel apart
        paths = {system: folder / f"{name}.{system}.vmfb" for system in MODULES}
        systems = {
            system: fc.load(path, device="cuda")["main"]
            for system, path in paths.items()
            if path.exists()
        }
        systems.update(torch_eager=model, torch_compile=torch.compile(model))
        head_dim = dim // heads
        projections = dim * dim + dim * 2 * kv_heads * head_dim + dim * dim + 2 * dim * 4 * dim
        flops = 2 * b * n * projections + harness.attention_flops(b, heads, n, n, head_dim, True)
        fields = dict(case=name, B=b, N=n, dim=dim, H=heads, Hkv=kv_heads)
        for system, call in systems.items():
            records.append(harness.measure(fields, system, call, inputs, reference, flops, True))
        harness.write(records, out, "blocks")
    return records


if __name__ == "__main__":
    sys.exit(harness.main(__doc__.splitlines()[0], prepare, run))
