"""Hugging Face architectures in fp16 (or bf16) through the generated sm_90 kernels, on the GPU.

On the CPU machine:
    .venv/bin/python benchmarks/hf_models_gpu.py prepare build/hf_gpu [ARCH ...]
builds each architecture (or those named) of ``tests/hf_corpus.py`` at a GPU size (d 256,
4 heads of 64, 2 sequences of 128 tokens, the second padded), exports it in fp16, compiles it for
``target="cuda", cuda_arch="sm_90"`` and saves the module, its inputs and the model's
output in float32 on the CPU (PyTorch, the same weights). On the GPU machine:
    python3 benchmarks/hf_models_gpu.py run build/hf_gpu OUT.md
runs each module there on those inputs and prints (and writes) rel. error against the
float32 reference, PyTorch's own fp16 error on the CPU for scale, and the attentions
fused / lowered to generated kernels.

HF_GPU_DTYPE=bfloat16 exports in bf16 instead (bound 2e-2, the kernel tests' bf16 bound).
HF_GPU_INPUTS=ids calls the text models with their token ids alone (no attention_mask:
transformers then builds its masks from the positions, which compile to the plain causal
or window kernel, or to none for encoders); HF_GPU_SEQ sets the tokens per sequence.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import fusion_compiler as fc  # noqa: E402

# the exported type; its models against float32 within the kernel tests' bound for it
DTYPE = getattr(torch, os.environ.get("HF_GPU_DTYPE", "float16"))
TYPE = {torch.float16: "fp16", torch.bfloat16: "bf16"}[DTYPE]
BOUNDS = {"fp16": 3e-3, "bf16": 2e-2}
GPU_SIZE = dict(hidden_size=256, intermediate_size=512, num_attention_heads=4)
# tokens per sequence; HF_GPU_SEQ=512 makes the padding masks span several key blocks
# (the block map's two loops)
SEQ = int(os.environ.get("HF_GPU_SEQ", "128"))
POSITIONS = max(256, 2 * SEQ)  # position embeddings: enough for SEQ
IDS_ONLY = os.environ.get("HF_GPU_INPUTS", "") == "ids"
ARCHS = {  # architecture -> attention implementation (sdpa where transformers has it)
    "gpt2": "sdpa",
    "llama": "sdpa",
    "mistral": "sdpa",
    "qwen2": "sdpa",
    "qwen3": "sdpa",
    "gemma2": "eager",
    "phi3": "sdpa",
    "gpt_neox": "sdpa",
    "opt": "sdpa",
    "falcon": "sdpa",
    "bert": "sdpa",
    "roberta": "sdpa",
    "distilbert": "sdpa",
    "modernbert": "sdpa",
    "vit": "sdpa",
    "clip_text_model": "sdpa",
    "swin": "sdpa",
    "swinv2": "eager",  # no SDPA path in transformers
    "beit": "sdpa",
}


def _sized(name: str) -> dict:
    import hf_corpus

    config = dict(hf_corpus.ARCHS[name].config)
    aliases = {  # the config names each architecture uses for GPU_SIZE's fields
        "gpt2": dict(n_embd=256, n_head=4, n_positions=POSITIONS),
        "distilbert": dict(dim=256, n_heads=4, hidden_dim=512, max_position_embeddings=POSITIONS),
        "opt": dict(
            hidden_size=256,
            num_attention_heads=4,
            ffn_dim=512,
            word_embed_proj_dim=256,
            max_position_embeddings=POSITIONS,
        ),
        # 16x16 patches in windows of 8 (shifted by 4), then 8x8 in one window; heads of 32
        "swin": dict(embed_dim=128, num_heads=[4, 8], window_size=8),
        "swinv2": dict(embed_dim=128, num_heads=[4, 8], window_size=8),
    }
    if name in aliases:
        config.update(aliases[name])
    else:
        config.update(GPU_SIZE)
        if "max_position_embeddings" in config:
            config["max_position_embeddings"] = POSITIONS
        if "head_dim" in config:
            config["head_dim"] = 64
        if name in ("vit", "beit"):
            config.update(image_size=64, patch_size=8)
    return config


def _rel(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got.double() - want.double()).norm() / want.double().norm()).item()


def prepare(out: Path, only: list[str]) -> None:
    """Compiles each architecture of ``ARCHS`` (those named in ``only``, if any) into ``out``."""
    import hf_corpus

    unknown = sorted(set(only) - set(ARCHS))
    if unknown:
        raise SystemExit(f"unknown architectures {unknown}; known: {sorted(ARCHS)}")
    out.mkdir(parents=True, exist_ok=True)
    index = {}
    for name, impl in ARCHS.items():
        if only and name not in only:
            continue
        arch = hf_corpus.ARCHS[name]
        sized = hf_corpus.Arch(name, _sized(name), arch.kind, arch.attentions, arch.auto)
        hf_corpus.ARCHS[name] = sized
        model, inputs = hf_corpus.build(name, impl, seq=SEQ, image=64)
        example = inputs()
        if IDS_ONLY and arch.kind in ("decoder", "encoder"):
            model, example = hf_corpus.IdsOnly(model.model).eval(), example[:1]
        with torch.no_grad():
            want = model.float()(*example)
        model = model.to(DTYPE)
        half = tuple(x.to(DTYPE) if x.is_floating_point() else x for x in example)
        with torch.no_grad():  # PyTorch's own error in DTYPE, for scale
            torch_half = _rel(model(*half).float(), want)
        start = time.perf_counter()
        program = torch.export.export(model, half, strict=False)
        module = fc.compile(program, target="cuda", cuda_arch="sm_90")
        seconds = time.perf_counter() - start
        kernels = sum(
            r.message.startswith("attention lowered to a generated sm_90 kernel")
            for r in module.remarks
        )
        module.save(out / f"{name}.vmfb")
        torch.save({"inputs": half, "want": want}, out / f"{name}.pt")
        index[name] = dict(
            impl=impl,
            expected=arch.attentions,
            fused=module.stats["attention_ops"],
            kernels=kernels,
            softmax=module.stats["softmax_ops"],
            compile_s=round(seconds, 1),
            torch_error=torch_half,
            dtype=TYPE,
        )
        print(name, index[name], flush=True)
    (out / "index.json").write_text(json.dumps(index, indent=1))


def run(folder: Path, report: Path) -> None:
    index = json.loads((folder / "index.json").read_text())
    type_ = next(iter(index.values()))["dtype"] if index else TYPE
    rows = [
        "| architecture | attention | attentions expected / fused / sm_90 kernels "
        f"| rel. error (ours {type_} vs f32) | PyTorch {type_} (CPU) vs f32 | max abs | pass |",
        "|---|---|---|---|---|---|---|",
    ]
    failures = 0
    for name, facts in index.items():
        data = torch.load(folder / f"{name}.pt")
        run_ = fc.load(folder / f"{name}.vmfb", device="cuda")
        args = tuple(x.cuda() for x in data["inputs"])
        got = run_(*args).float().cpu()
        want = data["want"]
        finite = bool(torch.isfinite(got).all())
        err = _rel(got, want)
        # the kernel tests' bound (fp16 3e-3), or twice PyTorch's own error where the model
        # in that type is further than that from f32 (Gemma's softcaps and embedding scale)
        bound = max(BOUNDS[facts["dtype"]], 2 * facts["torch_error"])
        ok = (
            finite
            and err < bound
            and facts["fused"] == facts["expected"] == facts["kernels"]
            and facts["softmax"] == 0
        )
        failures += not ok
        rows.append(
            f"| {name} | {facts['impl']} | {facts['expected']} / {facts['fused']} / "
            f"{facts['kernels']} | {err:.1e} | {facts['torch_error']:.1e} | "
            f"{(got - want).abs().max().item():.1e} | "
            f"{'yes' if ok else 'NO'} |"
        )
    table = "\n".join(rows)
    print(table)
    report.write_text(table + "\n")
    print(f"{len(index) - failures} of {len(index)} pass")


if __name__ == "__main__":
    mode, *paths = sys.argv[1:]
    if mode == "prepare":  # prepare FOLDER [ARCH ...]
        prepare(Path(paths[0]), paths[1:])
    else:
        run(Path(paths[0]), Path(paths[1]))
