"""Greedy decoding with a compiled decode step and a KV cache (examples/generate.py)."""

import torch
from generate import Config, Decoder, generate

import fusion_compiler as fc


def test_compiled_decode_step_generates_the_same_tokens_as_pytorch() -> None:
    torch.manual_seed(0)
    model = Decoder(Config(max_len=32)).eval()
    prompt = torch.tensor([[3, 14, 15]])
    example = (prompt[:, :1], torch.tensor([0]), *model.empty_caches(1))
    module = fc.compile(model, example_args=example)
    assert module.stats["attention_ops"] == 2  # Nq = 1 against the whole cache, per layer
    run = fc.load(module)
    assert run["main"].mutated == [2, 3, 4, 5]  # the caches, written where they are
    with torch.no_grad():
        want = generate(model, model, prompt, steps=12)
    assert generate(run, model, prompt, steps=12) == want


def test_saved_decode_step_runs_from_another_process(tmp_path) -> None:
    """--save compiles and writes the module and weights; --load (what a runtime-only
    machine runs) generates with them, checked against PyTorch by the script."""
    import subprocess
    import sys

    from conftest import ROOT

    script = [sys.executable, str(ROOT / "examples" / "generate.py"), "--steps", "8"]
    subprocess.run([*script, "--save", str(tmp_path)], check=True, capture_output=True)
    assert (tmp_path / "decode_step.vmfb").exists()
    done = subprocess.run([*script, "--load", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "same tokens as PyTorch" in done.stdout, done.stdout
