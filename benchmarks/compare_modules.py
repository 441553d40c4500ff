"""Two builds of the same benchmark modules, timed in one process: A/B of a kernel change.

On the CPU machine, compile the grid twice (e.g. before and after a change):
    .venv/bin/python benchmarks/attention_peers.py prepare build/a ours_sm90
    .venv/bin/python benchmarks/attention_peers.py prepare build/b ours_sm90
On the GPU machine:
    python3 benchmarks/compare_modules.py build/a build/b [SYSTEM] [NAME_SUBSTRING]
For every case whose module is in both folders, times A, B, A, B on the same inputs
(device time, as attention_peers.py) and prints each module's best time and B / A.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from attention_peers import CASES, _iree_system, _name, _qkv  # noqa: E402


def main(a: Path, b: Path, system: str = "ours_sm90", only: str = "") -> int:
    print(f"{'case':<42} {'A ms':>8} {'B ms':>8} {'B/A time':>9}")
    for case in CASES:
        name = f"{_name(case)}.{system}.vmfb"
        if only not in name or not (a / name).exists() or not (b / name).exists():
            continue
        inputs = [_qkv(case, "cuda") for _ in range(3)]
        timers = [_iree_system(folder / name)[0] for folder in (a, b)]
        times: list[list[float]] = [[], []]
        for _ in range(2):
            for i, timer in enumerate(timers):
                times[i].append(timer(inputs))
        best = [min(t) for t in times]
        print(f"{_name(case):<42} {best[0]:8.3f} {best[1]:8.3f} {best[1] / best[0]:9.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]), *sys.argv[3:]))
