"""The Hugging Face support matrix: every case of tests/test_hf_models.py, on the CPU.

    .venv/bin/python benchmarks/hf_support.py benchmarks/results/hf_support_cpu.md

Each architecture of ``tests/hf_corpus.py`` (tiny config, random weights), with each
attention implementation transformers has for it, exported with a padding mask,
compiled for the CPU and run on fresh inputs against the model in PyTorch.
"""

from __future__ import annotations

import platform
import sys
import time
from datetime import date
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import hf_corpus  # noqa: E402
import transformers  # noqa: E402
from test_hf_models import CASES  # noqa: E402

import fusion_compiler as fc  # noqa: E402


def _case(name: str, impl: str) -> str:
    model, inputs = hf_corpus.build(name, impl)
    start = time.perf_counter()
    module = fc.compile(torch.export.export(model, inputs(), strict=False), target="cpu")
    seconds = time.perf_counter() - start
    fresh = inputs()
    with torch.no_grad():
        want = model(*fresh)
    got = fc.load(module)(*fresh)
    error = ((got.double() - want.double()).norm() / want.double().norm()).item()
    expected = hf_corpus.ARCHS[name].attentions
    ok = (
        bool(torch.isfinite(got).all())
        and error < 1e-4
        and module.stats["attention_ops"] == expected
        and module.stats["softmax_ops"] == 0
    )
    return (
        f"| {name} | {impl} | {expected} / {module.stats['attention_ops']} | {error:.1e} "
        f"| {seconds:.1f} | {'yes' if ok else 'NO'} |"
    )


def main() -> int:
    rows = [
        "| architecture | attention | attentions expected / fused "
        "| rel. error | compile s | pass |",
        "|---|---|---|---|---|---|",
    ]
    for name, impl in CASES:
        try:
            rows.append(_case(name, impl))
        except Exception as exc:  # a failing case is a row of the table, not the end of it
            rows.append(f"| {name} | {impl} | - | - | - | NO: {type(exc).__name__} |")
        print(rows[-1], flush=True)
    passed = sum(row.endswith("| yes |") for row in rows)
    header = (
        f"# Hugging Face architectures on the CPU\n\n"
        f"`.venv/bin/python benchmarks/hf_support.py {sys.argv[1]}`, {date.today()}, "
        f"{platform.machine()} ({torch.get_num_threads()} threads), torch {torch.__version__}, "
        f"transformers {transformers.__version__}.\n\n"
        f"{passed} of {len(CASES)} cases pass: every attention fused, no softmax left, rel. "
        "error < 1e-4 against the model in PyTorch (float32), on inputs with a padding mask "
        "(decoders padded on the left, so causal rows of the padded sequence see no key).\n\n"
    )
    Path(sys.argv[1]).write_text(header + "\n".join(rows) + "\n")
    return 0 if passed == len(CASES) else 1


if __name__ == "__main__":
    sys.exit(main())
