"""Every attention variant of the detection tests, compiled for the H200's kernel path.

On the CPU machine:
    .venv/bin/python benchmarks/gpu_variants.py build/gpu_variants [CUDA_ARCH | vulkan] [--only S]
writes one module per variant (fp16 and bf16, target="cuda", default cuda_arch sm_90:
generated kernels; with "vulkan": fp16, bf16 and fp32, target="vulkan", generated SPIR-V
kernels, static shapes only) with its model weights and an index; on the GPU machine
    FUSION_GPU_MODULES=build/gpu_variants python3 -m pytest -q -m gpu tests/test_gpu_variants.py
runs each on fresh inputs against PyTorch in float64.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
from variants import FUSABLE_MASKS, SCALE_FORMS, Attention, PaddingMaskAttention  # noqa: E402

import fusion_compiler as fc  # noqa: E402

MASKS = [None, *FUSABLE_MASKS]
# name -> (Attention kwargs, (B, H, Hkv, Nq, Nk, D))
VARIANTS: dict[str, tuple[dict, tuple[int, ...]]] = {
    **{
        f"scale_{s}": (dict(heads=4, nq=77, nk=77, head_dim=64, scale_on=s), (2, 4, 4, 77, 77, 64))
        for s in SCALE_FORMS
    },
    **{
        f"mask_{m or 'none'}_cross": (
            dict(heads=2, nq=77, nk=333, head_dim=64, mask=m, upcast=True),
            (1, 2, 2, 77, 333, 64),
        )
        for m in MASKS
    },
    **{
        f"gqa_{g}_kv{kv}": (
            dict(heads=4, nq=130, nk=130, head_dim=64, gqa=g, kv_heads=kv, mask="causal-iota"),
            (1, 4, kv, 130, 130, 64),
        )
        for g in ("repeat_interleave", "repeat_kv")
        for kv in (1, 2)
    },
    **{
        f"head_dim_{d}": (dict(heads=2, nq=100, nk=150, head_dim=d), (1, 2, 2, 100, 150, d))
        for d in (32, 80, 96, 128, 160, 256)
    },
    # decoding shapes: split-KV and the combine kernel
    "decode_gqa_split_kv": (
        dict(heads=8, nq=1, nk=3000, head_dim=128, gqa="repeat_interleave", kv_heads=2),
        (1, 8, 2, 1, 3000, 128),
    ),
    "short_causal_split_kv": (
        dict(heads=4, nq=5, nk=2000, head_dim=64, mask="causal-iota", upcast=True),
        (1, 4, 4, 5, 2000, 64),
    ),
    # more causal row blocks than the GPU holds, D128: persistent programs with a producer
    # warp (backends/triton/warp_specialized.py); odd programs reversed over 1024 keys,
    # not over 4096; GQA
    **{
        f"causal_persistent_n{n}{'_gqa' if kv < h else ''}": (
            dict(heads=h, nq=n, nk=n, head_dim=128, mask="causal-iota", upcast=True)
            | (dict(gqa="repeat_kv", kv_heads=kv) if kv < h else {}),
            (b, h, kv, n, n, 128),
        )
        for b, h, kv, n in ((2, 16, 16, 1024), (1, 16, 16, 4096), (2, 8, 2, 2048))
    },
    # a sliding window over long rows: only the key blocks inside it are visited
    "sliding_window_n4096": (
        dict(heads=16, nq=4096, nk=4096, head_dim=128, mask="sliding-window", upcast=True),
        (1, 16, 16, 4096, 4096, 128),
    ),
    # attention with a sink (GPT-OSS): the template kernel adds each row's sink term to its
    # sum (causal with GQA read in place, a window, cross attention); a decoding step
    # falls back to IREE's online_attention (no split-KV kernel with a sink)
    **{
        f"sink_{name}": (dict(heads=h, nq=nq, nk=nk, head_dim=64, sink=True) | extra, shape)
        for name, h, nq, nk, extra, shape in (
            (
                "causal_gqa_n1024",
                8,
                1024,
                1024,
                dict(mask="causal-iota", upcast=True, gqa="repeat_kv", kv_heads=2),
                (1, 8, 2, 1024, 1024, 64),
            ),
            (
                "window_n2048",
                4,
                2048,
                2048,
                dict(mask="sliding-window", upcast=True),
                (1, 4, 4, 2048, 2048, 64),
            ),
            ("cross", 2, 77, 333, {}, (2, 2, 2, 77, 333, 64)),
            (
                "decode_gqa",
                8,
                1,
                3000,
                dict(gqa="repeat_interleave", kv_heads=2),
                (1, 8, 2, 1, 3000, 64),
            ),
        )
    },
    # full attention over 1024 keys, re-tiled for the producer-warp kernel
    "full_persistent_n1024": (
        dict(heads=16, nq=1024, nk=1024, head_dim=128),
        (2, 16, 16, 1024, 1024, 128),
    ),
}
# compiled with a dynamic sequence length, run at these lengths
DYNAMIC = {
    "dynamic_causal": (
        dict(heads=4, nq=128, nk=128, head_dim=64, mask="causal-iota", upcast=True),
        (1, 4, 4, 128, 128, 64),
    ),
    "dynamic_gqa": (
        dict(heads=8, nq=128, nk=128, head_dim=128, gqa="repeat_kv", kv_heads=2),
        (1, 8, 2, 128, 128, 128),
    ),
}
# a (B, Nk) padding input of the dynamic length too: the kernel reads it at the call's
# length (no (B, N, N) mask), a block map per call skipping the padded key blocks
PADDED = {"dynamic_padding": (2, 4, 4, 128, 128, 64)}
LENGTHS = (77, 1000, 4099)
DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
# the element types each target's kernels take
TARGET_DTYPES = {"cuda": ("f16", "bf16"), "vulkan": ("f16", "bf16", "f32")}


def inputs(
    shape: tuple[int, ...], dtype: torch.dtype, device: str = "cpu", padded: bool = False
) -> tuple:
    """Random q, k, v of ``shape``; ``padded``: and a (B, Nk) keep mask, each sequence's
    last keys from a random point on masked (its first key always kept)."""
    b, h, hkv, nq, nk, d = shape
    sizes = [(b, h, nq, d), (b, hkv, nk, d), (b, hkv, nk, d)]
    tensors = tuple(torch.randn(s, device=device).to(dtype) for s in sizes)
    if not padded:
        return tensors
    lengths = torch.randint(1, nk + 1, (b, 1), device=device)
    return (*tensors, torch.arange(nk, device=device)[None, :] < lengths)


def model_of(entry: dict) -> torch.nn.Module:
    """The PyTorch model an index entry was compiled from (weights not loaded)."""
    return PaddingMaskAttention() if entry.get("padded") else Attention(**entry["kwargs"])


def prepare(folder: Path, arch: str = "sm_90", only: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    target = "vulkan" if arch == "vulkan" else "cuda"
    options = dict(target=target) if target == "vulkan" else dict(target=target, cuda_arch=arch)
    index = {}
    n = torch.export.Dim("n", min=2, max=8192)
    cases = {**VARIANTS, **DYNAMIC, **{name: ({}, shape) for name, shape in PADDED.items()}}
    for name, (kwargs, shape) in cases.items():
        for dtype_name in TARGET_DTYPES[target]:
            dtype = DTYPES[dtype_name]
            case = f"{name}_{dtype_name}"
            if only not in case:
                continue
            torch.manual_seed(0)
            padded = name in PADDED
            model = model_of(dict(kwargs=kwargs, padded=padded)).eval()
            dynamic = ({2: n},) * 3 if name in DYNAMIC or padded else None
            if padded:
                dynamic = (*dynamic, {1: n})
            module = fc.compile(
                model,
                example_args=inputs(shape, dtype, padded=padded),
                dynamic_shapes=dynamic,
                **options,
            )
            module.save(folder / f"{case}.vmfb")
            torch.save(model.state_dict(), folder / f"{case}.pt")
            kernels = sum("generated" in r.message for r in module.remarks)
            index[case] = dict(
                kwargs=kwargs, shape=shape, dtype=dtype_name, kernels=kernels, device=target
            )
            if padded:
                index[case]["padded"] = True
            index[case]["producer_warp"] = any("producer warp" in r.message for r in module.remarks)
            if dynamic:
                index[case]["lengths"] = LENGTHS
            index[case].update(module.stats)
            print(case, module.stats, f"kernels={kernels}", flush=True)
    (folder / "index.json").write_text(json.dumps(index, indent=1))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("arch", nargs="?", default="sm_90", help="a CUDA arch, or vulkan")
    parser.add_argument("--only", default="", help="the variants whose name holds this")
    args = parser.parse_args()
    prepare(args.folder, args.arch, args.only)
