"""The sm_90 attention kernel's spec: the attention (``backends.spec.Problem``) and the
kernel's own choices.

A ``TritonSpec`` adds to the problem the score function as Triton code, a mask computed
in the kernel from its producers, tiles and warps, split-KV, packed GQA heads and
persistent programs; its constants are the template's ``constexpr`` parameters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fusion_compiler.backends.spec import Problem, View

# finfo(f32).min (linalg_ext.LOWEST_F32; this module is read without the compiler)
_LOWEST_F32 = -3.4028234663852886e38
# Triton appends two pointers of its own (global and profile scratch) after ours.
HIDDEN_POINTERS = 2
# the computed mask's inputs the producer-warp kernel takes (L0-L3)
WS_MASK_INPUTS = 4
# Triton's names in a printed mask (``triton.mask``) and Gluon's for the same op; a mask
# using any other goes to the template's kernel
_GLUON_NAMES = {
    **{f"tl.{n}": f"gl.{n}" for n in (
        "where", "load", "maximum", "minimum", "abs", "exp", "log", "floor", "ceil",
        "sqrt_rn", "int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
        "uint64", "float16", "bfloat16", "float32", "float64",
    )},
    **{f"tl.math.{n}": f"gl.{n}" for n in ("exp2", "log2", "div_rn", "erf")},
}  # fmt: skip


def gluon_expression(expression: str) -> str | None:
    """A printed Triton expression (a computed mask) in Gluon's names, or None where it
    uses an op this translation lacks."""
    unknown = []

    def renamed(match: re.Match) -> str:
        name = _GLUON_NAMES.get(match.group(0))
        if name is None:
            unknown.append(match.group(0))
        return name or match.group(0)

    translated = re.sub(r"\btl\.[A-Za-z_][\w.]*[A-Za-z_0-9]", renamed, expression)
    return None if unknown else translated


def describable(view: View, cols: int) -> bool:
    """Whether a TMA descriptor can read ``view`` of a 2-byte type: unit column stride,
    static strides of whole 16-byte units, rows of whole 16-byte units."""
    sb, sh, h, sr, sc = view
    strides = [sb, sr] + ([sh] if h > 1 else [])
    return (
        sc == 1
        and all(isinstance(s, int) and s > 0 and s % 8 == 0 for s in strides)
        and cols % 8 == 0
    )


def packed(view: View, rows: int, cols: int) -> bool:
    """Whether ``view`` reads a row-major (batch, rows, cols) tensor: element (batch, row,
    col) at (batch * rows + row) * cols + col, with the batch split into (outer, H) or not."""
    sb, sh, h, sr, sc = view
    whole = rows * cols
    return sc == 1 and sr == cols and (sb == whole if h == 1 else (sh == whole and sb == h * whole))


@dataclass(frozen=True, kw_only=True)
class TritonSpec(Problem):
    """One attention and the sm_90 kernel generated for it."""

    target = "cuda"

    score: str  # the score region: a Triton expression of ``x``, base 2
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    arch: int = 90  # sm_90 -> sm_90a code
    # the mask computed in the kernel: a Triton expression of batch, rows, keys and the
    # inputs L0, L1, ... (their pointer types in ``mask_inputs``), instead of read
    mask_expr: str | None = None
    mask_inputs: tuple[str, ...] = ()
    # lines setting ``low`` and ``high``, the least and most the computed mask adds over
    # a tile: the block map's classes from them (``_map_bounds``) where the fill is -inf
    mask_bounds: tuple[str, ...] | None = None
    # split-KV: programs sharing each row block's keys, their results merged by a second
    # kernel (``combine``) from a float32 buffer of ``partial_elements``; static n_q only
    splits: int = 1
    # decoding with GQA: the rows of the kv_group heads that share K and V in one program,
    # which then reads them once; static n_q only
    pack_gqa: bool = False
    # persistent programs (causal, static sizes, no split or packing): this many
    # programs take the (row block, batch) tiles longest first; 0: one tile per program
    persistent: int = 0
    # a computed mask that can empty whole tiles (it holds -inf or a swamping fill):
    # ``block_map`` lists each row block's key blocks per call, from the mask's own
    # computation, and the attention visits only those (static sizes, no split or packing)
    block_map: bool = False
    map_group: int = 1  # consecutive batches that see one mask (H: a mask per sequence)
    map_rows: bool = True  # an entry per row block; False: the mask and bounds ignore rows
    # an attention with a sink: one more key per row, of logit ``Sink``'s (batch, row)
    # entry (float32, base 2: log2(e)·sink) and value 0, taken into each row's online
    # softmax at the end (with split-KV, by split 0)
    sink: bool = False

    def __post_init__(self) -> None:  # read back from JSON: lists
        super().__post_init__()
        object.__setattr__(self, "mask_inputs", tuple(self.mask_inputs))

    @property
    def pointers(self) -> list[str]:
        """The kernel's pointer parameters, in order (IREE binds them in this order); the
        sizes are bound while static too (Q there, never read); with a block map, the
        map ``block_map`` wrote comes after the mask's inputs, then a sink's logits."""
        masks = [f"L{i}" for i in range(len(self.mask_inputs))] if self.mask_expr else ["Mask"]
        optional = [*(["Map"] if self.block_map else []), *(["Sink"] if self.sink else [])]
        return ["Q", "K", "V", *masks, *optional, "Sizes", "Out"]

    @property
    def tma_kv(self) -> bool:
        """K and V read through TMA descriptors: for persistent programs over more than
        2048 keys, where both views can be described (H200, causal D128 N4096: 149.6 ->
        142.5 us, D64 N4096 183.0 -> 178.5, GQA N8192 1221 -> 1158; slower over 1024 keys,
        in full attention and with a program per row block)."""
        return (
            self.persistent > 0
            and self.n_k > 2048
            and padded(self.d) <= 128
            and padded(self.dv) <= 128
            and describable(self.views[1], self.d)
            and describable(self.views[2], self.dv)
            and all(o % 8 == 0 for o in self.offsets[1:])  # 16-byte aligned starts
        )

    @property
    def warp_specialized(self) -> bool:
        """The kernel is ``warp_specialized.py``'s (a producer warp keeps a K/V ring filled across
        tiles): persistent programs on sm_90 over causal or full attention without a score
        function, with no mask or a computed one with a block map (in Gluon's names, at
        most ``WS_MASK_INPUTS`` inputs), f16 or bf16, D = DV = 128, 64x64 tiles, n_q = n_k
        a multiple of 64, every operand a contiguous (batch, rows, 128) tensor. H200, kernel time
        against this template's kernels: causal N1024 44.3 against 46.4-47.2 us, N4096
        132-137 against 143-159, GQA N8192 1151 against 1237; full N1024 71.2 against 74.3
        (``with_producer_warp``; benchmarks/results/causal_schedules_h200.md)."""
        return (
            self.arch == 90
            and self.persistent > 0
            and self.causal_offset in (None, 0)
            and (self.window_start is None or self.causal_offset == 0)
            and self.n_q == self.n_k
            and self.n_q % 64 == 0
            and self.mask_dtype is None
            and (self.mask_expr is None or self.ws_mask is not None)
            and self.score == "x"
            and self.qk_scale > 0
            and self.dtype in ("f16", "bf16")
            and self.out_dtype in (None, self.dtype)
            and self.d == self.dv == 128
            and self.block_m == self.block_n == 64
            and self.splits == 1
            and not self.pack_gqa
            and not self.sink
            and all(packed(self.views[i], self.n_q, self.d) for i in (0, 1, 2, 4))
            and self.offsets == (0, 0, 0)
        )

    @property
    def ws_mask(self) -> str | None:
        """The computed mask in Gluon for the producer-warp kernel: with a block map and
        at most ``WS_MASK_INPUTS`` inputs; else None."""
        if self.mask_expr is None or not self.block_map:
            return None
        if len(self.mask_inputs) > WS_MASK_INPUTS:
            return None
        return gluon_expression(self.mask_expr)

    def ws_constants(self) -> dict[str, object]:
        """The ``gl.constexpr`` parameters of ``warp_specialized.attention``."""
        return {
            "QK_SCALE": self.qk_scale,
            "N": self.n_q,
            "D": self.d,
            "BATCH": self.batch,
            "KV_GROUP": self.kv_group,
            "BLOCK": self.block_m,
            "STAGES": self.num_stages,
            "TILES": self.n_q // self.block_m * self.batch,
            "CAUSAL": self.causal_offset is not None,
            "WINDOW": self.window_start is not None,
            "WINDOW_START": self.window_start or 0,
            # as the template's persistent programs: over short rows only
            "DESYNC": self.causal_offset is not None and self.n_k <= 2048,
            "BLOCK_MAP": self.block_map,
            "HAS_MASK": self.constants()["HAS_MASK"],
            "MAP_GROUP": self.map_group,
            "MAP_ROWS": self.map_rows,
            "KEY_BLOCKS": self.key_blocks,
        }

    def grid_for(self, n_q: int) -> tuple[int, int, int]:
        if self.persistent:
            return (self.persistent, 1, 1)
        group = self.kv_group if self.pack_gqa else 1
        return (-(-n_q * group // self.block_m), self.batch // group, self.splits)

    @property
    def partial_elements(self) -> int:
        """The float32 buffer between the split-KV kernels: each split's rows, padded
        to DV_PAD, then their log-sum-exps."""
        return self.splits * self.batch * self.n_q * (padded(self.dv) + 1)

    @property
    def map_elements(self) -> int:
        """The int32 block map: per (batch, row block) two counts and a slot per key block."""
        row_blocks, batches = self.map_grid[:2]
        return batches * row_blocks * (2 + self.key_blocks)

    @property
    def key_blocks(self) -> int:
        return -(-self.n_k // self.block_n)

    @property
    def map_grid(self) -> tuple[int, int, int]:
        """The ``block_lists`` kernel's grid: an entry of the map per program."""
        row_blocks = -(-self.n_q // self.block_m) if self.map_rows else 1
        return (row_blocks, self.batch // self.map_group, 1)

    @property
    def classes_grid(self) -> tuple[int, int, int]:
        """The ``block_classes`` kernel's grid: ``map_parts`` programs per entry."""
        return (*self.map_grid[:2], self.map_parts)

    @property
    def map_rows_evaluated(self) -> int:
        """The rows of a row block ``block_classes`` evaluates the mask on: one where
        neither the mask nor the bounds read the row."""
        return self.block_m if self.map_rows else 1

    @property
    def map_chunk(self) -> int:
        """The keys ``block_classes`` classifies a step: whole key blocks, about
        ``MAP_STEP_ELEMENTS`` of the mask (a padding of 2048 keys in one step)."""
        keys = power_of_two(max(self.n_k, 1))
        return max(self.block_n, min(keys, MAP_STEP_ELEMENTS // self.map_rows_evaluated))

    @property
    def map_chunks(self) -> int:
        """The chunks of ``map_chunk`` keys the map's programs share."""
        return -(-max(self.n_k, 1) // self.map_chunk)

    @property
    def map_steps(self) -> int:
        """The steps of each ``block_classes`` program: ``MAP_STEPS``, more where the
        parts of an entry would exceed ``MAP_PARTS``."""
        return max(MAP_STEPS, -(-self.map_chunks // MAP_PARTS))

    @property
    def map_parts(self) -> int:
        return -(-self.map_chunks // self.map_steps)

    @property
    def map_scratch_elements(self) -> int:
        """The int32 buffer between the map's kernels: a class per (entry, key block),
        then the keys each part found per evaluated row."""
        entries = self.map_grid[0] * self.map_grid[1]
        return entries * (self.key_blocks + self.map_parts * self.map_rows_evaluated)

    def map_constants(self) -> dict[str, object]:
        """The ``tl.constexpr`` parameters of the template's ``block_classes`` kernel."""
        constants = self.constants()
        names = ("N_Q", "N_K", "CAUSAL", "CAUSAL_OFFSET", "WINDOW", "WINDOW_START", "HAS_MASK")
        return {
            **{n: constants[n] for n in names},
            "BLOCK_M": self.block_m,
            "BLOCK_N": self.block_n,
            "MAP_GROUP": self.map_group,
            "MAP_ROWS": self.map_rows,
            "CHUNK": self.map_chunk,
            "STEPS": self.map_steps,
            "PARTS": self.map_parts,
            # a finite fill keeps the counts of kept keys per row: every (row, key); a
            # -inf that replaces the score (masked_fill) is bounded as an added one
            "BOUNDS": self.mask_bounds is not None and self.mask_swamps is None,
            "FINITE_FILL": self.mask_swamps is not None,
        }

    def lists_constants(self) -> dict[str, object]:
        """The ``tl.constexpr`` parameters of the template's ``block_lists`` kernel."""
        return {
            "N_Q": self.n_q,
            "N_K": self.n_k,
            "FINITE_FILL": self.mask_swamps is not None,
            "BLOCK_M": self.block_m,
            "BLOCK_N": self.block_n,
            "MAP_ROWS": self.map_rows,
            "PARTS": self.map_parts,
            "BLOCKS_PAD": power_of_two(self.key_blocks),
            "PARTS_PAD": power_of_two(self.map_parts),
        }

    @property
    def combine_grid(self) -> tuple[int, int, int]:
        """A program per row, reading its splits at once (H100, a decoding step at B1 over
        8K keys in 16 splits: 1.7 us; 5.8 with 16 rows a program reading one split after
        another, where cuDNN's merge took 2.8)."""
        return (self.n_q, self.batch, 1)

    def combine_constants(self) -> dict[str, object]:
        """The ``tl.constexpr`` parameters of the template's ``combine`` kernel."""
        return {
            "N_Q": self.n_q,
            "DV": self.dv,
            "DV_PAD": padded(self.dv),
            "SPLITS": self.splits,
            "SPLITS_PAD": power_of_two(self.splits),
        }

    def constants(self) -> dict[str, object]:
        """The template's ``tl.constexpr`` parameters."""
        return {
            "QK_SCALE": self.qk_scale,
            # no score function (and a positive scale, so the max commutes with it)
            "LATE_SCALE": self.score == "x" and self.qk_scale > 0,
            "N_Q": max(self.n_q, 0),
            "N_K": max(self.n_k, 0),
            "D": self.d,
            "D_PAD": padded(self.d),
            "DV": self.dv,
            "DV_PAD": padded(self.dv),
            "CAUSAL": self.causal_offset is not None,
            "CAUSAL_OFFSET": self.causal_offset or 0,
            "WINDOW": self.window_start is not None,
            "WINDOW_START": self.window_start or 0,
            # 0: no mask; 1: an additive mask; below 0: one whose values at or below
            # this swamp the score (H200, a padding mask at N2048 D128: the test costs
            # 1.85x the kernel time, so only masks that can hold such a fill pay it).
            # -inf swamps under every threshold: a mask that replaces the score where it
            # is -inf takes the test at the lowest f32 (the fill finfo(f32).min swamps
            # too; H200, a masked_fill padding mask at B4 H16 N2048 D128 fp16: 0.297 ->
            # 0.557 ms, benchmarks/results/mask_forms_h200.md; a plain where on -inf
            # measured slower, 0.670)
            "HAS_MASK": (
                0
                if self.mask_dtype is None and self.mask_expr is None
                else self.mask_swamps or (_LOWEST_F32 if self.mask_replaces else 1)
            ),
            "KV_GROUP": self.kv_group,
            "BLOCK_M": self.block_m,
            "BLOCK_N": self.block_n,
            "DYNAMIC": self.dynamic,
            "SPLITS": self.splits,
            "GROUP": self.kv_group if self.pack_gqa else 1,
            # the masked blocks in a loop of their own pays off over long rows and costs
            # over short ones (H200, causal D128: 6% faster at 16384-65536 keys, 6% slower
            # at 1024)
            "LOOPS": 2 if self.n_k < 0 or self.n_k > 2048 else 1,
            "BATCH": self.batch,
            "TILES": -(-self.n_q // self.block_m) * self.batch if self.persistent else 0,
            # over short rows only (H200, persistent causal, kernel time: causal/full 0.756 ->
            # 0.781 at 1024 keys, D128; 0.855 -> 0.821 at 4096, 0.880 -> 0.845 at 8192 GQA)
            "DESYNC": bool(self.persistent) and 0 < self.n_k <= 2048,
            "TMA_KV": self.tma_kv,
            "BLOCK_MAP": self.block_map,
            "MAP_GROUP": self.map_group,
            "MAP_ROWS": self.map_rows,
            "SINK": self.sink,
        }


# the mask elements ``block_classes`` evaluates a step (a 64 x 128 tile: its registers),
# the steps of each of its programs, and at most this many programs per map entry
MAP_STEP_ELEMENTS = 8192
MAP_STEPS = 2
MAP_PARTS = 64


def padded(n: int) -> int:
    """A head dim padded to the power of two (at least 16) the kernel's tiles use."""
    return max(16, power_of_two(n))


def power_of_two(n: int) -> int:
    """The least power of two at or above ``n`` (Triton's tensor sizes)."""
    return 1 << max(0, (n - 1).bit_length())
