"""fc.load works where only iree-base-runtime and torch are installed (deploy machines)."""

import subprocess
import sys
from pathlib import Path

import torch
from models import SDPABlock

import fusion_compiler as fc

_SCRIPT = """
import sys
import importlib.abc

class NoCompiler(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "iree.compiler" or name.startswith("iree.compiler."):
            raise ImportError("no IREE compiler on this machine")
        return None

sys.meta_path.insert(0, NoCompiler())
import torch
import fusion_compiler as fc
run = fc.load(sys.argv[1])
x = torch.load(sys.argv[2])
torch.save(run(x), sys.argv[3])
assert "iree.compiler" not in sys.modules
"""


def test_load_and_run_without_the_compiler(tmp_path: Path) -> None:
    model = SDPABlock(causal=True).eval()
    fc.compile(model, example_args=(torch.randn(1, 12, 64),)).save(tmp_path / "m.vmfb")
    x = torch.randn(1, 12, 64)
    torch.save(x, tmp_path / "x.pt")
    subprocess.run(
        [
            sys.executable,
            "-c",
            _SCRIPT,
            str(tmp_path / "m.vmfb"),
            str(tmp_path / "x.pt"),
            str(tmp_path / "y.pt"),
        ],
        check=True,
    )
    with torch.no_grad():
        want = model(x)
    got = torch.load(tmp_path / "y.pt")
    assert ((got - want).norm() / want.norm()).item() < 1e-4


def test_import_loads_neither_torch_nor_iree() -> None:
    """``import fusion_compiler`` is quick: torch and IREE come with compile or load."""
    script = (
        "import sys, fusion_compiler as fc\n"
        "assert fc.Stage and fc.FusionCompilerError\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'iree')))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
