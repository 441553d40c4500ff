"""IREE's attention op on the CPU under lowering configurations of our choosing.

    .venv/bin/python benchmarks/cpu_attention_configs.py B H N D ["DIST|PARALLEL|REDUCTION" ...]

Compiles ``F.scaled_dot_product_attention`` (fp32, (B, H, N, D)) with
``attention="iree"`` to the fused stage, then once as IREE configures it and once per
given configuration, set as a ``compilation_info`` on the ``iree_linalg_ext.attention``
op (tile lists for its loops, ``#iree_cpu.lowering_config`` syntax, pipeline
``LinalgExtTileAndVectorize``), and times each module through ``fc.load`` (median of
10 blocking calls; this machine's threads), next to the CPU's default (our
online-softmax rewrite, host loops of dispatches) timed the same way. IREE's op is one
dispatch per attention: this measures how far a configuration takes it.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import fusion_compiler as fc
from fusion_compiler.targets import get_target

BIN = Path(sys.executable).parent
_PIPELINE = (
    "#iree_codegen.translation_info<pipeline = #iree_cpu.pipeline<LinalgExtTileAndVectorize>>"
)


class _SDPA(torch.nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


def _time(mlir: str, shape: str, folder: Path) -> str:
    """Compiles ``mlir`` for this CPU and times it; or why it does not compile."""
    source, module = folder / "m.mlir", folder / "m.vmfb"
    source.write_text(mlir)
    compiled = subprocess.run(
        [
            BIN / "iree-compile", "--compile-from=input", source, "-o", module,
            *get_target("cpu").flags,
        ],
        capture_output=True, text=True,
    )  # fmt: skip
    if compiled.returncode:
        errors = [line for line in compiled.stderr.splitlines() if "error:" in line]
        return "fails to compile: " + (errors[0].split("error:")[1].strip() if errors else "?")
    return _run(module.read_bytes(), shape)


def _run(module: bytes, shape: str) -> str:
    """Median wall time of 10 blocking calls through ``fc.load`` (local-task), as a user
    calls it, after one warm-up call."""
    sizes = [int(x) for x in shape.split("x")[:-1]]
    inputs = [torch.randn(sizes) for _ in range(3)]
    call = fc.load(module, device="local-task")
    call(*inputs)
    times = []
    for _ in range(10):
        start = time.perf_counter()
        call(*inputs)
        times.append((time.perf_counter() - start) * 1e3)
    return f"{statistics.median(times):.1f} ms"


def main(b: int, h: int, n: int, d: int, configs: list[str]) -> None:
    inputs = tuple(torch.randn(b, h, n, d) for _ in range(3))
    fused = fc.compile(
        _SDPA(), example_args=inputs, target="cpu", attention="iree", compile_to="fused"
    )
    shape = f"{b}x{h}x{n}x{d}xf32"
    print(f"| B{b} H{h} N{n} D{d} fp32 | configuration | time per call |")
    print("|---|---|---|")
    with tempfile.TemporaryDirectory() as directory:
        folder = Path(directory)
        online = _run(fc.compile(_SDPA(), example_args=inputs, target="cpu").vmfb, shape)
        print(f"| | ours: online softmax, host loops of dispatches (the default) | {online} |")
        print(f"| | IREE's op, IREE's own configuration | {_time(fused.mlir, shape, folder)} |")
        for config in configs:
            dist, parallel, reduction = config.split("|")
            info = (
                "{compilation_info = #iree_codegen.compilation_info<lowering_config = "
                f"#iree_cpu.lowering_config<distribution = [{dist}], vector_common_parallel = "
                f"[{parallel}], vector_reduction = [{reduction}]>, "
                f"translation_info = {_PIPELINE}>}}"
            )
            mlir = re.sub(
                r"(iree_linalg_ext\.attention <indexing_maps = \[[^\]]*\]>)",
                rf"\1 {info}",
                fused.mlir,
            )
            label = (
                f"IREE's op, distribution [{dist}], parallel [{parallel}], reduction [{reduction}]"
            )
            print(f"| | {label} | {_time(mlir, shape, folder)} |", flush=True)


if __name__ == "__main__":
    main(*map(int, sys.argv[1:5]), sys.argv[5:])
