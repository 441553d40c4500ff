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

from fusion_compiler.kernels.attention import padded

TABLE = Path(__file__).with_name("schedules.json")
_SHARED_BYTES = 227 * 1024  # per block on sm_90
_BUCKETS = (1024, 4096, 16384)  # key lengths up to ~1.5x a bucket fall in it
_SMS = {"sm_90": 132}  # streaming multiprocessors (H100 SXM and H200)


@dataclass(frozen=True)
class Tiles:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    splits: int = 1  # split-KV: programs sharing one row block's keys
    pack_gqa: int = 0  # 1: one program takes the rows of all heads sharing a K/V head


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


def fit(tiles: Tiles, arch: str, batch: int, n_q: int, n_k: int, kv_group: int = 1) -> Tiles:
    """``tiles`` fitted to one attention's sizes (-1: dynamic): with GQA and fewer query
    rows than a row block (decoding), the rows of the heads sharing K/V packed into one
    block; row blocks no taller than the rows; and split-KV when the row blocks are too
    few to fill the GPU (under 0.8 of a wave, as FlashAttention's heuristic): enough
    programs for about four per multiprocessor, each with at least four key blocks (a
    dynamic key length is taken as long)."""
    if n_q < 0:
        return tiles
    pack = kv_group > 1 and padded(n_q) < tiles.block_m
    group = kv_group if pack else 1
    block_m = min(tiles.block_m, padded(n_q * group))
    programs = batch // group * -(-n_q * group // block_m)
    sms = _SMS.get(arch.rstrip("a"), 132)
    splits = 1
    if programs < 0.8 * sms:  # else about one wave already: merging would cost more
        key_blocks = -(-n_k // tiles.block_n) if n_k > 0 else 1 << 20
        splits = max(1, min(-(-4 * sms // programs), key_blocks // 4, 64))
    return replace(tiles, block_m=block_m, splits=splits, pack_gqa=int(pack))


def choose(shape: ShapeClass, table: dict[str, dict] | None = None) -> tuple[Tiles, str]:
    """The tiles for ``shape`` and where they come from ("tuned ..." or "model")."""
    table = load_table() if table is None else table
    for key in (shape.key, ShapeClass(**{**asdict(shape), "dtype": "f16"}).key):
        entry = table.get(key)
        if entry is not None:
            return Tiles(**entry["tiles"]), f"tuned {key}"
    return model(shape), "model"
