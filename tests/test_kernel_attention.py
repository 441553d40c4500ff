"""fusion-kernel-attention: the generated kernel, from the IR, against PyTorch.

No GPU here: each model is compiled for CUDA sm_90 to the fused stage, the Spec the pass
put on the kernel dispatch is read back, and the generated kernel source runs under
Triton's interpreter on the CPU. The same kernels ran on the H200
(benchmarks/results/gpu_smoke_h200.md, peers_h200.md). Triton 3.6's interpreter
multiplies bf16 as the integers of its bits (rel. error ~1e9); ``patch_interpreter`` mends
that, so the bf16 cases here run too.
"""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from conftest import ROOT, rel_error, tool
from variants import Attention, PaddingMaskAttention

import fusion_compiler as fc
from fusion_compiler.backends.dispatch import MARKER, specs_in
from fusion_compiler.backends.triton.kernel import run_interpreted
from fusion_compiler.compiler import new_session
from fusion_compiler.ir import ir

# compiles many models: left out of the edit loop (-m 'not slow'), run in CI
pytestmark = pytest.mark.slow

F16 = torch.float16
BF16 = torch.bfloat16
BOUND = {F16: 3e-3, BF16: 2e-2}  # bf16 keeps 8 bits of mantissa to fp16's 11

# name -> (model, (B, H, Hkv, Nq, Nk, D), dtype, what the Spec must say)
CASES = {
    "causal_iota": (
        dict(mask="causal-iota", upcast=True),
        (1, 4, 4, 200, 200, 64),
        F16,
        dict(causal_offset=0, mask_dtype=None),
    ),
    # masks held in buffers, proven causal from their values: the mask is dropped
    "causal_tril_buffer": (
        dict(mask="causal-tril", upcast=True),
        (1, 2, 2, 96, 160, 64),
        F16,
        dict(causal_offset=64, mask_dtype=None, mask_expr=None),
    ),
    "causal_finfo_min_buffer": (
        dict(mask="causal-finfo-min"),
        (1, 2, 2, 128, 128, 64),
        F16,
        dict(causal_offset=0, mask_dtype=None, mask_expr=None),
    ),
    "causal_d80": (
        dict(mask="causal-iota", upcast=True),
        (2, 2, 2, 96, 96, 80),
        F16,
        dict(causal_offset=0, d=80),
    ),
    "cross_ragged": (dict(), (1, 2, 2, 77, 333, 64), F16, dict(n_q=77, n_k=333)),
    "gqa_repeat_kv": (
        dict(gqa="repeat_kv", kv_heads=2, mask="causal-iota", upcast=True),
        (1, 8, 2, 128, 128, 64),
        F16,
        dict(kv_group=4, causal_offset=0),
    ),
    "gqa_repeat_interleave": (
        dict(gqa="repeat_interleave", kv_heads=1),
        (1, 4, 1, 64, 130, 32),
        F16,
        dict(kv_group=4),
    ),
    "softcap": (dict(mask="softcap", upcast=True), (1, 2, 2, 100, 100, 64), F16, {}),
    # decoding: one query row per head, too few row blocks for the GPU -> split-KV, the
    # partial results merged by the second kernel
    "decode_gqa_split_kv": (
        dict(gqa="repeat_interleave", kv_heads=1),
        (1, 4, 1, 1, 1500, 64),
        F16,
        dict(block_m=16, block_n=128, splits=6, kv_group=4, pack_gqa=True),
    ),
    "short_causal_gqa_packed": (
        dict(gqa="repeat_kv", kv_heads=2, mask="causal-iota", upcast=True),
        (1, 4, 2, 5, 700, 32),
        F16,
        dict(block_m=16, splits=3, kv_group=2, pack_gqa=True, causal_offset=695),
    ),
    "short_causal_split_kv": (
        dict(mask="causal-iota", upcast=True),
        (1, 2, 2, 5, 1100, 32),
        F16,
        dict(block_m=16, splits=4, causal_offset=1095),
    ),
    "scores_div_d128": (dict(scale_on="scores-div"), (1, 2, 2, 64, 64, 128), F16, {}),
    "causal_iota_bf16": (
        dict(mask="causal-iota", upcast=True),
        (1, 4, 4, 200, 200, 64),
        BF16,
        dict(causal_offset=0, dtype="bf16"),
    ),
    "decode_gqa_split_kv_bf16": (
        dict(gqa="repeat_interleave", kv_heads=1),
        (1, 4, 1, 1, 1500, 64),
        BF16,
        dict(splits=6, pack_gqa=True, dtype="bf16"),
    ),
}
# over more than 2048 keys, persistent programs read K and V through TMA descriptors
LONG_CASES = {
    "long_causal_gqa": (
        dict(gqa="repeat_kv", kv_heads=1, mask="causal-iota", upcast=True),
        (1, 2, 1, 2100, 2100, 32),
        F16,
        dict(kv_group=2, causal_offset=0),
    ),
}


def _dispatch_inputs(fused: fc.CompiledModule) -> tuple[object, list[list[int]]]:
    """The kernel's Spec and the shapes of its dispatch's operands (the attention's, not
    a block map's before it)."""
    with new_session().context:
        module = ir.Module.parse(fused.mlir)
        specs = specs_in(module.operation)
        assert len(specs) == 1, "the attention did not become a generated kernel"
        found = []

        def visit(op):
            if op.name == "flow.dispatch" and MARKER in op.attributes:
                found.append([list(ir.RankedTensorType(v.type).shape) for v in op.operands])
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
    return specs[0], found[0]


def _compile_spec(model, inputs):
    fused = fc.compile(
        model, example_args=inputs, target="cuda", cuda_arch="sm_90", compile_to="fused"
    )
    assert fused.stats["attention_ops"] == 1
    return _dispatch_inputs(fused)[0]


def _check_case(name: str, cases: dict = CASES, **overrides):
    """Compiles cases[name] for sm_90, checks its Spec, runs the kernel (with the Spec's
    fields in ``overrides`` replaced) under the interpreter against PyTorch; the Spec."""
    options, (b, h, hkv, nq, nk, d), dtype, expected = cases[name]
    torch.manual_seed(0)
    model = Attention(h, nq, nk, d, **options).eval()
    q = torch.randn(b, h, nq, d).to(dtype)
    k, v = (torch.randn(b, hkv, nk, d).to(dtype) for _ in range(2))
    spec = _compile_spec(model, (q, k, v))
    for field, value in expected.items():
        assert getattr(spec, field) == value, f"{field}: {getattr(spec, field)} != {value}"
    spec = dataclasses.replace(spec, **overrides)
    # the kernel's operands: heads folded into the batch, K/V heads as the model has them
    # when the group broadcast was folded in, repeated otherwise
    repeat = h // hkv // spec.kv_group
    kk, vv = (x.repeat_interleave(repeat, dim=1).reshape(-1, nk, d) for x in (k, v))
    got = run_interpreted(spec, q.reshape(b * h, nq, d), kk, vv)
    with torch.no_grad():
        want = model.double()(q.double(), k.double(), v.double())
    assert rel_error(got.reshape(want.shape), want) < BOUND[dtype]
    return spec


@pytest.mark.parametrize("name", sorted(CASES))
def test_generated_kernel_matches_pytorch(name) -> None:
    _check_case(name)


@pytest.mark.parametrize("name", ["causal_iota", "gqa_repeat_kv"])
def test_persistent_programs_take_every_tile_once(name) -> None:
    """Causal row blocks of every batch longest first, shared by 3 persistent programs
    in snake order (rounds of both directions, a last round only partly taken)."""
    _check_case(name, persistent=3)


def test_persistent_programs_over_long_rows_read_kv_through_tma() -> None:
    """Rows past the last key block and columns past D come back as zeros from the
    descriptors, as from the masked loads."""
    spec = _check_case("long_causal_gqa", LONG_CASES, persistent=3, splits=1)
    assert spec.tma_kv


def _fused_spec(model, shape: tuple[int, ...], dtype=F16):
    b, h, hkv, nq, nk, d = shape
    q = torch.randn(b, h, nq, d).to(dtype)
    k, v = (torch.randn(b, hkv, nk, d).to(dtype) for _ in range(2))
    return _compile_spec(model.eval(), (q, k, v))


@pytest.mark.parametrize(
    "options, shape",
    [
        (dict(mask="causal-iota", upcast=True), (2, 16, 16, 1024, 1024, 128)),
        (dict(mask="causal-iota", gqa="repeat_kv", kv_heads=2), (2, 8, 2, 2048, 2048, 128)),
        (dict(), (2, 16, 16, 1024, 1024, 128)),  # full attention, re-tiled for it
    ],
)
def test_d128_attention_with_many_tiles_gets_the_producer_warp_kernel(options, shape) -> None:
    """Causal D128 attention with more row blocks than the GPU holds (and full attention
    over up to 2048 keys), operands contiguous: warp_specialized.py's kernel in persistent
    programs (Gluon, 8 warps: a warpgroup and a producer warp's group), its TMA
    descriptors (K, V, output) made on the GPU in 384 bytes of scratch per program. Its
    results are checked on the GPU (tests/test_gpu_variants.py, *_persistent_*)."""
    from fusion_compiler.backends.triton.kernel import compile_kernel

    _, h, _, n, _, d = shape
    spec = _fused_spec(Attention(h, n, n, d, **options), shape)
    assert spec.persistent == 264 and spec.warp_specialized
    assert (spec.block_m, spec.block_n, spec.num_stages) == (64, 64, 3)
    kernel = compile_kernel(spec)
    assert kernel.threads == 256 and kernel.scratch_bytes == 384
    assert kernel.shared_bytes <= 232448 // 2 - 1024  # two programs per multiprocessor


class SlidingWindow(torch.nn.Module):
    """Each query sees its own key and the ``window - 1`` before it (transformers' eager
    spelling: an arange compare, torch.where with finfo.min)."""

    def __init__(self, window: int):
        super().__init__()
        self.window = window

    def forward(self, q, k, v):
        s = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
        rows = torch.arange(q.shape[-2])[:, None]
        cols = torch.arange(k.shape[-2])[None, :]
        keep = (cols <= rows) & (cols > rows - self.window)
        s = torch.where(keep, s, torch.finfo(s.dtype).min)
        return torch.softmax(s.float(), dim=-1).to(v.dtype) @ v


def test_sliding_window_over_long_rows_gets_the_producer_warp_kernel() -> None:
    """A window of 512 keys over 16384: every tile is short, so persistent programs with
    the producer warp, which visits only the window's key blocks, as over short rows (H100:
    0.187 against the template's 0.220 ms at B1 H8 N32768; results checked on the GPU,
    benchmarks/results/mask_forms_h100.md)."""
    from fusion_compiler.backends.triton.kernel import compile_kernel

    spec = _fused_spec(SlidingWindow(512), (1, 2, 2, 16384, 16384, 128))
    assert spec.window_start == -511 and spec.causal_offset == 0
    assert spec.persistent == 264 and spec.warp_specialized
    assert spec.ws_constants()["WINDOW"] and spec.ws_constants()["WINDOW_START"] == -511
    kernel = compile_kernel(spec)
    assert kernel.threads == 256 and kernel.shared_bytes <= 232448 // 2 - 1024


@pytest.mark.parametrize(
    "options, shape, why",
    [
        (dict(mask="causal-iota", upcast=True), (2, 32, 32, 1024, 1024, 64), "D=64"),
        (dict(mask="alibi", upcast=True), (2, 16, 16, 1024, 1024, 128), "a computed mask"),
        (dict(), (1, 16, 16, 4096, 4096, 128), "full attention over 4096 keys"),
        (dict(), (1, 2, 2, 1024, 1024, 128), "fewer tiles than the GPU holds"),
    ],
)
def test_other_attention_keeps_the_template_kernel(options, shape, why) -> None:
    _, h, _, n, _, d = shape
    spec = _fused_spec(Attention(h, n, n, d, **options), shape)
    assert not spec.warp_specialized, why


def test_f32_attention_stays_with_iree_and_says_why() -> None:
    model = Attention(2, 32, 32, 16).eval()
    x = torch.randn(1, 2, 32, 16)
    module = fc.compile(
        model,
        example_args=(x, x.clone(), x.clone()),
        target="cuda",
        cuda_arch="sm_90",
        compile_to="fused",
        remarks=True,
    )
    assert module.stats["attention_ops"] == 1
    assert any("not all f16 or all bf16" in r.message for r in module.remarks)
    with new_session().context:
        assert specs_in(ir.Module.parse(module.mlir).operation) == []


def test_sm90_module_compiles_with_the_kernel_inside() -> None:
    model = Attention(4, 128, 128, 64, mask="causal-iota", upcast=True).eval()
    q, k, v = (torch.randn(1, 4, 128, 64).to(F16) for _ in range(3))
    module = fc.compile(model, example_args=(q, k, v), target="cuda", cuda_arch="sm_90")
    assert module.vmfb and module.stats["dispatches"] == 1


def test_decode_step_compiles_to_split_kv_and_combine() -> None:
    """One query row against 4096 keys: the keys are split over programs and a second
    dispatch merges their results; both kernels are in the module."""
    model = Attention(8, 1, 4096, 128, gqa="repeat_interleave", kv_heads=2).eval()
    q = torch.randn(1, 8, 1, 128).to(F16)
    k, v = (torch.randn(1, 2, 4096, 128).to(F16) for _ in range(2))
    module = fc.compile(model, example_args=(q, k, v), target="cuda", cuda_arch="sm_90")
    assert module.vmfb and module.stats["dispatches"] == 2
    assert module.stats["attention_ops"] == 1
    assert any("split-KV 16" in r.message for r in module.remarks), module.remarks


class HeadsInSequenceLayout(torch.nn.Module):
    """Q, K, V as projections give them, (B, N, H·D): heads split before, merged after."""

    def __init__(self, heads: int, causal: bool):
        super().__init__()
        self.heads, self.causal = heads, causal

    def forward(self, xq, xk, xv):
        b, n, width = xq.shape
        h, d = self.heads, width // self.heads

        def split(t):
            return t.view(b, t.shape[1], h, d).transpose(1, 2)

        q, k, v = split(xq), split(xk), split(xv)
        s = q @ k.transpose(-2, -1) / math.sqrt(d)
        if self.causal:
            rows = torch.arange(s.shape[-2])[:, None]
            s = s.masked_fill(torch.arange(s.shape[-1])[None, :] > rows, float("-inf"))
        y = torch.softmax(s.float(), dim=-1).to(xq.dtype) @ v
        return y.transpose(1, 2).reshape(b, n, width)


@pytest.mark.parametrize("causal", [False, True])
def test_kernel_reads_and_writes_the_model_layout(causal: bool) -> None:
    """No head transposes or K transpose are materialised: one dispatch in all."""
    torch.manual_seed(0)
    b, n, h, d = 2, 96, 4, 32
    model = HeadsInSequenceLayout(h, causal).eval()
    xq, xk, xv = (torch.randn(b, n, h * d).to(F16) for _ in range(3))
    flow = fc.compile(
        model, example_args=(xq, xk, xv), target="cuda", cuda_arch="sm_90", compile_to="flow"
    )
    assert flow.stats["dispatches"] == 1
    spec = _compile_spec(model, (xq, xk, xv))
    sequence_layout = (n * h * d, d, h, h * d, 1)  # (batch // H)·SB + (batch % H)·SH + ...
    assert spec.views == (sequence_layout,) * 5
    got = run_interpreted(spec, xq, xk, xv)  # the kernel writes (B, N, H, D)
    with torch.no_grad():
        want = model.double()(xq.double(), xk.double(), xv.double())
    assert rel_error(got.reshape(want.shape), want) < BOUND[F16]


class FusedQKV(torch.nn.Module):
    """GPT-2's attention: Q, K and V split off one (B, N, 3·H·D) projection."""

    def __init__(self, heads: int, causal: bool) -> None:
        super().__init__()
        self.heads, self.causal = heads, causal

    def forward(self, qkv):
        b, n, width = qkv.shape
        q, k, v = (
            x.view(b, n, self.heads, -1).transpose(1, 2) for x in qkv.split(width // 3, dim=-1)
        )
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return y.transpose(1, 2).reshape(b, n, width // 3)


@pytest.mark.parametrize("causal", [False, True])
def test_slices_of_a_fused_projection_are_read_where_they_are(causal: bool) -> None:
    """Q, K and V cut from one tensor: the kernel reads each from its start in that
    tensor, with its rows 3·H·D apart; IREE copies no slice (one dispatch in all)."""
    torch.manual_seed(0)
    b, n, h, d = 2, 96, 4, 32
    model = FusedQKV(h, causal).eval()
    qkv = torch.randn(b, n, 3 * h * d).to(F16)
    flow = fc.compile(
        model, example_args=(qkv,), target="cuda", cuda_arch="sm_90", compile_to="flow"
    )
    assert flow.stats["dispatches"] == 1 and flow.stats["attention_ops"] == 1
    spec = _dispatch_inputs(flow)[0]
    assert spec.offsets == (0, h * d, 2 * h * d)
    rows = 3 * h * d  # a token's Q, K and V
    assert spec.views[:3] == ((n * rows, d, h, rows, 1),) * 3
    got = run_interpreted(spec, qkv, qkv, qkv)
    with torch.no_grad():
        want = model(qkv.double())
    assert rel_error(got.reshape(want.shape), want) < BOUND[F16]


def test_slices_of_a_fused_projection_read_through_tma_descriptors() -> None:
    """Over more than 2048 keys K and V are read through descriptors that start at their
    slices (16-byte aligned starts)."""
    torch.manual_seed(0)
    b, n, h, d = 1, 2112, 2, 32
    model = FusedQKV(h, causal=True).eval()
    qkv = torch.randn(b, n, 3 * h * d).to(F16)
    spec = dataclasses.replace(_compile_spec(model, (qkv,)), persistent=3, splits=1)
    assert spec.tma_kv and spec.offsets == (0, h * d, 2 * h * d)
    got = run_interpreted(spec, qkv, qkv, qkv)
    with torch.no_grad():
        want = model(qkv.double())
    assert rel_error(got.reshape(want.shape), want) < BOUND[F16]


def test_heads_in_sequence_layout_keeps_the_template_kernel() -> None:
    """(B, N, H, D) operands are not contiguous per head: the template reads them in place."""
    b, n, h, d = 1, 2048, 16, 128
    xq, xk, xv = (torch.randn(b, n, h * d).to(F16) for _ in range(3))
    spec = _compile_spec(HeadsInSequenceLayout(h, causal=True).eval(), (xq, xk, xv))
    assert spec.persistent and not spec.warp_specialized


def test_dynamic_sequence_length_one_kernel_two_lengths() -> None:
    """Sequence lengths dynamic in the model: the kernel reads them at run time."""
    torch.manual_seed(0)
    model = Attention(4, 128, 128, 64, mask="causal-iota", upcast=True).eval()
    n = torch.export.Dim("n", min=2, max=4096)
    example = tuple(torch.randn(1, 4, 128, 64).to(F16) for _ in range(3))
    fused = fc.compile(
        model,
        example_args=example,
        dynamic_shapes=({2: n},) * 3,
        target="cuda",
        cuda_arch="sm_90",
        compile_to="fused",
    )
    with new_session().context:
        (spec,) = specs_in(ir.Module.parse(fused.mlir).operation)
    assert spec.dynamic and spec.causal_offset == 0
    for length in (77, 130):
        q, k, v = (torch.randn(1, 4, length, 64).to(F16) for _ in range(3))
        sizes = torch.tensor([length, length], dtype=torch.int32)
        got = run_interpreted(spec, q, k, v, sizes=sizes)
        with torch.no_grad():
            want = model.double()(q.double(), k.double(), v.double())
        assert rel_error(got.reshape(want.shape), want) < BOUND[F16], f"length {length}"


def _check_computed_mask(model, shape: tuple[int, ...]):
    """Compiles ``model`` for sm_90, runs its kernel (which computes the mask from the
    tensors its producers start from) under the interpreter against PyTorch; the Spec."""
    b, h, hkv, nq, nk, d = shape
    q = torch.randn(b, h, nq, d).to(F16)
    k, v = (torch.randn(b, hkv, nk, d).to(F16) for _ in range(2))
    fused = fc.compile(
        model, example_args=(q, k, v), target="cuda", cuda_arch="sm_90", compile_to="fused"
    )
    spec, shapes = _dispatch_inputs(fused)
    assert spec.mask_expr and spec.mask_dtype is None
    tensors = {t.numel(): t for t in [*model.buffers(), *model.parameters()]}
    leaves = []
    for shape_, pointer in zip(shapes[3:], spec.mask_inputs, strict=False):
        if b > 1:  # with one batch an (H, Nq, Nk) bias is as large as the mask
            assert math.prod(shape_) < b * h * nq * nk, f"a mask-sized input {shape_}"
        source = tensors[math.prod(shape_)].detach().reshape(shape_)
        leaves.append(source.to(torch.int8) if pointer in ("*i8", "*i1") else source.float())
    got = run_interpreted(
        spec, q.reshape(b * h, nq, d), k.reshape(-1, nk, d), v.reshape(-1, nk, d), mask=leaves
    )
    with torch.no_grad():
        want = model.double()(q.double(), k.double(), v.double())
    assert rel_error(got.reshape(want.shape), want) < BOUND[F16]
    return spec


def _scattered(keep: torch.Tensor) -> torch.Tensor:
    """A boolean buffer of ``keep``'s shape that is no causal pattern: random keys kept,
    the first key of every row among them."""
    scattered = torch.rand(keep.shape) < 0.6
    scattered[..., 0] = True
    return scattered


@pytest.mark.parametrize(
    "mask",
    [
        "causal-tril",
        "causal-where",
        "causal-sliced",
        "causal-additive",
        "alibi",
        "relative-bias",
        "softcap-causal",
    ],
)
def test_mask_computed_in_the_kernel_from_its_producers(mask: str) -> None:
    """No (B·H, Nq, Nk) mask: the kernel evaluates the mask's producers per tile and
    reads only the small tensors they start from (a (Nq, Nk) buffer, a slice of a larger
    one, (H, Nq, Nk) biases). The buffers hold no causal pattern (that one is dropped)."""
    torch.manual_seed(0)
    model = Attention(2, 77, 150, 32, mask=mask, upcast=True).eval()
    if hasattr(model, "keep"):
        model.keep = _scattered(model.keep)
    if mask == "causal-additive":
        model.bias = torch.zeros(77, 150).masked_fill(~_scattered(model.bias), -math.inf)
    spec = _check_computed_mask(model, (2, 2, 2, 77, 150, 32))
    assert spec.causal_offset is None or mask in ("softcap-causal", "alibi", "relative-bias")


@pytest.mark.parametrize("mask", ["alibi", "causal-tril"])
def test_computed_mask_with_gqa_heads_packed(mask: str) -> None:
    """Decoding-like shapes with GQA: the rows of 4 heads share a row block, so the
    computed mask is evaluated with a different head per row."""
    torch.manual_seed(0)
    model = Attention(8, 3, 700, 32, mask=mask, gqa="repeat_kv", kv_heads=2, upcast=True)
    if hasattr(model, "keep"):  # a causal tril would be proven causal and dropped
        model.keep = _scattered(model.keep)
    spec = _check_computed_mask(model.eval(), (1, 8, 2, 3, 700, 32))
    assert spec.pack_gqa and spec.kv_group == 4


def test_padding_mask_input_read_per_key() -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, n, 16).to(F16) for n in (19, 23, 23))
    keep = torch.ones(2, 23, dtype=torch.bool)
    keep[0, 17:] = False
    keep[1, 5:9] = False
    model = PaddingMaskAttention()
    fused = fc.compile(
        model, example_args=(q, k, v, keep), target="cuda", cuda_arch="sm_90", compile_to="fused"
    )
    spec, shapes = _dispatch_inputs(fused)
    assert spec.mask_expr and shapes[3] == [2, 23]  # the (B, Nk) input itself
    got = run_interpreted(
        spec, q.reshape(4, 19, 16), k.reshape(4, 23, 16), v.reshape(4, 23, 16), mask=[keep]
    )
    with torch.no_grad():
        want = model(q.double(), k.double(), v.double(), keep)
    assert rel_error(got.reshape(want.shape), want) < BOUND[F16]


@pytest.mark.parametrize("separate", [False, True], ids=["one-length", "q-and-keys"])
def test_padding_mask_input_of_a_dynamic_length_read_per_key(separate: bool) -> None:
    """The (B, N) padding input of a dynamic length is read by the kernel at the length
    of the call (its row stride n_k), not made a (B, N, N) mask: its length is the keys'
    by construction (one torch.export Dim). With queries and keys of two Dims, both
    names reach the kernel and the padding takes the keys'."""
    torch.manual_seed(0)
    model = PaddingMaskAttention()
    n, m = torch.export.Dim("n", min=2, max=512), torch.export.Dim("m", min=2, max=512)
    example = [torch.randn(2, 2, 23, 16).to(F16) for _ in range(3)]
    example.append(torch.ones(2, 23, dtype=torch.bool))
    fused = fc.compile(
        model,
        example_args=tuple(example),
        dynamic_shapes=({2: m if separate else n}, {2: n}, {2: n}, {1: n}),
        target="cuda",
        cuda_arch="sm_90",
        compile_to="fused",
    )
    with new_session().context:
        (spec,) = specs_in(ir.Module.parse(fused.mlir).operation)
    assert spec.dynamic and spec.mask_expr and spec.mask_dtype is None
    assert "n_k.to(tl.int64)" in spec.mask_expr  # strides in 64 bits: n_k * n_q overflows
    for nq, nk in ((19, 45), (70, 70)) if separate else ((45, 45), (70, 70)):
        q, k, v = (torch.randn(2, 2, length, 16).to(F16) for length in (nq, nk, nk))
        keep = torch.rand(2, nk) < 0.7
        keep[:, 0] = True
        sizes = torch.tensor([nq, nk], dtype=torch.int32)
        got = run_interpreted(
            spec, *(x.reshape(4, -1, 16) for x in (q, k, v)), mask=[keep], sizes=sizes
        )
        with torch.no_grad():
            want = model(q.double(), k.double(), v.double(), keep)
        assert rel_error(got.reshape(want.shape), want) < BOUND[F16], (nq, nk)


class FiveInputMask(torch.nn.Module):
    """A mask and-ing five (B, Nk) inputs: more tensors than the kernel computes from."""

    def forward(self, q, k, v, *keeps):
        keep = keeps[0]
        for other in keeps[1:]:
            keep = keep & other
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])


def test_a_mask_read_from_memory_says_why() -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 40, 16).to(F16) for _ in range(3))
    keeps = [torch.rand(2, 40) < 0.9 for _ in range(5)]
    fused = fc.compile(
        FiveInputMask(), example_args=(q, k, v, *keeps), target="cuda", cuda_arch="sm_90",
        compile_to="fused", remarks=True,
    )  # fmt: skip
    spec, _ = _dispatch_inputs(fused)
    assert spec.mask_dtype is not None and spec.mask_expr is None
    lowered = [r.message for r in fused.remarks if "generated sm_90 kernel" in r.message]
    assert "its mask read from memory (more than 4 tensors feed the mask)" in lowered[0]


class DecodePosition(torch.nn.Module):
    """A decode step over a cache: keys after ``position`` (a (1,) input) masked."""

    def forward(self, q, k, v, position):
        later = torch.arange(k.shape[2]) > position
        s = (q @ k.transpose(-2, -1)).masked_fill(later, float("-inf"))
        return torch.softmax(s / math.sqrt(q.shape[-1]), dim=-1) @ v


def test_mask_from_a_one_element_input_is_read_as_a_scalar() -> None:
    """A mask whose input has one element per program (the decoding position) reads it
    through a scalar pointer (a tile's mask on it failed Triton's compile)."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, n, 32).to(F16) for n in (1, 300, 300))
    position = torch.tensor([137])
    model = DecodePosition()
    fused = fc.compile(
        model, example_args=(q, k, v, position), target="cuda", cuda_arch="sm_90",
        compile_to="fused",
    )  # fmt: skip
    spec, shapes = _dispatch_inputs(fused)
    assert spec.mask_expr and shapes[3] == [1]
    got = run_interpreted(
        spec, q.reshape(8, 1, 32), k.reshape(8, 300, 32), v.reshape(8, 300, 32), mask=[position]
    )
    with torch.no_grad():
        want = model(q.double(), k.double(), v.double(), position)
    assert rel_error(got.reshape(want.shape), want) < BOUND[F16]


def test_rows_with_every_key_masked_give_zero() -> None:
    """A sequence with no key left: 0 on its rows (SDPA's and FlashAttention's answer),
    not the 0/0 of softmax written out."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, n, 16).to(F16) for n in (19, 23, 23))
    keep = torch.ones(2, 23, dtype=torch.bool)
    keep[0] = False
    model = PaddingMaskAttention()
    fused = fc.compile(
        model, example_args=(q, k, v, keep), target="cuda", cuda_arch="sm_90", compile_to="fused"
    )
    spec, _ = _dispatch_inputs(fused)
    got = run_interpreted(
        spec, q.reshape(4, 19, 16), k.reshape(4, 23, 16), v.reshape(4, 23, 16), mask=[keep]
    ).reshape(2, 2, 19, 16)
    assert (got[0] == 0).all()
    with torch.no_grad():
        want = model(q[1:].double(), k[1:].double(), v[1:].double(), keep[1:])
    assert rel_error(got[1:], want) < BOUND[F16]


def test_masked_fill_drops_nan_and_inf_scores_at_masked_keys() -> None:
    """``masked_fill(m, -inf)`` replaces the score: garbage keys past a cache's length
    (NaN, inf) reach no row, where adding the -inf mask would give NaN."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, n, 16).to(F16) for n in (19, 23, 23))
    keep = torch.ones(2, 23, dtype=torch.bool)
    keep[:, 17:] = False
    model = PaddingMaskAttention()
    fused = fc.compile(
        model, example_args=(q, k, v, keep), target="cuda", cuda_arch="sm_90", compile_to="fused"
    )
    spec, _ = _dispatch_inputs(fused)
    assert spec.mask_replaces
    k[:, :, 17:19], k[:, :, 19:] = float("nan"), float("inf")
    got = run_interpreted(
        spec, q.reshape(4, 19, 16), k.reshape(4, 23, 16), v.reshape(4, 23, 16), mask=[keep]
    ).reshape(2, 2, 19, 16)
    with torch.no_grad():
        want = model(q.double(), k.double(), v.double(), keep)
    assert rel_error(got, want) < BOUND[F16]


class _HalfFillPadding(torch.nn.Module):
    """transformers' eager fp16 attention: ``finfo(f16).min`` added to the fp16 scores where
    a key is padding, softmax upcast to f32."""

    def forward(self, q, k, v, keep):
        s = (q @ k.transpose(-2, -1)) * 0.25
        fill = torch.zeros_like(s).masked_fill(~keep[:, None, None, :], torch.finfo(s.dtype).min)
        return torch.softmax(s + fill, dim=-1, dtype=torch.float32).to(q.dtype) @ v


def test_fp16_fill_rows_with_no_key_get_pytorchs_equal_weights() -> None:
    """``s + finfo(f16).min`` rounds to the fill in fp16: a sequence with no key gets
    equal weights in PyTorch, and so in the kernel (the fill swamps the score)."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, n, 16).to(F16) for n in (19, 23, 23))
    keep = torch.ones(2, 23, dtype=torch.bool)
    keep[0] = False
    keep[1, 20:] = False
    model = _HalfFillPadding()
    fused = fc.compile(
        model, example_args=(q, k, v, keep), target="cuda", cuda_arch="sm_90", compile_to="fused"
    )
    spec, shapes = _dispatch_inputs(fused)
    masks = [keep if spec.mask_expr else None]
    got = run_interpreted(
        spec, q.reshape(4, 19, 16), k.reshape(4, 23, 16), v.reshape(4, 23, 16), mask=masks
    ).reshape(2, 2, 19, 16)
    with torch.no_grad():
        want = model(q.double(), k.double(), v.double(), keep)
    want[0] = v[0].double().mean(dim=1, keepdim=True)  # PyTorch fp16: equal weights
    assert rel_error(got, want) < BOUND[F16]


def test_kernel_path_without_triton_says_what_to_install(tmp_path) -> None:
    """On a machine without Triton, sm_90 compilation fails with the fix, not an ImportError."""
    script = tmp_path / "no_triton.py"
    examples = str(ROOT / "examples")
    script.write_text(
        "import sys\n"
        "sys.modules['triton'] = None  # as if not installed\n"
        "import torch\n"
        f"sys.path.insert(0, {examples!r})\n"
        "from variants import Attention\n"
        "import fusion_compiler as fc\n"
        "x = tuple(torch.randn(1, 2, 64, 32).half() for _ in range(3))\n"
        "try:\n"
        "    fc.compile(Attention(2, 64, 64, 32), example_args=x,\n"
        "               target='cuda', cuda_arch='sm_90')\n"
        "except fc.FusionCompilerError as e:\n"
        "    print(e)\n"
    )
    env = {**os.environ, "FUSION_COMPILER_CACHE": str(tmp_path / "cache")}  # no cached cubin
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
    assert "needs Triton: pip install 'fusion-compiler[kernels]'" in done.stdout, done.stderr
    assert "cuda_arch='sm_80'" in done.stdout


def test_autotune_without_a_gpu_says_so() -> None:
    done = tool("fusion-autotune", check=False)
    assert done.returncode == 1 and "no CUDA GPU here" in done.stderr


def test_tma_descriptors_read_kv_in_the_models_head_layout() -> None:
    """K and V still in (B, N, H, D) order (before a head transpose): a 4-d descriptor
    whose tile is picked by (batch // H, batch % H)."""
    from fusion_compiler.backends.triton import schedules

    heads, n, d = 2, 2100, 32
    spec = schedules.plain_spec(schedules.Tiles(64, 64, 4, 3, persistent=3), heads, n, d, True)
    bnhd = (n * heads * d, d, heads, heads * d, 1)
    spec = dataclasses.replace(spec, views=(spec.views[0], bnhd, bnhd, *spec.views[3:]))
    assert spec.tma_kv
    torch.manual_seed(0)
    q = torch.randn(heads, n, d).to(F16)
    k, v = (torch.randn(1, n, heads, d).to(F16) for _ in range(2))
    got = run_interpreted(spec, q, k, v)
    kk, vv = (x[0].transpose(0, 1).double() for x in (k, v))
    want = torch.nn.functional.scaled_dot_product_attention(q.double(), kk, vv, is_causal=True)
    assert rel_error(got, want) < BOUND[F16]
