"""fusion-spirv-attention: each fused attention -> a dispatch of a SPIR-V kernel for Vulkan.

IREE 3.13's SPIR-V code generation cannot lower ``iree_linalg_ext.attention``, and our
online-softmax loop nest reaches Vulkan only as host-side loops of dispatches. This
pass gives each attention one dispatch of a FlashAttention-2 compute shader generated
for it (``fusion_compiler/backends/vulkan/attention.comp``), specialised to its element
types (f16, bf16, f32), sizes (static or dynamic sequence lengths), head dims, the causal
and sliding-window bounds proven from its mask (the mask dropped, key blocks outside
them skipped), any other mask computed in the kernel from the tensors it starts from
(``vulkan/mask.py``; where it cannot be, read per key; either way the key blocks no row
needs are skipped), the GQA ratio, the score region (its tree printed as GLSL) and
strided views of every operand (head split and merge transposes, a transposed K and an
output cast are folded in, as on CUDA). The shader uses only what the target's devices
have (the options, from ``targets.VULKAN_CAPABILITIES``): without 64-bit integers the
mask is computed with 32-bit ones where that is exact (int64 inputs it only compares as
pairs of words), else read; without 8- or 16-bit storage, such buffers are read and
written as 32-bit words. Compiled to
SPIR-V with glslangValidator and embedded as a ``hal.executable.source``. An op it
cannot take stays (decomposed later in the Vulkan pipeline), with a remark.
"""

from __future__ import annotations

import math
from dataclasses import replace

from fusion_compiler.dialects import builders, linalg_ext
from fusion_compiler.dialects.builders import erase_dead

from fusion_compiler import remarks
from fusion_compiler.backends import dispatch
from fusion_compiler.backends.plan import plan_kernel
from fusion_compiler.backends.vulkan import glsl
from fusion_compiler.backends.vulkan.spec import Capabilities, VulkanSpec
from fusion_compiler.ir import dialects, ir

NAME = "fusion-spirv-attention"


# what the target's devices have: ``{int64=0 fp64=0 b16=0 b8=0}`` for
# vp_android_baseline_2022 (``targets.spirv_attention``); by default, everything
Options = Capabilities


def run(module: ir.Operation, options: Options) -> None:
    with module.context, module.location:
        for n, op in enumerate(linalg_ext.find_all(module)):
            _lower(op, f"fusion_spirv_attention_{n}", options)


def _lower(op: ir.Operation, symbol: str, has: Capabilities) -> None:
    def leave(why: str) -> None:
        remarks.emit(op.location, f"attention left for decomposition on Vulkan: {why}")

    linalg_ext.fold_k_transpose(op)
    form = linalg_ext.layout(op, allow_dynamic=True)
    if isinstance(form, str):
        return leave(form)
    plan = plan_kernel(op, form, target="vulkan", dtypes=("f16", "bf16", "f32"), has=has)
    if isinstance(plan, str):
        return leave(plan)
    shapes = [list(ir.RankedTensorType(v.type).shape) for v in plan.inputs]
    shapes.append(list(ir.RankedTensorType(plan.output.result_type).shape))
    why = glsl.unsupported(plan.spec, shapes)
    if why is not None:
        return leave(why)
    if glsl.compiler() is None:
        return leave(f"{glsl.COMPILER} not found (apt install glslang-tools)")
    with ir.InsertionPoint(op), op.location:
        plan = replace(plan, inputs=[_in_whole_words(x, has) for x in plan.inputs])
    location, spec = op.location, plan.spec
    kernels = {"attention": glsl.compile_kernel(spec)}
    spare = _spare_output(plan.output.result_type, spec)
    output = dispatch.build_dispatch(op, kernels, plan, symbol, spare_output=spare)
    erase_dead([output.replaced, op] if output.replaced != op else [op])
    causal = spec.bounds_said()
    if spec.mask_expr is not None:
        n = len(spec.mask_inputs)
        source = f"{n} tensor{'s' if n > 1 else ''}" if n else "indices alone"
        causal += f", its mask computed in the kernel from {source}"
    elif spec.mask_dtype is not None:
        causal += f", its mask read from memory ({plan.mask_read})"
    remarks.emit(
        location,
        f"attention lowered to a generated Vulkan kernel "
        f"({spec.dtype}, D={spec.d}, {spec.block_m} rows x {spec.block_n} keys{causal})",
    )


_FLOAT_BITS = {"f16": 16, "bf16": 16}


def _in_whole_words(tensor: ir.Value, has: Capabilities) -> ir.Value:
    """``tensor``, or a flat copy of it followed by zeros, where the shader reads it as
    32-bit words (8- or 16-bit elements the devices cannot store: ``glsl.in_words``) and
    its size may not be whole words. A storage buffer is bound with its tensor's exact
    size, and a word that ends past it is out of bounds whole (Vulkan's robust buffer
    access: read as 0 by llvmpipe), so the last elements of a (2, 5) boolean mask would
    read as false. The copy is a flat insert of the tensor into zeros: IREE moves it with
    a buffer copy, never a shader reading it as words."""
    shape = ir.RankedTensorType(tensor.type).shape
    element = ir.RankedTensorType(tensor.type).element_type
    integer = isinstance(element, ir.IntegerType)
    bits = max(element.width, 8) if integer else _FLOAT_BITS.get(str(element), 32)
    if not ((bits == 8 and not has.b8) or (bits == 16 and not has.b16)):
        return tensor
    known = 1  # the static factor of the element count: whole words whatever the rest
    for size in shape:
        known *= 1 if ir.ShapedType.is_dynamic_size(size) else size
    if known * bits % 32 == 0:
        return tensor
    flat = _flat(tensor)
    count = builders.size_of(flat, 0)
    spare = 32 // bits - 1  # elements past the last whole word's start
    if isinstance(count, int):
        padded: builders.Size = count + spare
    else:
        padded = dialects.arith.AddIOp(count, builders.index(spare)).result
    zero = dialects.arith.ConstantOp(element, 0 if integer else 0.0)
    zeros = dialects.linalg.fill(zero.result, outs=[builders.empty_of([padded], element)])
    return builders.insert_slice(flat, zeros, [0])


def _flat(tensor: ir.Value) -> ir.Value:
    """``tensor`` as one dimension (its elements in order)."""
    tensor_type = ir.RankedTensorType(tensor.type)
    element, rank = tensor_type.element_type, tensor_type.rank
    if rank == 1:
        return tensor
    if rank == 0:
        value = dialects.tensor.ExtractOp(tensor, []).result
        return dialects.tensor.FromElementsOp(ir.RankedTensorType.get([1], element), [value]).result
    static = all(not ir.ShapedType.is_dynamic_size(s) for s in tensor_type.shape)
    count = math.prod(tensor_type.shape) if static else ir.ShapedType.get_dynamic_size()
    flat = ir.RankedTensorType.get([count], element)
    return builders.collapse_shape(tensor, flat, [list(range(rank))])


def _spare_output(result_type: ir.Type, spec: VulkanSpec) -> int:
    """1 where the shader stores the output's 16-bit elements as 32-bit words and their
    count may be odd: the last word, half past the buffer, would be out of bounds whole
    and never written; the kernel writes a flat output one element longer instead."""
    known = builders.static_elements(result_type)
    return 1 if glsl.output_in_words(spec) and known % 2 else 0
