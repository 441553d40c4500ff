"""A block map's classes from the mask's bounds over a tile (``triton.mask.bounds_code``):
for hand-built mask trees, the generated lines run under Triton's interpreter (a child
process: Triton picks the interpreter when it is imported) over a few key blocks, and
every element's exact value (``expr.evaluate``) must lie within the bounds, a NaN only
where they are (-inf, inf); what cannot be bounded so is refused."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from fusion_compiler.dialects import expr
from fusion_compiler.dialects.expr import Const, Index, Load, Op, Unsupported

from fusion_compiler.backends.triton.mask import bounds_code

_KERNEL = """
import triton
import triton.language as tl

@triton.jit
def bounds(L0, L1, Out, row_lo, row_hi, n_k, ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
           STEP: tl.constexpr):
    batch = tl.program_id(0).to(tl.int64)
    block = tl.arange(0, STEP)
    key_lo = block * BLOCK_N
    key_hi = tl.minimum(key_lo + BLOCK_N, n_k) - 1
    rr = row_lo + tl.arange(0, ROWS)
    kk = key_lo[:, None] + tl.arange(0, BLOCK_N)[None, :]
    {lines}
    tl.store(Out + block, tl.zeros(block.shape, tl.float32) + low)
    tl.store(Out + STEP + block, tl.zeros(block.shape, tl.float32) + high)


if __name__ == "__main__":
    import sys

    import torch

    from fusion_compiler.backends.triton.interpret import patch_interpreter

    patch_interpreter()
    inputs = torch.load(sys.argv[1])
    out = torch.zeros(2 * {step})
    bounds[(1,)](*inputs, out, 0, {rows} - 1, {n_k}, ROWS={rows}, BLOCK_N={block_n}, STEP={step})
    torch.save(out, sys.argv[2])
"""
ROWS, BLOCK_N, STEP, N_K = 4, 4, 2, 8
NEG, ZERO = Const(-math.inf, "f32"), Const(0.0, "f32")
ROW, KEY = Index(1), Index(2)


def _keys(slot: int, type_: str) -> Load:
    return Load(slot, (KEY,), type_, (N_K,))


def _select(condition, a=ZERO, b=NEG) -> Op:
    return Op("arith.select", (condition, a, b), "f32")


def _check(tree, inputs, tmp_path) -> None:
    lines = bounds_code(tree, {}, (1, ROWS, N_K))
    path = tmp_path / "bounds_kernel.py"
    sizes = dict(rows=ROWS, n_k=N_K, block_n=BLOCK_N, step=STEP)
    path.write_text(_KERNEL.format(lines="\n    ".join(lines), **sizes))
    torch.save(list(inputs), tmp_path / "inputs.pt")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    args = [sys.executable, str(path), str(tmp_path / "inputs.pt"), str(tmp_path / "out.pt")]
    subprocess.run(args, env=env, check=True, capture_output=True)
    out = torch.load(tmp_path / "out.pt")
    rows, keys = np.meshgrid(np.arange(ROWS), np.arange(N_K), indexing="ij")
    coords = {0: np.zeros_like(rows), 1: rows, 2: keys}
    exact = expr.evaluate(tree, coords.__getitem__, lambda leaf, c: inputs[leaf.slot].numpy()[c[0]])
    exact = np.broadcast_to(np.asarray(exact, dtype=np.float64), rows.shape)
    for j in range(STEP):
        low, high = out[j].item(), out[STEP + j].item()
        values = exact[:, j * BLOCK_N : (j + 1) * BLOCK_N]
        if np.isnan(values).any():
            assert (low, high) == (-math.inf, math.inf), (j, low, high)
        finite = values[~np.isnan(values)]
        assert finite.size == 0 or low <= finite.min() and finite.max() <= high, (j, low, high)


def test_nan_through_a_clamp_leaves_the_tile_undecided(tmp_path) -> None:
    x = torch.tensor([1.0, -2.0, 3.0, 4.0, math.nan, 1.0, -1.0, 1.0])
    clamp = Op(
        "arith.maximumf", (Op("arith.minimumf", (_keys(0, "f32"), ZERO), "f32"), ZERO), "f32"
    )
    same = Op("arith.cmpf", (clamp, ZERO), "i1", "oeq")
    _check(_select(same), (x, x), tmp_path)  # -inf at the NaN: not "0 everywhere"
    absolute = Op("arith.minimumf", (Op("math.absf", (_keys(0, "f32"),), "f32"), ZERO), "f32")
    _check(Op("arith.addf", (absolute, NEG), "f32"), (x, x), tmp_path)


def test_the_larger_of_two_booleans_is_their_and(tmp_path) -> None:
    true, false = torch.ones(N_K, dtype=torch.bool), torch.zeros(N_K, dtype=torch.bool)
    larger = Op("arith.maxsi", (_keys(0, "i1"), _keys(1, "i1")), "i1")  # true is -1
    _check(_select(larger), (true, false), tmp_path)


def test_window_and_causal_bounds_hold_over_every_block(tmp_path) -> None:
    distance = Op("arith.subi", (ROW, KEY), "index")
    near = Op("arith.cmpi", (distance, Const(3, "index")), "i1", "slt")
    causal = Op("arith.cmpi", (KEY, ROW), "i1", "sle")
    both = Op("arith.andi", (near, causal), "i1")
    x = torch.zeros(N_K)
    _check(_select(both), (x, x), tmp_path)


def test_integer_arithmetic_that_may_wrap_is_refused() -> None:
    plus = Op("arith.addi", (_keys(0, "i64"), Const(1, "i64")), "i64")  # an i64 read + 1
    with pytest.raises(Unsupported, match="may leave i64"):
        bounds_code(_select(Op("arith.cmpi", (plus, Const(0, "i64")), "i1", "sgt")), {}, (1, 4, 8))
    with pytest.raises(Unsupported, match="without known sizes"):
        bounds_code(_select(Op("arith.cmpi", (plus, Const(0, "i64")), "i1", "sgt")), {})
