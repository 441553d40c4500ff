"""The Vulkan shader uses only what its target's devices have (targets.VULKAN_CAPABILITIES).

On vp_android_baseline_2022 (32-bit integers and floats, 32-bit storage) a mask is
computed with 32-bit integers where every value provably fits, int64 inputs it only
compares as pairs of words, narrow buffers are read and written as 32-bit words, and a
mask that computes with int64 inputs is read instead; the SPIR-V asks for no capability
but Shader. Mesa's llvmpipe has every capability, so the shaders of NVIDIA's targets run
here too, through their pipeline.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import ANY_VULKAN, rel_error
from fusion_compiler.dialects.expr import Const, Index, Load, Op
from test_spirv_attention import needs_glslang, needs_vulkan
from variants import PaddingMaskAttention

import fusion_compiler as fc
from fusion_compiler import targets
from fusion_compiler.backends.mask import narrow_problem
from fusion_compiler.pipeline import join_pipeline


def test_every_vulkan_target_passes_its_capabilities_to_the_shader() -> None:
    assert set(targets.VULKAN_CAPABILITIES) == set(targets.VULKAN_TARGETS)
    assert targets.spirv_attention("pascal") == "fusion-spirv-attention{int64=1 fp64=1 b16=1 b8=1}"
    assert targets.spirv_attention("adreno") == "fusion-spirv-attention{int64=0 fp64=0 b16=1 b8=0}"
    assert "fusion-spirv-attention{int64=0 fp64=0 b16=0 b8=0}" in targets.pipeline(
        "vulkan", vulkan_target="vp_android_baseline_2022"
    )


def _product(a: int, b: int) -> Op:
    return Op("arith.muli", (Index(a), Index(b)), "index")


def test_32_bit_integers_only_where_every_value_fits() -> None:
    """row * key fits 32 bits for 1024 x 1024, not for 65536 x 65536; the offsets of a
    read count too, as do the sizes a dynamic length may reach and the inputs' types."""
    assert narrow_problem(_product(1, 2), (1, 1024, 1024), {}) is None
    assert "may reach 4294836225" in narrow_problem(_product(1, 2), (1, 65536, 65536), {})
    assert "without a maximum" in narrow_problem(_product(1, 2), (1, None, 1024), {})
    keep = Load(0, (Index(0), Index(2)), "i1", (40000, 70000))
    assert "offset" in narrow_problem(keep, (40000, 1, 70000), {0: [40000, 70000]})
    assert narrow_problem(keep, (4, 1, 70000), {0: [4, 70000]}) is None
    ids = Load(0, (Index(0), Index(2)), "i64", (4, 100))
    same = Op("arith.cmpi", (ids, Const(3, "i64")), "i1", "eq")
    assert narrow_problem(same, (4, 1, 100), {0: [4, 100]}) is None  # compared: two words
    moved = Op("arith.cmpi", (Op("arith.addi", (ids, ids), "i64"), Const(3, "i64")), "i1", "eq")
    assert "i64 used other than compared" in narrow_problem(moved, (4, 1, 100), {0: [4, 100]})
    # an i32 op wraps as GLSL's int does: any value is exact
    wide = Op("arith.muli", (Load(0, (Index(2),), "i32", (100,)), Const(1 << 20, "i32")), "i32")
    assert narrow_problem(wide, (1, 1, 100), {0: [100]}) is None
    # a distance |row - key| (ModernBERT's local window) is at most the longer size
    distance = Op("math.absi", (Op("arith.subi", (Index(1), Index(2)), "i64"),), "i64")
    near = Op("arith.cmpi", (distance, Const(4, "i64")), "i1", "sle")
    assert narrow_problem(near, (1, 1024, 1024), {}) is None
    assert "may reach" in narrow_problem(
        Op("arith.muli", (distance, distance), "i64"), (1, 65536, 65536), {}
    )


class PrefixLM(torch.nn.Module):
    """Every query sees the first 100 keys and those up to itself."""

    def forward(self, q, k, v):
        rows, cols = torch.arange(q.shape[-2])[:, None], torch.arange(k.shape[-2])[None, :]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=(cols <= rows) | (cols < 100))


class OrderedIds(torch.nn.Module):
    """int64 ids (torch's default integer type) compared for order: a key is seen by the
    queries of higher or equal ids, and by all where its id is above -5."""

    def forward(self, q, k, v, ids):
        keep = (ids[:, None, None, :] <= ids[:, None, :, None]) | (ids[:, None, None, :] > -5)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)


class Positions(torch.nn.Module):
    """A window of 50 positions over int64 position ids: computed with them, not compared."""

    def forward(self, q, k, v, pos):
        distance = pos[:, None, :, None] - pos[:, None, None, :]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=(distance >= 0) & (distance < 50))


def _inputs(model: torch.nn.Module, dtype: torch.dtype, n: int = 200) -> tuple:
    qkv = tuple(torch.randn(2, 2, n, 64, dtype=dtype) for _ in range(3))
    if isinstance(model, PaddingMaskAttention):
        return (*qkv, torch.arange(n)[None, :] < torch.randint(1, n + 1, (2, 1)))
    if isinstance(model, OrderedIds):  # the high words decide, or the low ones, either sign
        near = (
            torch.randint(-3, 4, (2, n))
            + torch.tensor([0, 2**33, -(2**33)])[torch.randint(0, 3, (2, n))]
        )
        return (
            *qkv,
            torch.where(torch.rand(2, n) < 0.3, torch.randint(-(2**40), 2**40, (2, n)), near),
        )
    if isinstance(model, Positions):
        return (*qkv, torch.arange(n).expand(2, n) + torch.randint(0, 2**40, (2, 1)))
    return qkv


def _compiled(model, dtype, cache: Path, monkeypatch, pipeline: str | None = None):
    """The module for ANY_VULKAN, its remark, and the capabilities its shader asks for."""
    monkeypatch.setenv("FUSION_COMPILER_CACHE", str(cache))  # this test's shaders alone
    options = {"pipeline": pipeline} if pipeline else {}
    module = fc.compile(
        model,
        example_args=_inputs(model, dtype),
        target="vulkan",
        vulkan_target=ANY_VULKAN,
        **options,
    )
    said = [r.message for r in module.remarks if "Vulkan kernel" in r.message]
    (source,) = cache.rglob("kernel.comp")
    capabilities = None
    if shutil.which("spirv-dis"):
        (binary,) = cache.rglob("kernel.spv")
        text = subprocess.run(["spirv-dis", binary], capture_output=True, text=True).stdout
        capabilities = {line.split()[1] for line in text.splitlines() if "OpCapability" in line}
    return module, said, source.read_text(), capabilities


def _check(module, model, dtype, bound: float) -> None:
    fresh = _inputs(model, dtype)
    with torch.no_grad():
        want = model(*(x.double() if x.is_floating_point() else x for x in fresh))
    assert rel_error(fc.load(module, device="vulkan")(*fresh), want) < bound


@pytest.mark.slow
@needs_glslang
@needs_vulkan
@pytest.mark.parametrize(
    ("model", "dtype", "bound"),
    [(PaddingMaskAttention(), torch.float16, 3e-3), (PrefixLM(), torch.float32, 1e-5)],
    ids=["padding-f16", "prefix-lm-f32"],
)
def test_mask_computed_with_32_bit_integers_for_the_portable_target(
    model, dtype, bound, tmp_path, monkeypatch
) -> None:
    """A bool padding input (bytes read as words, f16 Q/K/V and output as half words)
    and an arange compare: computed in the shader, which needs nothing but Shader."""
    module, said, source, capabilities = _compiled(model, dtype, tmp_path, monkeypatch)
    assert "its mask computed in the kernel" in said[0], said
    assert "int64" not in source
    assert capabilities in (None, {"Shader"}), capabilities
    _check(module, model, dtype, bound)


@pytest.mark.slow
@needs_glslang
@needs_vulkan
def test_int64_ids_compared_as_words_on_the_portable_target(tmp_path, monkeypatch) -> None:
    """Ids past 32 bits, negative ones, and ids whose high words are equal."""
    model = OrderedIds()
    module, said, source, capabilities = _compiled(model, torch.float32, tmp_path, monkeypatch)
    assert "its mask computed in the kernel from" in said[0], said
    assert "int64" not in source
    assert capabilities in (None, {"Shader"}), capabilities
    _check(module, model, torch.float32, 1e-5)


@pytest.mark.slow
@needs_glslang
@needs_vulkan
def test_mask_computed_with_int64_inputs_is_read_on_the_portable_target(
    tmp_path, monkeypatch
) -> None:
    model = Positions()
    module, said, source, capabilities = _compiled(model, torch.float32, tmp_path, monkeypatch)
    assert "mask read from memory (the target has no 64-bit integers" in said[0], said
    assert "i64" in said[0], said
    assert capabilities in (None, {"Shader"}), capabilities
    _check(module, model, torch.float32, 1e-5)


@pytest.mark.slow
@needs_glslang
@needs_vulkan
def test_shader_of_nvidia_targets_computes_int64_ids_on_llvmpipe(tmp_path, monkeypatch) -> None:
    """ "pascal"'s shader (64-bit integers, 8- and 16-bit storage) run under llvmpipe,
    which has them all: the rest of the module stays portable."""
    pipeline = join_pipeline(targets.pipeline("vulkan", vulkan_target="pascal"))
    model = OrderedIds()
    module, said, source, capabilities = _compiled(
        model, torch.float16, tmp_path, monkeypatch, pipeline
    )
    assert "its mask computed in the kernel from" in said[0], said
    assert "int64" in source
    assert capabilities in (None, {"Shader", "Int64", "Float16", "StorageBuffer16BitAccess"})
    _check(module, model, torch.float16, 3e-3)
