"""Attention written the ways models write it, one small module per variant.

Every module takes ``q`` (B, H, Nq, D), ``k`` and ``v`` (B, Hkv, Nk, D) and returns
(B, H, Nq, D). They are the test matrix of ``fusion-detect-attention``.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def _repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    """Llama's repeat_kv: expand then reshape."""
    b, h, n, d = x.shape
    return x[:, :, None, :, :].expand(b, h, groups, n, d).reshape(b, h * groups, n, d)


# The ``scale_on`` values of Attention (every one fused).
SCALE_FORMS = [
    "scores-mul",
    "scores-div",
    "scores-div-tensor",
    "q",
    "k",
    "none",
    "scores-per-head",
    "scores-div-per-head",
    "scores-div-q-norm",
]

# The ``mask`` values of Attention that fusion-detect-attention fuses.
FUSABLE_MASKS = [
    "causal-tril",
    "causal-where",
    "causal-additive",
    "causal-iota",
    "causal-finfo-min",
    "causal-sliced",
    "sliding-window",
    "sliding-window-finfo-min",
    "alibi",
    "relative-bias",
    "softcap",
    "softcap-causal",
]


class Attention(nn.Module):
    """softmax(scores(q, k)) @ v with the score form chosen by ``scale_on`` and ``mask``.

    scale_on: "scores-mul", "scores-div", "scores-div-tensor" (by
      ``torch.sqrt(torch.tensor(head_dim))``, computed in the forward), "q", "k", "none",
      "scores-per-head" (Swin-v2's cosine attention: normalised q and k, the scores times
      a learned logit scale per head, ``clamp(max=log(100)).exp()``), "scores-div-per-head"
      (a learned temperature per head) or "scores-div-q-norm" (each query row's scores
      divided by that query's norm).
    mask: None, "causal-tril" (bool buffer, masked_fill), "causal-where" (torch.where),
      "causal-additive" (-inf buffer added), "causal-iota" (arange compare in forward),
      "causal-finfo-min" (torch.where with the dtype's lowest value, as transformers),
      "causal-sliced" (GPT-2's: a (1, 1, max, max) tril buffer sliced to the call's rows
      and keys, torch.where with finfo.min),
      "sliding-window" (the nk // 3 + 1 keys up to each row's diagonal, an arange compare
      with masked_fill), "sliding-window-finfo-min" (the same as a bool buffer, torch.where
      with finfo.min),
      "alibi" (slopes x distance), "relative-bias" (a learned (H, Nq, Nk) bias),
      "softcap" (cap * tanh(s / cap), as Gemma 2), "softcap-causal" (softcap, then a
      causal mask), "finite-fill" (masked_fill with -1e9; not fused: differs from -inf
      on fully masked rows).
    gqa: None, "repeat_interleave" or "repeat_kv" when Hkv < H.
    upcast: softmax in float32 with casts around it, as fp16/bf16 models do.
    sink: a learned logit per head appended to every row before the softmax and its
      column dropped after, the row max subtracted first (GPT-OSS's attention sinks).
    """

    def __init__(
        self,
        heads: int,
        nq: int,
        nk: int,
        head_dim: int,
        *,
        scale_on: str = "scores-mul",
        mask: str | None = None,
        gqa: str | None = None,
        kv_heads: int | None = None,
        upcast: bool = False,
        sink: bool = False,
    ):
        super().__init__()
        self.sinks = nn.Parameter(torch.randn(heads)) if sink else None
        if scale_on == "scores-per-head":
            self.logit_scale = nn.Parameter(torch.log(10 * torch.rand(heads, 1, 1) + 1))
        elif scale_on == "scores-div-per-head":
            self.temperature = nn.Parameter(torch.rand(1, heads, 1, 1) + 0.5)
        self.heads, self.kv_heads = heads, kv_heads or heads
        self.scale_on, self.mask, self.gqa, self.upcast = scale_on, mask, gqa, upcast
        self.scale, self.head_dim = 1 / math.sqrt(head_dim), head_dim
        keep = torch.ones(nq, nk, dtype=torch.bool).tril(diagonal=nk - nq)
        self.window = nk // 3 + 1
        if mask == "sliding-window-finfo-min":
            early = torch.ones(nq, nk, dtype=torch.bool).tril(diagonal=nk - nq - self.window)
            self.register_buffer("keep", keep & ~early)
        elif mask in (
            "causal-tril",
            "causal-where",
            "causal-finfo-min",
            "finite-fill",
            "softcap-causal",
        ):
            self.register_buffer("keep", keep)
        elif mask == "causal-sliced":
            longest = nk + 16
            tril = torch.ones(longest, longest, dtype=torch.bool).tril()
            self.register_buffer("keep", tril.view(1, 1, longest, longest), persistent=False)
        elif mask == "causal-additive":
            self.register_buffer("bias", torch.zeros(nq, nk).masked_fill(~keep, -math.inf))
        elif mask == "alibi":
            slopes = torch.tensor([2 ** (-8 * (i + 1) / heads) for i in range(heads)])
            distance = (torch.arange(nk)[None, :] - torch.arange(nq)[:, None]).float()
            self.register_buffer("bias", slopes[:, None, None] * distance)
        elif mask == "relative-bias":
            self.bias = nn.Parameter(torch.randn(heads, nq, nk))

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        groups = self.heads // self.kv_heads
        if self.gqa == "repeat_interleave":
            k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        elif self.gqa == "repeat_kv":
            k, v = _repeat_kv(k, groups), _repeat_kv(v, groups)
        if self.scale_on == "q":
            q = q * self.scale
        elif self.scale_on == "k":
            k = k * self.scale
        if self.scale_on == "scores-per-head":
            q, k = nn.functional.normalize(q, dim=-1), nn.functional.normalize(k, dim=-1)
        s = q @ k.transpose(-2, -1)
        if self.scale_on == "scores-per-head":
            s = s * torch.clamp(self.logit_scale, max=math.log(100)).exp()
        elif self.scale_on == "scores-div-per-head":
            s = s / self.temperature
        elif self.scale_on == "scores-div-q-norm":
            s = s / q.norm(dim=-1, keepdim=True)
        elif self.scale_on == "scores-mul":
            s = s * self.scale
        elif self.scale_on == "scores-div":
            s = s / (1 / self.scale)
        elif self.scale_on == "scores-div-tensor":
            s = s / torch.sqrt(torch.tensor(self.head_dim, dtype=s.dtype))
        if self.upcast:
            s = s.float()
        s = self._mask(s)
        if self.sinks is not None:
            sinks = self.sinks.to(s.dtype).reshape(1, -1, 1, 1).expand(*s.shape[:-1], 1)
            s = torch.cat([s, sinks], dim=-1)
            s = s - s.amax(dim=-1, keepdim=True)
            return torch.softmax(s, dim=-1)[..., :-1].to(v.dtype) @ v
        p = torch.softmax(s, dim=-1)
        return p.to(v.dtype) @ v

    def _mask(self, s: torch.Tensor) -> torch.Tensor:
        nq, nk = s.shape[-2:]
        if self.mask == "causal-tril":
            return s.masked_fill(~self.keep, float("-inf"))
        if self.mask == "causal-where":
            return torch.where(self.keep, s, float("-inf"))
        if self.mask == "causal-sliced":
            keep = self.keep[:, :, nk - nq : nk, :nk]
            return torch.where(keep, s, torch.full([], torch.finfo(s.dtype).min, dtype=s.dtype))
        if self.mask in ("causal-finfo-min", "sliding-window-finfo-min"):
            return torch.where(self.keep, s, torch.finfo(s.dtype).min)
        if self.mask == "sliding-window":
            rows = torch.arange(nq, device=s.device)[:, None] + (nk - nq)
            cols = torch.arange(nk, device=s.device)[None, :]
            return s.masked_fill((cols > rows) | (cols <= rows - self.window), float("-inf"))
        if self.mask == "finite-fill":
            return s.masked_fill(~self.keep, -1e9)
        if self.mask in ("causal-additive", "alibi", "relative-bias"):
            return s + self.bias
        if self.mask == "causal-iota":
            rows = torch.arange(nq, device=s.device)[:, None] + (nk - nq)
            cols = torch.arange(nk, device=s.device)[None, :]
            return s.masked_fill(cols > rows, float("-inf"))
        if self.mask == "softcap":
            return 30.0 * torch.tanh(s / 30.0)
        if self.mask == "softcap-causal":
            s = 30.0 * torch.tanh(s / 30.0)
            return s.masked_fill(~self.keep, float("-inf"))
        return s


class PaddingMaskAttention(nn.Module):
    """A per-batch key padding mask given as a boolean input, as encoders take it."""

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor
    ) -> torch.Tensor:
        s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        s = s.masked_fill(~keep[:, None, None, :], float("-inf"))
        return torch.softmax(s, dim=-1) @ v


class ScoresReturned(nn.Module):
    """Returns the attention weights too: the scores must exist, nothing to fuse."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        p = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
        return p @ v, p
