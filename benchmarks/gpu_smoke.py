"""Runs CUDA modules compiled elsewhere on this machine's GPU and checks them against PyTorch.

On the CPU machine (has the compiler):
    .venv/bin/python benchmarks/gpu_smoke.py prepare build/gpu [CUDA_ARCH]
On the GPU machine (runtime and torch only):
    python3 benchmarks/gpu_smoke.py check build/gpu

``prepare`` compiles each case for target="cuda" (sm_80, or sm_90: generated kernels)
and saves the module with the model's weights; ``check`` rebuilds each model from its
weights, runs the module on device "cuda" with fresh inputs, and compares with PyTorch
in float64 on the GPU. The ``DYNAMIC`` cases are compiled once with a dynamic sequence
length and run at several.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
from cases import BF16, BOUND, F16, F32, example, qkv  # noqa: E402
from models import (  # noqa: E402
    ExplicitAttentionBlock,
    MultiheadAttentionBlock,
    SDPABlock,
    TwoLayerDecoder,
)
from variants import Attention  # noqa: E402

import fusion_compiler as fc  # noqa: E402

BLOCK = [((2, 128, 64), F32)]


class SDPA(torch.nn.Module):
    def forward(self, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)


class Einsum(torch.nn.Module):
    """Attention written with einsum, softmax in f32."""

    def forward(self, q, k, v):
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * q.shape[-1] ** -0.5
        return torch.einsum("bhqk,bhkd->bhqd", scores.float().softmax(-1).to(q.dtype), v)


class Bmm(torch.nn.Module):
    """Attention written with bmm over heads folded into the batch, softmax in f32."""

    def forward(self, q, k, v):
        b, h, n, d = q.shape
        q3, k3, v3 = (x.reshape(b * h, x.shape[2], d) for x in (q, k, v))
        scores = torch.bmm(q3, k3.transpose(1, 2)) * d**-0.5
        out = torch.bmm(scores.float().softmax(-1).to(q.dtype), v3)
        return out.reshape(b, h, n, d)


# name -> (model factory, input (shape, dtype)s)
CASES = {
    "mha": (MultiheadAttentionBlock, BLOCK),
    "sdpa": (SDPABlock, BLOCK),
    "sdpa_causal": (lambda: SDPABlock(causal=True), BLOCK),
    "explicit": (ExplicitAttentionBlock, BLOCK),
    "decoder2": (TwoLayerDecoder, [((2, 77, 64), F32), ((2, 133, 64), F32)]),
    "causal_tril_f16": (
        lambda: Attention(8, 300, 300, 64, mask="causal-tril", upcast=True),
        qkv(1, 8, 8, 300, 300, 64, F16),
    ),
    "alibi_cross_bf16": (
        lambda: Attention(4, 77, 333, 128, mask="alibi", upcast=True),
        qkv(1, 4, 4, 77, 333, 128, BF16),
    ),
    "gqa_repeat_kv_f16": (
        lambda: Attention(
            8, 128, 128, 128, gqa="repeat_kv", kv_heads=2, mask="causal-iota", upcast=True
        ),
        qkv(1, 8, 2, 128, 128, 128, F16),
    ),
    "softcap_causal_f16": (
        lambda: Attention(8, 200, 200, 64, mask="softcap-causal", upcast=True),
        qkv(1, 8, 8, 200, 200, 64, F16),
    ),
    "softcap_d256_f32": (
        lambda: Attention(2, 64, 96, 256, mask="softcap"),
        qkv(1, 2, 2, 64, 96, 256, F32),
    ),
    "explicit_d256_f32": (lambda: Attention(2, 64, 96, 256), qkv(1, 2, 2, 64, 96, 256, F32)),
    "sdpa_d160_f32": (SDPA, qkv(1, 2, 2, 64, 96, 160, F32)),
    # decoding steps: streaming row blocks, split-KV (with sm_90's generated kernels)
    "decode_gqa_d64_f16": (
        lambda: Attention(12, 1, 3000, 64, gqa="repeat_interleave", kv_heads=4),
        qkv(2, 12, 4, 1, 3000, 64, F16),
    ),
    "decode_causal_d128_bf16": (
        lambda: Attention(8, 3, 5000, 128, mask="causal-iota", upcast=True),
        qkv(1, 8, 8, 3, 5000, 128, BF16),
    ),
    "decode_d256_f16": (lambda: Attention(4, 1, 2000, 256), qkv(1, 4, 4, 1, 2000, 256, F16)),
    "decode_sink_f16": (
        lambda: Attention(8, 1, 4100, 64, gqa="repeat_kv", kv_heads=2, sink=True),
        qkv(1, 8, 2, 1, 4100, 64, F16),
    ),
}
# name -> (model factory, input (shape, dtype)s, each input's dynamic dim (None: static),
# lengths to run besides the example's): compiled once with those dims one dynamic size
SEQUENCE, CACHE = (2, 2, 2), (None, 2, 2)  # every input's dim 2; K's and V's alone
DYNAMIC = {
    "dynamic_einsum_f16": (Einsum, qkv(1, 8, 8, 96, 96, 64, F16), SEQUENCE, (300,)),
    "dynamic_causal_f16": (
        lambda: Attention(8, 96, 96, 64, mask="causal-iota", upcast=True),
        qkv(1, 8, 8, 96, 96, 64, F16),
        SEQUENCE,
        (257,),
    ),
    "dynamic_bmm_f16": (Bmm, qkv(2, 4, 4, 80, 80, 128, F16), SEQUENCE, (1, 513)),
    "dynamic_sink_f16": (
        lambda: Attention(8, 64, 64, 64, gqa="repeat_kv", kv_heads=2, sink=True),
        qkv(1, 8, 2, 64, 64, 64, F16),
        SEQUENCE,
        (200,),
    ),
    # a decoding step against a cache of any length: split-KV over a dynamic key count
    "dynamic_decode_f16": (
        lambda: Attention(8, 1, 700, 128, gqa="repeat_interleave", kv_heads=2),
        qkv(1, 8, 2, 1, 700, 128, F16),
        CACHE,
        (5, 4100),
    ),
}


def _compile(model, specs, cuda_arch: str, dims: tuple | None = None):
    args = example(specs)
    if dims is None:
        return fc.compile(model, args, target="cuda", cuda_arch=cuda_arch, remarks=True)
    n = torch.export.Dim("n", min=1, max=8192)
    shapes = tuple(None if dim is None else {dim: n} for dim in dims)
    program = torch.export.export(model, args, dynamic_shapes=shapes)
    return fc.compile(program, target="cuda", cuda_arch=cuda_arch, remarks=True)


def _sized(specs, dims: tuple, length: int):
    """``specs`` with each input's dynamic dim (``dims``) at ``length``."""
    return [
        (shape if dim is None else (*shape[:dim], length, *shape[dim + 1 :]), dtype)
        for (shape, dtype), dim in zip(specs, dims, strict=True)
    ]


def prepare(folder: Path, cuda_arch: str = "sm_80") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    stats = {}
    cases = {name: (*case, None, ()) for name, case in CASES.items()} | DYNAMIC
    for name, (factory, specs, dims, _) in cases.items():
        torch.manual_seed(0)
        model = factory().eval()
        module = _compile(model, specs, cuda_arch, dims)
        module.save(folder / f"{name}.vmfb")
        torch.save(model.state_dict(), folder / f"{name}.pt")
        stats[name] = module.stats
        print(f"{name}: {module.stats}")
    (folder / "stats.json").write_text(json.dumps(stats))


def check(folder: Path) -> int:
    stats = json.loads((folder / "stats.json").read_text())
    print(f"{'case':<26} {'fused':>5} {'rel. error':>10} {'bound':>6} {'ms/call':>8} {'out':>5}")
    failed = 0
    runs = [(name, factory, specs) for name, (factory, specs) in CASES.items()]
    for name, (factory, specs, dims, lengths) in DYNAMIC.items():
        runs += [(name, factory, specs)] + [
            (name, factory, _sized(specs, dims, n)) for n in lengths
        ]
    for name, factory, specs in runs:
        model = factory().eval()
        model.load_state_dict(torch.load(folder / f"{name}.pt"))
        run = fc.load(folder / f"{name}.vmfb", device="cuda")
        inputs = [x.cuda() for x in example(specs)]
        label = name  # with a dynamic length, the length it runs at
        if name in DYNAMIC:
            label = f"{name}@{specs[1][0][DYNAMIC[name][2][1]]}"
        with torch.no_grad():
            want = model.double().cuda()(*(x.double() for x in inputs)).cpu()
        got = run(*inputs)
        where = got.device.type  # CUDA tensors in: the result stays on the GPU (DLPack)
        error = ((got.cpu().double() - want).norm() / want.norm()).item()
        start = time.perf_counter()
        for _ in range(10):
            run(*inputs)
        torch.cuda.synchronize()
        ms = (time.perf_counter() - start) / 10 * 1e3
        bound = BOUND[specs[0][1]]
        ok = error < bound  # NaN fails too
        failed += not ok
        fused = stats[name]["attention_ops"]
        mark = "" if ok else "  WRONG"
        print(f"{label:<26} {fused:>5} {error:>10.1e} {bound:>6.0e} {ms:>8.2f} {where:>5}{mark}")
    return 1 if failed else 0


if __name__ == "__main__":
    command, folder = sys.argv[1], Path(sys.argv[2])
    sys.exit(prepare(folder, *sys.argv[3:]) if command == "prepare" else check(folder))
