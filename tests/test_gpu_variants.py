"""Every detection variant on the GPU through the kernel path (CUDA or Vulkan), against PyTorch.

The modules are compiled on a machine with the compiler (benchmarks/gpu_variants.py);
this test runs where the GPU is, with only the runtime: set FUSION_GPU_MODULES to the
folder. Results on the H200: benchmarks/results/gpu_variants_h200.md.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch
from conftest import ROOT, rel_error
from variants import Attention

import fusion_compiler as fc

sys.path.insert(0, str(ROOT / "benchmarks"))
from gpu_variants import DTYPES, inputs, model_of  # noqa: E402

BOUND = {"f16": 3e-3, "bf16": 2e-2, "f32": 1e-4}
FOLDER = Path(os.environ.get("FUSION_GPU_MODULES", ROOT / "build" / "gpu_variants"))
INDEX = json.loads((FOLDER / "index.json").read_text()) if (FOLDER / "index.json").exists() else {}


@pytest.mark.gpu
@pytest.mark.skipif(not INDEX, reason=f"no prepared modules in {FOLDER}")
@pytest.mark.parametrize("case", sorted(INDEX))
def test_variant_on_gpu(case: str) -> None:
    entry = INDEX[case]
    model = model_of(entry).eval()
    model.load_state_dict(torch.load(FOLDER / f"{case}.pt"))
    device = entry.get("device", "cuda")  # or "vulkan": CPU tensors in and out
    run = fc.load(FOLDER / f"{case}.vmfb", device=device)
    model = model.double().to("cuda" if device == "cuda" else "cpu")
    b, h, hkv, nq, nk, d = entry["shape"]
    # a dynamic module runs at several lengths; a static one twice, on fresh inputs in
    # fresh buffers (IREE replays the command buffer it recorded with the new ones)
    for n in entry.get("lengths", [None, None]):
        shape = (b, h, hkv, n or nq, n or nk, d)
        on = "cuda" if device == "cuda" else "cpu"
        fresh = inputs(shape, DTYPES[entry["dtype"]], device=on, padded=entry.get("padded", False))
        with torch.no_grad():
            want = model(*(x.double() if x.is_floating_point() else x for x in fresh))
        got = run(*fresh)
        assert got.is_cuda == (device == "cuda")
        assert rel_error(got, want) < BOUND[entry["dtype"]], f"length {n}"


STATIC_CUDA = sorted(
    c for c, e in INDEX.items() if e.get("device") == "cuda" and "lengths" not in e
)


@pytest.mark.gpu
@pytest.mark.skipif(not STATIC_CUDA, reason=f"no prepared CUDA modules in {FOLDER}")
@pytest.mark.parametrize("case", STATIC_CUDA[:8])
def test_results_are_written_where_torch_allocated_them(case: str) -> None:
    """fusion-caller-storage: the module writes its result into a tensor torch allocated
    on the device (poisoned with NaN first), and a call returns that tensor, copied nowhere."""
    entry = INDEX[case]
    model = Attention(**entry["kwargs"]).eval()
    model.load_state_dict(torch.load(FOLDER / f"{case}.pt"))
    function = fc.load(FOLDER / f"{case}.vmfb", device="cuda")["main"]
    fresh = inputs(entry["shape"], DTYPES[entry["dtype"]], device="cuda")
    with torch.no_grad():
        want = model.double().cuda()(*(x.double() for x in fresh))
    tensors, on_gpu = function._arguments(fresh)
    storage, kept = function._result_storage(tensors, on_gpu)
    assert len(kept) == 2 and kept[0].is_cuda  # the result, then transient memory
    kept[0].fill_(float("nan"))
    function._function(*[function._to_device(t) for t in tensors], *storage)
    assert rel_error(kept[0], want) < BOUND[entry["dtype"]]
    activities = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        got = function(*fresh)
        torch.cuda.synchronize()
    assert not [e.name for e in prof.events() if e.name.startswith("Memcpy")]
    assert rel_error(got, want) < BOUND[entry["dtype"]]


@pytest.mark.gpu
@pytest.mark.skipif(not STATIC_CUDA, reason=f"no prepared CUDA modules in {FOLDER}")
@pytest.mark.parametrize("case", STATIC_CUDA[:4])
def test_blocking_calls_reuse_one_transient_memory(case: str) -> None:
    """A blocking call hands its transient memory to the next (poisoned between calls,
    which must not matter); every result is a tensor of its own with PyTorch's values."""
    entry = INDEX[case]
    model = Attention(**entry["kwargs"]).eval()
    model.load_state_dict(torch.load(FOLDER / f"{case}.pt"))
    model = model.double().cuda()
    function = fc.load(FOLDER / f"{case}.vmfb", device="cuda")["main"]
    calls = [inputs(entry["shape"], DTYPES[entry["dtype"]], device="cuda") for _ in range(3)]
    got, transients = [], set()
    for fresh in calls:
        got.append(function(*fresh))
        assert len(function._spare_transients) == 1
        _, transient, _ = function._spare_transients[0]
        transients.add(transient.data_ptr())
        transient.fill_(255)
    assert len(transients) == 1
    assert len({t.data_ptr() for t in got}) == len(got)
    for fresh, result in zip(calls, got, strict=True):
        with torch.no_grad():
            want = model(*(x.double() for x in fresh))
        assert rel_error(result, want) < BOUND[entry["dtype"]]
