"""Compile an attention block for the CPU, run it, compare with PyTorch.

.venv/bin/python examples/attention_block.py [--dump-ir ir/]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from models import ExplicitAttentionBlock, SDPABlock  # noqa: E402

import fusion_compiler as fc  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump-ir", default="ir", help="folder for the IR of every stage")
    args = parser.parse_args()
    torch.manual_seed(0)
    x = torch.randn(2, 77, 64)
    for name, model, attention in [
        ("explicit matmul/softmax/matmul", ExplicitAttentionBlock(), "iree"),
        ("explicit, our online softmax", ExplicitAttentionBlock(), "online-softmax"),
        ("SDPA, causal", SDPABlock(causal=True), "iree"),
    ]:
        model.eval()
        dump = Path(args.dump_ir) / f"{name.split()[0].strip(',').lower()}-{attention}"
        start = time.perf_counter()
        module = fc.compile(
            model, example_args=(x,), target="cpu", dump_ir=dump, attention=attention
        )
        seconds = time.perf_counter() - start
        run = fc.load(module, device="local-task")
        fresh = torch.randn_like(x)
        with torch.no_grad():
            want = model(fresh)
        got = run(fresh)
        error = ((got - want).norm() / want.norm()).item()
        print(
            f"{name}: compiled in {seconds:.1f} s, stats {module.stats}, "
            f"rel. error vs PyTorch {error:.1e}"
        )
        print(f"  IR after every stage and pass: {dump}/ ({len(list(dump.glob('*.mlir')))} files)")
        if not error < 1e-4:
            print("  MISMATCH", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
