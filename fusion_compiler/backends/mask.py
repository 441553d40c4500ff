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
# the most each coordinate of the mask (batch, n_q, n_k) reaches + 1; None: unbounded
Extents = tuple[int | None, int | None, int | None]
_SEQUENCES = ("n_q", "n_k")  # the names ``DimNamer`` gives
_INT32 = expr.type_range("i32")
# the values a tensor's elements may hold, by element type; an i64 tensor is unbounded
_ELEMENT_RANGES = {t: expr.type_range(t) for t in ("i1", "i8", "i32")}


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
    extents: Extents | None = None,
    bounded: Callable[[Expr, dict[int, list[int | str]]], tuple[str, ...]] | None = None,
) -> MaskCode | str:
    """The mask (batch, n_q, n_k) as code, or why it cannot be: ``printed(tree, sizes)``
    is its text, ``buffer_types`` the kernel's type of each tensor it reads, ``sized``
    how the kernel writes a dynamic size named by ``dim_name``. ``extents``: the mask is
    printed with 32-bit integers for 64-bit ones, where ``narrow_problem`` proves that
    exact from these sizes. ``bounded(tree, sizes)``: the mask's bounds over a tile, as
    code (``MaskCode.bounds``; None where it raises Unsupported)."""
    try:
        tree = expr.of_tensor(mask)
        sizes: dict[int, list[int | str]] = {}
        most: dict[int, list[int | None]] = {}  # the sizes at their largest
        for leaf in expr.leaves(tree.expr):
            sizes[leaf.slot], most[leaf.slot] = [], []
            for d, n in enumerate(leaf.shape):
                name = dim_name(tree.inputs[leaf.slot], d) if n < 0 and dim_name else None
                sizes[leaf.slot].append(sized(name) if name else n)
                sequence = extents[_SEQUENCES.index(name) + 1] if name and extents else None
                most[leaf.slot].append(sequence if n < 0 else n)
        text = printed(tree.expr, sizes)
        why = narrow_problem(tree.expr, extents, most) if extents is not None else None
    except Unsupported as problem:
        return str(problem)
    if why is not None:
        return f"the target has no 64-bit integers: {why}"
    if len(tree.inputs) > MAX_INPUTS:
        return f"more than {MAX_INPUTS} tensors feed the mask"
    types = [buffer_types[leaf.type] for leaf in expr.leaves(tree.expr)]
    neg_inf = any(isinstance(e, Const) and e.value == -math.inf for e in expr.walk(tree.expr))
    reads_rows = expr.reads_coordinate(tree.expr, 1)
    bounds = None
    if bounded is not None:
        try:
            bounds = bounded(tree.expr, sizes)
        except Unsupported:
            pass  # the map evaluates the mask at every (row, key)
    group = batch_group(tree.expr)
    return MaskCode(text, tree.inputs, types, neg_inf, group, reads_rows, bounds)


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


def narrow_problem(tree: Expr, extents: Extents, shapes: dict[int, list[int | None]]) -> str | None:
    """Why ``tree`` cannot be computed with 32-bit integers in place of its 64-bit ones
    (None: it can): every integer it computes, and the offset of every read, must fit in
    32 bits for coordinates within ``extents`` (``expr.bounds``). ``shapes``: each read
    tensor's sizes, a dynamic one at its largest (None: unbounded)."""

    def index(dim: int) -> expr.Interval:
        if extents[dim] is None:
            raise Unsupported("a dynamic size without a maximum (give torch.export.Dim a max)")
        return (0, extents[dim] - 1)

    def load(leaf: Load) -> expr.Interval:
        if expr.is_float(leaf.type):
            return (-math.inf, math.inf)
        if leaf.type == "i64" and leaf in compared:
            return expr.type_range("i64")  # held as two words (``compared_wide``)
        if leaf.type not in _ELEMENT_RANGES:
            raise Unsupported(f"a mask input of type {leaf.type} used other than compared")
        return _ELEMENT_RANGES[leaf.type]

    compared = compared_wide(tree)
    try:
        found = expr.bounds(tree, index, load)
    except Unsupported as why:
        return str(why)
    for e, (low, high) in found.items():
        integer = not expr.is_float(e.type) and e.type != "i1" and e not in compared
        if integer and not (_INT32[0] <= low and high <= _INT32[1]):
            return f"a value of the mask may reach {high if high > _INT32[1] else low}"
    for leaf in expr.leaves(tree):
        if None in shapes[leaf.slot]:
            return "a mask input of a dynamic size without a maximum"
        offset = 0
        for c, stride in strided(leaf, shapes[leaf.slot]):
            low, high = found[c]
            offset += max(-low, high) * stride
        if offset > _INT32[1]:
            return f"an offset into a mask input may reach {offset}"
    return None


def compared_wide(tree: Expr) -> set[Load]:
    """The reads of i64 tensors that ``tree`` only compares (``arith.cmpi``: document ids,
    transformers' int64 attention_mask): exact as two 32-bit words, whatever they hold."""
    wide = {e for e in expr.walk(tree) if isinstance(e, Load) and e.type == "i64"}
    for e in expr.walk(tree):
        children = e.operands if isinstance(e, Op) else e.coords if isinstance(e, Load) else ()
        if not (isinstance(e, Op) and e.name == "arith.cmpi"):
            wide -= set(children)
    return wide
