"""Whole models on the GPU: ours against torch eager and torch.compile, every system timed
the three ways of harness.py (device, back-to-back loop, one blocking call).

On the CPU machine:  .venv/bin/python benchmarks/models_gpu.py prepare build/models
On the GPU machine:  python3 benchmarks/models_gpu.py run build/models OUT

Models at the sizes of the public checkpoints, from transformers' configs, in fp16:
GPT-2 small, BERT-base, ViT-B/16, Whisper-small's encoder and Llama-3.2-1B's shape (16
layers, d 2048, 32 query / 8 KV heads, vocabulary 128256), each called as a user calls it
for prefill (token ids alone; pixels; mel features) and returning its last hidden state,
and Llama-3.2-1B's shape for a decoding step (one token per sequence against a KV cache
of 4K or 32K positions, given as inputs per layer as transformers' DynamicCache holds
them; tokens/s is batch over the blocking call's time).
The modules are compiled with ``weights="external"``: they hold none of the weights. On
the GPU machine each model is built from its config there (random weights, a seed), and
the same weights serve every system: ``fc.load(module, weights=state_dict)`` for ours,
the model itself for torch. Each output is checked against that model in float32.
TFLOP/s counts 2 x parameters x tokens (the matrix products; attention's own products
left out), over device time.

Systems: ours_sm90 (fc.compile, cuda_arch="sm_90": attention as generated kernels, the
rest by IREE), torch_eager, torch_compile (torch.compile, default mode); with --autotune
also torch_compile_max_autotune ("max-autotune-no-cudagraphs", minutes of tuning per
model) and, for decoding, torch_compile_reduce_overhead (CUDA graphs; also alone with
--reduce-overhead); with --baseline FOLDER, ours_sm90_baseline: the modules of another
build, timed in the same run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import harness
import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import fusion_compiler as fc  # noqa: E402


@dataclass(frozen=True)
class Case:
    model: str  # a key of MODELS
    batch: int
    tokens: int  # text: ids per sequence; ViT: 224 x 224 images; Whisper: audio frames x 2
    past: int = 0  # > 0: a decoding step of one token against a cache of this many

    @property
    def name(self) -> str:
        if self.past:
            return f"{self.model}_decode_B{self.batch}_past{self.past}"
        return f"{self.model}_B{self.batch}_N{self.tokens}"


def _gpt2():
    config = transformers.GPT2Config(n_positions=2048)
    return transformers.GPT2Model(config), "ids"


def _bert():
    return transformers.BertModel(transformers.BertConfig(), add_pooling_layer=False), "ids"


def _vit():
    return transformers.ViTModel(transformers.ViTConfig(), add_pooling_layer=False), "pixels"


def _whisper_encoder():
    config = transformers.WhisperConfig(  # whisper-small
        d_model=768,
        encoder_layers=12,
        encoder_attention_heads=12,
        encoder_ffn_dim=3072,
        decoder_layers=12,
        decoder_attention_heads=12,
        decoder_ffn_dim=3072,
        num_mel_bins=80,
    )
    return transformers.WhisperModel(config).get_encoder(), "mel"


def _llama_1b():
    config = transformers.LlamaConfig(  # Llama-3.2-1B's shape
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=64,
        vocab_size=128256,
        max_position_embeddings=8192,
        rope_theta=500000.0,
        tie_word_embeddings=True,
    )
    return transformers.LlamaModel(config), "ids"


MODELS: dict[str, Callable] = {
    "gpt2_small": _gpt2,
    "bert_base": _bert,
    "vit_b16": _vit,
    "whisper_small_encoder": _whisper_encoder,
    "llama_3.2_1b_shape": _llama_1b,
}
CASES = {
    c.name: c
    for c in (
        Case("gpt2_small", 1, 512),
        Case("gpt2_small", 4, 2048),
        Case("bert_base", 1, 512),
        Case("bert_base", 8, 512),
        Case("vit_b16", 1, 197),
        Case("vit_b16", 32, 197),
        Case("whisper_small_encoder", 1, 1500),
        Case("llama_3.2_1b_shape", 1, 512),
        Case("llama_3.2_1b_shape", 4, 2048),
        Case("llama_3.2_1b_shape", 1, 8192),
        Case("llama_3.2_1b_shape", 1, 1, past=4096),
        Case("llama_3.2_1b_shape", 16, 1, past=4096),
        Case("llama_3.2_1b_shape", 1, 1, past=32768),
    )
}


class Prefill(torch.nn.Module):
    """The model called as a user calls it for prefill, its last hidden state out."""

    def __init__(self, model: torch.nn.Module, kind: str) -> None:
        super().__init__()
        self.model, self.kind = model, kind

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "ids":
            return self.model(input_ids=x)[0]
        if self.kind == "pixels":
            return self.model(pixel_values=x)[0]
        return self.model(input_features=x)[0]


class DecodeStep(torch.nn.Module):
    """One decoding step as transformers runs it: the new tokens against the past keys
    and values given as inputs (per layer), through the model's own DynamicCache."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model, self.kind = model, "decode"

    def forward(self, ids: torch.Tensor, *past: torch.Tensor) -> torch.Tensor:
        cache = transformers.DynamicCache(config=self.model.config)
        for layer in range(len(past) // 2):
            cache.update(past[2 * layer], past[2 * layer + 1], layer)
        return self.model(input_ids=ids, past_key_values=cache, use_cache=True)[0]


def _model(case: Case) -> torch.nn.Module:
    torch.manual_seed(0)
    model, kind = MODELS[case.model]()
    wrapped = DecodeStep(model) if case.past else Prefill(model, kind)
    return wrapped.eval().half()


def _inputs(case: Case, model: torch.nn.Module, device: str) -> tuple[torch.Tensor, ...]:
    """A call's inputs: the ids (pixels, features), and for a decoding step the cache."""
    if not case.past:
        return (_input(case, model.kind, device),)
    config = model.model.config
    heads, head_dim = config.num_key_value_heads, config.head_dim
    shape = (case.batch, heads, case.past, head_dim)
    cache = [
        torch.randn(shape, device=device, dtype=torch.float16)
        for _ in range(2 * config.num_hidden_layers)
    ]
    return (torch.randint(2, 30000, (case.batch, 1), device=device), *cache)


def _input(case: Case, kind: str, device: str) -> torch.Tensor:
    if kind == "ids":
        return torch.randint(2, 30000, (case.batch, case.tokens), device=device)
    if kind == "pixels":
        return torch.randn(case.batch, 3, 224, 224, device=device, dtype=torch.float16)
    # Whisper: 80 mel bins of 3000 frames, which its convolutions halve to 1500 positions
    return torch.randn(case.batch, 80, 2 * case.tokens, device=device, dtype=torch.float16)


def _selected(args: argparse.Namespace) -> dict[str, Case]:
    return {name: case for name, case in CASES.items() if harness.selected(name, args.only)}


def prepare(folder: Path, args: argparse.Namespace) -> None:
    for name, case in _selected(args).items():
        model = _model(case)

        def build(model=model, case=case):
            example = _inputs(case, model, "cpu")
            compiled = fc.compile(
                model, example, target="cuda", cuda_arch="sm_90", weights="external"
            )
            compiled.weights = None  # made on the GPU machine from the config: not written
            return compiled

        harness.save_module(folder, f"{name}.ours_sm90", build)


def _ours(folder: Path, name: str, weights: dict) -> Callable:
    """Our module's entry point, or a call that raises why it could not be loaded (the
    system's record then says so)."""
    try:
        return fc.load(folder / f"{name}.ours_sm90.vmfb", device="cuda", weights=weights)["main"]
    except Exception as exc:  # noqa: BLE001 - not prepared, or does not load: a record
        reason = f"{type(exc).__name__}: {exc}"

        def fails(*args, reason=reason):
            raise RuntimeError(reason)

        return fails


def run(folder: Path, out: Path, args: argparse.Namespace) -> list[dict]:
    records = []
    for name, case in _selected(args).items():
        model = _model(case).cuda()
        inputs = [_inputs(case, model, "cuda") for _ in range(3)]
        with torch.no_grad():
            floats = (x.float() if x.is_floating_point() else x for x in inputs[0])
            reference = model.float()(*floats).float()
        model.half()
        weights = model.state_dict()
        systems: dict[str, Callable] = {"ours_sm90": _ours(folder, name, weights)}
        if args.baseline:
            systems["ours_sm90_baseline"] = _ours(args.baseline, name, weights)
        if not args.ours_only:
            systems.update(torch_eager=model, torch_compile=torch.compile(model))
        if args.autotune:
            systems["torch_compile_max_autotune"] = torch.compile(
                model, mode="max-autotune-no-cudagraphs"
            )
        if case.past and (args.autotune or args.reduce_overhead):
            systems["torch_compile_reduce_overhead"] = torch.compile(model, mode="reduce-overhead")
        parameters = sum(p.numel() for p in model.parameters())
        tokens = case.batch * (197 if model.kind == "pixels" else case.tokens)
        flops = 2 * parameters * tokens
        fields = dict(case=name, model=case.model, B=case.batch, N=case.tokens, past=case.past)
        for system, call in systems.items():
            record = harness.measure(fields, system, call, inputs, reference, flops, True)
            if case.past and "error" not in record:
                record["tokens_per_s"] = case.batch / (record["call_ms"] * 1e-3)
            records.append(record)
        harness.write(records, out, "models")
        del systems, model
        torch.cuda.empty_cache()
    return records


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--autotune",
        action="store_true",
        help="also torch.compile max-autotune-no-cudagraphs (and reduce-overhead for decoding)",
    )
    parser.add_argument(
        "--ours-only",
        action="store_true",
        help="time ours (and --baseline) alone: two builds compared, no torch system",
    )
    parser.add_argument(
        "--reduce-overhead",
        action="store_true",
        help="decoding steps: also torch.compile reduce-overhead (CUDA graphs)",
    )


if __name__ == "__main__":
    sys.exit(harness.main(__doc__.splitlines()[0], prepare, run, options=_options))
