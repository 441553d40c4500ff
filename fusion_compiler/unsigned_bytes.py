"""uint8 values computed as int32 wherever their sign matters.

MLIR's integers are signless: IREE 3.13's torch input pipeline types a uint8 tensor as
i8, and its lowerings of several ops read those bytes as signed. Found against PyTorch
(``tests/test_frontend.py``): 200 compared below 100 (``x < 200`` false), sums and
products sign-extended (``x.sum()`` of bytes near 200 negative), ``x / 7``, ``abs`` and
``x == 200`` wrong; ``x - 1``, ``3 - x``, ``x * 3`` and ``x // 3`` crashed the pipeline
itself. Its ``_to_copy`` from uint8 to a wider type is right (zero-extended), and so is
the narrowing back (a truncation, which wraps as PyTorch's uint8 arithmetic does).

So every op that reads a uint8 tensor, except those that only move, select or compare
bits for equality of whole tensors, reads it widened to int32; a result PyTorch types
otherwise than the widened op does (uint8, or int16 from uint8 with int8) is cast to its
type. Ops with several results keep their bytes (sorts and reductions with indices,
which IREE orders right).
"""

from __future__ import annotations

import torch
from torch.fx import Node

from fusion_compiler.graph_rewrites import Emitter

aten = torch.ops.aten

_WIDE = torch.int32

# Ops whose result is the same bytes as their uint8 operands, moved, selected or copied:
# they keep them. (Bitwise and/or/xor/not are sign-free too, but cheap to widen and
# their scalar operands above 127 are not.)
_MOVES_BYTES = {
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.expand.default,
    aten.permute.default, aten.transpose.int, aten.t.default, aten.squeeze.dim,
    aten.squeeze.dims, aten.squeeze.default, aten.unsqueeze.default, aten.slice.Tensor,
    aten.select.int, aten.cat.default, aten.stack.default, aten.clone.default,
    aten.alias.default, aten.flip.default, aten.roll.default, aten.repeat.default,
    aten.index_select.default, aten.gather.default, aten.index.Tensor, aten.detach.default,
    aten.lift_fresh_copy.default, aten.copy.default, aten.constant_pad_nd.default,
    aten.where.self, aten.masked_fill.Scalar, aten.masked_fill.Tensor,
    aten.index_put.default, aten.slice_scatter.default, aten.select_scatter.default,
    aten.unbind.int, aten.split.Tensor, aten.split_with_sizes.default, aten.chunk.default,
    aten._assert_tensor_metadata.default, aten.sym_size.int, aten.empty_like.default,
    aten.zeros_like.default, aten.ones_like.default, aten.full_like.default,
}  # fmt: skip


def _is_bytes(value: object) -> bool:
    return isinstance(value, Node) and _dtype(value) == torch.uint8


def _dtype(node: Node) -> torch.dtype | None:
    value = node.meta.get("val")
    return value.dtype if isinstance(value, torch.Tensor) else None


def _reads_bytes_by_value(node: Node) -> bool:
    """Whether ``node`` computes with the values of a uint8 operand (not only moves it)."""
    if node.op != "call_function" or node.target in _MOVES_BYTES:
        return False
    if not isinstance(node.meta.get("val"), torch.Tensor):
        return False  # several results, or none
    return any(_is_bytes(a) for a in node.all_input_nodes)


def _widened(node: Node) -> Node:
    """``node`` on its uint8 operands widened to int32, cast to ``node``'s type."""
    emit = Emitter(node.graph, node)
    wide: dict[Node, Node] = {}

    def widen(arg: Node) -> Node:
        if not _is_bytes(arg):
            return arg
        if arg not in wide:
            wide[arg] = emit(aten._to_copy.default, arg, dtype=_WIDE)
        return wide[arg]

    args = torch.fx.node.map_arg(node.args, widen)
    kwargs = torch.fx.node.map_arg(node.kwargs, widen)
    made = emit(node.target, *args, **kwargs)
    if _dtype(made) != _dtype(node):
        made = emit(aten._to_copy.default, made, dtype=_dtype(node))
    return made


def widened(program: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """``program`` with each op that reads uint8 operands by value computing on them as
    int32 (the module docstring says why). Rewrites in place."""
    graph = program.graph_module.graph
    changed = False
    for node in list(graph.nodes):
        if not _reads_bytes_by_value(node):
            continue
        node.replace_all_uses_with(_widened(node))
        graph.erase_node(node)
        changed = True
    if changed:
        program.graph_module.recompile()
    return program
