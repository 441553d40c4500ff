"""fusion-schedule: chooses the tiles of each fused attention's generated kernel.

Each ``iree_linalg_ext.attention`` gets a ``fusion.schedule`` attribute (block_m,
block_n, num_warps, num_stages, splits) for the target architecture: the entry
``fusion-autotune`` measured for its shape class (arch, dtype, padded head dim, causal,
key-length bucket) in ``fusion_compiler/backends/triton/schedules.json``, or, for a class not
tuned, ``schedules.model``'s tiles; then fitted to the op's sizes (row blocks no taller
than its queries, split-KV when its row blocks cannot fill the GPU, as in decoding,
persistent programs for short causal attention). A remark says which. ``fusion-kernel-attention``
generates its kernel with these tiles.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from fusion_compiler.dialects import linalg_ext

from fusion_compiler import remarks
from fusion_compiler.backends.plan import kv_group
from fusion_compiler.backends.triton import schedules
from fusion_compiler.ir import ir

NAME = "fusion-schedule"
ATTRIBUTE = "fusion.schedule"


@dataclass(frozen=True)
class Options:
    arch: str = "sm_90"


@dataclass(frozen=True)
class Choice:
    tiles: schedules.Tiles
    source: str  # "tuned <class>" or "model"
    shape: schedules.ShapeClass


def choose(op: ir.Operation, arch: str, table: dict | None = None) -> Choice | None:
    """The tiles for ``op``: its shape class's (arch, dtype, padded head dim, causal,
    key-length bucket), fitted to its sizes (short queries, GQA packing, split-KV); None
    for a layout the kernel path does not take."""
    form = linalg_ext.layout(op, allow_dynamic=True)
    if isinstance(form, str):
        return None
    (batch, n_q, _), element = _shape(op.operands[0]), ir.RankedTensorType(op.operands[0].type)
    n_k = _shape(op.operands[1])[2 if form.k_transposed else 1]
    head_dim = max(linalg_ext.head_dim(op), _shape(op.operands[2])[2])
    n_q, n_k = (-1 if ir.ShapedType.is_dynamic_size(n) else n for n in (n_q, n_k))
    shape = schedules.ShapeClass.of(
        arch.rstrip("a"),
        str(element.element_type),
        head_dim,
        form.causal_offset is not None,
        n_k if n_k > 0 else 4096,  # a dynamic length: the middle bucket
    )
    tiles, source = schedules.choose(shape, table)
    group = kv_group(op, form)
    window = 1 - form.window_start if form.window_start is not None else 0
    return Choice(schedules.fit(tiles, shape, batch, n_q, n_k, group, window), source, shape)


def _shape(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def read(op: ir.Operation) -> schedules.Tiles | None:
    """The tiles fusion-schedule put on ``op``, if it ran."""
    if ATTRIBUTE not in op.attributes:
        return None
    attr = ir.DictAttr(op.attributes[ATTRIBUTE])
    fields = [k for k in schedules.Tiles.__annotations__ if k in attr]
    return schedules.Tiles(**{k: ir.IntegerAttr(attr[k]).value for k in fields})


def schedule_attention(op: ir.Operation, tiles: schedules.Tiles) -> None:
    """attention -> attention {fusion.schedule = {block_m = .., ...}}"""
    i64 = ir.IntegerType.get_signless(64)
    op.attributes[ATTRIBUTE] = ir.DictAttr.get(
        {k: ir.IntegerAttr.get(i64, v) for k, v in asdict(tiles).items()}
    )


def run(module: ir.Operation, options: Options) -> None:
    table = schedules.load_table()
    with module.context, module.location:
        for op in linalg_ext.find_all(module):
            choice = choose(op, options.arch, table)
            if choice is None:
                continue
            tiles, source, shape = choice.tiles, choice.source, choice.shape
            schedule_attention(op, tiles)
            split = f", split-KV {tiles.splits}" if tiles.splits > 1 else ""
            split += ", GQA heads packed" if tiles.pack_gqa else ""
            split += f", {tiles.persistent} persistent programs" if tiles.persistent else ""
            remarks.emit(
                op.location,
                f"schedule {tiles.block_m}x{tiles.block_n} tiles, {tiles.num_warps} warps, "
                f"{tiles.num_stages} stages{split} ({source}; class {shape.key})",
            )
