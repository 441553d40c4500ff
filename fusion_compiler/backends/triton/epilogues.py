"""Epilogues: what a model computes elementwise from a matrix product, computed by the
product's kernel before its store.

After a projection come its bias, an activation (GELU in its erf, tanh and GPT-2 forms,
SiLU), a gate's product (SiLU(gate) · up), the residual add, and the reshape back to
(B, N, D): each an IREE dispatch that reads and writes the whole activation again.
``find`` takes the elementwise ops and reshapes computed from the product that nothing
else reads, ending in one result, and prints what they compute as one Triton expression
of ``x`` (the product, as the kernel holds it), the output's coordinates (from the tile's
``rows`` and ``cols``) and the other tensors they read (``L0``, ``L1``, ...), through the
expression IR (``dialects.expr.of_chain``) and the printer masks use. ``apply`` writes it
into a kernel's source at the lines the kernel marks.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from fusion_compiler.backends.triton import mask as kernel_mask
from fusion_compiler.dialects import expr, linalg
from fusion_compiler.ir import ir

FLOATS = ("f16", "bf16", "f32")  # what an epilogue's inputs may hold
# the lines of a kernel's source an epilogue replaces: where its inputs go in the
# parameters (before Out), and the value it stores
INPUTS_LINE = "# epilogue inputs\n"
VALUE_LINE = "y = {}  # epilogue\n"
# where a kernel may issue the epilogue's loads early (before its K loop), so that they
# are in flight while it computes
LOADS_LINE = "# epilogue loads\n"
_LOAD = "tl.load("
_TYPES = {"f16": "tl.float16", "bf16": "tl.bfloat16", "f32": "tl.float32"}


@dataclass(frozen=True, kw_only=True)
class EpilogueFields:
    """A stand-alone kernel spec's epilogue: a Triton expression of ``x`` (the product in
    ``product_dtype``), the output's coordinates and the inputs L0, L1, ... (of
    ``epilogue_inputs``' element types), computed before the store; None: the product."""

    epilogue: str | None = None
    epilogue_inputs: tuple[str, ...] = ()
    product_dtype: str | None = None

    def __post_init__(self) -> None:  # read back from JSON: a list
        object.__setattr__(self, "epilogue_inputs", tuple(self.epilogue_inputs))

    def epilogue_pointers(self) -> dict[str, str]:
        """The kernel's pointer parameters the epilogue reads: name -> element type."""
        return {f"L{i}": t for i, t in enumerate(self.epilogue_inputs)}


def _shape(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def _element(value: ir.Value) -> str:
    return str(ir.RankedTensorType(value.type).element_type)


def _op(owner) -> ir.Operation:
    return owner.operation if hasattr(owner, "operation") else owner


def _follows_elementwise(op: ir.Operation, within: list[ir.Value]) -> bool:
    """Whether ``op`` computes each element of its result from the same element of every
    operand in ``within`` (the product and what the epilogue computed from it): an
    all-parallel generic reading those at identity maps, writing one result it does not
    read, or a static reshape."""
    if op.name in ("tensor.expand_shape", "tensor.collapse_shape"):
        return ir.RankedTensorType(op.results[0].type).has_static_shape
    if op.name != "linalg.generic" or len(op.results) != 1 or linalg.reduction_dims(op):
        return False
    maps = linalg.indexing_maps(op)
    identity = ir.AffineMap.get_identity(ir.RankedTensorType(op.results[0].type).rank)
    n_inputs = linalg.num_inputs(op)
    reads = [i for i, v in enumerate(op.operands) if any(v == w for w in within)]
    return maps[-1] == identity and all(i < n_inputs and maps[i] == identity for i in reads)


def _region(product: ir.Value) -> list[ir.Operation]:
    """The elementwise ops and reshapes computed from ``product`` (transitively), in
    program order: what an epilogue may take."""
    found: list[ir.Operation] = []
    values, pending = [product], [product]
    while pending:
        for use in list(pending.pop().uses):
            user = _op(use.owner)
            if any(user == f for f in found) or not _follows_elementwise(user, values):
                continue
            found.append(user)
            values.append(user.results[0])
            pending.append(user.results[0])
    # an op admitted before a value it reads at another element joined the region (a
    # transposed read of an intermediate) is not elementwise in it: drop such ops until
    # every op is checked against the region it ends up in (what they fed then reads an
    # outside value, which ``_closed`` refuses where it matters)
    while True:
        values = [product, *(f.results[0] for f in found)]
        kept = [f for f in found if _follows_elementwise(f, values)]
        if len(kept) == len(found):
            break
        found = kept
    if not found:
        return []
    block = found[0].block  # elementwise ops on tensors: one block, in program order
    return [o.operation for o in block.operations if any(o.operation == f for f in found)]


def _feeding(sink: ir.Operation, region: list[ir.Operation]) -> list[ir.Operation]:
    """The ops of ``region`` that ``sink``'s result is computed from, ``sink`` included,
    in program order."""
    needed = [sink]
    stack = [sink]
    while stack:
        for value in stack.pop().operands:
            producer = linalg.producer(value)
            inside = producer is not None and any(producer == r for r in region)
            if inside and not any(producer == n for n in needed):
                needed.append(producer)
                stack.append(producer)
    return [r for r in region if any(r == n for n in needed)]


def _closed(ops: list[ir.Operation], product: ir.Value) -> bool:
    """Whether nothing but the last op's result leaves ``ops``: the product and every
    other result they compute are read by ``ops`` alone."""
    values = [product, *(o.results[0] for o in ops[:-1])]
    return all(any(_op(u.owner) == o for o in ops) for v in values for u in v.uses)


def _split(sizes: list[int], index: str) -> list[str]:
    """The coordinates of row-major ``sizes`` at the flat ``index`` (a block: its text
    has brackets), each a division and remainder by constants."""
    coords, stride = [], 1
    for size in reversed(sizes):
        coords.append(index if len(sizes) == 1 else f"({index} // {stride} % {size})")
        stride *= size
    return coords[::-1]


def coordinates(shape: list[int], n: int) -> tuple[list[str], list[str]]:
    """Each coordinate of an output of ``shape`` (the product's M x N elements in the same
    order) at the tile's elements, from ``rows`` and ``cols``, the tile's (M, N) indices,
    and where each is in bounds. Where the trailing dims hold a row of N (a (B, S, N)
    result), the leading ones are split from the row and the trailing ones from the
    column, in 32 bits (H100, ViT-B/16 B32: its products with their epilogues 3.94 ms with
    each split from the flat 64-bit index, 3.72 so), and a tensor read along the columns
    alone (a bias) is read as one row of the tile; else each is split from the flat
    64-bit index (other shapes, outputs of 2^31 elements or more)."""
    flat = f"(rows[:, None].to(tl.int64) * {n} + cols[None, :])"
    if math.prod(shape) < 2**31:  # offsets within 32 bits
        for k in range(len(shape) + 1):
            if math.prod(shape[k:]) == n:
                coords = _split(shape[:k], "rows[:, None]") + _split(shape[k:], "cols[None, :]")
                bounds = ["rows[:, None] < M"] * k + ["cols[None, :] < N"] * (len(shape) - k)
                return coords, bounds
    return _split(shape, flat), ["inside"] * len(shape)


@dataclass(frozen=True)
class Epilogue:
    ops: list[ir.Operation]  # computed in the kernel, in program order; the last's replaced
    code: str  # what the kernel stores: a Triton expression of x, rows, cols, L0, L1, ...
    inputs: list[ir.Value]  # the tensors L0, L1, ... read

    def spec_fields(self, product: ir.Value) -> dict[str, object]:
        """A product kernel's spec fields for this epilogue of ``product``."""
        return dict(
            epilogue=self.code,
            epilogue_inputs=tuple(_element(v) for v in self.inputs),
            product_dtype=_element(product),
        )


def said(epilogue: Epilogue | None) -> str:
    """What a product's remark adds for its epilogue."""
    if epilogue is None:
        return ""
    count = sum(o.name == "linalg.generic" for o in epilogue.ops)
    text = f"; the {count} elementwise op(s) after it computed before its store"
    return text + (f" (reading {len(epilogue.inputs)} more tensor(s))" if epilogue.inputs else "")


def replaced(op: ir.Operation, product: ir.Operation, epilogue: Epilogue | None) -> list:
    """What a product's lowering replaced, users first: the epilogue's ops, the cast after
    the product (``product``, when not ``op``), ``op``."""
    ops = list(reversed(epilogue.ops)) if epilogue else []
    return [*ops, *([product] if product != op else []), op]


def find(product: ir.Value, n: int) -> Epilogue | None:
    """The most of what is computed elementwise from ``product`` that the kernel can
    compute before its store: the ops feeding one result (the last of them) whose other
    results, and the product, nothing else reads, printable, over inputs of float types."""
    region = _region(product)
    for sink in reversed(region):
        if sink.name != "linalg.generic":
            continue
        ops = _feeding(sink, region)
        if not _closed(ops, product):
            continue
        result = sink.results[0]
        if _element(result) not in FLOATS:  # a compare, an integer cast: IREE's
            continue
        try:
            tree = expr.of_chain(result, ops)
            tree = expr.replace_input(tree, product, expr.Arg(_element(product)))
            if any(_element(v) not in FLOATS for v in tree.inputs):
                continue
            coords, bounds = coordinates(_shape(result), n)
            code = kernel_mask.expression(tree.expr, coords, bounds=bounds)
        except expr.Unsupported:
            continue
        return Epilogue(ops, code, tree.inputs)
    return None


def apply(
    text: str,
    n_inputs: int,
    stored: str,
    product_dtype: str,
    code: str,
    setup: list[str],
    whole_tiles: bool = True,
) -> str:
    """A kernel's source ``text`` with an epilogue: ``n_inputs`` pointers ``L0``... where
    it marks its inputs, and where it computes ``y = <stored>``, ``setup`` (defining
    ``rows``, ``cols`` and ``inside``), then ``x`` (the product in ``product_dtype``) and
    ``y`` = ``code`` in the output's type. Where the kernel also marks a place for the
    epilogue's loads, the setup and every load of ``code`` that does not read ``x`` go
    there, each into a variable ``e0``, ``e1``, ... that ``code`` then reads; without
    ``whole_tiles``, only those that read one row or one column of the tile (a bias)."""
    inputs_mark = _marked(text, INPUTS_LINE)
    value_mark = _marked(text, VALUE_LINE.format(stored))
    loads_mark = _marked(text, LOADS_LINE, required=False)
    early: list[str] = []
    if loads_mark is not None:
        code, loads = hoisted_loads(code, whole_tiles)
        early = [*setup, *(f"e{i} = {load}" for i, load in enumerate(loads))]
        setup = []
    lines = [
        *setup,
        f"x = ({stored}).to({_TYPES[product_dtype]})",
        f"y = ({code}).to(Out.dtype.element_ty)",
    ]
    params = _indent(inputs_mark)
    text = text.replace(inputs_mark, "".join(f"{params}L{i},\n" for i in range(n_inputs)))
    text = text.replace(value_mark, "".join(f"{_indent(value_mark)}{x}\n" for x in lines))
    if loads_mark is not None:
        text = text.replace(loads_mark, "".join(f"{_indent(loads_mark)}{x}\n" for x in early))
    return text


def _marked(text: str, mark: str, required: bool = True) -> str | None:
    """The one line of ``text`` that is ``mark`` (indented), or None where there is none
    and it is not ``required``."""
    lines = [line for line in text.splitlines(keepends=True) if line.strip() == mark.strip()]
    if len(lines) == 1 or (not lines and not required):
        return lines[0] if lines else None
    raise RuntimeError("the kernel's source lost the lines its epilogue replaces")


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def hoisted_loads(code: str, whole_tiles: bool = True) -> tuple[str, list[str]]:
    """``code`` with each outermost ``tl.load(...)`` that does not read ``x`` (the
    product) replaced by ``e0``, ``e1``, ... in order of appearance (the same load by the
    same name), and those loads; without ``whole_tiles``, only loads that do not read
    both ``rows`` and ``cols``."""
    loads: list[str] = []
    parts: list[str] = []
    at = 0
    while (start := code.find(_LOAD, at)) >= 0:
        end = _closing(code, start + len(_LOAD) - 1)
        load = code[start : end + 1]
        parts.append(code[at:start])
        tile = "rows[" in load and "cols[" in load
        if re.search(r"\bx\b", load) or (tile and not whole_tiles):
            parts.append(load)
        else:
            if load not in loads:
                loads.append(load)
            parts.append(f"e{loads.index(load)}")
        at = end + 1
    parts.append(code[at:])
    return "".join(parts), loads


def _closing(code: str, opening: int) -> int:
    """The index of the parenthesis closing the one at ``opening``."""
    depth = 0
    for i in range(opening, len(code)):
        depth += {"(": 1, ")": -1}.get(code[i], 0)
        if depth == 0:
            return i
    raise ValueError(f"unbalanced parentheses in an epilogue: {code!r}")


def kernel_source(
    name: str, spec, stored: str, setup: list[str], whole_tiles: bool = True
) -> str | None:
    """``name``.py (beside this module) with ``spec``'s epilogue written in (``apply``);
    None where the spec has none (the file as it is)."""
    if spec.epilogue is None:
        return None
    text = (Path(__file__).parent / f"{name}.py").read_text()
    dtype = spec.product_dtype or spec.out_dtype
    inputs = len(spec.epilogue_inputs)
    return apply(text, inputs, stored, dtype, spec.epilogue, setup, whole_tiles)
