"""fusion-kernel-matmul: matrix products by a weight -> dispatches of a generated sm_90 kernel.

IREE 3.13 has no Hopper target: its code for a transformer's projections and MLP is
sm_80's ``mma.sync``, about 140 TFLOP/s on the H200 where cuBLAS reaches 500 and more
(Llama-3.2-1B's prefill spends 93 of its 119 ms there, benchmarks/results/models_h200.md).
Each ``linalg.batch_matmul`` of activations (B, M, K) by one weight broadcast over the
batch, or ``linalg.matmul`` (M, K) by a weight, with more than one row (one row is
fusion-kernel-matvec's), f16 or bf16, static sizes, becomes a dispatch of
``backends/triton/matmul.py`` compiled for sm_90a: the batch's rows are one (B·M, K)
matrix, the weight is read where it lives (through the broadcast and the transpose of
PyTorch's (N, K) Linear weight), and a cast of the f32 product to the input type after
it is written by the kernel itself.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from fusion_compiler.dialects import linalg
from fusion_compiler.dialects.builders import dims, erase_dead
from fusion_compiler.passes.kernel_matvec import is_broadcast_of_matrix, weight_view

from fusion_compiler import remarks
from fusion_compiler.backends import dispatch
from fusion_compiler.backends.plan import output_cast
from fusion_compiler.backends.spec import Kernel
from fusion_compiler.backends.triton import epilogues
from fusion_compiler.backends.triton.kernel import stack_bytes
from fusion_compiler.backends.triton.matmul_kernel import (
    MARKER,
    MatmulSpec,
    aligned,
    compile_matmul,
    compile_sum,
    tilings,
)
from fusion_compiler.backends.triton.schedules import block_shared_bytes
from fusion_compiler.ir import ir

NAME = "fusion-kernel-matmul"
_ELEMENTS = ("f16", "bf16")
# the stack a thread of a kernel may spill to and the kernel still be taken over the next
# tiling (H100, persistent 128x256 tiles against 128x128: with a bias, 8 bytes and 10-26%
# faster; after GELU's erf, 80-320 bytes and ViT and Whisper 9-12% slower)
_SPILLS_TOLERATED = 32


@dataclass(frozen=True)
class Options:
    """``arch``; the others replace ``tiles``' choice where set (for measuring tilings:
    ``programs=0`` is one tile per program, -1 the rule's choice)."""

    arch: str = "sm_90"
    block_m: int = 0
    block_n: int = 0
    block_k: int = 0
    num_warps: int = 0
    num_stages: int = 0
    programs: int = -1
    split_k: int = 0

    def tilings(self, m: int, n: int, k: int) -> list[dict[str, int]]:
        """``tilings``' choices for the product, best first; where these options set a
        tile's shape or schedule, only the last choice (the one always taken where the
        others do not fit), with them in its place."""
        chosen = tilings(m, n, k)
        names = ("block_m", "block_n", "block_k", "num_warps", "num_stages", "split_k")
        if any(getattr(self, name) for name in names) or self.programs >= 0:
            tiles = chosen[-1]
            for name in names:
                tiles[name] = getattr(self, name) or tiles.get(name, 0)
            if self.programs >= 0:
                tiles["programs"] = self.programs
            chosen = [{name: value for name, value in tiles.items() if value}]
        return chosen


def _shape(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def _element(value: ir.Value) -> str:
    return str(ir.RankedTensorType(value.type).element_type)


def _weight_is_shared(op: ir.Operation) -> bool:
    """Whether a batch_matmul's second operand is one matrix broadcast over the batch."""
    return _shape(op.operands[1])[0] == 1 or is_broadcast_of_matrix(linalg.producer(op.operands[1]))


def _product(op: ir.Operation) -> str | None:
    """Why ``op`` is not a product this kernel takes, or None when it is."""
    if op.name not in ("linalg.batch_matmul", "linalg.matmul"):
        return "not a matmul"
    if "indexing_maps" in op.attributes:
        maps = [ir.AffineMapAttr(m).value for m in op.attributes["indexing_maps"]]
        plain = {"linalg.matmul": [[0, 2], [2, 1], [0, 1]]}
        plain["linalg.batch_matmul"] = [[0, 1, 3], [0, 3, 2], [0, 1, 2]]
        if [dims(m) for m in maps] != plain[op.name]:
            return "a matmul with transposed operands"
    a, b = op.operands[0], op.operands[1]
    shapes = [_shape(v) for v in (a, b, op.results[0])]
    if any(ir.ShapedType.is_dynamic_size(x) for s in shapes for x in s):
        return "dynamic sizes"
    if shapes[0][-2] * (shapes[0][0] if len(shapes[0]) == 3 else 1) == 1:
        return "one row (fusion-kernel-matvec's)"
    if op.name == "linalg.batch_matmul" and not _weight_is_shared(op):
        return "a batch of different matrices"
    if _element(a) not in _ELEMENTS or _element(b) != _element(a):
        return "operands not both f16 or both bf16"
    out = output_cast(op)
    out_dtype = _element((out or op).results[0])
    if out_dtype not in ("f32", _element(a)):
        return "a result type other than f32 or the operands'"
    k, n = _shape(b)[-2:]
    if not aligned(k, n, out_dtype):
        return f"K={k} or N={n} not a multiple of 8 (TMA's 16-byte rows)"
    return None


def run(module: ir.Operation, options: Options) -> None:
    with module.context, module.location:
        found: list[ir.Operation] = []

        def visit(op: ir.Operation) -> ir.WalkResult:
            if op.name in ("linalg.batch_matmul", "linalg.matmul"):
                why = _product(op)
                if why is None:
                    found.append(op)
                elif not why.startswith(("not a matmul", "one row")):
                    remarks.emit(op.location, f"matrix product left to IREE: {why}")
            return ir.WalkResult.ADVANCE

        module.walk(visit)
        for n, op in enumerate(found):
            _lower(module, op, options, f"fusion_matmul_{n}")


def _fitting(specs: list[MatmulSpec]) -> tuple[MatmulSpec, Kernel, str]:
    """The first of ``specs`` whose kernel fits: at most ``_SPILLS_TOLERATED`` bytes of
    register spills (a thread's stack, as ptxas left it in the cubin), no more shared
    memory than a block may have (an epilogue's layout conversions take some beside the
    pipeline and the staged output); that kernel, and what did not fit before it. Where
    none does, the last, with one tile per program, then fewer pipeline stages, until
    its shared memory fits."""
    limit = block_shared_bytes(specs[0].arch)
    passed_over = []
    for spec in specs[:-1]:
        kernel = compile_matmul(spec)
        spilled = stack_bytes(kernel)
        if kernel.shared_bytes <= limit and spilled <= _SPILLS_TOLERATED:
            return spec, kernel, "; ".join(passed_over)
        why = f"{kernel.shared_bytes} bytes of shared memory"
        if spilled > _SPILLS_TOLERATED:
            why = f"{spilled} bytes of spills"
        passed_over.append(f"{spec.block_m}x{spec.block_n} tiles need {why}")
    spec = specs[-1]
    kernel = compile_matmul(spec)
    if spec.programs and kernel.shared_bytes > limit:
        spec = replace(spec, programs=0)
        kernel = compile_matmul(spec)
    while kernel.shared_bytes > limit and spec.num_stages > 1:
        spec = replace(spec, num_stages=spec.num_stages - 1)
        kernel = compile_matmul(spec)
    return spec, kernel, "; ".join(passed_over)


def _lower(module: ir.Operation, op: ir.Operation, options: Options, symbol: str) -> None:
    """``op`` [-> cast] [-> its epilogue] -> flow.dispatch of the matmul kernel."""
    a, b = op.operands[0], op.operands[1]
    base, sk, _ = weight_view(b)
    k, n = _shape(b)[-2:]
    shape = _shape(a)
    m = shape[0] * shape[1] if len(shape) == 3 else shape[0]
    cast = output_cast(op)
    product = cast or op
    epilogue = epilogues.find(product.results[0], n)
    replaced = epilogue.ops[-1] if epilogue else product
    out_dtype = _element(replaced.results[0])
    specs = [
        MatmulSpec(
            dtype=_element(a),
            out_dtype=out_dtype,
            m=m,
            n=n,
            k=k,
            w_t=sk == 1,
            **tiles,
            arch=int(options.arch.removeprefix("sm_").rstrip("a")),
            **(epilogue.spec_fields(product.results[0]) if epilogue else {}),
        )
        for tiles in options.tilings(m, n, k)
    ]
    spec, passed_over = specs[0], ""
    extra = list(epilogue.inputs) if epilogue else []
    if spec.split_k == 1:
        spec, kernel, passed_over = _fitting(specs)
        steps = [dispatch.Step(symbol, kernel, [a, base, *extra], spec.grid)]
    else:  # the partial products, then their sum and the epilogue
        total = spec.sum()
        steps = [
            dispatch.Step(symbol, compile_matmul(spec), [a, base], spec.grid, spec.output),
            dispatch.Step(
                f"{symbol}_sum", compile_sum(total), [dispatch.PREVIOUS, *extra], total.grid
            ),
        ]
    # the whole computation's spec, epilogue included, also on a split-K product's
    # dispatch (whose cubin is ``spec.product()``'s: compile_matmul strips the epilogue)
    marker = (MARKER, spec.to_json())
    dispatch.replace_by_kernels(module, replaced, op.location, steps, marker)
    split = f", split-K {spec.split_k}" if spec.split_k > 1 else ""
    split += f", {spec.programs} persistent programs" if spec.programs else ""
    split += f" ({passed_over})" if passed_over else ""
    remarks.emit(
        op.location,
        f"matrix product lowered to a generated {options.arch} kernel "
        f"({spec.dtype}, M={m}, K={k}, N={n}, tiles {spec.block_m}x{spec.block_n}x{spec.block_k}"
        f"{split}{', the weight read transposed' if spec.w_t else ''}){epilogues.said(epilogue)}",
    )
    erase_dead(epilogues.replaced(op, product, epilogue))
