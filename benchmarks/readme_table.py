"""The README's benchmark table, generated from one harness run's records.

    .venv/bin/python benchmarks/readme_table.py            (rewrites the table in README.md)
    .venv/bin/python benchmarks/readme_table.py --check    (exit 1 if README.md differs)

It reads ``benchmarks/results/peers_readme_h200.json`` (``attention_peers.py`` on the
table's cases: every system timed the same three ways in one run) and writes, for those
fp16 cases, our sm_90 kernel's device and blocking-call time against torch SDPA's cuDNN
and FlashAttention-2 backends and torch.compile, between the README's two table markers.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "peers_readme_h200.json"
README = ROOT / "README.md"
BEGIN = "<!-- benchmark table: benchmarks/readme_table.py writes it from peers_readme_h200.json -->"
END = "<!-- end of benchmark table -->"
CASES = (
    "B4_H16_N1024_D128_float16_causal",
    "B1_H16_N4096_D128_float16_full",
    "B1_H16_N16384_D128_float16_causal",
    "B1_H32_N4096_D64_float16_causal",
    "B1_H32_KV8_N8192_D128_float16_causal",
)
PEERS = (
    ("torch_sdpa_cudnn", "cuDNN"),
    ("torch_sdpa_flash", "FA2"),
    ("torch_compile_unfused", "torch.compile, written out"),
)


def _label(case: str) -> str:
    """``B1_H32_KV8_N8192_D128_float16_causal`` -> ``B1 H32/8 N8192 D128 causal``."""
    parts = case.split("_")
    heads = parts[1]
    if parts[2].startswith("KV"):
        heads += "/" + parts.pop(2)[2:]
    return f"{parts[0]} {heads} {parts[2]} {parts[3]} {parts[-1]}"


def table(records: list[dict]) -> str:
    by = {(r["case"], r["system"]): r for r in records}
    head = "| fp16, ms: device / call | ours (sm_90) |" + "".join(f" {n} |" for _, n in PEERS)
    lines = [head, "|---" * (2 + len(PEERS)) + "|"]
    for case in CASES:
        cells = [_label(case)]
        for system in ("ours_sm90", *(s for s, _ in PEERS)):
            r = by.get((case, system))
            ok = r is not None and r.get("device_ms") is not None
            cells.append(f"{r['device_ms']:.3f} / {r['call_ms']:.3f}" if ok else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def with_table(readme: str, records: list[dict]) -> str:
    start, end = readme.index(BEGIN) + len(BEGIN), readme.index(END)
    return readme[:start] + "\n" + table(records) + "\n" + readme[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if README.md differs")
    args = parser.parse_args(argv)
    readme = README.read_text()
    updated = with_table(readme, json.loads(RESULTS.read_text()))
    if args.check:
        if updated != readme:
            print("README.md's benchmark table is stale: run benchmarks/readme_table.py")
            return 1
        return 0
    README.write_text(updated)
    return 0


if __name__ == "__main__":
    sys.exit(main())
