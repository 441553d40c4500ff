"""Attention-like graphs built from a description, for the property tests of the matcher.

A ``Case`` names every choice a model makes when it writes attention (the score path,
where the scale sits, how a mask is spelled, GQA, layout, casts, shapes, dynamic
lengths), or a near miss that must not be fused. ``FuzzAttention(case)`` is the module;
``check(case)`` compiles it with ``fc.compile``, runs it on fresh inputs and compares
with PyTorch eager; ``problems(case, outcome)`` says what is wrong with the result.

``Worker`` runs ``check`` in a child process, so a compile that crashes the process
(a segfault in the bindings) fails one case instead of the whole session.

Run one case by hand::

    .venv/bin/python tests/fuzz_graphs.py "Case(path='bmm', nq=7, nk=300)"
"""

from __future__ import annotations

import copy
import dataclasses
import math
import multiprocessing
import sys
import traceback
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

# Relative error bounds against PyTorch (float64 or the model's own dtype), per dtype.
BOUND = {"float32": 1e-4, "float16": 3e-3, "bfloat16": 2e-2}
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}

# The ways a model computes softmax(f(Q·Kᵀ))·V.
PATHS = ("sdpa", "matmul", "einsum", "bmm")
TWICE = ("none", "side", "chained")
# Where the 1/sqrt(D) sits. SDPA: its default, an explicit ``scale=``, or on Q (scale=1).
SCALES = ("scores-mul", "scores-div", "q", "k", "none")
SDPA_SCALES = ("sdpa-default", "sdpa-scale", "q")
# Masks. ``is_causal`` is SDPA's argument; the others are tensors (bool "keep" masks:
# True attends) applied by hand through ``apply`` with ``fill``, or given to SDPA.
MASKS = (
    "none",
    "is_causal",  # SDPA only
    "tril-buffer",  # a registered (Nq, Nk) bool buffer, diagonal at the end
    "triu-full",  # torch.full((Nq, Nk), fill).triu(...) in forward, added
    "arange",  # arange(Nk)[None] <= arange(Nq)[:, None] + (Nk - Nq), in forward
    "window",  # the same, and more than row - WINDOW: a sliding window, in forward
    "float-input",  # an additive float mask input (0/fill plus a bias)
    "bool-input",  # a bool mask input
    "padding",  # a (B, Nk) bool input, broadcast [:, None, None, :]
)
BOOL_MASKS = ("tril-buffer", "arange", "window", "bool-input", "padding")
WINDOW = 5  # keys per row of the "window" mask: its own (at the diagonal) and 4 before
STATIC_MASKS = ("tril-buffer",)  # sized at construction: no dynamic lengths
FILLS = ("-inf", "finfo.min")
# How a bool mask is applied: by hand masked_fill / where / an additive 0-fill tensor;
# SDPA takes it as a bool attn_mask or the additive float tensor.
APPLIES = ("masked_fill", "where", "additive")
SDPA_APPLIES = ("bool", "additive")
# The broadcast shape of a mask input: (B, H, ...), (B, 1, ...), (1, H, ...), (1, 1, ...),
# or (Nq, Nk).
MASK_BROADCASTS = ("bh", "b1", "1h", "11", "2d")
BIASES = ("none", "alibi", "relative")  # ALiBi slopes x distance; a (H, Nq, Nk) parameter
# GQA/MQA: K/V heads repeated (repeat_interleave, Llama's expand+reshape), broadcast by
# the matmul (Q viewed as (B, Hkv, G, Nq, D)), or SDPA's enable_gqa.
GQAS = ("repeat_interleave", "repeat_kv", "broadcast", "enable_gqa")
# fp16/bf16 models: softmax in the model's dtype, scores upcast before the masks, or
# HF's softmax(s, dtype=float32).to(dtype).
UPCASTS = ("none", "before-mask", "softmax-dtype")
DYNAMICS = ("none", "shared", "separate")  # one Dim for Nq = Nk, or one each
# Near misses: shaped like attention, not attention; compiled and equal to PyTorch, and
# never fused.
NEAR_MISSES = (
    "none",
    "softmax-dim",  # softmax over the query dim
    "scores-returned",  # the probabilities are an output too
    "square",  # s * s before softmax
    "relu",  # relu(s) before softmax
    "mask-after-softmax",  # p.masked_fill(~keep, 0) after softmax
    "log-softmax",
    "sigmoid",  # sigmoid attention
)
ATTENTIONS = ("auto", "iree", "online-softmax")


@dataclass(frozen=True)
class Case:
    """One drawn attention graph, its shapes and how it is compiled."""

    path: str = "matmul"
    batch: int = 1
    heads: int = 2
    kv_heads: int = 2
    gqa: str = "repeat_interleave"  # read only when kv_heads < heads
    nq: int = 8
    nk: int = 8
    head_dim: int = 16
    dtype: str = "float32"
    upcast: str = "none"
    layout: str = "bhnd"  # or "bnhd": (B, N, H, D) inputs, transposed in the model
    scale: str = "scores-mul"
    mask: str = "none"
    fill: str = "-inf"
    apply: str = "masked_fill"
    mask_broadcast: str = "b1"
    bias: str = "none"
    softcap: float = 0.0  # cap·tanh(s/cap) after the scale when > 0
    view4d: bool = True  # bmm: scores viewed (B, H, Nq, Nk) for the masks
    dynamic: str = "none"
    other_lengths: tuple[int, int] | None = None  # dynamic: a second (Nq, Nk) to run at
    near_miss: str = "none"
    # K at the padded keys (padding masks applied by masked_fill or where by hand):
    # "inf" or "nan", which those spellings drop, so PyTorch stays finite (SDPA's bool
    # mask does not: PyTorch adds -inf to the NaN there)
    poison: str = "none"
    attention: str = "auto"
    # a second attention in the module: "side" (of the same shape on -q, both results
    # returned) or "chained" (on the first one's output as its queries)
    twice: str = "none"
    seed: int = 0

    def __repr__(self) -> str:
        """Only the fields that differ from the defaults: short, and eval-able."""
        parts = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value != f.default:
                parts.append(f"{f.name}={value!r}")
        return f"Case({', '.join(parts)})"

    @property
    def groups(self) -> int:
        return self.heads // self.kv_heads

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    def expected_fused(self) -> int:
        """The attention ops the compiled module should hold."""
        if self.near_miss != "none":
            return 0
        # an attention with an extent of 0 folds to zeros (fusion-fold-empty-attention)
        if 0 in (self.batch, self.nq, self.nk):
            return 0
        # IREE 3.13's attention op is wrong above head dim 128 on the CPU: what is left
        # to it (attention="iree", and dynamic lengths, which the online-softmax rewrite
        # leaves to IREE's op) is decomposed there (documented, with a remark).
        if self.head_dim > 128 and (self.attention == "iree" or self.dynamic != "none"):
            return 0
        return 1 if self.twice == "none" else 2

    def nan_at_masked_keys(self) -> bool:
        """Whether a NaN/inf score at a key masked_fill or where drops may reach the output:
        IREE's attention op adds its mask (README, with a remark), and it takes what
        attention="iree" lowers and what has dynamic lengths, up to head dim 128."""
        left_to_iree = self.attention == "iree" or self.dynamic != "none"
        return self.poison != "none" and left_to_iree and self.expected_fused() >= 1

    def validate(self) -> None:
        """Fails on a description no model could be built from."""
        assert self.path in PATHS and self.heads % self.kv_heads == 0, self
        assert self.near_miss == "none" or self.path != "sdpa", self
        assert self.mask != "is_causal" or self.path == "sdpa", self
        assert self.gqa != "enable_gqa" or self.path == "sdpa", self
        assert self.gqa != "broadcast" or self.path in ("matmul", "einsum"), self
        assert self.dynamic == "none" or min(self.nq, self.nk) >= 2, self
        assert self.dynamic != "shared" or self.nq == self.nk, self
        assert self.dynamic == "none" or (self.mask not in STATIC_MASKS and self.bias != "relative")
        assert not (self.path == "sdpa" and self.mask == "is_causal" and self.bias != "none")
        assert self.path != "bmm" or self.view4d or not self.needs_4d, self
        assert self.poison == "none" or (
            self.mask == "padding" and self.apply in ("masked_fill", "where")
        ), self
        assert self.mask != "padding" or self.nk > 0, self
        assert self.twice in TWICE, self
        # the first one's output as queries: its head dim is V's, D
        assert self.twice != "chained" or self.nq > 0, self

    @property
    def needs_4d(self) -> bool:
        """Whether a mask or bias has batch or head dims (bmm's 3-D scores cannot take it)."""
        if self.bias != "none" or self.mask == "padding":
            return True
        return self.mask in ("float-input", "bool-input") and self.mask_broadcast != "2d"


def _repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    """Llama's repeat_kv: expand then reshape."""
    b, h, n, d = x.shape
    return x[:, :, None, :, :].expand(b, h, groups, n, d).reshape(b, h * groups, n, d)


class FuzzAttention(nn.Module):
    """The model a ``Case`` describes: (q, k, v[, mask]) -> attention output.

    q is (B, H, Nq, D) and k, v (B, Hkv, Nk, D), or (B, N, H, D) for layout "bnhd"; the
    output has q's layout ("bnhd": merged to (B, Nq, H·D)).
    """

    def __init__(self, case: Case):
        super().__init__()
        case.validate()
        self.case = case
        self.scale = 1 / math.sqrt(case.head_dim)
        if case.mask == "tril-buffer":
            keep = torch.ones(case.nq, case.nk, dtype=torch.bool).tril(case.nk - case.nq)
            self.register_buffer("keep", keep)
        if case.bias == "alibi":
            slopes = [2 ** (-8 * (i + 1) / case.heads) for i in range(case.heads)]
            self.register_buffer("slopes", torch.tensor(slopes)[:, None, None])
        elif case.bias == "relative":
            gen = torch.Generator().manual_seed(case.seed + 1)
            self.rel = nn.Parameter(torch.randn(case.heads, case.nq, case.nk, generator=gen))

    # -- the pieces ------------------------------------------------------------------

    def _fill(self, dtype: torch.dtype) -> float:
        return float("-inf") if self.case.fill == "-inf" else torch.finfo(dtype).min

    def _keep(self, mask: torch.Tensor | None, nq: int, nk: int, device) -> torch.Tensor | None:
        """The bool mask (True attends), broadcastable to (B, H, Nq, Nk), or None."""
        c = self.case
        if c.mask == "tril-buffer":
            return self.keep
        if c.mask in ("arange", "window"):
            rows = torch.arange(nq, device=device)[:, None] + (nk - nq)
            cols = torch.arange(nk, device=device)[None, :]
            return (cols <= rows) & (cols > rows - WINDOW) if c.mask == "window" else cols <= rows
        if c.mask == "bool-input":
            return mask
        if c.mask == "padding":
            return mask[:, None, None, :]
        return None

    def _additive(self, mask, nq: int, nk: int, dtype: torch.dtype, device) -> torch.Tensor | None:
        """The additive float mask (masks and bias), broadcastable to (B, H, Nq, Nk)."""
        c = self.case
        total = None
        if c.mask == "triu-full":
            total = torch.full((nq, nk), self._fill(dtype), dtype=dtype, device=device)
            total = total.triu(1 + nk - nq)
        elif c.mask == "float-input":
            total = mask.to(dtype)
        elif c.mask in BOOL_MASKS and c.apply == "additive":
            keep = self._keep(mask, nq, nk, device)
            total = torch.zeros(keep.shape, dtype=dtype, device=device)
            total = total.masked_fill(~keep, self._fill(dtype))
        bias = None
        if c.bias == "alibi":
            distance = (
                torch.arange(nk, device=device)[None, :] - torch.arange(nq, device=device)[:, None]
            )
            bias = (self.slopes * (distance - (nk - nq)).to(self.slopes.dtype)).to(dtype)
        elif c.bias == "relative":
            bias = self.rel.to(dtype)
        if bias is not None:
            total = bias if total is None else total + bias
        return total

    def _grouped(self, t: torch.Tensor) -> torch.Tensor:
        """A (.., H or 1, Nq, Nk) mask or bias reshaped for (B, Hkv, G, Nq, Nk) scores."""
        c = self.case
        if t.dim() <= 2:
            return t
        if t.dim() == 3:  # (H, Nq, Nk) bias
            return t.reshape(c.kv_heads, c.groups, *t.shape[-2:])
        if t.shape[1] == 1:
            return t.unsqueeze(2)
        return t.reshape(t.shape[0], c.kv_heads, c.groups, *t.shape[-2:])

    def _masked(self, s: torch.Tensor, mask, nq: int, nk: int, grouped: bool) -> torch.Tensor:
        """The scores with the bias and masks applied the way the case spells them."""
        c = self.case
        fit = self._grouped if grouped else (lambda t: t)
        add = self._additive(mask, nq, nk, s.dtype, s.device)
        if add is not None:
            s = s + fit(add)
        if c.mask in BOOL_MASKS and c.apply != "additive":
            keep = fit(self._keep(mask, nq, nk, s.device))
            if c.apply == "masked_fill":
                s = s.masked_fill(~keep, self._fill(s.dtype))
            else:
                s = torch.where(keep, s, self._fill(s.dtype))
        return s

    def _probs(self, s: torch.Tensor, nq: int, nk: int) -> torch.Tensor:
        """softmax (or the near miss's replacement), back in the model's dtype."""
        c = self.case
        if c.near_miss == "softmax-dim":
            p = torch.softmax(s, dim=-2)
        elif c.near_miss == "log-softmax":
            p = torch.log_softmax(s, dim=-1)
        elif c.near_miss == "sigmoid":
            p = torch.sigmoid(s)
        elif c.upcast == "softmax-dtype":
            p = torch.softmax(s, dim=-1, dtype=torch.float32)
        else:
            p = torch.softmax(s, dim=-1)
        if c.near_miss == "mask-after-softmax":
            rows = torch.arange(nq, device=s.device)[:, None] + (nk - nq)
            p = p.masked_fill(torch.arange(nk, device=s.device)[None, :] > rows, 0.0)
        return p

    # -- forward -----------------------------------------------------------------------

    def forward(self, q, k, v, mask=None):
        out = self._once(q, k, v, mask)
        if self.case.twice == "none":
            return out
        first = _outputs(out)[0]
        queries = -q if self.case.twice == "side" else first.reshape(q.shape).to(q.dtype)
        return (*_outputs(out), *_outputs(self._once(queries, k, v, mask)))

    def _once(self, q, k, v, mask):
        c = self.case
        if c.layout == "bnhd":
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        b, h, nq, d = q.shape
        nk = k.shape[2]
        if c.kv_heads < c.heads and c.gqa == "repeat_interleave":
            k, v = k.repeat_interleave(c.groups, dim=1), v.repeat_interleave(c.groups, dim=1)
        elif c.kv_heads < c.heads and c.gqa == "repeat_kv":
            k, v = _repeat_kv(k, c.groups), _repeat_kv(v, c.groups)
        if c.path == "sdpa":
            out = self._sdpa(q, k, v, mask, nq, nk)
            extra = None
        else:
            out, extra = self._by_hand(q, k, v, mask, b, nq, nk)
        if c.layout == "bnhd":
            out = out.transpose(1, 2).reshape(b, nq, h * d)
        return out if extra is None else (out, extra)

    def _sdpa(self, q, k, v, mask, nq: int, nk: int):
        c = self.case
        kwargs = {}
        if c.scale == "sdpa-scale":
            kwargs["scale"] = 0.5 * self.scale
        elif c.scale == "q":
            q = q * self.scale
            kwargs["scale"] = 1.0
        if c.mask == "is_causal":
            kwargs["is_causal"] = True
        if c.kv_heads < c.heads and c.gqa == "enable_gqa":
            kwargs["enable_gqa"] = True
        attn_mask = self._additive(mask, nq, nk, q.dtype, q.device)
        if c.mask in BOOL_MASKS and c.apply == "bool":
            keep = self._keep(mask, nq, nk, q.device)
            if attn_mask is None:
                attn_mask = keep
            else:
                attn_mask = torch.where(keep, attn_mask, self._fill(q.dtype))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, **kwargs)

    def _by_hand(self, q, k, v, mask, b: int, nq: int, nk: int):
        c = self.case
        h, d = q.shape[1], q.shape[3]
        if c.scale == "q":
            q = q * self.scale
        elif c.scale == "k":
            k = k * self.scale
        grouped = c.kv_heads < c.heads and c.gqa == "broadcast" and c.kv_heads > 1
        if grouped:  # Q viewed (B, Hkv, G, Nq, D): the K/V heads broadcast over G
            q = q.reshape(b, c.kv_heads, c.groups, nq, d)
            k, v = k.unsqueeze(2), v.unsqueeze(2)
        if c.path == "matmul":
            s = q @ k.transpose(-2, -1)
        elif c.path == "einsum":
            s = torch.einsum("...qd,...kd->...qk", q, k)
        else:  # bmm over (B·H, N, D)
            s = torch.bmm(q.reshape(b * h, nq, d), k.reshape(b * h, nk, d).transpose(1, 2))
            if c.view4d:
                s = s.view(b, h, nq, nk)
        if c.scale == "scores-mul":
            s = s * self.scale
        elif c.scale == "scores-div":
            s = s / math.sqrt(c.head_dim)
        if c.softcap > 0:
            s = torch.tanh(s / c.softcap) * c.softcap
        if c.near_miss == "square":
            s = s * s
        elif c.near_miss == "relu":
            s = torch.relu(s)
        if c.upcast == "before-mask":
            s = s.to(torch.float32)
        s = self._masked(s, mask, nq, nk, grouped)
        p = self._probs(s, nq, nk).to(v.dtype)
        if c.path == "matmul":
            out = p @ v
        elif c.path == "einsum":
            out = torch.einsum("...qk,...kd->...qd", p, v)
        else:
            out = torch.bmm(p.reshape(b * h, nq, nk), v.reshape(b * h, nk, d))
        out = out.reshape(b, h, nq, d)
        return out, (p if c.near_miss == "scores-returned" else None)


# -- inputs ------------------------------------------------------------------------------


def inputs(case: Case, nq: int, nk: int, seed: int) -> tuple[torch.Tensor, ...]:
    """Random q, k, v (and the mask input) at lengths (nq, nk)."""
    gen = torch.Generator().manual_seed(seed)
    dtype, b, d = case.torch_dtype, case.batch, case.head_dim

    def qkv(heads: int, n: int) -> torch.Tensor:
        shape = (b, n, heads, d) if case.layout == "bnhd" else (b, heads, n, d)
        return torch.randn(shape, generator=gen).to(dtype)

    args = [qkv(case.heads, nq), qkv(case.kv_heads, nk), qkv(case.kv_heads, nk)]
    if case.mask in ("float-input", "bool-input"):
        shape = {
            "bh": (b, case.heads, nq, nk),
            "b1": (b, 1, nq, nk),
            "1h": (1, case.heads, nq, nk),
            "11": (1, 1, nq, nk),
            "2d": (nq, nk),
        }[case.mask_broadcast]
        keep = torch.rand(shape, generator=gen) > 0.3
        if case.mask == "bool-input":
            args.append(keep)
        else:
            fill = float("-inf") if case.fill == "-inf" else torch.finfo(dtype).min
            bias = torch.randn(shape, generator=gen) * 0.5
            args.append(bias.masked_fill(~keep, fill).to(dtype))
    elif case.mask == "padding":
        lengths = torch.randint(1, nk + 1, (b,), generator=gen)
        keep = torch.arange(nk)[None, :] < lengths[:, None]
        args.append(keep)
        if case.poison != "none":
            padded = ~keep[:, None, :, None] if case.layout == "bhnd" else ~keep[:, :, None, None]
            args[1] = args[1].masked_fill(padded, float(case.poison))
    return tuple(args)


def dynamic_shapes(case: Case, n_args: int) -> dict | None:
    """torch.export dims on the sequence lengths, or None."""
    if case.dynamic == "none":
        return None
    nq = torch.export.Dim("nq", min=2, max=4096)
    nk = nq if case.dynamic == "shared" else torch.export.Dim("nk", min=2, max=4096)
    seq = 1 if case.layout == "bnhd" else 2
    shapes: dict = {"q": {seq: nq}, "k": {seq: nk}, "v": {seq: nk}}
    if n_args == 4:
        if case.mask == "padding":
            shapes["mask"] = {1: nk}
        elif case.mask_broadcast == "2d":
            shapes["mask"] = {0: nq, 1: nk}
        else:
            shapes["mask"] = {2: nq, 3: nk}
    return shapes


# -- compile, run, compare -----------------------------------------------------------------


@dataclass
class Run:
    """One call of the compiled module against PyTorch at lengths (nq, nk)."""

    nq: int
    nk: int
    error: float  # against PyTorch in float64, over the positions where PyTorch is finite
    eager_error: float  # against PyTorch in the model's own dtype
    torch_error: float  # PyTorch's own dtype against float64
    nonfinite: str | None  # what is wrong with the NaN/inf pattern, if anything


@dataclass
class Outcome:
    attention_ops: int | None = None
    softmax_ops: int | None = None
    remarks: list[str] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    exception: str | None = None  # "Type: first line", from building, compiling or running
    traceback: str | None = None


def _rel(got: torch.Tensor, want: torch.Tensor, where: torch.Tensor) -> float:
    got = torch.where(where, got.double(), 0.0)
    want = torch.where(where, want.double(), 0.0)
    norm = want.norm().item()
    diff = (got - want).norm().item()
    return diff / norm if norm > 0 else diff


def _compare(got: torch.Tensor, eager: torch.Tensor, exact: torch.Tensor, nq: int, nk: int) -> Run:
    """Compares one output. Where PyTorch is finite ours must be too; where PyTorch gives
    NaN in float64 too (a softmax row whose keys are all -inf, written out) ours may give
    NaN or the 0 SDPA and FlashAttention give (documented)."""
    finite = torch.isfinite(eager) & torch.isfinite(exact)
    got_finite = torch.isfinite(got)
    nonfinite = None
    if (finite & ~got_finite).any():
        count = int((finite & ~got_finite).sum())
        nonfinite = f"{count} of {int(finite.sum())} non-finite where PyTorch is finite"
    # where only PyTorch's own dtype overflows (bf16: finfo.min plus a negative bias is
    # -inf) the exact answer is finite, and ours may be too
    elif (
        undefined := ~torch.isfinite(eager) & ~torch.isfinite(exact) & got_finite & (got != 0)
    ).any():
        count = int(undefined.sum())
        nonfinite = f"{count} finite non-zero where PyTorch gives NaN/inf"
    usable = finite & got_finite
    return Run(
        nq,
        nk,
        _rel(got, exact, usable),
        _rel(got, eager, usable),
        _rel(eager, exact, usable),
        nonfinite,
    )


def _outputs(x) -> list[torch.Tensor]:
    return [x] if isinstance(x, torch.Tensor) else list(x)


def check(case: Case) -> Outcome:
    """Compiles the case's model for the CPU, runs it, compares with PyTorch."""
    import fusion_compiler as fc

    outcome = Outcome()
    try:
        model = FuzzAttention(case).to(case.torch_dtype).eval()
        example = inputs(case, case.nq, case.nk, case.seed)
        module = fc.compile(
            model,
            example_args=example,
            target="cpu",
            attention=case.attention,
            dynamic_shapes=dynamic_shapes(case, len(example)),
        )
        outcome.attention_ops = module.stats.get("attention_ops")
        outcome.softmax_ops = module.stats.get("softmax_ops")
        outcome.remarks = [r.message for r in module.remarks]
        run = fc.load(module)
        exact_model = copy.deepcopy(model).double()
        lengths = [(case.nq, case.nk)]
        if case.dynamic != "none" and case.other_lengths is not None:
            lengths.append(case.other_lengths)
        for i, (nq, nk) in enumerate(lengths):
            fresh = inputs(case, nq, nk, case.seed + 1000 + i)
            with torch.no_grad():
                eager = _outputs(model(*fresh))
                exact = _outputs(
                    exact_model(*(x.double() if x.is_floating_point() else x for x in fresh))
                )
            got = _outputs(run(*fresh))
            if len(got) != len(eager) or any(
                g.shape != e.shape or g.dtype != e.dtype for g, e in zip(got, eager, strict=False)
            ):
                raise AssertionError(
                    f"outputs {[(tuple(g.shape), g.dtype) for g in got]}, PyTorch's "
                    f"{[(tuple(e.shape), e.dtype) for e in eager]}"
                )
            for g, e, x in zip(got, eager, exact, strict=True):
                outcome.runs.append(_compare(g, e, x, nq, nk))
    except Exception as error:  # reported as this case's problem, not the session's
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        outcome.exception = f"{type(error).__name__}: {first}"[:400]
        outcome.traceback = traceback.format_exc()[-6000:]
    return outcome


def problems(case: Case, outcome: Outcome) -> list[str]:
    """What is wrong with ``outcome``: one line per problem, empty when it passed."""
    found = []
    if outcome.exception is not None:
        return [f"crash: {outcome.exception}"]
    want = case.expected_fused()
    if outcome.attention_ops != want:
        why = [r for r in outcome.remarks if "not fused" in r or "above" in r][:2]
        found.append(f"fusion: {outcome.attention_ops} attention ops, expected {want} {why}")
    bound = BOUND[case.dtype]
    for r in outcome.runs:
        if r.nonfinite and not case.nan_at_masked_keys():
            found.append(f"nonfinite at Nq={r.nq} Nk={r.nk}: {r.nonfinite}")
        # Close to the exact answer (within the dtype's bound, or twice PyTorch's own error
        # where the model's dtype loses more: a bf16 ALiBi bias over 500 rows), or to
        # PyTorch's own answer in that dtype (a fill at the bottom of fp16 swamps the
        # score there, as the compiler follows).
        if not (r.error <= max(bound, 2 * r.torch_error) or r.eager_error <= bound):
            found.append(
                f"wrong at Nq={r.nq} Nk={r.nk}: rel. error {r.error:.3g} (vs PyTorch "
                f"{case.dtype}: {r.eager_error:.3g}; PyTorch's own {r.torch_error:.3g}), "
                f"bound {bound:g}"
            )
    return found


# -- a child process per session: a crash fails one case ----------------------------------


def _serve(conn) -> None:
    torch.manual_seed(0)
    while True:
        case = conn.recv()
        if case is None:
            return
        conn.send(check(case))


class Worker:
    """Runs ``check`` in a spawned child; a crash or a hang fails that case only."""

    def __init__(self, timeout: float = 900.0, recycle: int = 100):
        self.timeout = timeout
        self.recycle = recycle  # cases per child: what compiles leave behind stays bounded
        self._context = multiprocessing.get_context("spawn")
        self._process = None
        self._conn = None
        self._served = 0

    def _start(self) -> None:
        parent, child = self._context.Pipe()
        self._process = self._context.Process(target=_serve, args=(child,), daemon=True)
        self._process.start()
        child.close()
        self._conn = parent

    def check(self, case: Case) -> Outcome:
        if self._served >= self.recycle:
            self.close()
        if self._process is None or not self._process.is_alive():
            self._start()
            self._served = 0
        self._served += 1
        self._conn.send(case)
        if self._conn.poll(self.timeout):
            try:
                return self._conn.recv()
            except (EOFError, OSError):  # the child died while answering
                pass
        else:
            self._process.kill()
            self._process.join()
            self._process = None
            return Outcome(exception=f"Timeout: no result after {self.timeout:g} s")
        self._process.join()
        code = self._process.exitcode
        self._process = None
        return Outcome(exception=f"ProcessDied: the compile or run exited with code {code}")

    def close(self) -> None:
        if self._process is not None and self._process.is_alive():
            self._conn.send(None)
            self._process.join(10)
            if self._process.is_alive():
                self._process.kill()
        self._process = None


def main(argv: list[str]) -> int:
    case = eval(argv[1], {"Case": Case})  # a Case(...) as printed by a failing test
    outcome = check(case)
    print(case)
    print(f"attention_ops={outcome.attention_ops} softmax_ops={outcome.softmax_ops}")
    for remark in outcome.remarks:
        print("  remark:", remark)
    for r in outcome.runs:
        print(" ", r)
    if outcome.traceback:
        print(outcome.traceback)
    found = problems(case, outcome)
    print("\n".join(found) or "ok")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
