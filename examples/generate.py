"""Token generation with a compiled module and a KV cache, from Python.

A toy 2-layer decoder (random weights) is compiled once for one decode step: it takes
the current token, its position and the K/V caches, and returns the next-token logits
and the updated caches. The loop below feeds the caches back step after step (greedy
decoding) and checks every token against the same model run by PyTorch.

    .venv/bin/python examples/generate.py [--steps 24] [--target cpu|cuda] [--save DIR | --load DIR]

``--save DIR`` compiles only and writes the module and weights; ``--load DIR`` generates
with them (on a machine with only the runtime, e.g. a GPU machine).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import torch
from torch import nn


class ToyDecoder(nn.Module):
    """Embedding, 2 causal attention + MLP layers reading a KV cache, LM head."""

    def __init__(
        self, vocab: int = 256, dim: int = 64, heads: int = 4, layers: int = 2, max_len: int = 64
    ):
        super().__init__()
        self.heads, self.head_dim, self.max_len = heads, dim // heads, max_len
        self.embed = nn.Embedding(vocab, dim)
        self.qkv = nn.ModuleList(nn.Linear(dim, 3 * dim) for _ in range(layers))
        self.out = nn.ModuleList(nn.Linear(dim, dim) for _ in range(layers))
        self.mlp = nn.ModuleList(
            nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
            for _ in range(layers)
        )
        self.norm = nn.ModuleList(nn.LayerNorm(dim) for _ in range(2 * layers))
        self.head = nn.Linear(dim, vocab)

    def empty_cache(self, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        shape = (len(self.qkv), batch, self.heads, self.max_len, self.head_dim)
        return torch.zeros(shape), torch.zeros(shape)

    def forward(self, token, position, k_cache, v_cache):
        """token (B, 1) int64, position (1,) int64, caches (layers, B, H, max_len, Dh)."""
        b = token.shape[0]
        x = self.embed(token)  # (B, 1, dim)
        slots = torch.arange(self.max_len)
        write = (slots == position).to(x.dtype)[:, None]  # the cache slot of this token
        later = slots[None, :] > position  # (1, max_len): slots not written yet
        new_k, new_v = [], []
        for i, (qkv, out, mlp) in enumerate(zip(self.qkv, self.out, self.mlp, strict=True)):
            q, k, v = qkv(self.norm[2 * i](x)).view(b, 1, 3, self.heads, self.head_dim).unbind(2)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, H, 1, Dh)
            keys = k_cache[i] * (1 - write) + k * write  # (B, H, max_len, Dh)
            values = v_cache[i] * (1 - write) + v * write
            s = q @ keys.transpose(-2, -1) / math.sqrt(self.head_dim)
            s = s.masked_fill(later, float("-inf"))
            y = torch.softmax(s, dim=-1) @ values  # (B, H, 1, Dh)
            x = x + out(y.transpose(1, 2).reshape(b, 1, -1))
            x = x + mlp(self.norm[2 * i + 1](x))
            new_k.append(keys)
            new_v.append(values)
        return self.head(x)[:, -1], torch.stack(new_k), torch.stack(new_v)


def generate(step, model: ToyDecoder, prompt: torch.Tensor, steps: int) -> list[int]:
    """Greedy decoding with ``step`` (the compiled module or the model itself)."""
    k_cache, v_cache = model.empty_cache(prompt.shape[0])
    tokens = prompt[:, :1]
    generated = []
    for position in range(steps):
        if position < prompt.shape[1]:
            tokens = prompt[:, position : position + 1]
        logits, k_cache, v_cache = step(tokens, torch.tensor([position]), k_cache, v_cache)
        k_cache, v_cache = k_cache.cpu(), v_cache.cpu()
        tokens = logits.cpu().argmax(-1, keepdim=True)
        generated.append(int(tokens[0, 0]))
    return generated


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--target", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--save", type=Path, help="compile only: DIR/decode_step.vmfb + weights")
    parser.add_argument("--load", type=Path, help="generate with what --save wrote")
    args = parser.parse_args()
    import fusion_compiler as fc

    torch.manual_seed(0)
    model = ToyDecoder().eval()
    prompt = torch.tensor([[1, 17, 42, 7]])
    if args.load:
        model.load_state_dict(torch.load(args.load / "decode_step.pt"))
        module = args.load / "decode_step.vmfb"
    else:
        example = (prompt[:, :1], torch.tensor([0]), *model.empty_cache(1))
        start = time.perf_counter()
        module = fc.compile(model, example_args=example, target=args.target)
        print(f"compiled one decode step in {time.perf_counter() - start:.1f} s: {module.stats}")
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            module.save(args.save / "decode_step.vmfb")
            torch.save(model.state_dict(), args.save / "decode_step.pt")
            return
    step = fc.load(module, device={"cpu": "local-task", "cuda": "cuda"}[args.target])
    start = time.perf_counter()
    ours = generate(step, model, prompt, args.steps)
    seconds = time.perf_counter() - start
    with torch.no_grad():
        want = generate(model, model, prompt, args.steps)
    print(f"generated {args.steps} tokens in {seconds * 1e3:.0f} ms: {ours}")
    print("same tokens as PyTorch" if ours == want else f"DIFFERENT from PyTorch: {want}")


if __name__ == "__main__":
    main()
