"""A mask's spelling on the sm_90 kernel: one causal or padding attention, written the ways
models write it, each compiled by us, against torch SDPA; every system timed the three
ways of harness.py (device, back-to-back loop, one blocking call).

On the CPU machine:  .venv/bin/python benchmarks/mask_forms_gpu.py prepare build/mask_forms
On the GPU machine:  python3 benchmarks/mask_forms_gpu.py run build/mask_forms OUT

fp16, B4 H16 D128, N 2048 (the offset cases: 512 queries over 2048 keys, each query sees
the keys up to its position + 1536, as a chunk of a prompt after a cache). Each case is one
spelling (``SPELLINGS``): causal as a registered tril buffer with masked_fill(-inf),
torch.full(-inf).triu(1) added, torch.where(keep, s, finfo.min), an arange compare with
masked_fill, F.scaled_dot_product_attention(is_causal=True), SDPA with a boolean attn_mask,
and transformers' own causal mask (``masking_utils.create_causal_mask`` from the positions,
as Llama builds it without an attention_mask) with its SDPA and its eager attention
function; the offset mask as an arange compare and as tril(diagonal); a padding mask (the
last 300 keys of every sequence) as SDPA's boolean attn_mask, masked_fill(~keep, -inf), an
added where(keep, 0, -inf) and an added (1 - keep)·finfo.min; a sliding window of 512 keys
(each query's own and the 511 before it) as an arange compare with masked_fill, torch.where
with finfo.min, SDPA's boolean attn_mask and a triu(-inf) plus the window's own -inf band;
packed documents of 512 tokens (document ids as an input, causal within each) as SDPA's
boolean mask; chunked local attention (chunks of 512, causal within each) and a prefix-LM
mask (the first 256 keys seen by every query) as arange compares with masked_fill; no mask
at all, half of every sequence padded, and packed documents attending to all of themselves
(masked_fill), the cases a block map's time is compared with. The causal spellings again at
the causal shapes of the masks issue's grid (``GRID``: B2 H16 N2048, B1 H16 N4096, B1 H32
N8192 bf16, B1 H8 N32768; the offsets with a quarter of the keys' queries), named
spelling@shape, against cuDNN once per shape; half of every sequence padded and packed
documents at B1 H8 N32768 too.
The windows again at B1 H8 N32768, of 512, 1024 and 4096 keys, against the unmasked
call there; the unmasked call at B16 H16 N512 (the packed documents' work as
separate sequences).

Systems: ours_sm90 (fc.compile of the spelling, cuda_arch="sm_90"; a spelling that does
not compile is a record saying so), torch_sdpa_cudnn (SDPA under cuDNN with the case's
mask as SDPA takes it: is_causal where it is causal from the first key, else a boolean
attn_mask) and torch_sdpa (the same, torch's choice of backend); for the windows also
torch_flex (torch.compile'd FlexAttention with the window as mask_mod and BlockMask); with
--baseline FOLDER, ours_sm90_baseline: the modules of another build, in the same run; with
--vulkan (prepare and run), ours_vulkan: the spelling compiled for target="vulkan" on the
GPU's Vulkan driver, called on CUDA tensors (so its times include their copies), at the
base shape.
Every output is checked against float32 SDPA with the case's mask; TFLOP/s counts the
query-key pairs the mask keeps. Padding cases also record whether NaN keys at the masked
positions leave our output finite, and PyTorch eager's of the same spelling (masked_fill
replaces the score; an added mask adds to NaN).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import harness
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import fusion_compiler as fc  # noqa: E402

B, H, D = 4, 16, 128
N = 2048
OFFSET_NQ = 512
PAD = 300  # keys masked at the end of every sequence
WINDOW = 512  # the sliding window's keys per query: its own and the 511 before it
DOCUMENT = 512  # tokens per packed document
CHUNK = 512  # keys per chunk of chunked local attention (Llama 4's)
PREFIX = 256  # keys every query sees in the prefix-LM mask
NEG_INF = float("-inf")


def _scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5


def _attend(s: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.softmax(s.float(), dim=-1).to(v.dtype) @ v


def _rows_cols(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    nq, nk = s.shape[-2:]
    return torch.arange(nq, device=s.device)[:, None], torch.arange(nk, device=s.device)[None, :]


def tril_buffer(m, q, k, v):
    s = _scores(q, k)
    nq, nk = s.shape[-2:]
    return _attend(s.masked_fill(m.bias[:, :, :nq, :nk] == 0, NEG_INF), v)


def full_triu_added(m, q, k, v):
    s = _scores(q, k)
    return _attend(s + torch.full(s.shape[-2:], NEG_INF, device=s.device).triu(1), v)


def where_finfo_min(m, q, k, v):
    s = _scores(q, k)
    keep = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).tril()
    return _attend(torch.where(keep, s, torch.finfo(s.dtype).min), v)


def arange_masked_fill(m, q, k, v):
    s = _scores(q, k)
    rows, cols = _rows_cols(s)
    return _attend(s.masked_fill(cols > rows, NEG_INF), v)


def _transformers_causal(q, k, v, implementation: str):
    """transformers' causal attention as Llama calls it without an ``attention_mask``:
    ``masking_utils.create_causal_mask`` from the positions, then its SDPA or eager
    attention function (out in (B, N, H, D), transposed back)."""
    from transformers import LlamaConfig
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import create_causal_mask
    from transformers.models.llama.modeling_llama import eager_attention_forward

    b, h, n, d = q.shape
    config = LlamaConfig(hidden_size=h * d, num_attention_heads=h, num_key_value_heads=h)
    config._attn_implementation = implementation
    positions = torch.arange(n, device=q.device)[None, :]
    mask = create_causal_mask(config, q[:, 0], None, None, position_ids=positions)
    module = torch.nn.Module()
    module.is_causal, module.num_key_value_groups, module.training = True, 1, False
    attend = sdpa_attention_forward if implementation == "sdpa" else eager_attention_forward
    out, _ = attend(module, q, k, v, mask, scaling=d**-0.5)
    return out.transpose(1, 2)


def transformers_sdpa(m, q, k, v):
    return _transformers_causal(q, k, v, "sdpa")


def transformers_eager(m, q, k, v):
    return _transformers_causal(q, k, v, "eager")


def sdpa_is_causal(m, q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def sdpa_bool_causal(m, q, k, v):
    keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)


def offset_arange_masked_fill(m, q, k, v):
    s = _scores(q, k)
    rows, cols = _rows_cols(s)
    return _attend(s.masked_fill(cols > rows + (k.shape[-2] - q.shape[-2]), NEG_INF), v)


def offset_tril_sdpa(m, q, k, v):
    nq, nk = q.shape[-2], k.shape[-2]
    keep = torch.ones(nq, nk, dtype=torch.bool, device=q.device).tril(diagonal=nk - nq)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)


def padding_sdpa_bool(m, q, k, v, keep):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])


def padding_masked_fill(m, q, k, v, keep):
    return _attend(_scores(q, k).masked_fill(~keep[:, None, None, :], NEG_INF), v)


def padding_where_added(m, q, k, v, keep):
    bias = torch.where(keep[:, None, None, :], 0.0, NEG_INF)
    return _attend(_scores(q, k) + bias, v)


def padding_finfo_min_added(m, q, k, v, keep):
    s = _scores(q, k)
    return _attend(s + (1.0 - keep[:, None, None, :].to(s.dtype)) * torch.finfo(s.dtype).min, v)


def _window(s: torch.Tensor, window: int) -> torch.Tensor:
    rows, cols = _rows_cols(s)
    return (cols <= rows) & (cols > rows - window)


def window_arange_masked_fill(m, q, k, v):
    s = _scores(q, k)
    return _attend(s.masked_fill(~_window(s, m.spelling.window), NEG_INF), v)


def window_where_finfo_min(m, q, k, v):
    s = _scores(q, k)
    return _attend(torch.where(_window(s, m.spelling.window), s, torch.finfo(s.dtype).min), v)


def window_sdpa_bool(m, q, k, v):
    rows = torch.arange(q.shape[-2], device=q.device)[:, None]
    cols = torch.arange(k.shape[-2], device=q.device)[None, :]
    keep = (cols <= rows) & (cols > rows - m.spelling.window)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)


def window_triu_plus_band(m, q, k, v):
    s = _scores(q, k)
    rows, cols = _rows_cols(s)
    causal = torch.full(s.shape[-2:], NEG_INF, device=s.device).triu(1)
    window = m.spelling.window
    band = torch.zeros(s.shape[-2:], device=s.device).masked_fill(cols <= rows - window, NEG_INF)
    return _attend(s + causal + band, v)


def full_no_mask(m, q, k, v):
    return _attend(_scores(q, k), v)


def padding_half_masked_fill(m, q, k, v, keep):
    return padding_masked_fill(m, q, k, v, keep)


def documents_full_masked_fill(m, q, k, v, doc):
    """Packed documents, each attending to all of itself (an encoder's packed batch)."""
    same = doc[:, None, :, None] == doc[:, None, None, :]
    return _attend(_scores(q, k).masked_fill(~same, NEG_INF), v)


def documents_sdpa_bool(m, q, k, v, doc):
    """Packed documents: a query sees the keys of its own document up to itself."""
    rows = torch.arange(q.shape[-2], device=q.device)[:, None]
    cols = torch.arange(k.shape[-2], device=q.device)[None, :]
    same = doc[:, None, :, None] == doc[:, None, None, :]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=same & (cols <= rows))


def documents_full_sdpa_bool(m, q, k, v, doc):
    """Packed documents, each attending to all of itself (SDPA's boolean mask)."""
    same = doc[:, None, :, None] == doc[:, None, None, :]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=same)


def chunked_masked_fill(m, q, k, v):
    s = _scores(q, k)
    rows, cols = _rows_cols(s)
    keep = (cols // CHUNK == rows // CHUNK) & (cols <= rows)
    return _attend(s.masked_fill(~keep, NEG_INF), v)


def prefix_lm_masked_fill(m, q, k, v):
    s = _scores(q, k)
    rows, cols = _rows_cols(s)
    return _attend(s.masked_fill(~((cols <= rows) | (cols < PREFIX)), NEG_INF), v)


@dataclass(frozen=True)
class Spelling:
    forward: Callable
    # "causal" (each query sees the keys up to its position + Nk - Nq), "window" (the
    # WINDOW keys up to its position), "padding" (the last ``pad`` keys of every
    # sequence masked), "documents" (causal within each), "documents_full", "chunked",
    # "prefix" or "full" (no mask)
    mask: str
    nq: int = N
    pad: int = PAD
    b: int = B
    h: int = H
    n: int = N  # keys
    d: int = D
    dtype: torch.dtype = torch.float16
    window: int = WINDOW  # the window's keys per query, for "window"
    document: int = DOCUMENT  # tokens per packed document, for "documents*"


# a row per case: its name is the spelling's
SPELLINGS = {
    f.__name__: Spelling(f, mask, nq, N // 2 if "half" in f.__name__ else PAD)
    for f, mask, nq in (
        (tril_buffer, "causal", N),
        (full_triu_added, "causal", N),
        (where_finfo_min, "causal", N),
        (arange_masked_fill, "causal", N),
        (sdpa_is_causal, "causal", N),
        (sdpa_bool_causal, "causal", N),
        (transformers_sdpa, "causal", N),
        (transformers_eager, "causal", N),
        (offset_arange_masked_fill, "causal", OFFSET_NQ),
        (offset_tril_sdpa, "causal", OFFSET_NQ),
        (padding_sdpa_bool, "padding", N),
        (padding_masked_fill, "padding", N),
        (padding_where_added, "padding", N),
        (padding_finfo_min_added, "padding", N),
        (window_arange_masked_fill, "window", N),
        (window_where_finfo_min, "window", N),
        (window_sdpa_bool, "window", N),
        (window_triu_plus_band, "window", N),
        (full_no_mask, "full", N),
        (padding_half_masked_fill, "padding", N),
        (documents_sdpa_bool, "documents", N),
        (documents_full_masked_fill, "documents_full", N),
        (documents_full_sdpa_bool, "documents_full", N),
        (chunked_masked_fill, "chunked", N),
        (prefix_lm_masked_fill, "prefix", N),
    )
}
# the causal spellings again at the causal shapes of the issue's grid: one case per
# spelling and shape, named spelling@shape (queries a quarter of the keys for the offsets)
GRID = {
    "B2H16N2048": dict(b=2, h=16, n=2048),
    "B1H16N4096": dict(b=1, h=16, n=4096),
    "B1H32N8192bf16": dict(b=1, h=32, n=8192, dtype=torch.bfloat16),
    "B1H8N32768": dict(b=1, h=8, n=32768),
}
SPELLINGS.update(
    {
        f"{name}@{label}": Spelling(
            s.forward, "causal", shape["n"] // 4 if s.nq < N else shape["n"], **shape
        )
        for label, shape in GRID.items()
        for name, s in list(SPELLINGS.items())
        if s.mask == "causal"
    }
)
# the sliding windows and the unmasked call over the grid's longest context: a window of
# WINDOW keys should cost about WINDOW / N of the full attention's time
SPELLINGS.update(
    {
        f"{name}@B1H8N32768": Spelling(s.forward, s.mask, 32768, **GRID["B1H8N32768"])
        for name, s in list(SPELLINGS.items())
        if s.mask in ("window", "full") and "@" not in name
    }
)
# the packed documents' work as separate sequences (B4 N2048 in documents of 512 is B16
# N512): what a documents call could cost at best
SPELLINGS["full_no_mask@B16H16N512"] = Spelling(full_no_mask, "full", 512, b=16, h=16, n=512)
# a packed batch of four documents over the longest context, against its unmasked call
# (full_no_mask@B1H8N32768; causal within documents: arange_masked_fill@B1H8N32768):
# about a quarter of its time at best
SPELLINGS.update(
    {
        f"{f.__name__}@B1H8N32768D4": Spelling(f, mask, 32768, **GRID["B1H8N32768"], document=8192)
        for f, mask in (
            (documents_full_masked_fill, "documents_full"),
            (documents_full_sdpa_bool, "documents_full"),
            (documents_sdpa_bool, "documents"),
        )
    }
)
# half of every sequence padded over the longest context, against its unmasked call: at
# most 0.6x of its time (the map's and a tile's fixed costs weigh less than at N 2048)
SPELLINGS["padding_half_masked_fill@B1H8N32768"] = Spelling(
    padding_half_masked_fill, "padding", 32768, pad=32768 // 2, **GRID["B1H8N32768"]
)
# and windows of Gemma 3's 1024 keys and Mistral's 4096 over the longest context
SPELLINGS.update(
    {
        f"{name}@B1H8N32768W{window}": Spelling(
            s.forward, s.mask, 32768, **GRID["B1H8N32768"], window=window
        )
        for name, s in list(SPELLINGS.items())
        for window in (1024, 4096)
        if s.mask == "window" and "@" not in name
    }
)


class Model(torch.nn.Module):
    def __init__(self, spelling: Spelling):
        super().__init__()
        self.spelling = spelling
        if spelling.forward is tril_buffer:  # as GPT-2 registers it
            n = spelling.n
            self.register_buffer("bias", torch.ones(n, n, dtype=torch.bool).tril().view(1, 1, n, n))

    def forward(self, *args):
        return self.spelling.forward(self, *args)


def _inputs(spelling: Spelling, device: str) -> tuple[torch.Tensor, ...]:
    b, h, n, d, dtype = spelling.b, spelling.h, spelling.n, spelling.d, spelling.dtype
    q = torch.randn(b, h, spelling.nq, d, dtype=dtype, device=device)
    k, v = (torch.randn(b, h, n, d, dtype=dtype, device=device) for _ in range(2))
    if spelling.mask.startswith("documents"):
        doc = (torch.arange(n, device=device) // spelling.document).expand(b, n).contiguous()
        return q, k, v, doc
    if spelling.mask != "padding":
        return q, k, v
    keep = torch.ones(b, n, dtype=torch.bool, device=device)
    keep[:, n - spelling.pad :] = False
    return q, k, v, keep


def _allowed(spelling: Spelling, inputs: tuple) -> torch.Tensor:
    """The (query, key) pairs the case's mask keeps, broadcastable to (B, H, Nq, Nk)."""
    if spelling.mask == "padding":
        return inputs[3][:, None, None, :]
    nq, n, device = spelling.nq, spelling.n, inputs[0].device
    if spelling.mask == "full":
        return torch.ones(nq, n, dtype=torch.bool, device=device)
    if spelling.mask == "documents_full":
        doc = inputs[3]
        return doc[:, None, :, None] == doc[:, None, None, :]
    causal = torch.ones(nq, n, dtype=torch.bool, device=device).tril(diagonal=n - nq)
    rows = torch.arange(nq, device=device)[:, None]
    cols = torch.arange(n, device=device)[None, :]
    if spelling.mask == "documents":
        doc = inputs[3]
        return (doc[:, None, :, None] == doc[:, None, None, :]) & causal
    if spelling.mask == "chunked":
        return causal & (cols // CHUNK == rows // CHUNK)
    if spelling.mask == "prefix":
        return causal | (cols < PREFIX)
    if spelling.mask == "window":
        return causal & ~torch.ones(nq, n, dtype=torch.bool, device=device).tril(-spelling.window)
    return causal


def _peer(spelling: Spelling, backend=None) -> Callable:
    """SDPA with the case's mask in SDPA's own form, under ``backend`` (or torch's choice)."""
    from torch.nn.attention import sdpa_kernel

    top_left = spelling.mask == "causal" and spelling.nq == spelling.n

    def sdpa(*inputs):
        q, k, v = inputs[:3]
        mask = None if top_left or spelling.mask == "full" else _allowed(spelling, inputs)
        if backend is None:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=top_left)
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=top_left)

    return sdpa


def _flex_window(spelling: Spelling) -> Callable:
    """torch.compile'd FlexAttention with the window as its mask_mod and BlockMask."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    def keep(b, h, q_idx, kv_idx):
        return (kv_idx <= q_idx) & (kv_idx > q_idx - spelling.window)

    block_mask = create_block_mask(keep, None, None, spelling.nq, spelling.n, device="cuda")
    compiled = torch.compile(flex_attention)

    def flex(q, k, v):
        return compiled(q, k, v, block_mask=block_mask)

    return flex


def _selected(args: argparse.Namespace) -> dict[str, Spelling]:
    return {name: s for name, s in SPELLINGS.items() if harness.selected(name, args.only)}


# our systems: the module's suffix, fc.compile's options, the device it runs on
OURS = {
    "ours_sm90": (dict(target="cuda", cuda_arch="sm_90"), "cuda"),
    "ours_vulkan": (dict(target="vulkan"), "vulkan"),
}


def _ours(args: argparse.Namespace, name: str) -> list[str]:
    """Our systems for spelling ``name``: with --vulkan, the Vulkan module too, at the base
    shape alone (the grid's shapes are there for the sm_90 kernel's speed)."""
    return ["ours_sm90", "ours_vulkan"] if args.vulkan and "@" not in name else ["ours_sm90"]


def prepare(folder: Path, args: argparse.Namespace) -> None:
    for name, spelling in _selected(args).items():
        for system in _ours(args, name):
            harness.save_module(
                folder,
                f"{name}.{system}",
                lambda spelling=spelling, options=OURS[system][0]: fc.compile(
                    Model(spelling).eval(), _inputs(spelling, "cpu"), **options
                ),
            )


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--vulkan",
        action="store_true",
        help="also each spelling compiled for target='vulkan' (ours_vulkan, run on the "
        "GPU's Vulkan driver: loop and call times with the inputs' copies to the host and "
        "back, no device time)",
    )


def _nan_keys_finite(call: Callable, inputs: tuple) -> bool:
    """Whether NaN keys at the masked positions leave the output finite."""
    q, k, v, keep = inputs
    poisoned = k.masked_fill(~keep[:, None, :, None], math.nan)
    with torch.no_grad():
        return bool(torch.isfinite(call(q, poisoned, v, keep)).all())


# the most scores the eager spelling materialises for the NaN check (f32: 8 GiB)
EAGER_SCORES = 2**31


def run(folder: Path, out: Path, args: argparse.Namespace) -> list[dict]:
    from torch.nn.attention import SDPBackend

    records = []
    peers_of: set[tuple] = set()  # the grid's (shape, Nq) whose peers were timed
    for name, spelling in _selected(args).items():
        inputs = [_inputs(spelling, "cuda") for _ in range(3)]
        first = inputs[0]
        allowed = _allowed(spelling, first)
        with torch.no_grad():
            reference = F.scaled_dot_product_attention(
                *(x.float() for x in first[:3]), attn_mask=allowed
            )
        b, h, n, d = spelling.b, spelling.h, spelling.n, spelling.d
        pairs = allowed.expand(b, 1, spelling.nq, n).sum().item()
        flops = 4 * h * d * pairs
        fields = dict(case=name, mask=spelling.mask, B=b, H=h, Nq=spelling.nq, Nk=n, D=d)
        fields["dtype"] = str(spelling.dtype).removeprefix("torch.")
        systems = {
            system: harness.module(folder, f"{name}.{system}", OURS[system][1])
            for system in _ours(args, name)
        }
        systems |= {
            "torch_sdpa_cudnn": _peer(spelling, SDPBackend.CUDNN_ATTENTION),
            "torch_sdpa": _peer(spelling),
        }
        if args.baseline:
            systems["ours_sm90_baseline"] = harness.module(
                args.baseline, f"{name}.ours_sm90", "cuda"
            )
        if "@" in name:  # the grid: each shape's peers once, cuDNN only
            shape = (b, h, spelling.nq, n, spelling.dtype)
            del systems["torch_sdpa"]
            if shape in peers_of:
                del systems["torch_sdpa_cudnn"]
            peers_of.add(shape)
        if spelling.mask == "window":  # the block-sparse peer a user writes a window for
            systems["torch_flex"] = _flex_window(spelling)
        facts = folder / f"{name}.ours_sm90.json"
        dispatches = (
            json.loads(facts.read_text())["stats"]["dispatches"] if facts.exists() else None
        )
        eager = Model(spelling).cuda().eval()
        for system, call in systems.items():
            known = {**fields, "dispatches": dispatches} if system == "ours_sm90" else fields
            record = harness.measure(known, system, call, inputs, reference, flops, True)
            if system in OURS and spelling.mask == "padding" and "error" not in record:
                # what PyTorch gives for the same spelling, next to ours
                record["nan_keys_finite"] = _nan_keys_finite(call, first)
                if b * h * spelling.nq * n <= EAGER_SCORES:  # eager's f32 scores fit
                    record["nan_keys_finite_eager"] = _nan_keys_finite(eager, first)
            records.append(record)
        harness.write(records, out, "mask_forms", render)  # so far
    return records


def render(records: list[dict]) -> str:
    """Per spelling: ours against cuDNN in device time, then every system's three timings."""
    by_case = harness.by_case(records)

    def cell(r: dict | None, key: str, digits: str) -> str:
        if r is None:
            return "-"
        return "failed" if "error" in r else format(r[key], digits)

    lines = [
        "| spelling | mask | Nq | ours_sm90 device ms | TFLOP/s | cuDNN TFLOP/s "
        "| ours / cuDNN time | ours dispatches "
        "| NaN at masked keys: finite output (ours, torch eager) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for case, found in by_case.items():
        ours, cudnn = found.get("ours_sm90"), found.get("torch_sdpa_cudnn")
        first = next(iter(found.values()))
        ratio = "-"
        if ours and cudnn and "error" not in ours and "error" not in cudnn:
            ratio = f"{ours['device_ms'] / cudnn['device_ms']:.2f}"
        finite = "-"
        if ours and "nan_keys_finite" in ours:
            finite = f"{ours['nan_keys_finite']}, {ours.get('nan_keys_finite_eager', '-')}"
        lines.append(
            f"| {case} | {first['mask']} | {first['Nq']} | {cell(ours, 'device_ms', '.3f')} "
            f"| {cell(ours, 'tflops', '.0f')} | {cell(cudnn, 'tflops', '.0f')} | {ratio} "
            f"| {(ours or {}).get('dispatches', '-')} | {finite} |"
        )
    return (
        "TFLOP/s from device time, over the query-key pairs each mask keeps:\n\n"
        + "\n".join(lines)
        + _grid(by_case)
        + "\n\nEvery system, the three timings (ms):\n\n"
        + harness.table(records)
    )


def _grid(by_case: dict[str, dict[str, dict]]) -> str:
    """The causal spellings at each shape of the grid (and the square shape): ours in
    device ms per spelling, their spread (slowest over fastest) and cuDNN's time."""
    groups: dict[tuple, dict[str, dict]] = {}
    for case, found in by_case.items():
        first = next(iter(found.values()))
        if first["mask"] != "causal":
            continue
        spelling, _, shape = case.partition("@")
        key = (shape or f"B{B}H{H}N{N}", "offset" if first["Nq"] < first["Nk"] else "square")
        groups.setdefault(key, {})[spelling] = found
    if not groups:
        return ""
    spellings = list(dict.fromkeys(s for g in groups.values() for s in g))
    lines = [
        "| shape | " + " | ".join(spellings) + " | spread | cuDNN |",
        "|---|" + "---|" * (len(spellings) + 2),
    ]
    for (shape, kind), found in groups.items():
        times = {
            s: r["ours_sm90"]["device_ms"]
            for s, r in found.items()
            if "ours_sm90" in r and "error" not in r["ours_sm90"]
        }
        cudnn = [
            r["torch_sdpa_cudnn"]["device_ms"]
            for r in found.values()
            if "torch_sdpa_cudnn" in r and "error" not in r["torch_sdpa_cudnn"]
        ]
        cells = [f"{times[s]:.3f}" if s in times else "-" for s in spellings]
        spread = f"{max(times.values()) / min(times.values()):.3f}" if times else "-"
        lines.append(
            f"| {shape} {kind} | "
            + " | ".join(cells)
            + f" | {spread} | "
            + (f"{cudnn[0]:.3f}" if cudnn else "-")
            + " |"
        )
    return (
        "\n\nCausal spellings, ours in device ms (the offset rows: a quarter of the keys'"
        " queries, each seeing the keys up to its position after the rest):\n\n" + "\n".join(lines)
    )


if __name__ == "__main__":
    sys.exit(harness.main(__doc__.splitlines()[0], prepare, run, options=_options))
