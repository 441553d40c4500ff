"""Token generation with a compiled decode step whose KV caches stay where they live.

A decoder (random weights: embedding, pre-norm GQA attention over a KV cache and a gated
SiLU MLP per layer, LM head) is compiled once for one decode step: it takes the current
token, its position and the per-layer K/V caches, writes this token's keys and values
into the caches in place (``k_cache[:, :, position] = k``) and returns the next-token
logits. The caches are never copied: on CUDA the module writes into the torch tensors
the caller holds. The loop decodes greedily and checks every token against the same
model run by PyTorch.

    .venv/bin/python examples/generate.py [--steps 24] [--size toy|large] [--target cpu|cuda]
        [--cuda-arch sm_90] [--save DIR | --load DIR]

``--size large``: 8 layers, d 2048, 32 query / 8 KV heads, a 4096-token cache, compiled
with its weights outside the module (``weights="external"``), given at load time.
``--save DIR`` compiles only and writes the module; ``--load DIR`` generates with it
(on a machine with only the runtime, e.g. a GPU machine), making the weights there from
the same seed, and times tokens/s against the same model in torch eager.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class Config:
    vocab: int = 256
    dim: int = 64
    heads: int = 4
    kv_heads: int = 2
    layers: int = 2
    hidden: int = 128  # of the gated MLP
    max_len: int = 64  # slots of the KV cache


SIZES = {
    "toy": Config(),
    "large": Config(
        vocab=32000, dim=2048, heads=32, kv_heads=8, layers=8, hidden=5632, max_len=4096
    ),
}


class Layer(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = c.heads, c.kv_heads, c.dim // c.heads
        self.norm1, self.norm2 = nn.LayerNorm(c.dim), nn.LayerNorm(c.dim)
        self.q = nn.Linear(c.dim, c.dim, bias=False)
        self.kv = nn.Linear(c.dim, 2 * c.kv_heads * self.head_dim, bias=False)
        self.out = nn.Linear(c.dim, c.dim, bias=False)
        self.gate_up = nn.Linear(c.dim, 2 * c.hidden, bias=False)
        self.down = nn.Linear(c.hidden, c.dim, bias=False)

    def forward(self, x, position, k_cache, v_cache):
        """x (B, 1, dim); caches (B, kv_heads, max_len, head_dim), written at position."""
        b = x.shape[0]
        h = self.norm1(x)
        q = self.q(h).view(b, 1, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(h).view(b, 1, 2, self.kv_heads, self.head_dim).unbind(2)
        k_cache[:, :, position] = k.transpose(1, 2)
        v_cache[:, :, position] = v.transpose(1, 2)
        group = self.heads // self.kv_heads
        keys = k_cache.repeat_interleave(group, dim=1)  # (B, heads, max_len, head_dim)
        values = v_cache.repeat_interleave(group, dim=1)
        s = q @ keys.transpose(-2, -1) / math.sqrt(self.head_dim)
        later = torch.arange(k_cache.shape[2], device=x.device) > position
        p = torch.softmax(s.masked_fill(later, float("-inf")), dim=-1)
        x = x + self.out((p @ values).transpose(1, 2).reshape(b, 1, -1))
        gate, up = self.gate_up(self.norm2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class Decoder(nn.Module):
    """One decode step: ``forward(token (B, 1), position (1,), *caches)`` -> logits."""

    def __init__(self, c: Config = Config()):
        super().__init__()
        self.config = c
        self.embed = nn.Embedding(c.vocab, c.dim)
        self.layers = nn.ModuleList(Layer(c) for _ in range(c.layers))
        self.norm = nn.LayerNorm(c.dim)
        self.head = nn.Linear(c.dim, c.vocab, bias=False)

    def empty_caches(self, batch: int, device="cpu") -> list[torch.Tensor]:
        """K and V per layer, (B, kv_heads, max_len, head_dim), zeros."""
        c = self.config
        shape = (batch, c.kv_heads, c.max_len, c.dim // c.heads)
        dtype = self.head.weight.dtype
        return [torch.zeros(shape, dtype=dtype, device=device) for _ in range(2 * c.layers)]

    def forward(self, token, position, *caches):
        x = self.embed(token)
        for i, layer in enumerate(self.layers):
            x = layer(x, position, caches[2 * i], caches[2 * i + 1])
        return self.head(self.norm(x))[:, -1]


def generate(step, model: Decoder, prompt: torch.Tensor, steps: int) -> list[int]:
    """Greedy decoding with ``step`` (the compiled module or the model itself); tokens,
    positions and caches stay on the prompt's device."""
    device = prompt.device
    caches = model.empty_caches(prompt.shape[0], device)
    tokens = prompt[:, :1]
    generated = []
    for position in range(steps):
        if position < prompt.shape[1]:
            tokens = prompt[:, position : position + 1]
        logits = step(tokens, torch.tensor([position], device=device), *caches)
        tokens = logits.argmax(-1, keepdim=True)
        generated.append(tokens[0, 0])
    return [int(t) for t in generated]


def seeded(size: str, dtype: torch.dtype) -> Decoder:
    """The decoder of ``size`` with weights from seed 0 (the same on every machine)."""
    torch.manual_seed(0)
    model = Decoder(SIZES[size]).eval()
    for p in model.parameters():  # a scale that keeps fp16 activations in range
        if p.dim() > 1:
            p.data.normal_(0.0, 0.02)
    return model.to(dtype)


def _time(call, steps: int, sync) -> float:
    """Tokens per second of ``call(steps)`` (a warm-up run first)."""
    call(min(steps, 4))
    sync()
    start = time.perf_counter()
    call(steps)
    sync()
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--size", default="toy", choices=sorted(SIZES))
    parser.add_argument("--target", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--cuda-arch", default="sm_80")
    parser.add_argument("--save", type=Path, help="compile only: DIR/decode_step.vmfb")
    parser.add_argument("--load", type=Path, help="generate with what --save wrote")
    parser.add_argument("--json", type=Path, help="write the measurements here")
    args = parser.parse_args()
    import fusion_compiler as fc

    if args.load:
        saved = json.loads((args.load / "decode_step.json").read_text())
        args.size, args.target = saved["size"], saved["target"]
    device = {"cpu": "cpu", "cuda": "cuda"}[args.target]
    dtype = torch.float16 if args.target == "cuda" else torch.float32
    model = seeded(args.size, dtype)
    external = args.size != "toy"  # too large to embed: the weights are given at load
    if args.load:
        module = args.load / "decode_step.vmfb"
    else:
        example = (torch.tensor([[1]]), torch.tensor([0]), *model.empty_caches(1))
        start = time.perf_counter()
        module = fc.compile(
            model,
            example_args=example,
            target=args.target,
            cuda_arch=args.cuda_arch,
            weights="external" if external else "embedded",
        )
        print(f"compiled one decode step in {time.perf_counter() - start:.1f} s: {module.stats}")
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            module.save(args.save / "decode_step.vmfb")
            about = {"size": args.size, "target": args.target, "config": asdict(model.config)}
            (args.save / "decode_step.json").write_text(json.dumps(about))
            return
    model = model.to(device)
    weights = model.state_dict() if external else None
    runtime_device = {"cpu": "local-task", "cuda": "cuda"}[args.target]
    step = fc.load(module, device=runtime_device, weights=weights)
    prompt = torch.tensor([[1, 17, 42, 7]], device=device)
    start = time.perf_counter()
    ours = generate(step, model, prompt, args.steps)
    seconds = time.perf_counter() - start
    with torch.no_grad():
        want = generate(model, model, prompt, args.steps)
    print(f"generated {args.steps} tokens in {seconds * 1e3:.0f} ms: {ours}")
    same = sum(a == b for a, b in zip(ours, want, strict=True))
    print("same tokens as PyTorch" if same == len(want) else f"DIFFERENT from PyTorch: {want}")
    if device != "cuda":
        return
    sync = torch.cuda.synchronize
    with torch.no_grad():
        eager = _time(lambda n: generate(model, model, prompt, n), args.steps, sync)
    compiled = _time(lambda n: generate(step, model, prompt, n), args.steps, sync)
    print(f"tokens/s (batch 1, {args.steps} steps against a {model.config.max_len}-slot cache):")
    print(f"  compiled {compiled:.1f}  torch eager {eager:.1f}  ratio {compiled / eager:.2f}x")
    if args.json:
        record = {"size": args.size, "steps": args.steps, "tokens_per_s": compiled}
        record |= {"eager_tokens_per_s": eager, "same_tokens": same, "of": len(want)}
        args.json.write_text(json.dumps(record | {"config": asdict(model.config)}, indent=1))


if __name__ == "__main__":
    main()
