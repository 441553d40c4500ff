"""Complex values of an exported program computed as pairs of real ones: IREE 3.13 cannot
compile complex numbers, and models use them for rotary embeddings (Llama 4:
``torch.polar`` makes the rotations, ``view_as_complex`` pairs Q's and K's features,
a complex product rotates them, ``view_as_real`` takes them back).

Each complex value becomes a real tensor of its shape and one more dim of 2 (real,
imaginary), the layout ``view_as_real`` gives: ``view_as_complex`` and ``view_as_real``
become that tensor itself, products and sums are written out on the parts, and views
(unsqueeze, slices, reshapes, expands, permutes) keep the pair dim last. A program whose
complex values are all made and used by the ops of ``_RULES`` comes out with none; any
other complex value is left as it is, for the front end to refuse with its source line.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.fx import Node

from fusion_compiler.graph_rewrites import Emitter

aten = torch.ops.aten

# a complex dtype -> the dtype of its parts
_PARTS = {torch.complex32: torch.float16, torch.complex64: torch.float32,
          torch.complex128: torch.float64}  # fmt: skip


def _is_complex(value: object) -> bool:
    return isinstance(value, torch.Tensor) and value.is_complex()


class _Emitter(Emitter):
    """An ``Emitter`` that also splits and builds (real, imaginary) pairs."""

    def parts(self, pair: Node) -> tuple[Node, Node]:
        return self(aten.select.int, pair, -1, 0), self(aten.select.int, pair, -1, 1)

    def pair(self, real: Node, imaginary: Node) -> Node:
        return self(aten.stack.default, [real, imaginary], -1)


def _dim(dim: int) -> int:
    """A dim of a complex value, in its pair: negative dims count past the pair dim."""
    return dim - 1 if dim < 0 else dim


def _polar(emit: _Emitter, node: Node, pairs: dict) -> Node:
    magnitude, angle = node.args[:2]
    return emit.pair(
        emit(aten.mul.Tensor, magnitude, emit(aten.cos.default, angle)),
        emit(aten.mul.Tensor, magnitude, emit(aten.sin.default, angle)),
    )


def _mul(emit: _Emitter, node: Node, pairs: dict) -> Node | None:
    a, b = node.args[:2]
    if a in pairs and b in pairs:
        ar, ai = emit.parts(pairs[a])
        br, bi = emit.parts(pairs[b])
        return emit.pair(
            emit(aten.sub.Tensor, emit(aten.mul.Tensor, ar, br), emit(aten.mul.Tensor, ai, bi)),
            emit(aten.add.Tensor, emit(aten.mul.Tensor, ar, bi), emit(aten.mul.Tensor, ai, br)),
        )
    pair, other = (pairs[a], b) if a in pairs else (pairs.get(b), a)
    if pair is None:
        return None
    if isinstance(other, Node) and not _is_complex(other.meta.get("val")):
        return emit(aten.mul.Tensor, pair, emit(aten.unsqueeze.default, other, -1))
    if isinstance(other, (int, float)) and not isinstance(other, bool):
        return emit(aten.mul.Tensor, pair, other)
    return None


def _termwise(op: Callable) -> Callable:
    """A sum or difference of two complex values: ``op`` of their pairs."""

    def rule(emit: _Emitter, node: Node, pairs: dict) -> Node | None:
        a, b = node.args[:2]
        if a in pairs and b in pairs and not node.kwargs:
            return emit(op, pairs[a], pairs[b])
        return None

    return rule


def _view(rewrite: Callable) -> Callable:
    """A view of a complex value: ``rewrite(pair, node, *args)`` the same view of its pair."""

    def rule(emit: _Emitter, node: Node, pairs: dict) -> Node | None:
        source = node.args[0]
        if source not in pairs or node.kwargs:
            return None
        return rewrite(emit, pairs[source], node, *node.args[1:])

    return rule


def _permute(emit: _Emitter, pair: Node, node: Node, dims: list[int]) -> Node:
    rank = len(dims)
    return emit(aten.permute.default, pair, [d % rank for d in dims] + [rank])


def _to_copy(emit: _Emitter, node: Node, pairs: dict) -> Node | None:
    """``.to`` from a complex type to a complex type: the parts' types."""
    source, wanted = node.args[0], node.kwargs.get("dtype")
    if source not in pairs or wanted not in _PARTS or set(node.kwargs) - {"dtype"}:
        return None
    pair = pairs[source]
    if pair.meta["val"].dtype == _PARTS[wanted]:
        return pair
    return emit(aten._to_copy.default, pair, dtype=_PARTS[wanted])


# op -> its rule: the pair of its complex result (or, for view_as_real, its real one),
# None where this use of the op is not covered
_RULES: dict[Callable, Callable] = {
    aten.polar.default: _polar,
    aten.view_as_complex.default: lambda emit, node, pairs: node.args[0],
    aten.view_as_real.default: lambda emit, node, pairs: pairs.get(node.args[0]),
    aten.mul.Tensor: _mul,
    aten.add.Tensor: _termwise(aten.add.Tensor),
    aten.sub.Tensor: _termwise(aten.sub.Tensor),
    aten.unsqueeze.default: _view(lambda e, p, n, d: e(aten.unsqueeze.default, p, _dim(d))),
    aten.select.int: _view(lambda e, p, n, d, i: e(aten.select.int, p, _dim(d), i)),
    aten.slice.Tensor: _view(lambda e, p, n, d=0, *rest: e(aten.slice.Tensor, p, _dim(d), *rest)),
    aten.view.default: _view(lambda e, p, n, shape: e(aten.view.default, p, [*shape, 2])),
    aten.reshape.default: _view(lambda e, p, n, shape: e(aten.reshape.default, p, [*shape, 2])),
    aten.expand.default: _view(lambda e, p, n, shape: e(aten.expand.default, p, [*shape, 2])),
    aten.permute.default: _view(_permute),
    aten.clone.default: _view(lambda e, p, n: e(aten.clone.default, p)),
    aten.alias.default: _view(lambda e, p, n: p),
    aten._to_copy.default: _to_copy,
}


def as_real_pairs(program: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """``program`` with its complex values computed as real pairs where every op making
    or using them has a rule (``_RULES``); the rest left as it is. Rewrites in place."""
    graph = program.graph_module.graph
    pairs: dict[Node, Node] = {}  # a complex value -> its pair
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        made_complex = _is_complex(node.meta.get("val"))
        inputs = [a for a in node.all_input_nodes if _is_complex(a.meta.get("val"))]
        if not (made_complex or inputs):
            continue
        if node.target is aten._assert_tensor_metadata.default and not node.users:
            graph.erase_node(node)  # a dtype check of the value, which now has another type
            continue
        rule = _RULES.get(node.target)
        if rule is None or not all(a in pairs for a in inputs):
            continue
        made = rule(_Emitter(graph, node), node, pairs)
        if made is None:
            continue
        if made_complex:
            pairs[node] = made
        else:
            node.replace_all_uses_with(made)
        changed = True
    if changed:
        graph.eliminate_dead_code()
        program.graph_module.recompile()
    return program
