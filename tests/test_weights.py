"""Weights outside the module (``fc.compile(..., weights="external")``): the module reads
the model's parameters as IREE parameters, named by their state-dict keys, and
``fc.load(module, weights=...)`` gives them (a state dict, or a .safetensors file)."""

import pytest
import torch
from conftest import rel_error, tool
from transformer_blocks import BLOCKS, CONFIG

import fusion_compiler as fc
from fusion_compiler.errors import FusionCompilerError
from fusion_compiler.runtime import write_parameters


@pytest.fixture(scope="module")
def llama():
    """The Llama block (RMSNorm, RoPE, GQA, causal) compiled with its weights outside."""
    factory, shapes, fused = BLOCKS["llama"]
    torch.manual_seed(0)
    model = factory(CONFIG).eval()
    x = torch.randn(*shapes[0])
    external = fc.compile(model, example_args=(x,), weights="external")
    assert external.stats["attention_ops"] == fused
    return factory, model, x, external


def test_external_weights_leave_the_module_and_give_pytorchs_answer(llama) -> None:
    factory, model, x, external = llama
    embedded = fc.compile(model, example_args=(x,))
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    assert len(embedded.vmfb) - len(external.vmfb) > 0.9 * weight_bytes
    with torch.no_grad():
        want = model(x)
    assert rel_error(fc.load(external, weights=model.state_dict())(x), want) < 1e-5


def test_the_same_module_runs_other_weights(llama) -> None:
    """Nothing of the weights it was compiled with is left in the module."""
    factory, _, x, external = llama
    torch.manual_seed(1)
    other = factory(CONFIG).eval()
    with torch.no_grad():
        want = other(x)
    assert rel_error(fc.load(external, weights=other.state_dict())(x), want) < 1e-5


def test_weights_from_a_safetensors_file(llama, tmp_path) -> None:
    from safetensors.torch import save_file

    _, model, x, external = llama
    path = tmp_path / "block.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, path)
    with torch.no_grad():
        want = model(x)
    assert rel_error(fc.load(external, weights=path)(x), want) < 1e-5


def test_saved_module_keeps_its_weights_beside_it(llama, tmp_path) -> None:
    """save writes m.vmfb and m.irpa (the weights only: the module holds none); loading
    the path reads both; without the archive, the error says what to give."""
    _, model, x, external = llama
    path = external.save(tmp_path / "block.vmfb")
    archive = tmp_path / "block.irpa"
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    assert archive.stat().st_size >= weight_bytes > path.stat().st_size
    with torch.no_grad():
        want = model(x)
    assert rel_error(fc.load(path)(x), want) < 1e-5
    archive.rename(tmp_path / "elsewhere.irpa")
    with pytest.raises(FusionCompilerError, match="compiled with weights='external'"):
        fc.load(path)
    assert rel_error(fc.load(path, weights=tmp_path / "elsewhere.irpa")(x), want) < 1e-5
    with pytest.raises(FusionCompilerError, match="is where the module's weights go"):
        external.save(tmp_path / "block.irpa")


def test_an_archive_of_other_weights_is_refused(llama, tmp_path) -> None:
    _, model, _, external = llama
    state = model.state_dict()
    name = next(iter(n for n, _ in model.named_parameters()))
    other = {k: v.double() if k == name else v for k, v in state.items()}
    write_parameters(other, tmp_path / "doubled.irpa")
    with pytest.raises(FusionCompilerError, match=f"bytes for '{name}'"):
        fc.load(external, weights=tmp_path / "doubled.irpa")
    del other[name]
    write_parameters(other, tmp_path / "short.irpa")
    with pytest.raises(FusionCompilerError, match=f"holds no '{name}'"):
        fc.load(external, weights=tmp_path / "short.irpa")


def test_cli_writes_the_weights_beside_the_module(tmp_path) -> None:
    factory, shapes, _ = BLOCKS["llama"]
    torch.manual_seed(0)
    model = factory(CONFIG).eval()
    x = torch.randn(*shapes[0])
    torch.export.save(torch.export.export(model, (x,)), tmp_path / "block.pt2")
    vmfb = tmp_path / "block.vmfb"
    result = tool(
        "fusion-compile", str(tmp_path / "block.pt2"), "--weights", "external", "-o", str(vmfb)
    )
    assert str(tmp_path / "block.irpa") in result.stderr
    with torch.no_grad():
        want = model(x)
    assert rel_error(fc.load(vmfb)(x), want) < 1e-5


def test_half_precision_weights() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))
    model = model.to(torch.bfloat16).eval()
    x = torch.randn(4, 32, dtype=torch.bfloat16)
    module = fc.compile(model, example_args=(x,), weights="external")
    with torch.no_grad():
        want = model.float()(x.float())
    got = fc.load(module, weights=model.to(torch.bfloat16).state_dict())(x)
    assert got.dtype == torch.bfloat16 and rel_error(got.float(), want) < 2e-2


def test_weights_that_do_not_fit_the_module_are_refused_naming_them(llama) -> None:
    _, model, _, external = llama
    with pytest.raises(FusionCompilerError, match="compiled with weights='external'"):
        fc.load(external)
    state = model.state_dict()
    missing = dict(state)
    name = next(iter(n for n, _ in model.named_parameters()))
    del missing[name]
    with pytest.raises(FusionCompilerError, match=f"no '{name}', which the module reads"):
        fc.load(external, weights=missing)
    wrong = dict(state)
    wrong[name] = torch.zeros(3, dtype=state[name].dtype)
    with pytest.raises(FusionCompilerError, match=rf"weights\['{name}'\] is \(3\)"):
        fc.load(external, weights=wrong)
    with pytest.raises(FusionCompilerError, match="no such file"):
        fc.load(external, weights="/nonexistent/weights.irpa")
    with pytest.raises(FusionCompilerError, match="expected 'embedded' or 'external'"):
        fc.compile(model, example_args=(torch.randn(1, 4, 128),), weights="outside")
