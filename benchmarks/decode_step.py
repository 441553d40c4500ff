"""One decode step of a decoder against its KV caches on the GPU: ours against torch eager
and torch.compile, every system timed the three ways of harness.py (device, back-to-back
loop, one blocking call); tokens/s is 1000 / loop ms.

On the CPU machine:  .venv/bin/python benchmarks/decode_step.py prepare build/decode_step
On the GPU machine:  python3 benchmarks/decode_step.py run build/decode_step OUT

The model is examples/generate.py's decoder at ``--size large`` (8 layers, d 2048, 32
query / 8 KV heads of 64, gated SiLU MLP of 5632, vocabulary 32000, 4096-slot caches),
fp16, batch 1, one token at position 2048. Its weights come from a seed on the GPU
machine; the modules are compiled with ``weights="external"`` and given them at load.
Every step writes its K/V into the caller's caches in place. Output checked against the
model in float32. Systems: ours_sm90 (attention as a generated split-KV kernel),
iree_alone (the same export, none of our passes, IREE for sm_80), torch_eager,
torch_compile (default) and torch_compile_ro (mode="reduce-overhead", CUDA graphs);
ours_sm90_iree_matvec is ours without fusion-kernel-matvec (IREE's matrix-vector
products), for the A/B.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import harness
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
from generate import SIZES, seeded  # noqa: E402

import fusion_compiler as fc  # noqa: E402

SIZE = "large"
POSITION = 2048
MODULES = {
    "ours_sm90": {"cuda_arch": "sm_90"},
    # the sm_90 pipeline without fusion-kernel-matvec: the products left to IREE (prepare
    # fills it in: the pipeline module needs the compiler)
    "ours_sm90_iree_matvec": {"cuda_arch": "sm_90", "pipeline": None},
    "iree_alone": {"cuda_arch": "sm_80", "pipeline": "builtin.module()"},
}


def _without_matvec() -> str:
    from fusion_compiler.pipeline import join_pipeline
    from fusion_compiler.targets import pipeline

    kept = [p for p in pipeline("cuda", "auto", "sm_90") if "fusion-kernel-matvec" not in p]
    return join_pipeline(kept)


def _inputs(model, device: str, seed: int) -> tuple:
    """A token, its position and caches holding random keys and values before it."""
    generator = torch.Generator().manual_seed(seed)
    caches = model.empty_caches(1, device)
    for cache in caches:
        values = torch.randn(cache.shape, generator=generator).to(cache.dtype)
        cache.copy_(values.masked_fill(torch.arange(cache.shape[2])[:, None] >= POSITION, 0))
    token = torch.randint(0, model.config.vocab, (1, 1), generator=generator).to(device)
    return (token, torch.tensor([POSITION], device=device), *caches)


def prepare(folder: Path, args: argparse.Namespace) -> None:
    model = seeded(SIZE, torch.float16)
    example = _inputs(model, "cpu", 0)
    for system, options in MODULES.items():
        if options.get("pipeline", "") is None:
            options = {**options, "pipeline": _without_matvec()}

        def build(options=options):
            return fc.compile(model, example, target="cuda", weights="external", **options)

        harness.save_module(folder, system, build)


def run(folder: Path, out: Path, args: argparse.Namespace) -> list[dict]:
    model = seeded(SIZE, torch.float16).cuda()
    inputs = [_inputs(model, "cuda", seed) for seed in range(3)]
    with torch.no_grad():
        reference = seeded(SIZE, torch.float32).cuda()(
            *(t.float() if t.is_floating_point() else t for t in inputs[0])
        )
    weights = model.state_dict()
    systems = {}
    for system in MODULES:
        path = folder / f"{system}.vmfb"
        if path.exists():
            systems[system] = fc.load(path, device="cuda", weights=weights)["main"]
    systems.update(
        torch_eager=model,
        torch_compile=torch.compile(model),
        torch_compile_ro=torch.compile(model, mode="reduce-overhead"),
    )
    c = SIZES[SIZE]
    head_dim = c.dim // c.heads
    per_layer = c.dim * c.dim * 2 + c.dim * 2 * c.kv_heads * head_dim + 3 * c.dim * c.hidden
    flops = 2 * (c.layers * per_layer + c.dim * c.vocab)
    flops += c.layers * harness.attention_flops(1, c.heads, 1, c.max_len, head_dim, False)
    fields = dict(case=f"decode_{SIZE}_pos{POSITION}_fp16", position=POSITION, **vars(c))
    records = []
    for system, call in systems.items():
        # each system starts from the same caches (every step writes one slot of them)
        fresh = [tuple(t.clone() for t in x) for x in inputs]
        record = harness.measure(fields, system, call, fresh, reference, flops, True)
        if "loop_ms" in record:
            record["tokens_per_s"] = 1e3 / record["loop_ms"]
        records.append(record)
        harness.write(records, out, "decode_step", render=_render)
    return records


def _render(records: list[dict]) -> str:
    lines = [harness.table(records), "", "| system | tokens/s (1000 / loop ms) |", "|---|---|"]
    for r in records:
        if "tokens_per_s" in r:
            lines.append(f"| {r['system']} | {r['tokens_per_s']:.1f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(harness.main(__doc__.splitlines()[0], prepare, run))
