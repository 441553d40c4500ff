"""State across calls: inputs the model updates in place (a KV cache written at a
position) are written into the caller's tensors; buffers a model updates are refused."""

import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ROOT

import fusion_compiler as fc
from fusion_compiler.errors import FusionCompilerError


class CacheStep(torch.nn.Module):
    """One decode step: K/V written into the caches at ``position``, then attention of the
    query over the cache (later slots masked)."""

    def __init__(self, write: str = "index_put") -> None:
        super().__init__()
        self.write = write

    def forward(self, q, k, v, position, k_cache, v_cache):
        if self.write == "index_copy":  # transformers' StaticCache
            k_cache.index_copy_(2, position, k)
            v_cache.index_copy_(2, position, v)
        else:
            k_cache[:, :, position] = k
            v_cache[:, :, position] = v
        later = torch.arange(k_cache.shape[2], device=q.device) > position
        s = q @ k_cache.transpose(-2, -1) / math.sqrt(q.shape[-1])
        return torch.softmax(s.masked_fill(later, float("-inf")), dim=-1) @ v_cache


def _inputs(batch=2, heads=4, length=24, dim=16, dtype=torch.float32, device="cpu"):
    def make(*shape):
        return torch.randn(*shape, dtype=dtype, device=device)

    q, k, v = (make(batch, heads, 1, dim) for _ in range(3))
    return q, k, v, make(batch, heads, length, dim), make(batch, heads, length, dim)


def _expected(q, k, v, position, k_cache, v_cache):
    caches = k_cache.clone(), v_cache.clone()
    out = CacheStep()(q, k, v, position, *caches)
    return out, caches


@pytest.mark.parametrize("write", ["index_put", "index_copy"])
def test_caches_updated_in_place_step_after_step(write: str) -> None:
    q, k, v, k_cache, v_cache = _inputs()
    example = (q, k, v, torch.tensor([0]), k_cache, v_cache)
    module = fc.compile(CacheStep(write), example_args=example)
    assert module.stats["attention_ops"] == 1
    run = fc.load(module)
    assert run["main"].mutated == [4, 5]
    for position in (0, 5, 23):
        q, k, v, _, _ = _inputs()
        out, (want_k, want_v) = _expected(q, k, v, torch.tensor([position]), k_cache, v_cache)
        got = run(q, k, v, torch.tensor([position]), k_cache, v_cache)
        assert isinstance(got, torch.Tensor)  # the model's one result, not the caches too
        torch.testing.assert_close(got, out)
        assert torch.equal(k_cache, want_k) and torch.equal(v_cache, want_v)


def test_submitted_call_writes_the_caches_when_it_is_waited_for() -> None:
    q, k, v, k_cache, v_cache = _inputs(dtype=torch.float16)
    position = torch.tensor([7])
    module = fc.compile(CacheStep(), example_args=(q, k, v, position, k_cache, v_cache))
    out, (want_k, want_v) = _expected(q, k, v, position, k_cache, v_cache)
    got = fc.load(module)["main"].submit(q, k, v, position, k_cache, v_cache).result()
    torch.testing.assert_close(got, out, atol=2e-3, rtol=2e-3)
    assert torch.equal(k_cache, want_k) and torch.equal(v_cache, want_v)


def test_numpy_caches_are_updated_in_place() -> None:
    q, k, v, k_cache, v_cache = _inputs()
    position = torch.tensor([3])
    module = fc.compile(CacheStep(), example_args=(q, k, v, position, k_cache, v_cache))
    out, (want_k, want_v) = _expected(q, k, v, position, k_cache, v_cache)
    arrays = [t.numpy().copy() for t in (q, k, v, position, k_cache, v_cache)]
    got = fc.load(module)(*arrays)
    torch.testing.assert_close(got, out)
    np.testing.assert_array_equal(arrays[4], want_k.numpy())
    np.testing.assert_array_equal(arrays[5], want_v.numpy())


class Counter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(4))

    def forward(self, x):
        self.count.add_(x)
        return self.count * 2


def test_a_model_updating_its_own_buffer_is_refused_naming_it() -> None:
    with pytest.raises(FusionCompilerError, match=r"buffer\(s\) 'count' in place.*as an input"):
        fc.compile(Counter(), example_args=(torch.ones(4),))


# CUDA modules are compiled where the compiler is (``python tests/test_state.py DIR``)
# and run where the GPU is, with only the runtime: FUSION_STATE_MODULES=DIR.
FOLDER = Path(os.environ.get("FUSION_STATE_MODULES", ROOT / "build" / "state"))
CUDA_SHAPE = {"dtype": torch.float16, "length": 256, "dim": 64}


def prepare(folder: Path) -> None:
    q, k, v, k_cache, v_cache = _inputs(**CUDA_SHAPE)
    folder.mkdir(parents=True, exist_ok=True)
    for arch in ("sm_90", "sm_80"):
        example = (q, k, v, torch.tensor([0]), k_cache, v_cache)
        module = fc.compile(CacheStep(), example_args=example, target="cuda", cuda_arch=arch)
        module.save(folder / f"cache_step_{arch}.vmfb")


@pytest.mark.gpu
@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_cuda_caches_updated_where_they_live(arch) -> None:
    """On CUDA the caches are the buffers IREE writes: same pointers, no copy back."""
    path = FOLDER / f"cache_step_{arch}.vmfb"
    if not path.exists():
        pytest.skip(f"no prepared module {path}")
    run = fc.load(path, device="cuda")
    q, k, v, k_cache, v_cache = _inputs(**CUDA_SHAPE, device="cuda")
    for position in (0, 100, 255):
        position = torch.tensor([position], device="cuda")
        out, (want_k, want_v) = _expected(q, k, v, position, k_cache, v_cache)
        pointers = k_cache.data_ptr(), v_cache.data_ptr()
        got = run(q, k, v, position, k_cache, v_cache)
        torch.testing.assert_close(got, out, atol=2e-3, rtol=2e-3)
        assert (k_cache.data_ptr(), v_cache.data_ptr()) == pointers
        assert torch.equal(k_cache, want_k) and torch.equal(v_cache, want_v)


if __name__ == "__main__":
    prepare(Path(sys.argv[1]) if len(sys.argv) > 1 else FOLDER)
