"""An attention op -> the kernel it needs: its spec, the tensors it reads, where it writes.

The kernel is specialised from the op: element types, sizes, K layout, the causal
offset proven from the mask's producers (the mask is then dropped), any other mask
computed in the kernel or read, the scale and the score region (printed in the target's
kernel language). Q, K, V and the output are read and written in place through strided views
that look through head splits, transposes and GQA broadcasts, so those copies are never
made.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from fusion_compiler import signature
from fusion_compiler.backends.spec import (
    MaskCode,
    Problem,
    Stride,
    View,
    contiguous,
    contiguous_strides,
)
from fusion_compiler.backends.triton import mask as kernel_mask
from fusion_compiler.backends.triton.spec import TritonSpec
from fusion_compiler.backends.vulkan import glsl
from fusion_compiler.backends.vulkan import mask as shader_mask
from fusion_compiler.backends.vulkan import spec as vulkan_spec
from fusion_compiler.dialects import expr, linalg, linalg_ext
from fusion_compiler.dialects.builders import dims
from fusion_compiler.dialects.linalg_ext import LOG2E, Layout
from fusion_compiler.ir import ir

_ELEMENTS = {"f16": "f16", "bf16": "bf16", "f32": "f32"}


def score_expression(op: ir.Operation, target: str = "cuda") -> str:
    """The op's score region as an expression of ``x`` in the target's kernel language
    (Triton, GLSL); ValueError naming what has none."""
    region = op.regions[0].blocks[0]
    if target == "vulkan":
        return glsl.region_expression(region)
    return kernel_mask.region_expression(region)


def _element(value: ir.Value) -> str | None:
    return _ELEMENTS.get(str(ir.RankedTensorType(value.type).element_type))


def output_cast(op: ir.Operation) -> ir.Operation | None:
    """The one user of the op's result when it only casts it (f32 -> f16): the kernel
    then writes the cast type itself (consumer fusion)."""
    uses = list(op.results[0].uses)
    if len(uses) != 1:
        return None
    user = uses[0].owner
    if not any(linalg.is_elementwise_payload(user, c) for c in ("arith.truncf", "arith.extf")):
        return None
    rank = ir.RankedTensorType(op.results[0].type).rank
    identity = ir.AffineMap.get_identity(rank)
    if any(ir.AffineMapAttr(m).value != identity for m in user.attributes["indexing_maps"]):
        return None
    return user


def group_broadcast(value: ir.Value, transposed: bool = False) -> tuple[ir.Value, int] | None:
    """(S, g) when ``value`` (B·H, n, d) is the KV heads of S (B, Hkv, n, d) each repeated
    g times (``repeat_interleave`` / ``repeat_kv``): head bh reads KV head bh // g.
    ``transposed``: ``value`` is K's transposed copy (B·H, d, n), as before
    ``fold_k_transpose``; the transpose of the last two dims is looked through."""
    groups: list[list[int]] = [[0], [1], [2]]
    op = linalg.producer(value)
    while op is not None:
        if op.name == "tensor.collapse_shape":
            inner = linalg.reassociation(op)
            groups = [[i for g in groups[k] for i in inner[g]] for k in range(len(groups))]
        elif transposed and op.name == "linalg.transpose":
            perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
            if perm != list(range(len(perm) - 2)) + [len(perm) - 1, len(perm) - 2]:
                return None
            transposed = False
        else:
            break
        value, op = op.operands[0], linalg.producer(op.operands[0])
    if transposed:
        return None
    if groups != [[0, 1, 2], [3], [4]] or op is None or op.name != "linalg.generic":
        return None
    maps = [ir.AffineMapAttr(m).value for m in op.attributes["indexing_maps"]]
    body = linalg.payload(op)
    block = op.regions[0].blocks[0]
    terminator = list(block.operations)[-1]
    if len(maps) != 2 or body or terminator.operands[0] != block.arguments[0]:
        return None
    if dims(maps[0]) != [0, 1, 3, 4] or maps[1] != ir.AffineMap.get_identity(5):
        return None
    return op.operands[0], ir.RankedTensorType(value.type).shape[2]


Symbols = list[str | None]  # per axis: "n_q" / "n_k" for a sequence axis, else None


def _sizes(value: ir.Value, symbols: Symbols) -> list[Stride]:
    """The axis sizes of ``value``: numbers, or the symbol of a dynamic sequence axis."""
    sizes: list[Stride] = []
    for size, symbol in zip(_shape(value), symbols, strict=True):
        if ir.ShapedType.is_dynamic_size(size):
            if symbol is None:
                raise ValueError("a dynamic size other than a sequence length")
            sizes.append(symbol)
        else:
            sizes.append(size)
    return sizes


def _shape(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def _slice_strides(x: ir.Value) -> tuple[ir.Value, list[int], int] | None:
    """(source, the strides of ``x``'s dims in it, where ``x`` starts in it) when ``x`` is
    a static unit-stride ``tensor.extract_slice`` of a static tensor, or an
    ``expand_shape`` of one: a fused QKV projection's Q, K or V, split off its output."""
    op = linalg.producer(x)
    expand = None
    if op is not None and op.name == "tensor.expand_shape":
        expand, op = op, linalg.producer(op.operands[0])
    found = linalg.plain_slice(op)
    if found is None:
        return None
    offsets, _ = found
    source = op.operands[0]
    shape = _shape(source)
    if any(ir.ShapedType.is_dynamic_size(n) for n in shape):
        return None
    source_strides = [int(s) for s in contiguous_strides(list(shape))]
    start = sum(o * s for o, s in zip(offsets, source_strides, strict=True))
    if expand is None:
        return source, source_strides, start
    out = _shape(expand.results[0])
    if any(ir.ShapedType.is_dynamic_size(n) for n in out):
        return None
    strides = [0] * len(out)
    for dim, group in enumerate(linalg.reassociation(expand)):
        stride = source_strides[dim]  # a dim split in several: the last keeps its stride
        for d in reversed(group):
            strides[d] = stride
            stride *= out[d]
    return source, strides, start


def _in_place(x: ir.Value, symbols: Symbols, slices: bool) -> tuple[ir.Value, list[Stride], int]:
    """(the tensor holding ``x``'s data, the strides of ``x``'s dims there, where ``x``
    starts there): with ``slices``, a slice is read in its source."""
    found = _slice_strides(x) if slices else None
    if found is not None:
        return found
    return x, contiguous_strides(_sizes(x, symbols)), 0


def _strides4(x: ir.Value, symbols: Symbols, slices: bool) -> tuple[ir.Value, list[Stride], int]:
    """A 4-D tensor as (the tensor holding its data, the strides of its dims there, where
    it starts there): a transposed copy is read from its source, and with ``slices`` a
    slice from the tensor it was cut from."""
    op = linalg.producer(x)
    if op is not None and op.name == "linalg.transpose":
        perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
        source = op.operands[0]
        source_symbols: Symbols = [None] * len(perm)
        for i, p in enumerate(perm):
            source_symbols[p] = symbols[i]
        base, strides, start = _in_place(source, source_symbols, slices)
        return base, [strides[perm[i]] for i in range(len(perm))], start
    return _in_place(x, symbols, slices)


def strided_view(
    value: ir.Value, symbols: Symbols, group: int = 1, slices: bool = False
) -> tuple[ir.Value, View, int]:
    """(base, view, start): ``value`` (batch, dim1, dim2) read in place from ``base``,
    from element ``start`` on.

    Looks through the head merge ``collapse_shape`` (B, H, ...) -> (B·H, ...), a head or
    K transpose under it, a GQA group broadcast (``group`` > 1) and, with ``slices``, a
    slice of a larger tensor (a fused QKV projection's output), so those copies are
    never made. ``symbols`` names dim1 and dim2 when they are sequence lengths.
    """
    four = [None, None, *symbols]
    if group > 1:
        source, _ = group_broadcast(value)
        base, st, start = _strides4(source, four, slices)
        return base, (st[0], st[1], _shape(source)[1], st[2], st[3]), start
    op = linalg.producer(value)
    if (
        op is not None
        and op.name == "tensor.collapse_shape"
        and linalg.reassociation(op) == [[0, 1], [2], [3]]
    ):
        x = op.operands[0]
        base, st, start = _strides4(x, four, slices)
        return base, (st[0], st[1], _shape(x)[1], st[2], st[3]), start
    _, rows, cols = _sizes(value, [None, *symbols])
    return value, contiguous(rows, cols), 0


@dataclass(frozen=True)
class OutputPlan:
    """Where the kernel writes: the op whose result it replaces, in which layout."""

    replaced: ir.Operation  # the attention, its output cast, or the head transpose after
    view: View
    result_type: ir.Type


def output_plan(op: ir.Operation) -> OutputPlan:
    """Follows the result through an output cast, the head split (B·H -> B, H) and a
    transpose to (B, N, H, Dv): the kernel writes that layout (consumer fusion)."""
    replaced = output_cast(op) or op
    result = replaced.results[0]
    _, n_q, dv = _sizes(result, [None, "n_q", None])
    plan = OutputPlan(replaced, contiguous(n_q, dv), result.type)
    uses = list(result.uses)
    if len(uses) != 1 or uses[0].owner.name != "tensor.expand_shape":
        return plan
    expand = uses[0].owner
    if linalg.reassociation(expand) != [[0, 1], [2], [3]]:
        return plan
    x = expand.results[0]
    uses = list(x.uses)
    if len(uses) != 1 or uses[0].owner.name != "linalg.transpose":
        return plan
    transpose = uses[0].owner
    perm = list(ir.DenseI64ArrayAttr(transpose.attributes["permutation"]))
    x_symbols = [None, None, "n_q", None]
    y_strides = contiguous_strides(_sizes(transpose.results[0], [x_symbols[p] for p in perm]))
    st = [y_strides[perm.index(j)] for j in range(4)]
    view = (st[0], st[1], _shape(x)[1], st[2], st[3])
    return OutputPlan(transpose, view, transpose.results[0].type)


def kv_group(op: ir.Operation, form: Layout) -> int:
    """How many query heads share each K/V head in the op's operands (1: no sharing);
    K may still be the transposed copy that ``fold_k_transpose`` drops."""
    k = group_broadcast(op.operands[1], transposed=form.k_transposed)
    v = group_broadcast(op.operands[2])
    if k is None or v is None or k[1] != v[1]:
        return 1
    return k[1]


def operand_views(op: ir.Operation, form: Layout, group: int, mask: str | MaskCode | None):
    """The dispatch's input tensors (Q, K, V, then the mask's), the kernel's views of Q,
    K, V and a read mask, and where Q, K and V start in their tensors (slices of one
    tensor, a fused QKV projection's, are read there). ``mask``: "read" (the materialised
    mask), the code computing it in the kernel, or None."""
    q, k, v = list(op.operands)[:3]
    q_base, q_view, q_start = strided_view(q, ["n_q", None], slices=True)
    if form.k_transposed:  # (batch, D, N_K): the kernel's view is (batch, key, dim)
        k_base, (sb, sh, h, s1, s2), k_start = strided_view(k, [None, "n_k"], group, True)
        k_view = (sb, sh, h, s2, s1)
    else:
        k_base, k_view, k_start = strided_view(k, ["n_k", None], group, True)
    v_base, v_view, v_start = strided_view(v, ["n_k", None], group, True)
    if mask == "read":
        m_base, m_view, _ = strided_view(op.operands[4], ["n_q", "n_k"])
        mask_inputs = [m_base]
    elif isinstance(mask, MaskCode):
        m_view, mask_inputs = q_view, list(mask.inputs)
    else:
        m_view, mask_inputs = q_view, [q_base]  # bound, never read
    inputs = [q_base, k_base, v_base, *mask_inputs]
    return inputs, [q_view, k_view, v_view, m_view], (q_start, k_start, v_start)


def _mask_plan(
    op: ir.Operation, form: Layout, target: str, has: vulkan_spec.Capabilities
) -> str | MaskCode | None:
    """None: no mask, or nothing but the bounds the kernel masks by index (causal, a
    sliding window); a MaskCode: the mask computed in the kernel from its producers,
    with what the Vulkan target ``has``; else why it cannot be (the materialised mask
    is read)."""
    if not form.has_mask or form.band_only:
        return None
    symbols = signature.dim_symbols(op)

    def root(value: ir.Value, dim: int) -> object:
        """One key per size: an input's dim by the symbol torch.export gave it."""
        found = linalg.dim_root(value, dim)
        if isinstance(found, tuple) and found[0] == "argument":
            return symbols.get(found[1:], found)
        return found

    q, k = op.operands[0], op.operands[1]
    roots = (root(q, 1), root(k, 2 if form.k_transposed else 1))
    sequences = dict(zip(roots, ("n_q", "n_k"), strict=True))  # where one size, either name

    def name(value: ir.Value, dim: int) -> str | None:
        return sequences.get(root(value, dim))

    maxima = signature.dim_maxima(op)  # a dynamic length at its largest
    batch, *lengths = ir.RankedTensorType(op.operands[4].type).shape
    sizes = [maxima.get(r) if n < 0 else n for n, r in zip(lengths, roots, strict=True)]
    if target == "cuda":
        return kernel_mask.mask_code(op.operands[4], name, (batch, *sizes))
    return shader_mask.mask_code(op.operands[4], name, has, (batch, *sizes))


@dataclass(frozen=True)
class KernelPlan:
    """What lowering one attention to a kernel needs: the kernel's spec (a TritonSpec
    or a VulkanSpec), the tensors its dispatch takes, and where its result goes."""

    spec: Problem
    inputs: list[ir.Value]  # Q, K, V and the mask's, as the kernel's views read them
    output: OutputPlan
    form: Layout
    mask_read: str | None = None  # why the kernel reads a materialised mask (cuda)
    sink: ir.Value | None = None  # a sink's (batch, rows) float32 logits, base 2 (cuda)


def plan_kernel(
    op: ir.Operation,
    form: Layout,
    target: str = "cuda",
    tiles: dict[str, int] | None = None,
    dtypes: tuple[str, ...] = ("f16", "bf16"),
    has: vulkan_spec.Capabilities = vulkan_spec.EVERYTHING,
) -> KernelPlan | str:
    """The kernel ``op`` needs on ``target``, or why the kernel path cannot take it:
    "cuda", a TritonSpec with ``tiles`` (its tile, warp and schedule fields); "vulkan", a
    VulkanSpec using only what the target ``has``. Q, K and V must be of one of
    ``dtypes``."""
    q, k, v, scale = list(op.operands)[:4]
    dtype = _element(q)
    if dtype not in dtypes or _element(k) != dtype or _element(v) != dtype:
        return f"Q, K and V are not all {' or all '.join(dtypes)}"
    cast = output_cast(op)
    out_dtype = _element(cast.results[0] if cast is not None else op.results[0])
    if out_dtype is None:
        return "output element type is not f16, bf16 or f32"
    scale_value = linalg.constant_value(scale)
    if not isinstance(scale_value, float):
        return "the scale is not a constant"
    try:
        score = score_expression(op, target)
    except ValueError as why:
        return str(why)
    batch, n_q, d = _shape(q)
    n_k = _shape(k)[2 if form.k_transposed else 1]
    dv = _shape(v)[2]
    if any(ir.ShapedType.is_dynamic_size(x) for x in (batch, d, dv)):
        return "a dynamic batch or head dim (only sequence lengths may be dynamic)"
    n_q, n_k = (-1 if ir.ShapedType.is_dynamic_size(x) else x for x in (n_q, n_k))
    if max(d, dv) > 256:
        return f"head dim {max(d, dv)} above 256"
    group = 1 if form.k_transposed else kv_group(op, form)  # a K copy not folded: read as is
    mask = _mask_plan(op, form, target, has)
    mask_read = mask if isinstance(mask, str) else None
    if mask_read:
        mask = "read"
    mask_dtype = _element(op.operands[4]) if mask == "read" else None
    if mask == "read" and mask_dtype is None:
        return "mask element type is not f16, bf16 or f32"
    try:
        inputs, views, starts = operand_views(op, form, group, mask)
        plan = output_plan(op)
    except ValueError as why:  # a dynamic size the views cannot express
        return str(why)
    problem = dict(
        dtype=dtype,
        mask_dtype=mask_dtype,
        batch=batch,
        n_q=n_q,
        n_k=n_k,
        d=d,
        dv=dv,
        views=(*views, plan.view),
        causal_offset=form.causal_offset,
        window_start=form.window_start,
        qk_scale=scale_value * LOG2E,
        out_dtype=None if out_dtype == dtype else out_dtype,
        kv_group=group,
        mask_swamps=(
            linalg_ext.swamping_fill(op.operands[4], threshold=linalg_ext.swamp_threshold(op))
            if mask is not None
            else None
        ),
        mask_replaces=mask is not None and linalg_ext.mask_replaces(op),
        offsets=starts,
    )
    computed = dict(
        mask_expr=mask.expr if isinstance(mask, MaskCode) else None,
        mask_inputs=tuple(mask.types) if isinstance(mask, MaskCode) else (),
    )
    spec: Problem
    if target == "vulkan":
        block_n = vulkan_spec.block_n(d, dv)
        spec = vulkan_spec.VulkanSpec(
            **problem,
            **computed,
            score=score,
            block_n=block_n,
            int64=has.int64,
            b16=has.b16,
            b8=has.b8,
        )
    else:
        spec = TritonSpec(**problem, **computed, score=score, **(tiles or {}))
        if isinstance(mask, MaskCode):
            spec = _with_block_map(spec, mask, form)
    return KernelPlan(spec, inputs, plan, form, mask_read)


def _with_block_map(spec: TritonSpec, mask: MaskCode, form: Layout) -> TritonSpec:
    """``spec`` visiting only the key blocks a per-call block map lists, where that pays:
    a computed mask that can empty whole tiles (it makes -inf or a swamping fill:
    padding, documents, chunks, prefix-LM), over more than one key block, static sizes.
    The map has an entry per sequence (not per head) where the mask reads the batch as
    batch // H, and one for all row blocks where neither the mask nor the bounds read
    the row; packed GQA rows (several heads in a row block) take such a map only."""
    if not (mask.makes_neg_inf or spec.mask_swamps is not None):
        return spec
    if spec.dynamic or spec.n_k <= spec.block_n:
        return spec
    group = mask.batch_group or spec.batch
    group = group if spec.batch % group == 0 else 1
    rows = mask.reads_rows or form.causal_offset is not None or spec.window_start is not None
    if spec.pack_gqa and (rows or group % spec.kv_group != 0):
        return spec
    bounds = mask.bounds
    return replace(spec, block_map=True, map_group=group, map_rows=rows, mask_bounds=bounds)


def _input_named(op: ir.Operation, tensor: ir.Value) -> str:
    """A tensor a mask reads, for a remark: ``input 3 `attention_mask``` where it is an
    input of the function (named as the model names it), else a constant or a computed
    tensor."""
    index = linalg.entry_input(tensor)
    if index is None:
        source, _ = linalg.producer_and_reshapes(tensor)
        constant = source is not None and source.name in ("arith.constant", "util.global.load")
        return "a constant tensor" if constant else "a computed tensor"
    name = signature.input_name(op, index)
    return f"input {index} `{name}`" if name else f"input {index}"


# the most elements of a mask ``block_map_summary`` evaluates at compile time
_MAX_SUMMARISED = 1 << 24


def block_map_summary(op: ir.Operation, spec: TritonSpec) -> str:
    """What a block map finds, for the remark: for a mask of indices alone (chunks,
    prefix-LM), the share of tiles skipped and of those needing the mask, computed here
    as the kernel will; for one reading inputs (padding, document ids), that it is
    computed per call."""
    tree = expr.of_tensor(op.operands[4])
    leaves = expr.leaves(tree.expr)
    if leaves:
        read = [_input_named(op, tree.inputs[leaf.slot]) for leaf in leaves]
        return f"a block map of the mask's key blocks per call, from {', '.join(read)}"
    if spec.n_q * spec.n_k > _MAX_SUMMARISED:
        return "a block map of the mask's key blocks per call"
    grids = {1: np.arange(spec.n_q)[:, None], 2: np.arange(spec.n_k)[None, :]}
    values = expr.evaluate(tree.expr, lambda dim: grids.get(dim, np.zeros((1, 1), np.int64)))
    values = np.broadcast_to(values.astype(np.float64), (spec.n_q, spec.n_k))
    rows, keys = np.arange(spec.n_q)[:, None], np.arange(spec.n_k)[None, :]
    visible = np.ones((spec.n_q, spec.n_k), bool)
    if spec.causal_offset is not None:
        visible &= keys <= rows + spec.causal_offset
    if spec.window_start is not None:
        visible &= keys >= rows + spec.window_start
    fill = spec.mask_swamps if spec.mask_swamps is not None else -np.inf
    kept = visible & ~(values <= fill)
    plain = visible & (values == 0)
    empty = masked = 0
    for m in range(0, spec.n_q, spec.block_m):
        for n in range(0, spec.n_k, spec.block_n):
            tile = (slice(m, m + spec.block_m), slice(n, n + spec.block_n))
            if not kept[tile].any():
                empty += 1
            elif not (plain[tile].all() and n + spec.block_n <= spec.n_k):
                masked += 1
    tiles = -(-spec.n_q // spec.block_m) * -(-spec.n_k // spec.block_n)
    return f"a block map: {empty / tiles:.0%} of tiles skipped, {masked / tiles:.0%} masked"
