"""The Markdown table of a peer-harness run, with our ratios to each peer.

    python3 benchmarks/peer_table.py benchmarks/results/NVIDIA_H200.json

TFLOP/s per case and system; ``ours_sm90`` (generated Hopper kernel) against torch SDPA
flash (FlashAttention-2), cuDNN and IREE alone; causal/full is ours_sm90's causal TFLOP/s
over the same shape's full attention.
"""

from __future__ import annotations

import json
import sys

SYSTEMS = [
    "ours_sm90",
    "ours",
    "iree_sdpa",
    "torch_sdpa_flash",
    "torch_sdpa_cudnn",
    "torch_compile_unfused",
    "torch_eager_unfused",
]


def table(records: list[dict]) -> str:
    by_case: dict[str, dict[str, dict]] = {}
    for r in records:
        by_case.setdefault(r["case"], {})[r["system"]] = r

    def tflops(case: str, system: str) -> float | None:
        return by_case.get(case, {}).get(system, {}).get("tflops")

    head = [*SYSTEMS, "/ flash", "/ cuDNN", "/ IREE alone", "causal / full", "rel. err"]
    lines = ["| case | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    for case, systems in by_case.items():
        cells = []
        for system in SYSTEMS:
            value = tflops(case, system)
            cells.append(f"{value:.0f}" if value else ("OOM" if system in systems else "-"))
        ours = tflops(case, "ours_sm90")
        for peer in ("torch_sdpa_flash", "torch_sdpa_cudnn", "iree_sdpa"):
            other = tflops(case, peer)
            cells.append(f"{ours / other:.2f}x" if ours and other else "-")
        full = tflops(case.replace("_causal", "_full"), "ours_sm90")
        cells.append(f"{ours / full:.2f}" if case.endswith("_causal") and ours and full else "")
        error = systems.get("ours_sm90", {}).get("rel_err")
        cells.append(f"{error:.1e}" if error is not None else "-")
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(json.loads(open(sys.argv[1]).read())))
