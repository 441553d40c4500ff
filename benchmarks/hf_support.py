"""The Hugging Face support matrix: every case of tests/test_hf_models.py, on the CPU or
on this machine's Vulkan device.

    .venv/bin/python benchmarks/hf_support.py benchmarks/results/hf_support_cpu.md
    .venv/bin/python benchmarks/hf_support.py OUT.md --target vulkan

Each architecture of ``tests/hf_corpus.py`` (tiny config, random weights), with each
attention implementation transformers has for it, exported with a padding mask,
compiled for the target and run on fresh inputs against the model in PyTorch. Vulkan:
compiled for ``vp_android_baseline_2022`` (runs on any device), the table says where
each shader's mask comes from (computed in it, read, or none: a band or no mask).
"""

from __future__ import annotations

import argparse
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

# fc.compile options and the runtime device per target
TARGETS = {
    "cpu": ({"target": "cpu"}, "local-task"),
    "vulkan": ({"target": "vulkan", "vulkan_target": "vp_android_baseline_2022"}, "vulkan"),
}


def _mask_source(module: fc.CompiledModule) -> str:
    """Where the Vulkan shaders' masks come from, from their remarks."""
    said = [r.message for r in module.remarks if "generated Vulkan kernel" in r.message]
    kinds = {
        "computed" if "computed" in m else "read" if "read from" in m else "none" for m in said
    }
    return ", ".join(sorted(kinds)) or "no shader"


def _case(name: str, impl: str, target: str) -> str:
    model, inputs = hf_corpus.build(name, impl)
    options, device = TARGETS[target]
    start = time.perf_counter()
    module = fc.compile(torch.export.export(model, inputs(), strict=False), **options)
    seconds = time.perf_counter() - start
    fresh = inputs()
    with torch.no_grad():
        want = model(*fresh)
    got = torch.as_tensor(fc.load(module, device=device)(*fresh))
    error = ((got.double() - want.double()).norm() / want.double().norm()).item()
    expected = hf_corpus.ARCHS[name].attentions
    ok = (
        bool(torch.isfinite(got).all())
        and error < 1e-4
        and module.stats["attention_ops"] == expected
        and module.stats["softmax_ops"] == hf_corpus.ARCHS[name].softmaxes
    )
    mask = f" {_mask_source(module)} |" if target == "vulkan" else ""
    return (
        f"| {name} | {impl} | {expected} / {module.stats['attention_ops']} |{mask} {error:.1e} "
        f"| {seconds:.1f} | {'yes' if ok else 'NO'} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--target", choices=sorted(TARGETS), default="cpu")
    args = parser.parse_args()
    vulkan = args.target == "vulkan"
    rows = [
        "| architecture | attention | attentions expected / fused "
        f"|{' mask in the shader |' if vulkan else ''} rel. error | compile s | pass |",
        "|---|---|---|" + ("---|" if vulkan else "") + "---|---|---|",
    ]
    for case in CASES:
        name, impl = case.values if hasattr(case, "values") else case  # pytest.param
        try:
            rows.append(_case(name, impl, args.target))
        except Exception as exc:  # a failing case is a row of the table, not the end of it
            blanks = " - |" * (4 if vulkan else 3)
            rows.append(f"| {name} | {impl} |{blanks} NO: {type(exc).__name__} |")
        print(rows[-1], flush=True)
    passed = sum(row.endswith("| yes |") for row in rows)
    where = "on Vulkan" if vulkan else "on the CPU"
    device = ""
    if vulkan:
        import iree.runtime as rt

        device = f", device {rt.get_driver('vulkan').query_available_devices()[0]['name']}"
    command = " ".join(sys.argv[1:])
    header = (
        f"# Hugging Face architectures {where}\n\n"
        f"`.venv/bin/python benchmarks/hf_support.py {command}`, {date.today()}, "
        f"{platform.machine()} ({torch.get_num_threads()} threads), torch {torch.__version__}, "
        f"transformers {transformers.__version__}{device}.\n\n"
        f"{passed} of {len(CASES)} cases pass: every attention fused, no softmax left but "
        "MoE routers', rel. error < 1e-4 against the model in PyTorch (float32), on inputs "
        "with a padding mask (decoders padded on the left, so causal rows of the padded "
        "sequence see no key).\n\n"
    )
    args.out.write_text(header + "\n".join(rows) + "\n")
    return 0 if passed == len(CASES) else 1


if __name__ == "__main__":
    sys.exit(main())
