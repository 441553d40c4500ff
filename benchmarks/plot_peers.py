"""TFLOP/s against N, one line per system, from a peer harness run.

    .venv/bin/python benchmarks/plot_peers.py benchmarks/results/peers_h200.json OUT.png

Needs matplotlib (pip install matplotlib). One panel per (dtype, causal), for the cases
with H·D = 2048 (H16 D128 and H8 D128 at growing N, H32 D64).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(source: str, target: str) -> None:
    records = [r for r in json.loads(open(source).read()) if r.get("tflops") and r["Hkv"] == r["H"]]
    panels = sorted({(r["dtype"], r["causal"]) for r in records})
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for ax, (dtype, causal) in zip(axes[0], panels, strict=True):
        lines: dict[str, list[tuple[int, float]]] = defaultdict(list)
        for r in records:
            if (r["dtype"], r["causal"]) == (dtype, causal) and r["D"] == 128 and r["B"] == 1:
                lines[r["system"]].append((r["Nq"], r["tflops"]))
        for system, points in sorted(lines.items()):
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=system)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("N (B=1, D=128)")
        ax.set_ylabel("TFLOP/s")
        ax.set_title(f"{dtype}, {'causal' if causal else 'full'}")
        ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(target, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
