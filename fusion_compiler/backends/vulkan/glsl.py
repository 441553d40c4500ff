"""FlashAttention-2 kernels for Vulkan: ``attention.comp`` specialised to a VulkanSpec, as
SPIR-V.

The GLSL template (next to this file) is filled from a ``VulkanSpec``: element types
(f16, bf16 or f32), sizes (sequence lengths static, or read from a sizes binding), head
dims, the strided views of Q, K, V, a read mask and the output, the causal offset, the
GQA ratio and the score region (its expression tree printed as GLSL by
``region_expression``). ``glslangValidator`` (Debian/Ubuntu:
``glslang-tools``; the Vulkan SDK) compiles it to SPIR-V on the compiling machine;
binaries are cached by content hash like the CUDA kernels.
"""

from __future__ import annotations

import functools
import math
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from string import Template

from fusion_compiler.backends.cache import cache_entry, write_whole
from fusion_compiler.backends.spec import Kernel, View
from fusion_compiler.backends.vulkan.spec import VulkanSpec
from fusion_compiler.dialects import expr
from fusion_compiler.dialects.expr import Arg, Const, Expr, Op, Unsupported
from fusion_compiler.errors import FusionCompilerError
from fusion_compiler.ir import ir

_HERE = Path(__file__).parent
TEMPLATE = _HERE / "attention.comp"
# what a binary depends on besides its generated source
_READ = (TEMPLATE, _HERE / "spec.py", _HERE.parent / "spec.py", Path(__file__))
_BINDING = "layout(set = 0, binding = {}) {}buffer Binding{} {{ {} {}[]; }};"
# element i of a buffer of narrow elements bound as 32-bit words: its bits
_BITS = "uint {0}_bits(uint i) {{ return ({0}[i / {1}u] >> (i % {1}u * {2}u)) & {3:#x}u; }}"
# element i of an int64 buffer bound as 32-bit words: its (low, high) words
_PAIR = "ivec2 {0}_pair(uint i) {{ return ivec2({0}[2u * i], {0}[2u * i + 1u]); }}"
_NARROW = {"float16_t": 16, "uint16_t": 16, "int8_t": 8, "uint8_t": 8}  # bits, by GLSL type
_FROM_BITS = {"float16_t": "unpackHalf2x16({}).x", "uint16_t": "uintBitsToFloat({} << 16)"}
_ROUND_F16 = {
    True: "float round_f16(float v) { return float(float16_t(v)); }",
    False: "float round_f16(float v) { return unpackHalf2x16(packHalf2x16(vec2(v, 0.0))).x; }",
}
# the output's element i as 16 bits of a word, the word's other half another's to write
_STORE_HALF = """void store_out(uint i, float v) {
  uint shift = i % 2u * 16u;
  atomicAnd(out_buffer[i / 2u], ~(0xFFFFu << shift));
  atomicOr(out_buffer[i / 2u], to_out(v) << shift);
}"""
# what a computed mask's buffers and 64-bit coordinates need
_MASK_EXTENSIONS = {
    "int64_t": "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require",
    "uint8_t": "#extension GL_EXT_shader_8bit_storage : require\n"
    "#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require",
}
COMPILER = "glslangValidator"
_GLSL_TYPES = {"f16": "float16_t", "f32": "float", "bf16": "uint16_t"}
_BF16_EXTENSION = "#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require"
_BF16_TO_FLOAT = "float to_float(uint16_t v) { return uintBitsToFloat(uint(v) << 16); }"
_TO_OUT = {
    "f32": "float to_out(float v) { return v; }",
    "f16": "float16_t to_out(float v) { return float16_t(v); }",
    "bf16": (
        "uint16_t to_out(float v) {\n"
        "  uint bits = floatBitsToUint(v);\n"
        "  return uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);\n"
        "}"
    ),
}
# the same as the bits of a word's half, where 16-bit types are not to be used
_TO_OUT_BITS = {
    "f16": "uint to_out(float v) { return packHalf2x16(vec2(v, 0.0)); }",
    "bf16": (
        "uint to_out(float v) {\n"
        "  uint bits = floatBitsToUint(v);\n"
        "  return (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;\n"
        "}"
    ),
}
_LENGTHS = re.compile(r"[0-9n_qk* ]+")  # a stride expression of n_q and n_k
_MAX_ELEMENTS = 2**32  # offsets are 32-bit


def unsupported(spec: VulkanSpec, sizes: list[list[int]]) -> str | None:
    """Why the Vulkan kernel cannot take ``spec`` (None: it can). ``sizes``: the shapes
    of the tensors the kernel reads and writes."""
    if spec.dtype not in _GLSL_TYPES or (spec.out_dtype or spec.dtype) not in _GLSL_TYPES:
        return f"{spec.out_dtype or spec.dtype} (the Vulkan kernel takes f16, bf16 and f32)"
    if spec.mask_dtype is not None and spec.mask_dtype not in _GLSL_TYPES:
        return f"a {spec.mask_dtype} mask (the Vulkan kernel takes f16, bf16 and f32)"
    if any(isinstance(s, str) and not _LENGTHS.fullmatch(s) for v in spec.views for s in v):
        return "a dynamic stride other than a product of sequence lengths"
    if max(spec.d, spec.dv) > 256:
        return f"head dim {max(spec.d, spec.dv)} above 256"
    for shape in sizes:
        if any(n < 0 for n in shape):  # dynamic: its size is not known here
            continue
        elements = 1
        for n in shape:
            elements *= n
        if elements >= _MAX_ELEMENTS:
            return "a tensor of 2^32 elements or more"
    return None


# The score region's tree as GLSL (the score is a float; ops with MLIR's semantics:
# unordered compares as the negation of the ordered complement, NaN through maximumf).
_SYMBOLS = {"arith.addf": "+", "arith.subf": "-", "arith.mulf": "*", "arith.divf": "/"}
_FUNCTIONS = {
    "math.absf": "tl_abs({})",
    "math.exp": "tl_exp({})",
    "math.exp2": "tl_exp2({})",
    "math.log": "tl_log({})",
    "math.log2": "tl_log2({})",
    "math.sqrt": "tl_sqrt({})",
    "arith.negf": "(-{})",
    "math.tanh": "(2.0 * tl_sigmoid(2.0 * {}) - 1.0)",
    "math.floor": "floor({})",
    "math.ceil": "ceil({})",
    "arith.maximumf": "((isnan({0}) || isnan({1})) ? {0} + {1} : max({0}, {1}))",
    "arith.minimumf": "((isnan({0}) || isnan({1})) ? {0} + {1} : min({0}, {1}))",
    "arith.maxnumf": "(isnan({0}) ? {1} : (isnan({1}) ? {0} : max({0}, {1})))",
    "arith.minnumf": "(isnan({0}) ? {1} : (isnan({1}) ? {0} : min({0}, {1})))",
    "arith.select": "({} ? {} : {})",
}
_RELATIONS = {"oeq": "==", "ogt": ">", "oge": ">=", "olt": "<", "ole": "<="}
_COMPLEMENT = {"ueq": "one", "ugt": "ole", "uge": "olt", "ult": "oge", "ule": "ogt", "une": "oeq"}
_FLOAT_BITS = {math.inf: "0x7f800000u", -math.inf: "0xff800000u"}


def _glsl(e: Expr) -> str:
    if isinstance(e, Arg):
        return "x"
    if isinstance(e, Const) and isinstance(e.value, float):
        if math.isnan(e.value):
            return "uintBitsToFloat(0x7fc00000u)"
        if math.isinf(e.value):
            return f"uintBitsToFloat({_FLOAT_BITS[e.value]})"
        return repr(e.value)
    if not isinstance(e, Op):
        raise Unsupported(f"{type(e).__name__.lower()} {e} in the score region")
    args = [_glsl(o) for o in e.operands]
    if e.name in _SYMBOLS:
        return f"({args[0]} {_SYMBOLS[e.name]} {args[1]})"
    if e.name in _FUNCTIONS:
        return _FUNCTIONS[e.name].format(*args)
    if e.name == "arith.cmpf":
        return cmpf(e.predicate or "", *args)
    raise Unsupported(f"{e.name} has no GLSL translation")


def cmpf(predicate: str, a: str, b: str) -> str:
    """A float compare of GLSL values ``a`` and ``b`` with MLIR's predicate semantics."""
    if predicate in _COMPLEMENT:
        return f"(!{cmpf(_COMPLEMENT[predicate], a, b)})"
    if predicate == "one":
        return f"({a} < {b} || {a} > {b})"
    if predicate in ("ord", "uno"):
        either = f"(isnan({a}) || isnan({b}))"
        return either if predicate == "uno" else f"(!{either})"
    if predicate not in _RELATIONS:
        raise Unsupported(f"cmpf {predicate}")
    return f"({a} {_RELATIONS[predicate]} {b})"


def region_expression(block: ir.Block) -> str:
    """The attention's score region as a GLSL expression of ``x``; ValueError naming
    what has no translation."""
    try:
        return _glsl(expr.of_region(block))
    except Unsupported as why:
        raise ValueError(f"score region: {why}") from None


def _uint(stride) -> str:
    """A stride in GLSL: a number as an unsigned literal, or an expression of the uint
    globals n_q and n_k with its numbers made unsigned."""
    unsigned = re.sub(r"([0-9]+)", r"\1u", str(stride))
    return f"({unsigned})"


def _view(view: View, start: int = 0) -> str:
    sb, sh, h, sr, sc = (_uint(s) if i != 2 else s for i, s in enumerate(view))
    batch = f"batch * {sb}" if h == 1 else f"(batch / {h}u) * {sb} + (batch % {h}u) * {sh}"
    return f"{f'{start}u + ' if start else ''}{batch} + row * {sr} + col * {sc}"


def in_words(glsl_type: str, b16: bool, b8: bool) -> int:
    """The bits of an element of ``glsl_type`` where its buffer is bound as 32-bit words
    (a device without storage of its width); 0 where it is bound as it is."""
    bits = _NARROW.get(glsl_type, 0)
    return bits if (bits == 16 and not b16) or (bits == 8 and not b8) else 0


def output_in_words(spec: VulkanSpec) -> bool:
    """Whether the shader stores ``spec``'s output as 32-bit words (16-bit elements on a
    device without 16-bit storage)."""
    return bool(in_words(_GLSL_TYPES[spec.out_dtype or spec.dtype], spec.b16, spec.b8))


def _bind(spec: VulkanSpec, binding: int, name: str, glsl_type: str, written: bool = False) -> str:
    """A buffer of ``glsl_type`` elements, or of 32-bit words with ``name_bits(i)``."""
    bits = in_words(glsl_type, spec.b16, spec.b8)
    access = "" if written else "readonly "
    block = name.removesuffix("_buffer").upper()
    if glsl_type == "int64_t" and not spec.int64:  # compared only: as words, low first
        words = _BINDING.format(binding, access, block, "int", name)
        return f"{words}\n{_PAIR.format(name)}"
    if not bits:
        return _BINDING.format(binding, access, block, glsl_type, name)
    words = _BINDING.format(binding, access, block, "uint", name)
    return f"{words}\n{_BITS.format(name, 32 // bits, bits, (1 << bits) - 1)}"


def _read(spec: VulkanSpec, accessor: str, name: str, glsl_type: str) -> str:
    """``float accessor(uint i)``: element i of buffer ``name`` as a float."""
    if in_words(glsl_type, spec.b16, spec.b8):
        value = _FROM_BITS[glsl_type].format(f"{name}_bits(i)")
    else:
        value = f"to_float({name}[i])"
    return f"float {accessor}(uint i) {{ return {value}; }}"


def source_of(spec: VulkanSpec) -> str:
    """The GLSL compute shader of ``spec``."""
    q_view, k_view, v_view, m_view, o_view = spec.views
    element = _GLSL_TYPES[spec.dtype]
    out = spec.out_dtype or spec.dtype
    out_words = in_words(_GLSL_TYPES[out], spec.b16, spec.b8)
    bf16 = "bf16" in (spec.dtype, out, spec.mask_dtype) or "uint16_t" in spec.mask_inputs
    bf16 = bf16 and spec.b16  # held in a uint16_t (int16), not read from words
    extensions = [_BF16_EXTENSION] if bf16 else []
    bindings = [_bind(spec, i, f"{x}_buffer", element) for i, x in enumerate("qkv")]
    accessors = [_read(spec, f"{x}_at", f"{x}_buffer", element) for x in "qkv"]
    if spec.mask_expr is not None:
        bindings += [_bind(spec, 3 + i, f"l{i}", t) for i, t in enumerate(spec.mask_inputs)]
        needed = {
            *({"int64_t"} if spec.int64 else ()),
            *({"uint8_t"} if {"uint8_t", "int8_t"} & set(spec.mask_inputs) and spec.b8 else ()),
        }
        extensions += [_MASK_EXTENSIONS[t] for t in sorted(needed)]
        mask_value = spec.mask_expr
    else:  # read (Q is bound in its place without a mask)
        mask_type = _GLSL_TYPES[spec.mask_dtype] if spec.mask_dtype else element
        bindings.append(_bind(spec, 3, "mask_buffer", mask_type))
        accessors.append(_read(spec, "mask_at", "mask_buffer", mask_type))
        mask_value = "mask_at(m_offset(batch, row, key))"
    if spec.dynamic:
        bindings.append(_bind(spec, spec.pointers.index("Sizes"), "sizes_buffer", "int"))
    out_type = "uint" if out_words else _GLSL_TYPES[out]
    bindings.append(_BINDING.format(len(spec.pointers) - 1, "", "O", out_type, "out_buffer"))
    store = "void store_out(uint i, float v) { out_buffer[i] = to_out(v); }"
    accessors.append(_STORE_HALF if out_words else store)
    to_out = _TO_OUT_BITS[out] if out_words else _TO_OUT[out]
    return Template(TEMPLATE.read_text()).substitute(
        EXTENSIONS="\n".join(extensions),
        BINDINGS="\n".join(bindings),
        CONVERSIONS="\n".join([*([_BF16_TO_FLOAT] if bf16 else []), to_out]),
        ACCESSORS="\n".join(accessors),
        ROUND_F16=_ROUND_F16[spec.b16],
        MASK_VALUE=mask_value,
        N_Q="uint(sizes_buffer[0])" if spec.dynamic else f"{spec.n_q}u",
        N_K="uint(sizes_buffer[1])" if spec.dynamic else f"{spec.n_k}u",
        D=f"{spec.d}u",
        DV=f"{spec.dv}u",
        BLOCK_M=spec.block_m,
        BLOCK_N=f"{spec.block_n}u",
        KV_GROUP=f"{spec.kv_group}u",
        CAUSAL="true" if spec.causal_offset is not None else "false",
        CAUSAL_OFFSET=spec.causal_offset or 0,
        WINDOW="true" if spec.window_start is not None else "false",
        WINDOW_START=spec.window_start or 0,
        HAS_MASK="true" if spec.mask_dtype or spec.mask_expr else "false",
        MASK_REPLACES="true" if spec.mask_replaces else "false",
        SWAMPS="true" if spec.mask_swamps is not None else "false",
        SWAMP=repr(spec.mask_swamps or 0.0),
        QK_SCALE=repr(spec.qk_scale),
        SCORE=spec.score,
        Q_VIEW=_view(q_view, spec.offsets[0]),
        K_VIEW=_view(k_view, spec.offsets[1]),
        V_VIEW=_view(v_view, spec.offsets[2]),
        M_VIEW=_view(m_view),
        O_VIEW=_view(o_view),
    )


def compiler() -> str | None:
    """The path of glslangValidator, None where it is not installed."""
    return shutil.which(COMPILER)


@functools.cache
def _compiler_version() -> str:
    tool = compiler()
    if tool is None:
        return "none"  # compile_kernel says what to install
    done = subprocess.run([tool, "--version"], capture_output=True, text=True)
    return done.stdout.strip()


def compile_kernel(spec: VulkanSpec) -> Kernel:
    """The SPIR-V of ``spec`` (from the cache when the same kernel was built before)."""
    source = source_of(spec)
    parts = [source, *(path.read_text() for path in _READ), spec.to_json()]
    key, directory = cache_entry([*parts, f"{COMPILER} {_compiler_version()}"], prefix="spirv-")
    binary = directory / "kernel.spv"
    if not binary.exists():
        tool = compiler()
        if tool is None:
            raise FusionCompilerError(
                f"generating a Vulkan attention kernel needs {COMPILER} "
                "(apt install glslang-tools, or the Vulkan SDK), or compile with "
                'attention="iree"'
            )
        directory.mkdir(parents=True, exist_ok=True)
        comp = directory / "kernel.comp"
        write_whole(comp, source)  # whole: another process may compile the same kernel
        with tempfile.TemporaryDirectory() as scratch:
            out = Path(scratch) / "kernel.spv"
            command = [tool, "-V", "--target-env", "vulkan1.1", "-S", "comp"]
            done = subprocess.run(
                [*command, "-o", str(out), str(comp)],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                raise RuntimeError(f"{COMPILER} rejected the generated kernel:\n{done.stdout}")
            write_whole(binary, out.read_bytes())
    return Kernel("main", binary.read_bytes(), 0, spec.block_m, key, target="vulkan")
