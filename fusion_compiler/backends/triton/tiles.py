"""The tile order of persistent attention programs, shared by the template's kernel and
the warp-specialized one."""

import triton
import triton.language as tl


@triton.jit
def _tile_of(step, rounds, programs, DESYNC: tl.constexpr):
    """The tile a persistent program takes at ``step`` (see ``attention``); past its
    last step, a number outside [0, TILES)."""
    round = step
    if DESYNC:
        if tl.program_id(0) % 2 == 1:
            round = rounds - 1 - step
    if round % 2 == 0:
        tile = round * programs + tl.program_id(0)
    else:
        tile = round * programs + programs - 1 - tl.program_id(0)
    return tile


@triton.jit
def _tile_row_block(tile, BATCH: tl.constexpr, TILES: tl.constexpr):
    """The row block of persistent tile ``tile`` (the longest first, see ``attention``)."""
    return TILES // BATCH - 1 - tile // BATCH
