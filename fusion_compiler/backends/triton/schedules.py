"""Tiles for the generated attention kernel: tuned entries, and a model for the rest.

A schedule is chosen per shape class: architecture, dtype, head dim (padded to a power
of two), causal or not, and the key length's bucket. ``schedules.json`` (next to this
file) holds the classes ``fusion-autotune`` measured on a GPU; a class not in it gets
``model()``'s tiles, sized from the head dim and the shared memory they need.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from fusion_compiler.backends.spec import contiguous
from fusion_compiler.backends.triton.spec import TritonSpec, padded

TABLE = Path(__file__).with_name("schedules.json")
_SHARED_BYTES = 227 * 1024  # per block on sm_90
_BUCKETS = (1024, 4096, 16384)  # key lengths up to ~1.5x a bucket fall in it
# causal attention over at most this many keys runs persistent programs (H200, D128 fp16,
# benchmarks/results/experiments.md: causal/full 0.68 -> 0.75 at 1024 keys, 0.71 -> 0.87 at
# 4096, 0.85 -> 0.88 at 8192 with GQA; 0.89 -> 0.84 at 16384, 0.90 -> 0.88 at 65536)
_PERSISTENT_KEYS = 8192
_SMS = {"sm_90": 132}  # streaming multiprocessors (H100 SXM and H200)
_SM_SHARED_BYTES = 228 * 1024  # per multiprocessor, 1 KiB of it reserved per block
_SM_REGISTERS = 64 * 1024
# row blocks of at most this many rows (decoding) are bound by reading K and V: each
# program streams them through the largest key blocks three stages deep that fit, and
# split-KV makes one wave of programs (H100, decode B1-64 over 1K-128K keys, D128 fp16,
# benchmarks/results/decode_tilings_h100.md: 128x3 against the tuned 64x2, 0.98-1.05x
# cuDNN's time from 0.98-1.43x; four programs per multiprocessor, or two, were slower;
# with the per-row combine 0.89-1.01x, decode_bandwidth_h100.md)
_STREAMING_ROWS = 16
_STREAMING_BLOCKS = ((128, 3), (64, 3), (32, 3))  # key block, stages


@dataclass(frozen=True)
class Tiles:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    splits: int = 1  # split-KV: programs sharing one row block's keys
    pack_gqa: int = 0  # 1: one program takes the rows of all heads sharing a K/V head
    persistent: int = 0  # > 0: this many programs take the causal tiles longest first


@dataclass(frozen=True)
class ShapeClass:
    arch: str  # "sm_90"
    dtype: str  # "f16" | "bf16"
    d: int  # head dim padded to a power of two
    causal: bool
    n: int  # bucket of the key length

    @classmethod
    def of(cls, arch: str, dtype: str, d: int, causal: bool, n_k: int) -> ShapeClass:
        bucket = next((b for b in _BUCKETS if n_k <= b * 3 // 2), _BUCKETS[-1])
        return cls(arch, dtype, padded(d), causal, bucket)

    @property
    def key(self) -> str:
        kind = "causal" if self.causal else "full"
        return f"{self.arch}/{self.dtype}/d{self.d}/{kind}/n{self.n}"


def load_table(path: Path = TABLE) -> dict[str, dict]:
    return json.loads(path.read_text()) if path.exists() else {}


def shared_bytes(tiles: Tiles, d: int, element_bytes: int = 2) -> int:
    """Q once, K and V for each pipeline stage."""
    return element_bytes * d * (tiles.block_m + 2 * tiles.block_n * tiles.num_stages)


def multiprocessors(arch: str) -> int:
    """The streaming multiprocessors of ``arch``'s GPUs (\"sm_90\" or \"sm_90a\")."""
    return _SMS.get(arch.rstrip("a"), 132)


def block_shared_bytes(arch: int) -> int:
    """The shared memory one block may have on sm_``arch`` (90: 227 KiB)."""
    return _SHARED_BYTES


def resident_programs(tiles: Tiles, d: int, arch: str) -> int:
    """Programs of these tiles the GPU runs at once: per multiprocessor, as many as its
    shared memory and registers (taken as 128 per thread) hold."""
    by_shared = _SM_SHARED_BYTES // (shared_bytes(tiles, d) + 1024)
    by_registers = _SM_REGISTERS // (tiles.num_warps * 32 * 128)
    return multiprocessors(arch) * max(1, min(by_shared, by_registers))


def model(shape: ShapeClass) -> Tiles:
    """Tiles for a class no one tuned: the largest that keep wgmma fed and fit in
    shared memory (the shapes of the tuned entries for head dims 64 and 128)."""
    # the f32 accumulator (block_m x d over 128 threads) stays within 128 registers
    block_m = 128 if shape.d == 128 and not shape.causal else 64
    block_n = 64 if shape.d >= 128 or shape.causal else 128
    if shape.d > 128:
        block_n = 32
    for stages in (3, 2, 1):
        tiles = Tiles(block_m, block_n, 4, stages)
        if shared_bytes(tiles, shape.d) <= _SHARED_BYTES:
            return tiles
    return Tiles(64, 16, 4, 1)


def fit(
    tiles: Tiles,
    shape: ShapeClass,
    batch: int,
    n_q: int,
    n_k: int,
    kv_group: int = 1,
    window: int = 0,
) -> Tiles:
    """``tiles`` fitted to one attention's sizes (-1: dynamic): with GQA and fewer query
    rows than a row block (decoding), the rows of the heads sharing K/V packed into one
    block; row blocks no taller than the rows, and for a few rows, key blocks that keep
    K and V streaming (``_STREAMING_ROWS``); split-KV when the row blocks are too few to
    fill the GPU (under 0.8 of a wave, as FlashAttention's heuristic): enough programs
    for about four per multiprocessor, each with at least four key blocks, or for
    streaming rows one per multiprocessor, each with at least two (a dynamic key length
    is taken as long); and for causal attention over few keys, with
    more tiles than the GPU holds at once, persistent programs (one per place on the
    GPU) taking the tiles of every head longest first, which keeps the multiprocessors
    evenly busy where each tile is short; a sliding ``window`` of keys (> 0) makes every
    tile short, however long the rows."""
    if n_q < 0:
        return tiles
    pack = kv_group > 1 and padded(n_q) < tiles.block_m
    group = kv_group if pack else 1
    block_m = min(tiles.block_m, padded(n_q * group))
    streaming = block_m <= _STREAMING_ROWS
    if streaming:
        tiles = _streaming(replace(tiles, block_m=block_m), shape.d)
    programs = batch // group * -(-n_q * group // block_m)
    sms = multiprocessors(shape.arch)
    splits = 1
    if programs < 0.8 * sms:  # else about one wave already: merging would cost more
        key_blocks = -(-n_k // tiles.block_n) if n_k > 0 else 1 << 20
        if streaming:  # one wave, at least two key blocks each
            splits = max(1, min(sms // programs, key_blocks // 2, 64))
        else:
            splits = max(1, min(-(-4 * sms // programs), key_blocks // 4, 64))
    fitted = replace(tiles, block_m=block_m, splits=splits, pack_gqa=int(pack))
    keys = min(n_k, window) if window > 0 else n_k
    if shape.causal and splits == 1 and not pack and 0 < keys <= _PERSISTENT_KEYS:
        resident = resident_programs(fitted, shape.d, shape.arch)
        if programs > resident:
            fitted = replace(fitted, persistent=resident)
    return fitted


def _streaming(tiles: Tiles, d: int) -> Tiles:
    """``tiles`` for row blocks of a few rows: the largest key blocks that fit three
    stages deep (``_STREAMING_BLOCKS``), or ``tiles`` where none does."""
    for block_n, stages in _STREAMING_BLOCKS:
        streaming = replace(tiles, block_n=block_n, num_stages=stages)
        if shared_bytes(streaming, d) <= _SHARED_BYTES:
            return streaming
    return tiles


def plain_spec(
    tiles: Tiles, batch: int, n: int, d: int, causal: bool, kv_group: int = 1, n_k: int = 0
) -> TritonSpec:
    """The kernel for fp16 attention over contiguous (batch, n, d) operands (K and V:
    (batch // kv_group, n_k or n, d)), no mask, scale d^-0.5, with these tiles: what
    fusion-autotune and the schedule benchmarks time."""
    n_k = n_k or n
    q_view, kv_view = contiguous(n, d), contiguous(n_k, d)
    return TritonSpec(
        dtype="f16",
        mask_dtype=None,
        batch=batch,
        n_q=n,
        n_k=n_k,
        d=d,
        dv=d,
        views=(q_view, kv_view, kv_view, q_view, q_view),
        causal_offset=0 if causal else None,
        qk_scale=d**-0.5 * 1.4426950408889634,  # scale * log2(e)
        score="x",
        block_m=tiles.block_m,
        block_n=tiles.block_n,
        num_warps=tiles.num_warps,
        num_stages=tiles.num_stages,
        kv_group=kv_group,
        persistent=tiles.persistent,
    )


def choose(shape: ShapeClass, table: dict[str, dict] | None = None) -> tuple[Tiles, str]:
    """The tiles for ``shape`` and where they come from ("tuned ..." or "model")."""
    table = load_table() if table is None else table
    for key in (shape.key, ShapeClass(**{**asdict(shape), "dtype": "f16"}).key):
        entry = table.get(key)
        if entry is not None:
            return Tiles(**entry["tiles"]), f"tuned {key}"
    return model(shape), "model"
