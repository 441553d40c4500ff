"""An sm_90 attention kernel: generated from its TritonSpec, compiled ahead of time.

``attention.py.tmpl`` is the kernel, a ``string.Template``; ``source_of`` fills it for a
``TritonSpec`` and ``compile_kernel`` turns that into a cubin for an NVIDIA architecture
with Triton, on a machine with no GPU. Persistent causal attention over contiguous
operands (``TritonSpec.warp_specialized``) gets ``warp_specialized.py`` instead: the same
tiles and tile order with a producer warp, in Gluon. Kernels are cached
(``backends.cache``) on their source, every file it or the compile step reads, the spec,
the entry and Triton's version.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
from dataclasses import asdict, replace
from pathlib import Path
from string import Template

from fusion_compiler.backends.cache import cache_entry, write_whole
from fusion_compiler.backends.spec import Kernel, View
from fusion_compiler.backends.triton.spec import HIDDEN_POINTERS, TritonSpec
from fusion_compiler.errors import FusionCompilerError

_HERE = Path(__file__).parent
_TEMPLATE = _HERE / "attention.py.tmpl"
_WARP_SPECIALIZED = _HERE / "warp_specialized.py"
# what a kernel's binary depends on besides its generated source: the kernels it
# imports, its spec's constants and this module's compile options
_READ = (
    _TEMPLATE,
    _WARP_SPECIALIZED,
    _HERE / "tiles.py",
    _HERE / "spec.py",
    _HERE.parent / "spec.py",
    Path(__file__),
)
# registers per thread of the warp-specialized kernel: two programs (8 warps each) per
# multiprocessor; its warpgroup gets 120 * 256 / 128 - 24 = 216 of them (H200, causal N1024
# D128: 44.5 us against 44.9 with 112 and 48.2 with 128 without the TMA store)
WS_MAX_REGISTERS = 120
# full attention over at most this many keys takes that kernel (measured at 1024; at 4096
# it was 0.98-1.05 of the template's, and slower with GQA at 8192)
WS_FULL_KEYS = 2048
TRITON_TYPES = {"f16": "fp16", "bf16": "bf16", "f32": "fp32"}
# the template's placeholders where the spec asks for nothing of its own
_READ_MASK = (
    "tl.load(Mask + _m_offsets(batch, rows[:, None], keys[None, :], n_q, n_k), "
    "mask=inside, other=0.0)"
)


def _descriptor_expression(name: str, view: View, batch: int, rows: int, cols: int) -> str:
    """A 4-d (outer, H, rows, cols) TMA descriptor of ``view`` (see ``describable``), in
    (1, 1, BLOCK_N, D_PAD) tiles."""
    sb, sh, h, sr, _ = view
    head_stride = sh if h > 1 else sb  # a size-1 dim: any valid stride
    return (
        f"tl.make_tensor_descriptor({name}, shape=[{batch // h}, {h}, {rows}, {cols}], "
        f"strides=[{sb}, {head_stride}, {sr}, 1], block_shape=[1, 1, BLOCK_N, D_PAD])"
    )


def _offsets_expression(view: View, start: int = 0) -> str:
    sb, sh, h, sr, sc = view
    batch = f"batch * ({sb})" if h == 1 else f"(batch // {h}) * ({sb}) + (batch % {h}) * ({sh})"
    return f"{f'{start} + ' if start else ''}{batch} + rows * ({sr}) + cols * ({sc})"


def source_of(spec: TritonSpec) -> str:
    """The template filled in for ``spec``: the score region, the mask (read, or computed
    from the tensors its producers start from), the operands' views and, with TMA_KV, the
    descriptors of K and V and their tiles."""
    fields = {
        "score": spec.score,
        "mask_inputs": "Mask,",
        "bias": _READ_MASK,
        "k_descriptor": "K",
        "v_descriptor": "V",
        "k_tile": "0",
        "v_tile": "0",
        "map_input": "",
        "map_argument": "Q",  # bound, never read without a block map
        "sink_input": "",
        "sink_argument": "Q",  # bound, never read without a sink
        "map_bounds": "low = 0.0\n    high = 0.0",  # never called without them
    }
    if spec.block_map:
        fields["map_input"], fields["map_argument"] = "Map,", "Map"
    if spec.sink:
        fields["sink_input"], fields["sink_argument"] = "Sink,", "Sink"
    if spec.mask_expr is not None:
        fields["mask_inputs"] = " ".join(f"L{i}," for i in range(len(spec.mask_inputs)))
        fields["bias"] = spec.mask_expr
    if spec.mask_bounds is not None:
        fields["map_bounds"] = "\n    ".join(spec.mask_bounds)
    starts = (*spec.offsets, 0, 0)  # the mask and the output start where they are
    for name, view, start in zip("qkvmo", spec.views, starts, strict=True):
        fields[f"{name}_view"] = _offsets_expression(view, start)
    if spec.tma_kv:
        batch = spec.batch // spec.kv_group
        for name, view, cols, start in (
            ("K", spec.views[1], spec.d, spec.offsets[1]),
            ("V", spec.views[2], spec.dv, spec.offsets[2]),
        ):
            base = f"({name} + {start})" if start else name
            made = _descriptor_expression(base, view, batch, spec.n_k, cols)
            fields[f"{name.lower()}_descriptor"] = made
            h = view[2]
            tile = f"{name}.load([batch // {h}, batch % {h}, start_n, 0]).reshape(BLOCK_N, D_PAD)"
            fields[f"{name.lower()}_tile"] = tile
    return Template(_TEMPLATE.read_text()).substitute(fields)


def with_producer_warp(spec: TritonSpec, resident: int) -> TritonSpec:
    """``spec``, or for full attention over at most ``WS_FULL_KEYS`` keys that
    ``warp_specialized.py`` can take, with more 64-row tiles than ``resident`` programs, the same
    attention in that kernel's tiles: 64x64, 3 stages, ``resident`` persistent programs
    (H200, B·H 64 N1024 D128, kernel time: 71.2 against 74.3 us with the template's tuned
    128x64 tiles in fp16, 70.1 against 74.1 in bf16)."""
    if spec.causal_offset is not None or spec.persistent or not 0 < spec.n_k <= WS_FULL_KEYS:
        return spec
    tiles = dict(block_m=64, block_n=64, num_warps=4, num_stages=3, persistent=resident)
    candidate = replace(spec, **tiles)
    if not candidate.warp_specialized or spec.batch * (spec.n_q // 64) <= resident:
        return spec
    return candidate


# the body of warp_specialized.py's ``_bias`` that a computed mask's expression replaces
_WS_BIAS = "return 0.0  # the mask's expression"
# warp_specialized.attention's pointer parameters that a spec may lack (then None)
_WS_OPTIONAL = ("Mask", "L0", "L1", "L2", "L3", "Map")


def kernel_source(spec: TritonSpec, entry: str = "attention") -> str:
    """The source ``compile_kernel`` compiles: ``warp_specialized.py`` for a warp-specialized
    spec's attention (its ``_bias`` returning the computed mask in Gluon), else the
    generated template (``source_of``, which Triton's interpreter runs; the block map's
    kernels of either)."""
    if not _gluon(spec, entry):
        return source_of(spec)
    source = _WARP_SPECIALIZED.read_text()
    if spec.ws_mask is None:
        return source
    assert source.count(_WS_BIAS) == 1, "warp_specialized._bias has lost its marker"
    return source.replace(_WS_BIAS, f"return {spec.ws_mask}")


def _gluon(spec: TritonSpec, entry: str) -> bool:
    """Whether ``entry`` of ``spec`` is ``warp_specialized.py``'s Gluon kernel."""
    return spec.warp_specialized and entry == "attention"


def triton_version() -> str:
    try:
        return importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        return "none"  # compile_kernel says what to install


def _key_parts(source: str, spec: TritonSpec, entry: str) -> list[str]:
    """What the cubin of ``spec``'s ``entry`` depends on (``backends.cache``)."""
    read = [path.read_text() for path in _READ]
    return [source, *read, spec.to_json(), entry, f"triton {triton_version()}"]


def compile_kernel(spec: TritonSpec, entry: str = "attention") -> Kernel:
    """The cubin of ``spec``'s ``entry`` kernel (``attention``; ``combine`` after a
    split-KV attention; ``block_classes`` and ``block_lists`` before one with a block map),
    from the cache when the same kernel was built before."""
    source = kernel_source(spec, entry)

    def build(directory: Path):  # -> CompiledKernel
        source_path = directory / "kernel.py"
        write_whole(source_path, source)  # Triton reads a kernel's source from its file
        return _triton_compile(spec, source_path, entry)

    return cached_kernel(_key_parts(source, spec, entry), build)


def cached_kernel(parts: list[str], build, prefix: str = "") -> Kernel:
    """The kernel keyed on ``parts`` (``backends.cache``): read from the cache, or
    ``build(directory)`` (a Triton CompiledKernel) and written there whole."""
    key, directory = cache_entry(parts, prefix)
    meta_path, cubin_path = directory / "kernel.json", directory / "kernel.cubin"
    if meta_path.exists() and cubin_path.exists():
        meta = json.loads(meta_path.read_text())
        return Kernel(
            meta["name"],
            cubin_path.read_bytes(),
            meta["shared"],
            meta["threads"],
            key,
            scratch_bytes=meta.get("scratch", 0),
            hidden_pointers=HIDDEN_POINTERS,
        )
    directory.mkdir(parents=True, exist_ok=True)
    compiled = build(directory)
    kernel = Kernel(
        compiled.metadata.name,
        compiled.asm["cubin"],
        compiled.metadata.shared,
        compiled.metadata.num_warps * 32,
        key,
        scratch_bytes=compiled.metadata.global_scratch_size,
        hidden_pointers=HIDDEN_POINTERS,
    )
    write_whole(cubin_path, kernel.binary)
    meta = {
        "name": kernel.name,
        "shared": kernel.shared_bytes,
        "threads": kernel.threads,
        "scratch": kernel.scratch_bytes,
    }
    write_whole(meta_path, json.dumps(meta))  # last: its presence says the cubin is whole
    return kernel


def load_source(spec: TritonSpec, directory: Path, entry: str = "attention") -> object:
    """The generated ``entry`` kernel as a Triton JIT function (the source is written to
    ``directory``: Triton reads a kernel's source from its file)."""
    path = directory / "kernel.py"
    path.write_text(source_of(spec))
    return getattr(_import(path), entry)


def run_interpreted(
    spec: TritonSpec, q, k, v, mask=None, sizes=None, with_map=False, sink=None
):  # fmt: skip
    """Runs the generated kernel on the CPU with Triton's interpreter: how the kernel's
    numerics are tested where there is no GPU. Q (batch, n_q, d), K (batch // kv_group,
    n_k, d) or its transpose, V (batch // kv_group, n_k, dv), mask (batch, n_q, n_k), or
    for a spec that computes its mask the list of tensors it reads; for a dynamic spec,
    ``sizes`` = int32 (n_q, n_k); for a spec with a sink, ``sink`` = float32 (batch,
    n_q), its logits in base 2. The output; ``with_map``: and the block map the
    ``block_lists`` kernel computed for a spec with one.

    Triton picks the interpreter when it is imported, so the kernel runs in a child
    process (``interpret.main`` in ``interpreter_process``'s).
    """
    import tempfile

    import torch

    from fusion_compiler.backends.triton import interpreter_process

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "call.pt"
        torch.save({"spec": asdict(spec), "args": [q, k, v, mask, sizes], "sink": sink}, path)
        interpreter_process.run("fusion_compiler.backends.triton.interpret:main", path)
        out = torch.load(path.with_suffix(".out.pt"))
        if with_map:
            return out, torch.load(path.with_suffix(".map.pt")) if spec.block_map else None
        return out


def _import(path: Path):
    module_spec = importlib.util.spec_from_file_location("fusion_attention_kernel", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def require_triton():
    """The ``triton`` module, or a FusionCompilerError saying what to install."""
    try:
        import triton
    except ImportError:
        raise FusionCompilerError(
            "generating an sm_90 kernel needs Triton: "
            "pip install 'fusion-compiler[kernels]', or compile with cuda_arch='sm_80'"
        ) from None
    return triton


@functools.lru_cache(maxsize=256)
def stack_bytes(kernel: Kernel) -> int:
    """The bytes of stack a thread of ``kernel`` (a cubin) uses: where its registers
    spilled (ptxas' ``bytes stack frame``), as ``cuobjdump -res-usage`` of Triton's
    CUDA tools reads the cubin's resource table; no GPU needed. Read once per kernel in a
    process (a module's products of one shape share their kernel)."""
    import re
    import subprocess
    import tempfile

    triton = require_triton()
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(kernel.binary)
        cubin.flush()
        try:
            tool = triton.knobs.nvidia.cuobjdump.path  # RuntimeError where it is missing
            usage = subprocess.run(
                [tool, "-res-usage", cubin.name], capture_output=True, text=True, check=True
            ).stdout
        except (OSError, RuntimeError, subprocess.CalledProcessError) as error:
            raise FusionCompilerError(
                f"reading the registers of kernel {kernel.name} with cuobjdump failed "
                f"({error}): its cubin is not one cuobjdump reads, or Triton's CUDA tools "
                "are missing (reinstall Triton)"
            ) from None
    found = re.search(r"STACK:(\d+)", usage)
    if found is None:
        raise FusionCompilerError(f"cuobjdump -res-usage gave no STACK for {kernel.name}: {usage}")
    return int(found.group(1))


def triton_compile(
    function, pointers: dict[str, str], constants: dict[str, object], arch: int, options: dict,
    gluon: bool = False,
):  # fmt: skip  # -> CompiledKernel
    """``function`` (a Triton or, with ``gluon``, a Gluon kernel) compiled for sm_``arch``:
    ``pointers`` its pointer parameters and types in order, ``constants`` its
    constexprs. IREE's bindings are at least 16-byte aligned; saying so lets Triton
    vectorise loads (measured on the H200: about half the speed without it)."""
    triton = require_triton()
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = function.arg_names  # Triton reads the signature in the parameters' order
    aligned = {(names.index(name),): [["tt.divisibility", 16]] for name in pointers}
    signature = {name: pointers.get(name, "constexpr") for name in names}
    if gluon:
        from triton.experimental.gluon._runtime import GluonASTSource as ASTSource
    source = ASTSource(function, signature, constexprs=constants, attrs=aligned)
    return triton.compile(source, target=GPUTarget("cuda", arch, 32), options=options)


def _triton_compile(spec: TritonSpec, source_path: Path, entry: str):  # -> CompiledKernel
    require_triton()  # before the generated source imports it
    module = _import(source_path)
    element = TRITON_TYPES[spec.dtype]
    output = f"*{TRITON_TYPES[spec.out_dtype or spec.dtype]}"
    if entry == "combine":
        signature = {"Partial": "*fp32", "Out": output}
        constants = spec.combine_constants()
    elif entry == "block_classes":
        signature = {f"L{i}": t for i, t in enumerate(spec.mask_inputs)}
        signature["Scratch"] = "*i32"
        constants = spec.map_constants()
    elif entry == "block_lists":
        signature = {"Scratch": "*i32", "Map": "*i32"}
        constants = spec.lists_constants()
    else:
        signature = {
            "Q": f"*{element}",
            "K": f"*{element}",
            "V": f"*{element}",
            "Map": "*i32",
            "Sink": "*fp32",
            "Sizes": "*i32",  # Q bound and never read while the sizes are static
            "Out": "*fp32" if spec.splits > 1 else output,
        }
        if spec.mask_expr is None:  # without a mask, Q is bound here and never read
            signature["Mask"] = f"*{TRITON_TYPES[spec.mask_dtype or spec.dtype]}"
        signature.update({f"L{i}": t for i, t in enumerate(spec.mask_inputs)})
        signature = {name: signature[name] for name in spec.pointers}  # Map: with a map
        if _gluon(spec, entry):  # the pointers this spec lacks: None
            lacking = {name: None for name in _WS_OPTIONAL if name not in signature}
            constants = {**lacking, **spec.ws_constants()}
        else:
            constants = spec.constants()
    kernel = getattr(module, entry)
    if _gluon(spec, entry):
        options = {"num_warps": spec.num_warps, "maxnreg": WS_MAX_REGISTERS}
        return triton_compile(kernel, signature, constants, spec.arch, options, gluon=True)
    options = {"num_warps": spec.num_warps, "num_stages": spec.num_stages}
    return triton_compile(kernel, signature, constants, spec.arch, options)
