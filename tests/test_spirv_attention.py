"""fusion-spirv-attention: fused attention as one generated SPIR-V kernel on Vulkan.

Compiling needs glslangValidator (apt install glslang-tools); running needs a Vulkan
device: on machines without a GPU, Mesa's llvmpipe (apt install mesa-vulkan-drivers).
Tests skip what their machine lacks. Sizes stay small: llvmpipe computes this shader
wrongly once a workgroup loops over more than about 440 keys at D=64 (the NVIDIA driver
does not; benchmarks/results/vulkan_h200.md has the H200 runs of every variant), and
head dims stay at 64 and above: llvmpipe takes over two minutes to build the D=32 shader
(fully unrolled), a second or so for the others.
"""

from __future__ import annotations

import shutil

import iree.runtime as rt
import pytest
import torch
from conftest import ANY_VULKAN, rel_error
from variants import Attention, PaddingMaskAttention

import fusion_compiler as fc
from fusion_compiler.backends.vulkan import glsl as spirv
from fusion_compiler.backends.vulkan.spec import VulkanSpec, block_n
from fusion_compiler.errors import WrongDeviceError

# compiles many models: left out of the edit loop (-m 'not slow'), run in CI
pytestmark = pytest.mark.slow


def _vulkan_device() -> bool:
    try:
        return bool(rt.get_driver("vulkan").query_available_devices())
    except Exception:  # no loader, no driver: no device
        return False


needs_glslang = pytest.mark.skipif(
    shutil.which(spirv.COMPILER) is None, reason="glslangValidator not installed"
)
needs_vulkan = pytest.mark.skipif(not _vulkan_device(), reason="no Vulkan device")
BOUND = {torch.float32: 1e-4, torch.float16: 3e-3, torch.bfloat16: 2e-2}

# name -> (Attention kwargs, (B, H, Hkv, Nq, Nk, D), dtype)
CASES = {
    "plain_f32": (dict(), (2, 2, 2, 77, 130, 64), torch.float32),
    "causal_f16": (dict(mask="causal-iota", upcast=True), (1, 2, 2, 100, 100, 64), torch.float16),
    "causal_cross_f32": (dict(mask="causal-tril"), (1, 2, 2, 40, 150, 64), torch.float32),
    "alibi_f32": (dict(mask="alibi"), (1, 2, 2, 40, 90, 64), torch.float32),
    "gqa_f16": (
        dict(gqa="repeat_interleave", kv_heads=1, upcast=True),
        (1, 4, 1, 33, 70, 64),
        torch.float16,
    ),
    "scale_on_q_f32": (dict(scale_on="q"), (1, 2, 2, 50, 60, 64), torch.float32),
    "head_dim_128_f16": (dict(), (1, 1, 1, 20, 64, 128), torch.float16),
    "head_dim_256_f32": (dict(), (1, 1, 1, 16, 40, 256), torch.float32),
    "softcap_causal_f32": (dict(mask="softcap-causal"), (1, 2, 2, 60, 60, 64), torch.float32),
    # key blocks before the window skipped, the mask not read (remark checked below)
    "sliding_window_f32": (dict(mask="sliding-window"), (1, 2, 2, 200, 200, 64), torch.float32),
    "sliding_window_finfo_min_f16": (
        dict(mask="sliding-window-finfo-min", upcast=True),
        (1, 2, 2, 150, 300, 64),
        torch.float16,
    ),
    "causal_bf16": (
        dict(mask="causal-iota", upcast=True),
        (1, 2, 2, 70, 70, 64),
        torch.bfloat16,
    ),
    # Swin-v2's cosine attention: a logit scale per head, folded into Q (f32: IREE's own
    # f16 code for a target without 16-bit storage is wrong under llvmpipe, targets.md)
    "scale_per_head_f32": (
        dict(scale_on="scores-per-head", mask="causal-iota"),
        (1, 2, 2, 70, 70, 64),
        torch.float32,
    ),
}


def _compile(kwargs, shape, dtype, **options):
    b, h, hkv, nq, nk, d = shape
    torch.manual_seed(0)
    model = Attention(h, nq, nk, d, **kwargs).eval().to(dtype)
    sizes = [(b, h, nq, d), (b, hkv, nk, d), (b, hkv, nk, d)]
    example = tuple(torch.randn(s).to(dtype) for s in sizes)
    options = {"vulkan_target": ANY_VULKAN, **options}
    return model, example, fc.compile(model, example_args=example, target="vulkan", **options)


@needs_glslang
def test_one_dispatch_per_attention_with_a_remark() -> None:
    _, _, module = _compile(*CASES["causal_f16"], compile_to="flow")
    assert module.stats["attention_ops"] == 1 and module.stats["dispatches"] == 1
    assert any("generated Vulkan kernel" in r.message for r in module.remarks), module.remarks


@needs_glslang
@needs_vulkan
@pytest.mark.parametrize("name", sorted(CASES))
def test_vulkan_kernel_matches_pytorch(name: str) -> None:
    kwargs, shape, dtype = CASES[name]
    model, example, module = _compile(kwargs, shape, dtype)
    assert any("generated Vulkan kernel" in r.message for r in module.remarks), module.remarks
    fresh = tuple(torch.randn_like(x) for x in example)
    with torch.no_grad():
        want = model.double()(*(x.double() for x in fresh))
    got = fc.load(module, device="vulkan")(*fresh)
    assert got.dtype == dtype
    assert rel_error(got, want) < BOUND[dtype]
    if "window" in name:
        said = [r.message for r in module.remarks if "Vulkan kernel" in r.message]
        assert "sliding window of" in said[0] and "mask read" not in said[0], said


@needs_glslang
@needs_vulkan
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_slices_of_a_fused_projection_are_read_where_they_are(dtype) -> None:
    """GPT-2's attention: Q, K and V split off one (B, N, 3·H·D) tensor; the shader reads
    each from where it starts there: one dispatch, no copy of a slice."""
    from test_kernel_attention import FusedQKV

    torch.manual_seed(0)
    model = FusedQKV(4, causal=True).eval().to(dtype)
    qkv = torch.randn(2, 40, 3 * 4 * 16).to(dtype)
    module = fc.compile(model, example_args=(qkv,), target="vulkan", vulkan_target=ANY_VULKAN)
    assert module.stats["dispatches"] == 1, module.remarks
    fresh = torch.randn_like(qkv)
    got = fc.load(module, device="vulkan")(fresh)
    with torch.no_grad():
        want = model.double()(fresh.double())
    assert rel_error(got, want) < BOUND[dtype]


@needs_glslang
def test_head_dim_above_256_is_left_for_decomposition_and_says_why() -> None:
    _, _, module = _compile(dict(), (1, 1, 1, 8, 8, 512), torch.float32, compile_to="fused")
    reasons = [r.message for r in module.remarks if "left for decomposition" in r.message]
    assert reasons and "head dim 512 above 256" in reasons[0], module.remarks


def test_without_glslang_attention_is_decomposed_with_a_remark(monkeypatch) -> None:
    monkeypatch.setattr(spirv, "compiler", lambda: None)
    _, _, module = _compile(*CASES["plain_f32"], compile_to="fused")
    assert any("glslangValidator not found" in r.message for r in module.remarks)


@needs_glslang
@needs_vulkan
def test_dynamic_sequence_length_one_kernel_three_lengths() -> None:
    """Exported with a dynamic N: the kernel reads the lengths from a sizes binding and
    its grid follows n_q; one compile runs at three lengths."""
    torch.manual_seed(0)
    model = Attention(4, 128, 128, 64, mask="causal-iota", upcast=True).eval().half()
    n = torch.export.Dim("n", min=2, max=4096)
    example = tuple(torch.randn(1, 4, 128, 64).half() for _ in range(3))
    dynamic = ({2: n},) * 3
    module = fc.compile(
        model,
        example_args=example,
        dynamic_shapes=dynamic,
        target="vulkan",
        vulkan_target=ANY_VULKAN,
    )
    assert any("generated Vulkan kernel" in r.message for r in module.remarks), module.remarks
    run = fc.load(module, device="vulkan")
    for length in (5, 77, 200):
        fresh = tuple(torch.randn(1, 4, length, 64).half() for _ in range(3))
        with torch.no_grad():
            want = model.double()(*(x.double() for x in fresh))
        model.half()
        assert rel_error(run(*fresh), want) < BOUND[torch.float16], f"length {length}"


class ByteIdsAndChunks(torch.nn.Module):
    """A mask from a uint8 input read as unsigned (ids of 200 and above hidden: a byte
    the shader holds sign-extended must read back as 200-255) and from integer floor
    division of positions (chunks of 100 keys, not a power of two)."""

    def forward(self, q, k, v, ids):
        n = q.shape[-2]
        rows, cols = torch.arange(n)[:, None], torch.arange(n)[None, :]
        hidden = (ids.to(torch.int64) >= 200)[:, None, None, :] | (rows // 100 != cols // 100)
        s = (q @ k.transpose(-2, -1)) * 0.125
        return torch.softmax(s.masked_fill(hidden, float("-inf")), dim=-1) @ v


@needs_glslang
@needs_vulkan
def test_mask_of_unsigned_bytes_and_floor_division_is_computed_exactly() -> None:
    model = ByteIdsAndChunks().eval()

    def inputs() -> tuple:
        qkv = tuple(torch.randn(2, 2, 300, 64) for _ in range(3))
        ids = torch.randint(0, 200, (2, 300), dtype=torch.uint8)
        ids[:, 1::3] = torch.randint(200, 256, (2, 100), dtype=torch.uint8)
        return (*qkv, ids)

    module = fc.compile(model, example_args=inputs(), target="vulkan", vulkan_target=ANY_VULKAN)
    said = [r.message for r in module.remarks if "Vulkan kernel" in r.message]
    assert "mask computed in the kernel from 1 tensor" in said[0], said
    fresh = inputs()
    with torch.no_grad():
        want = model(*(x.double() if x.is_floating_point() else x for x in fresh))
    assert rel_error(fc.load(module, device="vulkan")(*fresh), want) < 1e-5


@needs_glslang
@needs_vulkan
def test_padding_mask_input_is_computed_in_the_kernel_at_three_lengths() -> None:
    """A (B, N) keep mask of the dynamic length: the shader reads it at the call's
    length (no (B, N, N) mask is made); the first sequence padded from a random point
    on, the last one not at all. Without 8-bit storage the mask is read as 32-bit words,
    and a (2, 5) mask is 10 bytes: its last two (the last sequence's keys 3 and 4) sit in
    a word that ends past the buffer, read as zeros unless the mask is padded."""
    model = PaddingMaskAttention().eval()
    n = torch.export.Dim("n", min=2, max=4096)

    def inputs(length: int) -> tuple:
        qkv = tuple(torch.randn(2, 4, length, 64).half() for _ in range(3))
        kept = torch.tensor([[int(torch.randint(1, length + 1, ()))], [length]])
        return (*qkv, torch.arange(length)[None, :] < kept)

    dynamic = ({2: n}, {2: n}, {2: n}, {1: n})
    module = fc.compile(
        model,
        example_args=inputs(128),
        dynamic_shapes=dynamic,
        target="vulkan",
        vulkan_target=ANY_VULKAN,
    )
    said = [r.message for r in module.remarks if "Vulkan kernel" in r.message]
    assert len(said) == 1 and "mask computed in the kernel from 1 tensor" in said[0], said
    run = fc.load(module, device="vulkan")
    for length in (5, 77, 200):
        fresh = inputs(length)
        with torch.no_grad():
            want = model(*(x.double() if x.is_floating_point() else x for x in fresh))
        assert rel_error(run(*fresh), want) < BOUND[torch.float16], f"length {length}"


class BiasInputAttention(torch.nn.Module):
    """An additive (1, 1, Nq, Nk) bias given as an input."""

    def forward(self, q, k, v, bias):
        return torch.softmax(q @ k.transpose(-2, -1) / 8.0 + bias, dim=-1) @ v


@needs_glslang
@needs_vulkan
@pytest.mark.parametrize("mask", ["bool_2x5", "f16_5x5"])
def test_a_mask_input_of_part_of_a_word_is_read_to_its_last_element(mask: str) -> None:
    """Without 8- and 16-bit storage, a (2, 5) boolean mask (10 bytes) or a (5, 5) f16
    bias (50 bytes) ends inside a 32-bit word; the shader reads them as words, and a word
    past the buffer's end reads as zeros: the last sequence's last keys dropped, the
    last bias taken as 0. Static sizes."""
    torch.manual_seed(0)
    qkv = tuple(torch.randn(2 if mask == "bool_2x5" else 1, 2, 5, 64).half() for _ in range(3))
    if mask == "bool_2x5":
        model = PaddingMaskAttention().eval()
        last = torch.tensor([True, False, True, True, True])
        extra = torch.stack([torch.tensor([True, True, False, False, False]), last])
    else:
        model = BiasInputAttention().eval()
        extra = (3 * torch.randn(1, 1, 5, 5)).half()
        extra[..., -1, -1] = 4.0  # what a zero in its place would change
    example = (*qkv, extra)
    module = fc.compile(model, example_args=example, target="vulkan", vulkan_target=ANY_VULKAN)
    assert any("generated Vulkan kernel" in r.message for r in module.remarks), module.remarks
    with torch.no_grad():
        want = model(*(x.double() if x.is_floating_point() else x for x in example))
    assert rel_error(fc.load(module, device="vulkan")(*example), want) < BOUND[torch.float16]


@needs_glslang
@needs_vulkan
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_an_f16_output_of_an_odd_count_is_written_to_its_last_element(dynamic: bool) -> None:
    """Without 16-bit storage the shader stores f16 pairs as 32-bit words; with head dim
    9 and 3 heads of 5 rows the output has an odd count, and the last word would end
    past the buffer: the kernel writes a flat output one element longer, sliced. (Left
    to IREE instead, its code for this target was off by 1e4.)"""
    model = PaddingMaskAttention().eval()
    n = torch.export.Dim("n", min=2, max=4096)

    def inputs(length: int) -> tuple:
        qkv = tuple(torch.randn(1, 3, length, 9).half() for _ in range(3))
        return (*qkv, torch.arange(length)[None, :] < length - 1)

    dims = ({2: n}, {2: n}, {2: n}, {1: n}) if dynamic else None
    module = fc.compile(
        model, inputs(5), dynamic_shapes=dims, target="vulkan", vulkan_target=ANY_VULKAN
    )
    assert any("generated Vulkan kernel" in r.message for r in module.remarks), module.remarks
    run = fc.load(module, device="vulkan")
    for length in (5, 7) if dynamic else (5,):
        fresh = inputs(length)
        with torch.no_grad():
            want = model(*(x.double() if x.is_floating_point() else x for x in fresh))
        assert rel_error(run(*fresh), want) < BOUND[torch.float16], length


@needs_glslang
@needs_vulkan
def test_calls_on_fresh_inputs_reuse_their_device_memory() -> None:
    """Each blocking call copies its inputs into the device memory of a finished call of
    that size (IREE 3.13 keeps every buffer a Vulkan dispatch read: on an H100 each call
    on fresh inputs held on to them until the device ran out), and still reads the
    inputs it was given, of every length."""
    model = PaddingMaskAttention().eval()
    n = torch.export.Dim("n", min=2, max=4096)

    def inputs(length: int) -> tuple:
        qkv = tuple(torch.randn(1, 2, length, 32).half() for _ in range(3))
        return (*qkv, torch.arange(length)[None, :] < torch.randint(1, length + 1, (1, 1)))

    dynamic = ({2: n}, {2: n}, {2: n}, {1: n})
    module = fc.compile(
        model, example_args=inputs(64), dynamic_shapes=dynamic, target="vulkan",
        vulkan_target=ANY_VULKAN,
    )  # fmt: skip
    run = fc.load(module, device="vulkan")["main"]
    for length in (64, 64, 64, 100, 64, 100):
        fresh = inputs(length)
        with torch.no_grad():
            want = model(*(x.double() if x.is_floating_point() else x for x in fresh))
        assert rel_error(run(*fresh), want) < BOUND[torch.float16], f"length {length}"
    # one set of four inputs per length, taken back after each call
    assert sum(map(len, run._spare_inputs.values())) == 8


class _Scaled(torch.nn.Module):
    def forward(self, x, scale, shift):
        return x * scale + shift.float()


@needs_vulkan
def test_scalar_and_unsigned_inputs_reach_the_device() -> None:
    """0-d and unsigned inputs go through the staging copy as they are."""
    args = (torch.randn(4, 8), torch.tensor(0.5), torch.arange(8, dtype=torch.uint8))
    module = fc.compile(_Scaled(), example_args=args, target="vulkan", vulkan_target=ANY_VULKAN)
    run = fc.load(module, device="vulkan")
    fresh = (torch.randn(4, 8), torch.tensor(-2.0), torch.arange(8, 16, dtype=torch.uint8))
    torch.testing.assert_close(run(*fresh), _Scaled()(*fresh))


@needs_vulkan
def test_submitted_calls_reuse_their_inputs_device_memory_once_done() -> None:
    """A submitted call's inputs go into the device memory of a call already waited for,
    as a blocking call's do (it took fresh memory each time, which IREE 3.13 keeps)."""
    args = (torch.randn(4, 8), torch.tensor(0.5), torch.arange(8, dtype=torch.uint8))
    module = fc.compile(_Scaled(), example_args=args, target="vulkan", vulkan_target=ANY_VULKAN)
    run = fc.load(module, device="vulkan")["main"]
    for _ in range(3):
        fresh = (torch.randn(4, 8), torch.randn(()), torch.randint(0, 255, (8,), dtype=torch.uint8))
        torch.testing.assert_close(run.submit(*fresh).result(), _Scaled()(*fresh))
    assert sum(map(len, run._spare_inputs.values())) == 3  # one set, taken back each time


def test_kernel_compiler_missing_says_what_to_install(monkeypatch, tmp_path) -> None:
    """Called directly (the pass checks first and leaves the op with a remark)."""
    monkeypatch.setattr(spirv, "compiler", lambda: None)
    monkeypatch.setenv("FUSION_COMPILER_CACHE", str(tmp_path))  # nothing cached
    view = (64 * 32, 0, 1, 32, 1)
    spec = VulkanSpec(
        dtype="f32",
        mask_dtype=None,
        batch=1,
        n_q=64,
        n_k=64,
        d=32,
        dv=32,
        views=(view,) * 5,
        causal_offset=None,
        qk_scale=0.25,
        score="x",
        block_n=block_n(32, 32),
    )
    with pytest.raises(fc.FusionCompilerError, match="apt install glslang-tools"):
        spirv.compile_kernel(spec)


@needs_vulkan
def test_module_for_another_vendors_gpu_is_refused_at_load() -> None:
    """IREE's SPIR-V for NVIDIA's GPUs (the default target, "pascal") assumes subgroups
    of 32: on another device (llvmpipe's are 8) a LayerNorm's reductions come out wrong,
    so fc.load refuses it, naming the target and the device, before running anything;
    compiled for a target without subgroup operations, the same model is right there."""
    if "NVIDIA" in rt.get_driver("vulkan").query_available_devices()[0]["name"]:
        pytest.skip("the device here is NVIDIA's")
    model = torch.nn.LayerNorm(64).eval()
    x = torch.randn(8, 64)
    module = fc.compile(model, example_args=(x,), target="vulkan")
    with pytest.raises(WrongDeviceError) as refused:
        fc.load(module, device="vulkan")
    assert refused.value.target == "pascal" and refused.value.vendor == "NVIDIA"
    module = fc.compile(model, example_args=(x,), target="vulkan", vulkan_target=ANY_VULKAN)
    with torch.no_grad():
        want = model(x)
    assert rel_error(fc.load(module, device="vulkan")(x), want) < 1e-5
