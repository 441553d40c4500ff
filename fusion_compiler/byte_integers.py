"""8-bit integer values computed as int32 wherever their values are read.

MLIR's integers are signless: IREE 3.13's torch input pipeline types uint8 and int8
tensors as i8, and its lowerings of several ops on them are wrong or crash. Found
against PyTorch (``tests/test_frontend.py``): uint8 bytes above 127 read as negative
(``x < 200`` false, sums and products negative, ``x / 7``, ``abs`` and ``x == 200``
wrong), and ``x - 1``, ``3 - x``, ``x * 3`` and ``x // 7`` on uint8 or int8 crashed the
process. Its conversions from 8-bit integers to other types are right (uint8
zero-extended, int8 sign-extended), and so is the narrowing back (a truncation, which
wraps as PyTorch's 8-bit arithmetic does).

So every op that reads 8-bit integer operands computes on them converted to int32
(a ``dtype=`` of 8 bits too), and its result is cast to the type PyTorch gives it.
Left as they are: conversions and bit casts themselves, ops that only move, select or
copy elements when their result keeps the operand's type (an op that also converts, a
``where`` of uint8 and float, is widened), and ops with several results (sorts and
reductions with indices, which IREE orders right).
"""

from __future__ import annotations

import torch
from torch.fx import Node

from fusion_compiler.graph_rewrites import Emitter

aten = torch.ops.aten

_WIDE = torch.int32
_BYTES = (torch.uint8, torch.int8)

# conversions: IREE's are right from and to 8-bit integers
_CONVERSIONS = {aten._to_copy.default, aten.view.dtype}
# ops whose result is their operands' elements, moved, selected or copied: they keep
# 8-bit operands where their result has the same type (bitwise and/or/xor/not are
# sign-free too, but cheap to widen, and their scalar operands above 127 are not)
_MOVES_ELEMENTS = {
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.expand.default,
    aten.permute.default, aten.transpose.int, aten.t.default, aten.squeeze.dim,
    aten.squeeze.dims, aten.squeeze.default, aten.unsqueeze.default, aten.slice.Tensor,
    aten.select.int, aten.cat.default, aten.stack.default, aten.clone.default,
    aten.alias.default, aten.flip.default, aten.roll.default, aten.repeat.default,
    aten.index_select.default, aten.gather.default, aten.index.Tensor, aten.detach.default,
    aten.lift_fresh_copy.default, aten.copy.default, aten.constant_pad_nd.default,
    aten.where.self, aten.masked_fill.Scalar, aten.masked_fill.Tensor,
    aten.index_put.default, aten.slice_scatter.default, aten.select_scatter.default,
    aten._assert_tensor_metadata.default, aten.empty_like.default,
    aten.zeros_like.default, aten.ones_like.default, aten.full_like.default,
}  # fmt: skip


def _dtype(node: Node) -> torch.dtype | None:
    value = node.meta.get("val")
    return value.dtype if isinstance(value, torch.Tensor) else None


def _is_bytes(value: object) -> bool:
    return isinstance(value, Node) and _dtype(value) in _BYTES


def _reads_byte_values(node: Node) -> bool:
    """Whether ``node`` computes with the values of an 8-bit integer operand."""
    if node.op != "call_function" or node.target in _CONVERSIONS:
        return False
    if not isinstance(node.meta.get("val"), torch.Tensor):
        return False  # several results, or none
    operands = [a for a in node.all_input_nodes if _is_bytes(a)]
    if node.target in _MOVES_ELEMENTS:
        return any(_dtype(a) != _dtype(node) for a in operands)
    return bool(operands) or node.kwargs.get("dtype") in _BYTES


def _widened(node: Node) -> Node:
    """``node`` on its 8-bit operands converted to int32, cast to ``node``'s type."""
    emit = Emitter(node.graph, node)
    wide: dict[Node, Node] = {}

    def widen(arg: Node) -> Node:
        if not _is_bytes(arg):
            return arg
        if arg not in wide:
            wide[arg] = emit(aten._to_copy.default, arg, dtype=_WIDE)
        return wide[arg]

    args = torch.fx.node.map_arg(node.args, widen)
    kwargs = dict(torch.fx.node.map_arg(node.kwargs, widen))
    if kwargs.get("dtype") in _BYTES:
        kwargs["dtype"] = _WIDE
    made = emit(node.target, *args, **kwargs)
    if _dtype(made) != _dtype(node):
        made = emit(aten._to_copy.default, made, dtype=_dtype(node))
    return made


def widened(program: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """``program`` with each op that reads 8-bit integer values computing on them as
    int32 (the module docstring says why). Rewrites in place."""
    graph = program.graph_module.graph
    changed = False
    for node in list(graph.nodes):
        if not _reads_byte_values(node):
            continue
        node.replace_all_uses_with(_widened(node))
        graph.erase_node(node)
        changed = True
    if changed:
        program.graph_module.recompile()
    return program
