"""Transformer blocks as model code writes them, built from configs with random weights.

GPT-2 (fused QKV projection, causal mask buffer), Llama (RMSNorm, RoPE, GQA, causal),
nn.TransformerEncoderLayer, a ViT encoder block (pre-norm, GELU, no mask) and a decoder
block with cross-attention to an encoder's memory. ``BLOCKS`` lists them with their
example inputs and how many attentions each has.

    .venv/bin/python examples/transformer_blocks.py [--target cpu|cuda|vulkan] [--cuda-arch sm_90]
        [--dtype float32|float16] [--save DIR | --load DIR]

compiles each block, runs it (CPU by default) on fresh inputs and compares with PyTorch
in float32. For a GPU machine with only the runtime: ``--save DIR`` compiles here and
writes the modules and weights, ``--load DIR`` there runs and checks them.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import DecoderLayer  # noqa: E402


@dataclass(frozen=True)
class Config:
    dim: int = 128
    heads: int = 4
    kv_heads: int = 2
    max_len: int = 256


class GPT2Block(nn.Module):
    """GPT-2: LayerNorm, one Linear for Q, K and V, a causal bias buffer, GELU MLP."""

    def __init__(self, config: Config):
        super().__init__()
        self.heads = config.heads
        self.ln_1 = nn.LayerNorm(config.dim)
        self.c_attn = nn.Linear(config.dim, 3 * config.dim)
        self.c_proj = nn.Linear(config.dim, config.dim)
        self.ln_2 = nn.LayerNorm(config.dim)
        self.mlp = nn.Sequential(
            nn.Linear(config.dim, 4 * config.dim), nn.GELU(), nn.Linear(4 * config.dim, config.dim)
        )
        n = config.max_len
        self.register_buffer("bias", torch.tril(torch.ones(n, n)).view(1, 1, n, n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q, k, v = (t.view(b, n, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        w = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        w = w.masked_fill(self.bias[:, :, :n, :n] == 0, float("-inf"))
        y = F.softmax(w, dim=-1) @ v
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(b, n, d))
        return x + self.mlp(self.ln_2(x))


class LlamaBlock(DecoderLayer):
    """Llama: RMSNorm, RoPE, grouped-query causal attention, SiLU MLP."""

    def __init__(self, config: Config):
        super().__init__(config.dim, config.heads, config.kv_heads, config.max_len)


class EncoderLayer(nn.Module):
    """torch.nn.TransformerEncoderLayer, batch first, as encoders use it."""

    def __init__(self, config: Config):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(
            config.dim, config.heads, 4 * config.dim, dropout=0.0, batch_first=True
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


class ViTBlock(nn.Module):
    """A ViT encoder block: pre-norm, SDPA over all patches, GELU MLP."""

    def __init__(self, config: Config):
        super().__init__()
        self.heads = config.heads
        self.norm1 = nn.LayerNorm(config.dim, eps=1e-6)
        self.qkv = nn.Linear(config.dim, 3 * config.dim)
        self.proj = nn.Linear(config.dim, config.dim)
        self.norm2 = nn.LayerNorm(config.dim, eps=1e-6)
        self.mlp = nn.Sequential(
            nn.Linear(config.dim, 4 * config.dim), nn.GELU(), nn.Linear(4 * config.dim, config.dim)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(y.transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.norm2(x))


class CrossAttentionDecoderBlock(nn.Module):
    """A decoder block: causal self-attention, then cross-attention to encoder memory."""

    def __init__(self, config: Config):
        super().__init__()
        self.heads = config.heads
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(config.dim) for _ in range(3))
        self.self_qkv = nn.Linear(config.dim, 3 * config.dim)
        self.self_out = nn.Linear(config.dim, config.dim)
        self.cross_q = nn.Linear(config.dim, config.dim)
        self.cross_kv = nn.Linear(config.dim, 2 * config.dim)
        self.cross_out = nn.Linear(config.dim, config.dim)
        self.mlp = nn.Sequential(
            nn.Linear(config.dim, 4 * config.dim), nn.ReLU(), nn.Linear(4 * config.dim, config.dim)
        )

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        b, n, d = t.shape
        return t.view(b, n, self.heads, d // self.heads).transpose(1, 2)

    def _attend(self, q, k, v, causal: bool) -> torch.Tensor:
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if causal:
            n = s.shape[-1]
            later = torch.arange(n)[None, :] > torch.arange(n)[:, None]
            s = s.masked_fill(later, float("-inf"))
        y = torch.softmax(s, dim=-1) @ v
        b, h, n, e = y.shape
        return y.transpose(1, 2).reshape(b, n, h * e)

    def forward(self, x: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        q, k, v = self.self_qkv(self.norm1(x)).chunk(3, dim=-1)
        x = x + self.self_out(self._attend(*map(self._heads, (q, k, v)), causal=True))
        q = self._heads(self.cross_q(self.norm2(x)))
        k, v = map(self._heads, self.cross_kv(memory).chunk(2, dim=-1))
        x = x + self.cross_out(self._attend(q, k, v, causal=False))
        return x + self.mlp(self.norm3(x))


CONFIG = Config()
# name -> (model factory, example input shapes (B, N, dim), fused attentions)
BLOCKS = {
    "gpt2": (GPT2Block, [(2, 96, CONFIG.dim)], 1),
    "llama": (LlamaBlock, [(2, 96, CONFIG.dim)], 1),
    "encoder": (EncoderLayer, [(2, 96, CONFIG.dim)], 1),
    "vit": (ViTBlock, [(2, 197, CONFIG.dim)], 1),
    "cross_decoder": (CrossAttentionDecoderBlock, [(2, 40, CONFIG.dim), (2, 150, CONFIG.dim)], 2),
}


def _check(name: str, call, model: nn.Module, shapes, dtype, device: str) -> float:
    """Runs ``call`` on fresh inputs and returns its rel. error against PyTorch in fp32."""
    fresh = tuple(torch.randn(s) for s in shapes)
    with torch.no_grad():
        want = model.float()(*fresh)
    inputs = tuple(x.to(dtype) for x in fresh)
    if device == "cuda":
        inputs = tuple(x.cuda() for x in inputs)
    got = call(*inputs).cpu().float()
    return ((got - want).norm() / want.norm()).item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="cpu", choices=["cpu", "cuda", "vulkan"])
    parser.add_argument("--cuda-arch", default="sm_80")
    parser.add_argument("--vulkan-target", default="pascal", help="IREE's SPIR-V target")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16"])
    parser.add_argument("--save", type=Path, help="compile only: modules and weights to DIR")
    parser.add_argument(
        "--load", type=Path, help="run the modules --save wrote (no compiler needed)"
    )
    args = parser.parse_args()
    import fusion_compiler as fc

    dtype = getattr(torch, args.dtype)
    device = {"cpu": "local-task", "cuda": "cuda", "vulkan": "vulkan"}[args.target]
    for name, (factory, shapes, _) in BLOCKS.items():
        torch.manual_seed(0)
        model = factory(CONFIG).eval()
        if args.load:
            model.load_state_dict(torch.load(args.load / f"{name}.pt"))
            step = fc.load(args.load / f"{name}.vmfb", device=device)
            error = _check(name, step, model, shapes, dtype, args.target)
            print(f"{name:<14} loaded  rel. error {error:.1e} on {device}")
            continue
        example = tuple(torch.randn(s, dtype=dtype) for s in shapes)
        start = time.perf_counter()
        module = fc.compile(
            model.to(dtype),
            example_args=example,
            target=args.target,
            cuda_arch=args.cuda_arch,
            vulkan_target=args.vulkan_target,
        )
        seconds = time.perf_counter() - start
        print(f"{name:<14} compiled in {seconds:4.1f} s  {module.stats}", end="")
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            module.save(args.save / f"{name}.vmfb")
            torch.save(model.state_dict(), args.save / f"{name}.pt")
            print(f"  saved to {args.save}")
            continue
        error = _check(name, fc.load(module, device=device), model, shapes, dtype, args.target)
        print(f"  rel. error {error:.1e}")


if __name__ == "__main__":
    main()
