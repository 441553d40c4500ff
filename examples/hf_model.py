"""Compile a Hugging Face transformers model: export it, compile it with the IR dumped,
print what happened to every attention, run it and compare with PyTorch.

    .venv/bin/python examples/hf_model.py llama                  # a model type, random weights
    .venv/bin/python examples/hf_model.py path/to/checkpoint/    # a checkpoint on disk
    .venv/bin/python examples/hf_model.py gpt2 --target cuda --cuda-arch sm_90 --dtype float16

A model type builds a small model of that architecture from ``AutoConfig.for_model``
with random weights (nothing is downloaded); ``--config key=value`` changes its config.
The inputs are two sequences, the second padded (on the left for decoders).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

import fusion_compiler as fc

SMALL = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256)
ENCODERS = {"bert", "roberta", "distilbert", "modernbert", "clip_text_model", "electra"}


class FirstOutput(torch.nn.Module):
    """The model's first output (last hidden state or logits) from ids and a mask."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=ids, attention_mask=mask)[0]


def _value(text: str) -> object:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def load(source: str, overrides: dict, attn: str) -> tuple[torch.nn.Module, bool]:
    """The model (eval mode) and whether it reads the sequence causally."""
    import transformers

    if Path(source).is_dir():
        model = transformers.AutoModel.from_pretrained(source, attn_implementation=attn)
        config = model.config
    else:
        config = transformers.AutoConfig.for_model(
            source, **{**SMALL, "vocab_size": 1000, "pad_token_id": 0, **overrides}
        )
        torch.manual_seed(0)
        model = transformers.AutoModel.from_config(config, attn_implementation=attn)
    decoder = config.model_type not in ENCODERS and not getattr(config, "is_encoder_decoder", 0)
    return FirstOutput(model.eval()).eval(), decoder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="a model type (llama, gpt2, bert, ...) or a checkpoint dir")
    parser.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"])
    parser.add_argument("--target", default="cpu", choices=["cpu", "cuda", "vulkan"])
    parser.add_argument("--cuda-arch", default="sm_80")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--dump-ir", default="ir/hf_model", help="folder for the IR of every stage")
    parser.add_argument("--save", help="write the compiled module here (.vmfb)")
    args = parser.parse_args()
    overrides = dict(item.split("=", 1) for item in args.config)
    model, decoder = load(args.model, {k: _value(v) for k, v in overrides.items()}, args.attn)
    dtype = getattr(torch, args.dtype)
    model = model.to(dtype)

    vocab = model.model.config.vocab_size
    ids = torch.randint(2, vocab, (2, args.seq))
    mask = torch.ones(2, args.seq, dtype=torch.long)
    pad = args.seq // 4
    mask[1, :pad] = 0 if decoder else 1
    mask[1, args.seq - pad :] = 1 if decoder else 0

    start = time.perf_counter()
    program = torch.export.export(model, (ids, mask), strict=False)
    module = fc.compile(program, target=args.target, cuda_arch=args.cuda_arch, dump_ir=args.dump_ir)
    print(f"compiled in {time.perf_counter() - start:.1f} s; IR of every pass in {args.dump_ir}/")
    print(f"stats: {module.stats}")
    for remark in module.remarks:
        if "attention" in remark.message:
            print(f"  {remark}")
    if args.save:
        module.save(args.save)
        print(f"saved {args.save}")

    device = {"cpu": "local-task", "cuda": "cuda", "vulkan": "vulkan"}[args.target]
    if device == "cuda" and not torch.cuda.is_available():
        print("no CUDA GPU here: not run (load the saved module where there is one)")
        return 0
    run = fc.load(module, device=device)
    with torch.no_grad():
        want = model.float()(ids, mask)
    got = run(ids.cuda(), mask.cuda()) if device == "cuda" else run(ids, mask)
    got = got.float().cpu()
    error = ((got - want).norm() / want.norm()).item()
    print(f"rel. error against PyTorch (float32): {error:.1e}")
    bound = {"float32": 1e-4, "float16": 3e-3, "bfloat16": 3e-2}[args.dtype]
    return 0 if torch.isfinite(got).all() and error < bound else 1


if __name__ == "__main__":
    sys.exit(main())
