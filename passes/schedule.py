"""fusion-schedule: chooses the tiles of each fused attention's generated kernel.

Each ``iree_linalg_ext.attention`` gets a ``fusion.schedule`` attribute (block_m,
block_n, num_warps, num_stages, splits) for the target architecture: the entry
``fusion-autotune`` measured for its shape class (arch, dtype, padded head dim, causal,
key-length bucket) in ``fusion_compiler/kernels/schedules.json``, or, for a class not
tuned, ``schedules.model``'s tiles; then fitted to the op's sizes (row blocks no taller
than its queries, split-KV when its row blocks cannot fill the GPU, as in decoding). A
remark says which. ``fusion-kernel-attention``
generates its kernel with these tiles.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from fusion_compiler.dialects import flash, kernel_dispatch, linalg_ext

from fusion_compiler import remarks
from fusion_compiler.ir import ir
from fusion_compiler.kernels import schedules

NAME = "fusion-schedule"
ATTRIBUTE = "fusion.schedule"


@dataclass(frozen=True)
class Options:
    arch: str = "sm_90"


def shape_class(op: ir.Operation, arch: str) -> schedules.ShapeClass | None:
    """The op's shape class, None for a layout the kernel path does not take."""
    form = flash.layout(op, allow_dynamic=True)
    if isinstance(form, str):
        return None
    q_type = ir.RankedTensorType(op.operands[0].type)
    dtype = {"f16": "f16", "bf16": "bf16"}.get(str(q_type.element_type), str(q_type.element_type))
    v_dim = ir.RankedTensorType(op.operands[2].type).shape[2]
    head_dim = max(linalg_ext.head_dim(op), v_dim)
    n_k = _key_length(op)
    if ir.ShapedType.is_dynamic_size(n_k):
        n_k = 4096  # a dynamic length: the middle bucket
    return schedules.ShapeClass.of(
        arch.rstrip("a"), dtype, head_dim, form.causal_offset is not None, n_k
    )


def choose(
    op: ir.Operation, shape: schedules.ShapeClass, table: dict | None = None
) -> tuple[schedules.Tiles, str]:
    """The tiles of ``op``'s class, fitted to its sizes (short queries, split-KV), and
    where they come from."""
    tiles, source = schedules.choose(shape, table)
    (batch, n_q, _), n_k = ir.RankedTensorType(op.operands[0].type).shape, _key_length(op)
    n_q, n_k = (-1 if ir.ShapedType.is_dynamic_size(n) else n for n in (n_q, n_k))
    form = flash.layout(op, allow_dynamic=True)
    group = 1 if isinstance(form, str) else kernel_dispatch.kv_group(op, form)
    return schedules.fit(tiles, shape.arch, batch, n_q, n_k, group), source


def _key_length(op: ir.Operation) -> int:
    form = flash.layout(op, allow_dynamic=True)
    k_transposed = not isinstance(form, str) and form.k_transposed
    return ir.RankedTensorType(op.operands[1].type).shape[2 if k_transposed else 1]


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
            shape = shape_class(op, options.arch)
            if shape is None:
                continue
            tiles, source = choose(op, shape, table)
            schedule_attention(op, tiles)
            split = f", split-KV {tiles.splits}" if tiles.splits > 1 else ""
            split += ", GQA heads packed" if tiles.pack_gqa else ""
            remarks.emit(
                op.location,
                f"schedule {tiles.block_m}x{tiles.block_n} tiles, {tiles.num_warps} warps, "
                f"{tiles.num_stages} stages{split} ({source}; class {shape.key})",
            )
