"""An attention's mask as kernel code, whatever the kernel language.

What both printers (``triton.mask``, ``vulkan.mask``) share: the mask's expression tree
(``dialects.expr``) with its leaves' sizes (dynamic ones named as the kernel names
them), the offsets of a leaf's reads, and the facts the planner reads off the tree (it
computes -inf, reads the row, sees the batch as batch // g). Each printer turns the tree
into its language's text and names its buffers' types.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from fusion_compiler.backends.spec import MaskCode, Stride, contiguous_strides
from fusion_compiler.dialects import expr
from fusion_compiler.dialects.expr import Const, Expr, Index, Load, Op, Unsupported
from fusion_compiler.ir import ir

# names a dynamic dim of a tensor the mask reads: "n_q", "n_k" or None
DimNamer = Callable[[ir.Value, int], str | None]
MAX_INPUTS = 4  # tensors a computed mask may read


def strided(leaf: Load, shape: list[int | str]) -> list[tuple[Expr, Stride]]:
    """Each coordinate of a read of ``leaf`` (laid out row-major by ``shape``, dynamic
    sizes named) with its stride, the dims of size 1 left out."""
    if any(isinstance(n, int) and n < 0 for n in shape):
        raise Unsupported("a mask input of a dynamic size other than the sequences'")
    strides = contiguous_strides(shape)
    return [(c, s) for c, s, n in zip(leaf.coords, strides, shape, strict=True) if n != 1]


def mask_code(
    mask: ir.Value,
    dim_name: DimNamer | None,
    printed: Callable[[Expr, dict[int, list[int | str]]], str],
    buffer_types: dict[str, str],
    sized: Callable[[str], str],
) -> MaskCode | str:
    """The mask (batch, n_q, n_k) as code, or why it cannot be: ``printed(tree, sizes)``
    is its text, ``buffer_types`` the kernel's type of each tensor it reads, ``sized``
    how the kernel writes a dynamic size named by ``dim_name``."""
    try:
        tree = expr.of_tensor(mask)
        sizes: dict[int, list[int | str]] = {}
        for leaf in expr.leaves(tree.expr):
            sizes[leaf.slot] = []
            for d, n in enumerate(leaf.shape):
                name = dim_name(tree.inputs[leaf.slot], d) if n < 0 and dim_name else None
                sizes[leaf.slot].append(sized(name) if name else n)
        text = printed(tree.expr, sizes)
    except Unsupported as why:
        return str(why)
    if len(tree.inputs) > MAX_INPUTS:
        return f"more than {MAX_INPUTS} tensors feed the mask"
    types = [buffer_types[leaf.type] for leaf in expr.leaves(tree.expr)]
    neg_inf = any(isinstance(e, Const) and e.value == -math.inf for e in expr.walk(tree.expr))
    reads_rows = expr.reads_coordinate(tree.expr, 1)
    return MaskCode(text, tree.inputs, types, neg_inf, batch_group(tree.expr), reads_rows)


def batch_group(tree: Expr) -> int:
    """g where ``tree`` reads the batch coordinate only as batch // g (1: as it is), 0
    where it does not read it: every g consecutive batches see one mask."""
    divisors: set[int] = set()

    def visit(e: Expr) -> None:
        if isinstance(e, Index):
            if e.dim == 0:
                divisors.add(1)
            return
        if isinstance(e, Op) and e.name == "arith.divui":
            a, b = e.operands
            if isinstance(a, Index) and a.dim == 0 and isinstance(b, Const) and int(b.value) > 0:
                divisors.add(int(b.value))
                return
        children = e.operands if isinstance(e, Op) else e.coords if isinstance(e, Load) else ()
        for child in children:
            visit(child)

    visit(tree)
    return math.gcd(*divisors) if divisors else 0
