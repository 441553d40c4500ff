"""The producer-warp kernel (warp_specialized.py) as Triton compiles it: every tile's
key-block loop runs to that tile's own bound.

No GPU here, and Gluon does not run under Triton's interpreter, so this reads the
compiled TTGIR. Triton 3.6's loop-aware CSE replaced a loop-carried bound computed a tile
ahead (the producer warp's ``first, last`` from the next tile's map entry) by the first
tile's: the producer then loaded another number of key blocks than the warpgroup used,
and causal and packed-document calls hung on the H100. A bound must be computed inside
the loop over tiles, from what that loop carries or computes.
"""

from __future__ import annotations

import itertools
import re

import pytest

pytest.importorskip("triton")

N, BATCH, BLOCK = 2048, 64, 64

CONFIGS = [
    dict(CAUSAL=causal, BLOCK_MAP=block_map, MAP_ROWS=rows, WINDOW=window)
    for causal, block_map, rows, window in itertools.product([False, True], repeat=4)
    if (block_map or not rows) and not (window and (block_map or not causal))
]


def _ttgir(config: dict) -> str:
    from fusion_compiler.backends.triton import warp_specialized
    from fusion_compiler.backends.triton.kernel import triton_compile

    constants = dict(
        QK_SCALE=0.1275, N=N, D=128, BATCH=BATCH, KV_GROUP=1, BLOCK=BLOCK, STAGES=3,
        TILES=N // BLOCK * BATCH, WINDOW_START=-511 if config["WINDOW"] else 0, DESYNC=True,
        HAS_MASK=0, MAP_GROUP=16, KEY_BLOCKS=N // BLOCK, Mask=None, L0=None, L1=None,
        L2=None, L3=None, Sizes=None, **config,
    )  # fmt: skip
    pointers = {"Q": "*fp16", "K": "*fp16", "V": "*fp16", "Out": "*fp16"}
    if config["BLOCK_MAP"]:
        pointers["Map"] = "*i32"
    else:
        constants["Map"] = None
    options = {"num_warps": 4, "maxnreg": 120}
    kernel = triton_compile(warp_specialized.attention, pointers, constants, 90, options, True)
    return kernel.asm["ttgir"]


def _fixed_bounds(ttgir: str) -> list[str]:
    """The key-block loops whose bound does not follow the tile: for each loop over tiles
    (``scf.for ... to %rounds``), its first inner loop's bounds that are neither constants,
    nor carried by the tile loop, nor computed in it from something it carries or
    computes."""
    lines = ttgir.splitlines()
    fixed = []
    for start, head in enumerate(lines):
        if not re.search(r"scf\.for %\w+ = %\w+ to %rounds", head):
            continue
        carried = set(re.findall(r"(%\w+) = %", head.partition("iter_args(")[2]))
        inner = next(i for i in range(start + 1, len(lines)) if "scf.for" in lines[i])
        defined = {}  # name -> its defining line, inside the tile loop
        for line in lines[start + 1 : inner]:
            if match := re.match(r"\s*(%\w+)(?::\d+)? = (.*)", line):
                defined[match.group(1)] = match.group(2)
        bounds = re.search(r"scf\.for %\w+ = (%\w+) to (%\w+)", lines[inner]).group(1, 2)
        for bound in bounds:
            if re.fullmatch(r"%c-?\d+_i32(_\d+)?", bound) or bound in carried:
                continue
            operands = re.findall(r"%\w+", defined.get(bound, ""))
            if not any(o in carried or o in defined for o in operands):
                fixed.append(f"{bound} in the loop at line {start + 1}")
    return fixed


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(k for k, v in c.items() if v))
def test_every_tile_loads_and_computes_its_own_key_blocks(config) -> None:
    ttgir = _ttgir(config)
    assert ttgir.count("to %rounds") == 2  # the producer warp's loop and the warpgroup's
    assert _fixed_bounds(ttgir) == []
