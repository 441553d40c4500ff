"""FlashAttention-2 kernels specialised to one fused attention, compiled ahead of time.

``flash_template.py`` is the kernel; a ``Spec`` fixes everything about one attention
(dtypes, sizes, head dims, K layout, causal offset, mask, the score function generated
from the op's score region, tiles and warps), and ``compile_kernel`` turns it into a
cubin for an NVIDIA architecture with Triton, on a machine with no GPU. Persistent causal
attention over contiguous operands (``Spec.warp_specialized``) gets ``flash_ws.py``
instead: the same tiles and tile order with a producer warp, in Gluon. Kernels are
cached by the hash of their generated source and options.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from fusion_compiler.errors import FusionCompilerError

_TEMPLATE = Path(__file__).with_name("flash_template.py")
# finfo(f32).min (linalg_ext.LOWEST_F32; this module is read without the compiler)
_LOWEST_F32 = -3.4028234663852886e38
_WARP_SPECIALIZED = Path(__file__).with_name("flash_ws.py")
# registers per thread of the warp-specialized kernel: two programs (8 warps each) per
# multiprocessor; its warpgroup gets 120 * 256 / 128 - 24 = 216 of them (H200, causal N1024
# D128: 44.5 us against 44.9 with 112 and 48.2 with 128 without the TMA store)
WS_MAX_REGISTERS = 120
# full attention over at most this many keys takes that kernel (measured at 1024; at 4096
# it was 0.98-1.05 of the template's, and slower with GQA at 8192)
WS_FULL_KEYS = 2048
_SCORE_STUB = "    x = x  # generated: the score region, on base-2 logits\n"
_TRITON_TYPES = {"f16": "fp16", "bf16": "bf16", "f32": "fp32"}
_MASK_PARAM = "Mask,  # generated: mask inputs"
_MASK_LOAD = (
    "        bias = tl.load(Mask + _m_offsets(batch, rows[:, None], keys[None, :],"
    " n_q, n_k), mask=inside, other=0.0)  # noqa: E501 - generated: mask\n"
)
_VIEW_STUB = "    return 0  # generated: {} view\n"
_DESCRIPTOR_STUB = "    return {0}  # generated: {0} descriptor\n"
_TILE_STUB = "    return 0  # generated: {} tile\n"
# Triton appends two pointers of its own (global and profile scratch) after ours.
HIDDEN_POINTERS = 2
COMBINE_BLOCK = 16  # rows per program of the split-KV combine kernel
ENTRIES = ("attention", "combine")  # the template's kernels


# (SB, SH, H, SR, SC) of a strided operand; a stride is a number, or a Triton expression
# of n_q and n_k (e.g. "n_q * 64") when a sequence length is dynamic
Stride = int | str
View = tuple[Stride, Stride, int, Stride, Stride]


def product(*factors: Stride) -> Stride:
    """A stride times another: a number while every factor is one, else an expression."""
    numbers = [f for f in factors if isinstance(f, int)]
    value = 1
    for f in numbers:
        value *= f
    names = [f for f in factors if isinstance(f, str)]
    if not names:
        return value
    return " * ".join([*names, *([str(value)] if value != 1 else [])])


def contiguous_strides(sizes: list[Stride]) -> list[Stride]:
    """The strides of a row-major tensor of ``sizes`` (numbers or expressions)."""
    strides: list[Stride] = [1] * len(sizes)
    for i in reversed(range(len(sizes) - 1)):
        strides[i] = product(strides[i + 1], sizes[i + 1])
    return strides


def contiguous(rows: Stride, cols: Stride) -> View:
    """The view of a contiguous (batch, rows, cols) tensor."""
    return (product(rows, cols), 0, 1, cols, 1)


def describable(view: View, cols: int) -> bool:
    """Whether a TMA descriptor can read ``view`` of a 2-byte type: unit column stride,
    static strides of whole 16-byte units, rows of whole 16-byte units."""
    sb, sh, h, sr, sc = view
    strides = [sb, sr] + ([sh] if h > 1 else [])
    return (
        sc == 1
        and all(isinstance(s, int) and s > 0 and s % 8 == 0 for s in strides)
        and cols % 8 == 0
    )


def packed(view: View, rows: int, cols: int) -> bool:
    """Whether ``view`` reads a row-major (batch, rows, cols) tensor: element (batch, row,
    col) at (batch * rows + row) * cols + col, with the batch split into (outer, H) or not."""
    sb, sh, h, sr, sc = view
    whole = rows * cols
    return sc == 1 and sr == cols and (sb == whole if h == 1 else (sh == whole and sb == h * whole))


def _descriptor_expression(name: str, view: View, batch: int, rows: int, cols: int) -> str:
    """A 4-d (outer, H, rows, cols) TMA descriptor of ``view`` (see ``describable``), in
    (1, 1, BLOCK_N, D_PAD) tiles."""
    sb, sh, h, sr, _ = view
    head_stride = sh if h > 1 else sb  # a size-1 dim: any valid stride
    return (
        f"tl.make_tensor_descriptor({name}, shape=[{batch // h}, {h}, {rows}, {cols}], "
        f"strides=[{sb}, {head_stride}, {sr}, 1], block_shape=[1, 1, BLOCK_N, D_PAD])"
    )


def _offsets_expression(view: View) -> str:
    sb, sh, h, sr, sc = view
    batch = f"batch * ({sb})" if h == 1 else f"(batch // {h}) * ({sb}) + (batch % {h}) * ({sh})"
    return f"{batch} + rows * ({sr}) + cols * ({sc})"


@dataclass(frozen=True)
class Spec:
    """One attention, as the kernel sees it: sizes and choices are all compile-time."""

    dtype: str  # element type of Q, K and V: f16 | bf16
    mask_dtype: str | None  # element type of the additive mask, None without one
    batch: int
    n_q: int  # -1: dynamic, read at run time
    n_k: int
    d: int
    dv: int
    views: tuple[View, ...]  # Q, K, V, mask, output: (SB, SH, H, SR, SC), see the template
    causal_offset: int | None
    qk_scale: float  # scale · log2(e)
    score: str  # Triton expression of ``x``: the score region in base 2
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    arch: int = 90  # sm_90 -> sm_90a code
    out_dtype: str | None = None  # of the output, when not ``dtype`` (f32 in upcast models)
    kv_group: int = 1  # query heads per K/V head (GQA): K and V hold batch // kv_group
    # the mask computed in the kernel: a Triton expression of batch, rows, keys and the
    # inputs L0, L1, ... (their pointer types in ``mask_inputs``), instead of read
    mask_expr: str | None = None
    mask_inputs: tuple[str, ...] = ()
    # mask values at or below this swamp the score they are added to in the mask's type
    # (fp16: finfo.min): the logit is then the fill alone, as in PyTorch; None: the mask
    # holds no such fill (the kernel then skips the test)
    mask_swamps: float | None = None
    # the mask replaces the score where it is -inf (``masked_fill``), not added to it: a
    # NaN or inf score there is dropped
    mask_replaces: bool = False
    target: str = "cuda"  # "cuda" (a Triton kernel for sm_{arch}) or "vulkan" (SPIR-V)
    # split-KV: programs sharing each row block's keys, their results merged by a second
    # kernel (``combine``) from a float32 buffer of ``partial_elements``; static n_q only
    splits: int = 1
    # decoding with GQA: the rows of the kv_group heads that share K and V in one program,
    # which then reads them once; static n_q only
    pack_gqa: bool = False
    # persistent programs (causal, static sizes, no split or packing): this many
    # programs take the (row block, batch) tiles longest first; 0: one tile per program
    persistent: int = 0

    def __post_init__(self) -> None:  # views read back from JSON are lists
        object.__setattr__(self, "views", tuple(tuple(v) for v in self.views))
        object.__setattr__(self, "mask_inputs", tuple(self.mask_inputs))

    @property
    def pointers(self) -> list[str]:
        """The kernel's pointer parameters, in order (IREE binds them in this order)."""
        masks = [f"L{i}" for i in range(len(self.mask_inputs))] if self.mask_expr else ["Mask"]
        sizes = ["Sizes"] if self.target == "cuda" or self.dynamic else []
        return ["Q", "K", "V", *masks, *sizes, "Out"]

    @property
    def dynamic(self) -> bool:
        return self.n_q < 0 or self.n_k < 0

    @property
    def tma_kv(self) -> bool:
        """K and V read through TMA descriptors: for persistent programs over more than
        2048 keys, where both views can be described (H200, causal D128 N4096: 149.6 ->
        142.5 us, D64 N4096 183.0 -> 178.5, GQA N8192 1221 -> 1158; slower over 1024 keys,
        in full attention and with a program per row block)."""
        return (
            self.target == "cuda"
            and self.persistent > 0
            and self.n_k > 2048
            and padded(self.d) <= 128
            and padded(self.dv) <= 128
            and describable(self.views[1], self.d)
            and describable(self.views[2], self.dv)
        )

    @property
    def warp_specialized(self) -> bool:
        """The kernel is ``flash_ws.py``'s (a producer warp keeps a K/V ring filled across
        tiles): persistent programs on sm_90 over causal or full attention without a mask
        or score function, f16 or bf16, D = DV = 128, 64x64 tiles, n_q = n_k a multiple
        of 64, every operand a contiguous (batch, rows, 128) tensor. H200, kernel time
        against this template's kernels: causal N1024 44.3 against 46.4-47.2 us, N4096
        132-137 against 143-159, GQA N8192 1151 against 1237; full N1024 71.2 against 74.3
        (``with_producer_warp``; benchmarks/results/causal_schedules_h200.md)."""
        return (
            self.target == "cuda"
            and self.arch == 90
            and self.persistent > 0
            and self.causal_offset in (None, 0)
            and self.n_q == self.n_k
            and self.n_q % 64 == 0
            and self.mask_dtype is None
            and self.mask_expr is None
            and self.score == "x"
            and self.qk_scale > 0
            and self.dtype in ("f16", "bf16")
            and self.out_dtype in (None, self.dtype)
            and self.d == self.dv == 128
            and self.block_m == self.block_n == 64
            and self.splits == 1
            and not self.pack_gqa
            and all(packed(self.views[i], self.n_q, self.d) for i in (0, 1, 2, 4))
        )

    def ws_constants(self) -> dict[str, object]:
        """The ``gl.constexpr`` parameters of ``flash_ws.attention``."""
        return {
            "QK_SCALE": self.qk_scale,
            "N": self.n_q,
            "D": self.d,
            "BATCH": self.batch,
            "KV_GROUP": self.kv_group,
            "BLOCK": self.block_m,
            "STAGES": self.num_stages,
            "TILES": self.n_q // self.block_m * self.batch,
            "CAUSAL": self.causal_offset is not None,
            # as the template's persistent programs: over short rows only
            "DESYNC": self.causal_offset is not None and self.n_k <= 2048,
        }

    @property
    def grid(self) -> tuple[int, int, int]:
        """The launch grid of a static spec (a dynamic one: ``grid_for`` its n_q)."""
        return self.grid_for(self.n_q)

    def grid_for(self, n_q: int) -> tuple[int, int, int]:
        if self.persistent:
            return (self.persistent, 1, 1)
        group = self.kv_group if self.pack_gqa else 1
        return (-(-n_q * group // self.block_m), self.batch // group, self.splits)

    @property
    def partial_elements(self) -> int:
        """The float32 buffer between the split-KV kernels: each split's rows, padded
        to DV_PAD, then their log-sum-exps."""
        return self.splits * self.batch * self.n_q * (padded(self.dv) + 1)

    @property
    def combine_grid(self) -> tuple[int, int, int]:
        return (-(-self.n_q // COMBINE_BLOCK), self.batch, 1)

    def combine_constants(self) -> dict[str, object]:
        """The ``tl.constexpr`` parameters of the template's ``combine`` kernel."""
        return {
            "N_Q": self.n_q,
            "DV": self.dv,
            "DV_PAD": padded(self.dv),
            "SPLITS": self.splits,
            "BLOCK_M": COMBINE_BLOCK,
        }

    def constants(self) -> dict[str, object]:
        """The template's ``tl.constexpr`` parameters."""
        return {
            "QK_SCALE": self.qk_scale,
            # no score function (and a positive scale, so the max commutes with it)
            "LATE_SCALE": self.score == "x" and self.qk_scale > 0,
            "N_Q": max(self.n_q, 0),
            "N_K": max(self.n_k, 0),
            "D": self.d,
            "D_PAD": padded(self.d),
            "DV": self.dv,
            "DV_PAD": padded(self.dv),
            "CAUSAL": self.causal_offset is not None,
            "CAUSAL_OFFSET": self.causal_offset or 0,
            # 0: no mask; 1: an additive mask; below 0: one whose values at or below
            # this swamp the score (H200, a padding mask at N2048 D128: the test costs
            # 1.85x the kernel time, so only masks that can hold such a fill pay it).
            # -inf swamps under every threshold: a mask that replaces the score where it
            # is -inf takes the test at the lowest f32 (the fill finfo(f32).min swamps
            # too; H200, a masked_fill padding mask at B4 H16 N2048 D128 fp16: 0.297 ->
            # 0.557 ms, benchmarks/results/mask_forms_h200.md; a plain where on -inf
            # measured slower, 0.670)
            "HAS_MASK": (
                0
                if self.mask_dtype is None and self.mask_expr is None
                else self.mask_swamps or (_LOWEST_F32 if self.mask_replaces else 1)
            ),
            "KV_GROUP": self.kv_group,
            "BLOCK_M": self.block_m,
            "BLOCK_N": self.block_n,
            "DYNAMIC": self.dynamic,
            "SPLITS": self.splits,
            "GROUP": self.kv_group if self.pack_gqa else 1,
            # the masked blocks in a loop of their own pays off over long rows and costs
            # over short ones (H200, causal D128: 6% faster at 16384-65536 keys, 6% slower
            # at 1024)
            "LOOPS": 2 if self.n_k < 0 or self.n_k > 2048 else 1,
            "BATCH": self.batch,
            "TILES": -(-self.n_q // self.block_m) * self.batch if self.persistent else 0,
            # over short rows only (H200, persistent causal, kernel time: causal/full 0.756 ->
            # 0.781 at 1024 keys, D128; 0.855 -> 0.821 at 4096, 0.880 -> 0.845 at 8192 GQA)
            "DESYNC": bool(self.persistent) and 0 < self.n_k <= 2048,
            "TMA_KV": self.tma_kv,
        }


@dataclass(frozen=True)
class Kernel:
    name: str
    binary: bytes  # a cubin, or SPIR-V for target "vulkan"
    shared_bytes: int  # dynamic shared memory to request (0: none)
    threads: int
    source_hash: str
    target: str = "cuda"
    scratch_bytes: int = 0  # global scratch per program (TMA descriptors made on the GPU)

    @property
    def hidden_pointers(self) -> int:
        """Pointer parameters the kernel compiler added after ours (Triton's scratch)."""
        return HIDDEN_POINTERS if self.target == "cuda" else 0


def cache_dir() -> Path:
    root = os.environ.get("FUSION_COMPILER_CACHE") or Path.home() / ".cache" / "fusion_compiler"
    return Path(root) / "kernels"


def cache_entry(source: str, spec: Spec, entry: str, prefix: str = "") -> tuple[str, Path]:
    """(content hash, cache folder) of one kernel: its generated source, its Spec and
    which of the source's kernels it is."""
    options = json.dumps(asdict(spec), sort_keys=True) + entry
    key = hashlib.sha256((source + options).encode()).hexdigest()
    return key, cache_dir() / f"{prefix}{key[:24]}"


def padded(n: int) -> int:
    """A head dim padded to the power of two (at least 16) the kernel's tiles use."""
    return 1 << max(4, (n - 1).bit_length())


def source_of(spec: Spec) -> str:
    """The template with the score line replaced by the generated expression of ``x``."""
    text = _TEMPLATE.read_text()
    stubs = [_SCORE_STUB, _MASK_PARAM, _MASK_LOAD] + [_VIEW_STUB.format(n) for n in "QKVMO"]
    stubs += [_DESCRIPTOR_STUB.format(n) for n in "KV"] + [_TILE_STUB.format(n) for n in "KV"]
    if any(stub not in text for stub in stubs):
        raise RuntimeError(f"{_TEMPLATE} lost a generated line")
    text = text.replace(_SCORE_STUB, f"    x = {spec.score}\n")
    if spec.mask_expr is not None:
        inputs = " ".join(f"L{i}," for i in range(len(spec.mask_inputs)))
        text = text.replace(_MASK_PARAM, inputs)
        text = text.replace(_MASK_LOAD, f"        bias = {spec.mask_expr}\n")
    for name, view in zip("QKVMO", spec.views, strict=True):
        text = text.replace(_VIEW_STUB.format(name), f"    return {_offsets_expression(view)}\n")
    if spec.tma_kv:
        batch = spec.batch // spec.kv_group
        for name, view, cols in (("K", spec.views[1], spec.d), ("V", spec.views[2], spec.dv)):
            made = _descriptor_expression(name, view, batch, spec.n_k, cols)
            text = text.replace(_DESCRIPTOR_STUB.format(name), f"    return {made}\n")
            h = view[2]
            tile = f"{name}.load([batch // {h}, batch % {h}, start_n, 0]).reshape(BLOCK_N, D_PAD)"
            text = text.replace(_TILE_STUB.format(name), f"    return {tile}\n")
    return text


def with_producer_warp(spec: Spec, resident: int) -> Spec:
    """``spec``, or for full attention over at most ``WS_FULL_KEYS`` keys that
    ``flash_ws.py`` can take, with more 64-row tiles than ``resident`` programs, the same
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


def kernel_source(spec: Spec) -> str:
    """The source ``compile_kernel`` compiles: ``flash_ws.py`` for a warp-specialized
    spec, else the generated template (``source_of``, which Triton's interpreter runs)."""
    return _WARP_SPECIALIZED.read_text() if spec.warp_specialized else source_of(spec)


def compile_kernel(spec: Spec, entry: str = "attention") -> Kernel:
    """The cubin of ``spec``'s ``entry`` kernel (``attention``, or ``combine`` after a
    split-KV attention), from the cache when the same kernel was built before."""
    source = kernel_source(spec)
    key, directory = cache_entry(source, spec, entry)
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
        )
    directory.mkdir(parents=True, exist_ok=True)
    source_path = directory / "kernel.py"
    source_path.write_text(source)
    compiled = _triton_compile(spec, source_path, entry)
    kernel = Kernel(
        compiled.metadata.name,
        compiled.asm["cubin"],
        compiled.metadata.shared,
        compiled.metadata.num_warps * 32,
        key,
        scratch_bytes=compiled.metadata.global_scratch_size,
    )
    cubin_path.write_bytes(kernel.binary)
    meta = {
        "name": kernel.name,
        "shared": kernel.shared_bytes,
        "threads": kernel.threads,
        "scratch": kernel.scratch_bytes,
    }
    meta_path.write_text(json.dumps(meta))
    return kernel


def load_source(spec: Spec, directory: Path, entry: str = "attention") -> object:
    """The generated ``entry`` kernel as a Triton JIT function (the source is written to
    ``directory``: Triton reads a kernel's source from its file)."""
    path = directory / "kernel.py"
    path.write_text(source_of(spec))
    return getattr(_import(path), entry)


def run_interpreted(spec: Spec, q, k, v, mask=None, sizes=None):  # torch tensors -> tensor
    """Runs the generated kernel on the CPU with Triton's interpreter: how the kernel's
    numerics are tested where there is no GPU. Q (batch, n_q, d), K (batch // kv_group,
    n_k, d) or its transpose, V (batch // kv_group, n_k, dv), mask (batch, n_q, n_k), or
    for a spec that computes its mask the list of tensors it reads; for a dynamic spec,
    ``sizes`` = int32 (n_q, n_k).

    Triton picks the interpreter when it is imported, so the kernel runs in a child
    process (``fusion_compiler.kernels.interpret``).
    """
    import subprocess
    import sys
    import tempfile

    import torch

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "call.pt"
        torch.save({"spec": asdict(spec), "args": [q, k, v, mask, sizes]}, path)
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        command = [sys.executable, "-m", "fusion_compiler.kernels.interpret", str(path)]
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"interpreted kernel failed:\n{done.stderr[-4000:]}")
        return torch.load(path.with_suffix(".out.pt"))


def _import(path: Path):
    module_spec = importlib.util.spec_from_file_location("fusion_attention_kernel", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def _triton_compile(spec: Spec, source_path: Path, entry: str):  # -> triton CompiledKernel
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from triton.experimental.gluon._runtime import GluonASTSource
    except ImportError:
        raise FusionCompilerError(
            "generating an sm_90 attention kernel needs Triton: "
            "pip install 'fusion-compiler[kernels]', or compile with cuda_arch='sm_80'"
        ) from None
    module = _import(source_path)
    element = _TRITON_TYPES[spec.dtype]
    output = f"*{_TRITON_TYPES[spec.out_dtype or spec.dtype]}"
    if entry == "combine":
        signature = {"Partial": "*fp32", "Out": output}
        constants = spec.combine_constants()
    else:
        signature = {
            "Q": f"*{element}",
            "K": f"*{element}",
            "V": f"*{element}",
            "Sizes": "*i32",  # Q bound and never read while the sizes are static
            "Out": "*fp32" if spec.splits > 1 else output,
        }
        if spec.mask_expr is None:  # without a mask, Q is bound here and never read
            signature["Mask"] = f"*{_TRITON_TYPES[spec.mask_dtype or spec.dtype]}"
        signature.update({f"L{i}": t for i, t in enumerate(spec.mask_inputs)})
        signature = {name: signature[name] for name in spec.pointers}
        constants = spec.ws_constants() if spec.warp_specialized else spec.constants()
    pointers = len(signature)
    signature.update(dict.fromkeys(constants, "constexpr"))
    # IREE's bindings are at least 16-byte aligned; saying so lets Triton vectorise loads
    # (measured on the H200: about half the speed without it).
    aligned = {(i,): [["tt.divisibility", 16]] for i in range(pointers)}
    kernel = getattr(module, entry)
    target = GPUTarget("cuda", spec.arch, 32)
    if spec.warp_specialized:
        source = GluonASTSource(kernel, signature, constexprs=constants, attrs=aligned)
        options = {"num_warps": spec.num_warps, "maxnreg": WS_MAX_REGISTERS}
        return triton.compile(source, target=target, options=options)
    source = ASTSource(kernel, signature, constexprs=constants, attrs=aligned)
    options = {"num_warps": spec.num_warps, "num_stages": spec.num_stages}
    return triton.compile(source, target=target, options=options)
