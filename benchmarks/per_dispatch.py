"""Each dispatch of an example block as a module of its own: which one a driver refuses.

    .venv/bin/python benchmarks/per_dispatch.py prepare DIR [BLOCK] [--target T] [--dtype D]
    python3 benchmarks/per_dispatch.py run DIR [--device vulkan]      # where the GPU is

``prepare`` compiles one block of ``examples/transformer_blocks.py`` with our passes to
the fused stage, then has IREE write every dispatch of it as a standalone benchmark
(``--iree-hal-dump-executable-benchmarks-to``) and compiles each to DIR/<dispatch>.vmfb.
``run`` loads and runs each on the device with ``iree-benchmark-module`` (the runtime's
tool) and prints a Markdown table: the dispatches that ran, and the error of each that
did not (such as a driver refusing to build its pipeline).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def prepare(folder: Path, block: str, target: str, dtype: str) -> None:
    import torch

    sys.path.insert(0, str(ROOT / "examples"))
    from transformer_blocks import BLOCKS, CONFIG

    import fusion_compiler as fc
    from fusion_compiler.targets import get_target

    factory, shapes, _ = BLOCKS[block]
    torch.manual_seed(0)
    model = factory(CONFIG).eval().to(getattr(torch, dtype))
    example = tuple(torch.randn(s, dtype=getattr(torch, dtype)) for s in shapes)
    fused = fc.compile(model, example_args=example, target=target, compile_to="fused")
    folder.mkdir(parents=True, exist_ok=True)
    flags = list(get_target(target).flags)
    compiler = Path(sys.executable).parent / "iree-compile"
    with tempfile.TemporaryDirectory() as directory:
        source, sources = Path(directory) / "fused.mlir", Path(directory) / "dispatches"
        fused.save(source)
        # the whole block as fc.compile makes it, to see the failure in context
        subprocess.run(
            [compiler, "--compile-from=input", source, "-o", folder / "all.vmfb", *flags],
            check=True,
        )
        # constants passed as bindings (not inlined into dispatches), so that each
        # dispatch's benchmark module stands alone
        subprocess.run(
            [compiler, "--compile-from=input", source, "-o", Path(directory) / "all.vmfb",
             *flags, "--iree-flow-inline-constants-max-byte-length=0",
             f"--iree-hal-dump-executable-benchmarks-to={sources}"],
            check=True,
        )  # fmt: skip
        for benchmark in sorted(sources.glob("*.mlir")):
            out = folder / f"{benchmark.stem}.vmfb"
            done = subprocess.run([compiler, benchmark, "-o", out, *flags], capture_output=True)
            # a dispatch with constants inlined from the model's resources is not
            # standalone: IREE's benchmark dump leaves the resources out
            print(out.name, "compiled" if done.returncode == 0 else "not standalone", flush=True)


def run(folder: Path, device: str) -> int:
    tool = next(
        (p / "iree" / "_runtime_libs" / "iree-benchmark-module" for p in map(Path, sys.path)
         if (p / "iree" / "_runtime_libs" / "iree-benchmark-module").exists()),
        "iree-benchmark-module",
    )  # fmt: skip
    print("| dispatch | result |")
    print("|---|---|")
    failed = 0
    for module in sorted(folder.glob("*.vmfb")):
        # the whole block: only whether its executables load (its entry needs inputs)
        entry = ["--function=__none__"] if module.stem == "all" else []
        done = subprocess.run(
            [tool, f"--module={module}", f"--device={device}", "--benchmark_min_time=0.05", *entry],
            capture_output=True, text=True,
        )  # fmt: skip
        if done.returncode == 0:
            times = [line.split()[1:3] for line in done.stdout.splitlines() if "real_time" in line]
            result = "ran" + (f", {' '.join(times[0])}" if times else "")
        else:
            failed += 1
            lines = [x for x in done.stderr.splitlines() if x.strip()]
            result = "FAILED: " + " / ".join(lines[-2:])[:300].replace("|", "/")
        print(f"| {module.stem} | {result} |", flush=True)
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["prepare", "run"])
    parser.add_argument("folder", type=Path)
    parser.add_argument("block", nargs="?", default="gpt2")
    parser.add_argument("--target", default="vulkan")
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--device", default="vulkan")
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args.folder, args.block, args.target, args.dtype)
        return 0
    return run(args.folder, args.device)


if __name__ == "__main__":
    sys.exit(main())
