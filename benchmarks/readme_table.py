"""The README's benchmark tables, generated from harness records (each row's systems
timed in one run).

    .venv/bin/python benchmarks/readme_table.py            (rewrites the tables in README.md)
    .venv/bin/python benchmarks/readme_table.py --check    (exit 1 if README.md differs)

Attention: ``benchmarks/results/peers_readme_h200.json`` (``attention_peers.py`` on the
table's cases: every system timed the same three ways in one run), our sm_90 kernel's
device and blocking-call time against torch SDPA's cuDNN and FlashAttention-2 backends and
torch.compile, for those fp16 cases. Whole models:
``benchmarks/results/models_suite_h200.json`` (``models_gpu.py``; every model in one
machine session), ours against torch.compile and torch eager. Each table sits between its
two markers in the README.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


@dataclass(frozen=True)
class Table:
    results: Path
    head: str  # the first column's title
    cases: tuple[str, ...]
    systems: tuple[tuple[str, str], ...]  # (record's system, column title), ours first
    label: Callable[[str], str]  # a case's row title

    @property
    def begin(self) -> str:
        writer = "benchmarks/readme_table.py writes it from"
        return f"<!-- benchmark table: {writer} {self.results.name} -->"


def _attention_label(case: str) -> str:
    """``B1_H32_KV8_N8192_D128_float16_causal`` -> ``B1 H32/8 N8192 D128 causal``."""
    parts = case.split("_")
    heads = parts[1]
    if parts[2].startswith("KV"):
        heads += "/" + parts.pop(2)[2:]
    return f"{parts[0]} {heads} {parts[2]} {parts[3]} {parts[-1]}"


_MODEL_NAMES = {
    "gpt2_small": "GPT-2 small",
    "bert_base": "BERT-base",
    "vit_b16": "ViT-B/16",
    "llama_3.2_1b_shape": "Llama-3.2-1B's shape",
    "whisper_small_encoder": "Whisper-small's encoder",
}


def _model_label(case: str) -> str:
    """``bert_base_B8_N512`` -> ``BERT-base B8 N512`` (ViT: images, not tokens);
    ``..._decode_B16_past4096`` -> ``... decode B16, 4096 cached``."""
    model, batch, tokens = case.rsplit("_", 2)
    if model.endswith("_decode"):
        name = _MODEL_NAMES[model.removesuffix("_decode")]
        return f"{name} decode {batch}, {tokens.removeprefix('past')} cached"
    return f"{_MODEL_NAMES[model]} {batch}" + ("" if model == "vit_b16" else f" {tokens}")


ATTENTION = Table(
    ROOT / "benchmarks" / "results" / "peers_readme_h200.json",
    "fp16, ms: device / call",
    (
        "B4_H16_N1024_D128_float16_causal",
        "B1_H16_N4096_D128_float16_full",
        "B1_H16_N16384_D128_float16_causal",
        "B1_H32_N4096_D64_float16_causal",
        "B1_H32_KV8_N8192_D128_float16_causal",
    ),
    (
        ("ours_sm90", "ours (sm_90)"),
        ("torch_sdpa_cudnn", "cuDNN"),
        ("torch_sdpa_flash", "FA2"),
        ("torch_compile_unfused", "torch.compile, written out"),
    ),
    _attention_label,
)
MODELS = Table(
    ROOT / "benchmarks" / "results" / "models_suite_h200.json",
    "fp16, H200, ms: device / call",
    (
        "gpt2_small_B1_N512",
        "gpt2_small_B4_N2048",
        "bert_base_B1_N512",
        "bert_base_B8_N512",
        "vit_b16_B1_N197",
        "vit_b16_B32_N197",
        "whisper_small_encoder_B1_N1500",
        "llama_3.2_1b_shape_B1_N512",
        "llama_3.2_1b_shape_B4_N2048",
        "llama_3.2_1b_shape_B1_N8192",
        "llama_3.2_1b_shape_decode_B1_past4096",
        "llama_3.2_1b_shape_decode_B16_past4096",
        "llama_3.2_1b_shape_decode_B1_past32768",
    ),
    (
        ("ours_sm90", "ours (sm_90)"),
        ("torch_compile", "torch.compile"),
        ("torch_eager", "torch eager"),
    ),
    _model_label,
)
TABLES = (ATTENTION, MODELS)
END = "<!-- end of benchmark table -->"


def table(spec: Table, records: list[dict]) -> str:
    by = {(r["case"], r["system"]): r for r in records}
    head = f"| {spec.head} |" + "".join(f" {title} |" for _, title in spec.systems)
    lines = [head, "|---" * (1 + len(spec.systems)) + "|"]
    for case in spec.cases:
        cells = [spec.label(case)]
        for system, _ in spec.systems:
            r = by.get((case, system))
            ok = r is not None and r.get("device_ms") is not None
            cells.append(f"{r['device_ms']:.3f} / {r['call_ms']:.3f}" if ok else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def with_table(readme: str, spec: Table, records: list[dict]) -> str:
    start = readme.index(spec.begin) + len(spec.begin)
    end = readme.index(END, start)
    return readme[:start] + "\n" + table(spec, records) + "\n" + readme[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if README.md differs")
    args = parser.parse_args(argv)
    readme = README.read_text()
    updated = readme
    for spec in TABLES:
        updated = with_table(updated, spec, json.loads(spec.results.read_text()))
    if args.check:
        if updated != readme:
            print("README.md's benchmark tables are stale: run benchmarks/readme_table.py")
            return 1
        return 0
    README.write_text(updated)
    return 0


if __name__ == "__main__":
    sys.exit(main())
