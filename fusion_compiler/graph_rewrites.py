"""Building blocks for the front end's rewrites of exported programs (FX graphs)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.fx import Graph, Node


class Emitter:
    """Builds ops before ``node``, each with its fake value and ``node``'s source."""

    def __init__(self, graph: Graph, node: Node):
        self.graph, self.node = graph, node

    def __call__(self, op: Callable, *args: object, **kwargs: object) -> Node:
        with self.graph.inserting_before(self.node):
            made = self.graph.call_function(op, args, kwargs)
        values, named = torch.fx.node.map_arg((args, kwargs), lambda a: a.meta["val"])
        # an op of no tensor (``full``) is made in the mode of the node it is built for
        leaves = torch.utils._pytree.tree_leaves((values, named, self.node.meta.get("val")))
        fakes = [v for v in leaves if hasattr(v, "fake_mode")]
        with fakes[0].fake_mode:
            made.meta["val"] = op(*values, **named)
        for key in ("stack_trace", "nn_module_stack", "source_fn_stack"):
            if key in self.node.meta:
                made.meta[key] = self.node.meta[key]
        return made
