"""Small attention models, written the ways people write them; used by examples and tests."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class MultiheadAttentionBlock(nn.Module):
    """torch.nn.MultiheadAttention, self-attention, batch first."""

    def __init__(self, dim: int = 64, heads: int = 4):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x, x, x, need_weights=False)[0]


class SDPABlock(nn.Module):
    """Projections around F.scaled_dot_product_attention."""

    def __init__(self, dim: int = 64, heads: int = 4, causal: bool = False):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.out(y.transpose(1, 2).reshape(b, n, d))


class ExplicitAttentionBlock(nn.Module):
    """Attention spelled out: matmul, scale, softmax, matmul, with projections."""

    def __init__(self, dim: int = 64, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        h = self.heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, n, h, d // h).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // h)
        y = torch.softmax(scores, dim=-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, n, d))


class DecoderLayer(nn.Module):
    """A Llama-style decoder layer: RMSNorm, RoPE, grouped-query causal attention, MLP."""

    def __init__(self, dim: int = 64, heads: int = 4, kv_heads: int = 2, max_len: int = 128):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.norm1 = nn.RMSNorm(dim)
        self.norm2 = nn.RMSNorm(dim)
        self.q = nn.Linear(dim, dim, bias=False)
        self.kv = nn.Linear(dim, 2 * kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.SiLU(), nn.Linear(4 * dim, dim))
        half = self.head_dim // 2
        freqs = 1.0 / 10000 ** (torch.arange(half) / half)
        angles = torch.arange(max_len)[:, None] * freqs[None, :]
        self.register_buffer("cos", angles.cos())
        self.register_buffer("sin", angles.sin())
        self.register_buffer("keep", torch.ones(max_len, max_len, dtype=torch.bool).tril())

    def _rope(self, x: torch.Tensor) -> torch.Tensor:
        n, half = x.shape[-2], self.head_dim // 2
        a, b = x[..., :half], x[..., half:]
        cos, sin = self.cos[:n], self.sin[:n]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, n, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(h).view(b, n, 2, self.kv_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = self._rope(q), self._rope(k)
        groups = self.heads // self.kv_heads
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        s = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        s = s.masked_fill(~self.keep[:n, :n], float("-inf"))
        y = torch.softmax(s.float(), dim=-1).to(q.dtype) @ v
        x = x + self.o(y.transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.norm2(x))


class TwoLayerDecoder(nn.Module):
    """Two decoder layers, then a cross-attention block over an encoder memory."""

    def __init__(self, dim: int = 64):
        super().__init__()
        self.layers = nn.ModuleList([DecoderLayer(dim), DecoderLayer(dim)])
        self.cross = nn.MultiheadAttention(dim, 4, batch_first=True)

    def forward(self, x: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x + self.cross(x, memory, memory, need_weights=False)[0]
