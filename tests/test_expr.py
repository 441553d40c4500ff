"""The expression IR has MLIR's semantics, and so do the Triton expressions printed from it.

Each case is one elementwise generic over float and integer inputs holding NaN, ±inf,
±0, equal pairs, negative and large integers. Its tree (``expr.of_tensor``) is evaluated
in numpy and compared with what IREE computes for the same generic on the CPU; its
Triton expression is run under Triton's interpreter and compared with the same values.
The causality proof reads unsigned comparisons as unsigned.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from fusion_compiler.dialects import causal, expr, linalg

import fusion_compiler as fc
from fusion_compiler import inputs
from fusion_compiler.backends.triton import mask as triton_mask
from fusion_compiler.inputs import parse
from fusion_compiler.ir import ir

N = 64
CMPF = [p for p in expr.CMPF if p not in ("false", "true")]

# name -> (payload over %x, %y: f32 and %i, %j: i32 and %k = linalg.index 0, result type)
CASES: dict[str, tuple[str, str]] = {
    **{
        f"cmpf_{p}": (f"%c = arith.cmpf {p}, %x, %y : f32\n%r = arith.extui %c : i1 to i32", "i32")
        for p in CMPF
    },
    **{
        f"cmpi_{p}": (f"%c = arith.cmpi {p}, %i, %j : i32\n%r = arith.extui %c : i1 to i32", "i32")
        for p in expr.CMPI
    },
    **{
        name: (f"%r = arith.{name} %x, %y : f32", "f32")
        for name in ("maximumf", "minimumf", "maxnumf", "minnumf", "divf", "subf")
    },
    **{name: (f"%r = arith.{name} %i, %j : i32", "i32") for name in ("maxsi", "minsi")},
    "uitofp": ("%r = arith.uitofp %i : i32 to f32", "f32"),
    "sitofp": ("%r = arith.sitofp %i : i32 to f32", "f32"),
    "sitofp_i1": ("%c = arith.cmpi slt, %i, %j : i32\n%r = arith.sitofp %c : i1 to f32", "f32"),
    "extsi_i1": ("%c = arith.cmpi slt, %i, %j : i32\n%r = arith.extsi %c : i1 to i32", "i32"),
    "trunci_extsi": ("%t = arith.trunci %i : i32 to i8\n%r = arith.extsi %t : i8 to i32", "i32"),
    "trunci_extui": ("%t = arith.trunci %i : i32 to i8\n%r = arith.extui %t : i8 to i32", "i32"),
    "trunci_i1": ("%t = arith.trunci %i : i32 to i1\n%r = arith.extui %t : i1 to i32", "i32"),
    "truncf_f16": ("%t = arith.truncf %x : f32 to f16\n%r = arith.extf %t : f16 to f32", "f32"),
    "select_nan": (
        "%c = arith.cmpf une, %x, %x : f32\n%r = arith.select %c, %y, %x : f32",
        "f32",
    ),
    # ALiBi-like: a distance of indices and an input, scaled
    "distance": (
        "%ki = arith.index_cast %k : index to i32\n%d = arith.subi %ki, %j : i32\n"
        "%f = arith.sitofp %d : i32 to f32\n%r = arith.mulf %f, %x : f32",
        "f32",
    ),
    "absi": ("%d = arith.subi %i, %j : i32\n%r = math.absi %d : i32", "i32"),
    # an index window by an unsigned compare: 32 <= k < 40
    "window_ult": (
        "%c32 = arith.constant 32 : index\n%c8 = arith.constant 8 : index\n"
        "%d = arith.subi %k, %c32 : index\n%c = arith.cmpi ult, %d, %c8 : index\n"
        "%r = arith.extui %c : i1 to i32",
        "i32",
    ),
    # f16 arithmetic rounds in f16, and so must the printed Triton (fp32 literals inside)
    "f16_divide": (
        "%h = arith.truncf %x : f32 to f16\n%g = arith.truncf %y : f32 to f16\n"
        "%d = arith.divf %h, %g : f16\n%r = arith.extf %d : f16 to f32",
        "f32",
    ),
    "f16_select_add": (
        "%h = arith.truncf %x : f32 to f16\n%c = arith.cmpf olt, %x, %y : f32\n"
        "%p1 = arith.constant 0.1 : f16\n%p2 = arith.constant 0.3 : f16\n"
        "%s = arith.select %c, %p1, %p2 : f16\n%t = arith.addf %s, %h : f16\n"
        "%r = arith.extf %t : f16 to f32",
        "f32",
    ),
    # signed i1: true is -1, so max(true, false) is false
    "maxsi_i1": (
        "%p1 = arith.cmpi slt, %i, %j : i32\n%p2 = arith.cmpi sgt, %i, %j : i32\n"
        "%m = arith.maxsi %p1, %p2 : i1\n%r = arith.extui %m : i1 to i32",
        "i32",
    ),
    "index_cast_i1": (  # keeps the low bit
        "%t = arith.index_cast %k : index to i1\n%r = arith.extui %t : i1 to i32",
        "i32",
    ),
    "ult_true": (
        "%p1 = arith.cmpi slt, %i, %j : i32\n%t = arith.constant true\n"
        "%u = arith.cmpi ult, %p1, %t : i1\n%r = arith.extui %u : i1 to i32",
        "i32",
    ),
    # a constant condition drops a branch and the tensor it reads
    "select_constant": ("%t = arith.constant true\n%r = arith.select %t, %y, %x : f32", "f32"),
    # constants folded in their own types: 0.1 rounded to f16, then to f32
    "folded": (
        "%c = arith.constant 0.1 : f32\n%h = arith.truncf %c : f32 to f16\n"
        "%e = arith.extf %h : f16 to f32\n%r = arith.addf %x, %e : f32",
        "f32",
    ),
}


def _module() -> str:
    functions = []
    for name, (body, result) in CASES.items():
        payload = textwrap.indent(body, "      ")
        functions.append(f"""
  func.func @{name}(%a: tensor<{N}xf32>, %b: tensor<{N}xf32>, %ia: tensor<{N}xi32>,
                    %ib: tensor<{N}xi32>) -> tensor<{N}x{result}> {{
    %init = tensor.empty() : tensor<{N}x{result}>
    %o = linalg.generic {{indexing_maps = [#id, #id, #id, #id, #id],
                         iterator_types = ["parallel"]}}
        ins(%a, %b, %ia, %ib : tensor<{N}xf32>, tensor<{N}xf32>, tensor<{N}xi32>,
                               tensor<{N}xi32>)
        outs(%init : tensor<{N}x{result}>) {{
    ^bb0(%x: f32, %y: f32, %i: i32, %j: i32, %out: {result}):
      %k = linalg.index 0 : index
{payload}
      linalg.yield %r : {result}
    }} -> tensor<{N}x{result}>
    return %o : tensor<{N}x{result}>
  }}""")
    return "#id = affine_map<(d0) -> (d0)>\nmodule {" + "".join(functions) + "\n}\n"


def _inputs(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.5, 65504.0], np.float32)
    a = rng.standard_normal(N).astype(np.float32) * 4
    a[: len(special)] = special
    b = rng.permutation(a).astype(np.float32)
    b[::5] = a[::5]  # equal pairs, NaN with NaN among them
    ia = rng.integers(-(2**31), 2**31, N, dtype=np.int64).astype(np.int32)
    ia[:16] = rng.integers(-300, 300, 16)
    ib = rng.permutation(ia)
    ib[::4] = ia[::4]
    return [a, b, ia, ib]


@pytest.fixture(scope="module")
def trees() -> dict[str, tuple[expr.Expr, list[int]]]:
    """Each case's tree and, per Load slot, the function argument it reads."""
    context = ir.Context()
    module = parse(_module(), context)
    found = {}
    for func in module.body.operations:
        name = ir.StringAttr(func.attributes["sym_name"]).value
        ret = list(func.regions[0].blocks[0].operations)[-1]
        tree = expr.of_tensor(ret.operands[0])
        found[name] = (tree.expr, [ir.BlockArgument(v).arg_number for v in tree.inputs])
    return found


@pytest.fixture(scope="module")
def iree_results() -> dict[str, list[np.ndarray]]:
    run = fc.load(fc.compile(_module(), target="cpu"))
    out = {}
    for seed in (0, 1):
        args = _inputs(seed)
        for name in CASES:
            out.setdefault(name, []).append(run[name](*args).numpy())
    return out


def _evaluate(tree: tuple[expr.Expr, list[int]], args: list[np.ndarray]) -> np.ndarray:
    root, arguments = tree

    def load(leaf: expr.Load, coords: list[np.ndarray]) -> np.ndarray:
        return args[arguments[leaf.slot]][coords[0]]

    return np.broadcast_to(expr.evaluate(root, lambda d: np.arange(N), load), (N,))


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    return np.array_equal(np.asarray(got, want.dtype), want, equal_nan=want.dtype.kind == "f")


@pytest.mark.parametrize("name", list(CASES))
def test_tree_computes_what_iree_computes(name, trees, iree_results):
    for seed, want in zip((0, 1), iree_results[name], strict=True):
        got = _evaluate(trees[name], _inputs(seed))
        assert _same(got, want), (name, seed, got, want)


def test_a_dropped_branch_reads_no_tensor(trees):
    root, arguments = trees["select_constant"]
    assert isinstance(root, expr.Load) and root.slot == 0 and arguments == [1]


def test_integers_round_once_to_bf16():
    folded = expr.fold(expr.Op("arith.sitofp", (expr.Const(16842753, "i32"),), "bf16"))
    assert folded == expr.Const(16908288.0, "bf16")  # through f32 it would be 16777216


def test_constants_fold_in_their_own_type(trees):
    tree, _ = trees["folded"]
    assert isinstance(tree, expr.Op) and tree.operands[1] == expr.Const(
        float(np.float32(np.float16(0.1))), "f32"
    )


_KERNEL = """
import sys
import numpy as np
import torch
import triton
import triton.language as tl

cases = {cases!r}
args = [torch.from_numpy(np.load(sys.argv[1] + f"/in{{i}}.npy")) for i in range(4)]
for name, (text, slots, result) in cases.items():
    source = f'''
@triton.jit
def kernel(L0, L1, L2, L3, Out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    inside = offs < BLOCK
    value = {{text}}
    tl.store(Out + offs, value.to(Out.dtype.element_ty))
'''
    path = sys.argv[1] + f"/{{name}}.py"
    with open(path, "w") as f:
        f.write("import triton\\nimport triton.language as tl\\n" + source)
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = torch.empty({n}, dtype=torch.float32 if result == "f32" else torch.int32)
    module.kernel[(1,)](*[args[s] for s in slots], out, BLOCK={n})
    np.save(sys.argv[1] + f"/{{name}}.out.npy", out.numpy())
"""


def test_triton_expressions_compute_what_the_tree_computes(trees, tmp_path):
    pytest.importorskip("triton")
    args = _inputs(0)
    for i, a in enumerate(args):
        np.save(tmp_path / f"in{i}.npy", a)
    cases = {}
    for name, (root, arguments) in trees.items():
        text = triton_mask.expression(root, ["offs"])
        # the kernel's L0..L3 are the tensors the tree reads, in slot order
        slots = arguments + [0] * (4 - len(arguments))
        cases[name] = (f"({text}) + tl.zeros([BLOCK], tl.int32)", slots, CASES[name][1])
    script = tmp_path / "run.py"
    script.write_text(_KERNEL.format(cases=cases, n=N))
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for name, tree in trees.items():
        got = np.load(tmp_path / f"{name}.out.npy")
        want = _evaluate(tree, args)
        want = want.astype(got.dtype)
        wrong = [i for i in range(N) if not _same(got[i : i + 1], want[i : i + 1])]
        assert not wrong, (name, cases[name][0], [(args[0][i], args[1][i]) for i in wrong],
                           got[wrong], want[wrong])  # fmt: skip


_CAUSAL = """
#map3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @mask(%e: tensor<2x8x8xf32>) -> tensor<2x8x8xf32> {{
  %m = linalg.generic {{indexing_maps = [#map3], iterator_types = ["parallel", "parallel",
                       "parallel"]}} outs(%e : tensor<2x8x8xf32>) {{
  ^bb0(%o: f32):
    %q = linalg.index 1 : index
    %k = linalg.index 2 : index
    {compare}
    %ninf = arith.constant 0xFF800000 : f32
    %zero = arith.constant 0.0 : f32
    %r = arith.select %c, %ninf, %zero : f32
    linalg.yield %r : f32
  }} -> tensor<2x8x8xf32>
  return %m : tensor<2x8x8xf32>
}}
"""


@pytest.mark.parametrize(
    "compare, offset",
    [
        ("%c = arith.cmpi sgt, %k, %q : index", 0),
        ("%c = arith.cmpi ugt, %k, %q : index", 0),  # indices are never negative
        (
            "%d = arith.subi %k, %q : index\n%z = arith.constant 0 : index\n"
            "%c = arith.cmpi sgt, %d, %z : index",
            0,
        ),  # fmt: skip
        # k - q >u 0 holds wherever k != q: not causal
        (
            "%d = arith.subi %k, %q : index\n%z = arith.constant 0 : index\n"
            "%c = arith.cmpi ugt, %d, %z : index",
            None,
        ),  # fmt: skip
        ("%c = arith.cmpi sge, %k, %q : index", -1),
    ],
)
def test_causality_reads_unsigned_compares_as_unsigned(compare, offset):
    context = ir.Context()
    module = parse(_CAUSAL.format(compare=compare), context)
    func = module.body.operations[0]
    mask = list(func.regions[0].blocks[0].operations)[-1].operands[0]
    assert causal.offset(mask, 1, 2) == offset
    assert causal.is_pure(mask) == (offset is not None)


_MASK = """
#map3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map0 = affine_map<(d0, d1, d2) -> ()>
func.func @mask(%e: tensor<2x8x8xf32>, %bias: tensor<1x1xf32>) -> tensor<2x8x8xf32> {{
  %b = tensor.collapse_shape %bias [] : tensor<1x1xf32> into tensor<f32>
  %m = linalg.generic {{indexing_maps = [#map0, #map3], iterator_types = ["parallel",
                       "parallel", "parallel"]}} ins(%b : tensor<f32>)
                       outs(%e : tensor<2x8x8xf32>) {{
  ^bb0(%bv: f32, %o: f32):
    %q = linalg.index 1 : index
    %k = linalg.index 2 : index
    {body}
    linalg.yield %r : f32
  }} -> tensor<2x8x8xf32>
  return %m : tensor<2x8x8xf32>
}}
"""


def _mask_value(body: str):
    context = ir.Context()
    module = parse(_MASK.format(body=body), context)
    func = module.body.operations[0]
    return context, module, list(func.regions[0].blocks[0].operations)[-1].operands[0]


_CAUSAL_BODY = (
    "%c = arith.cmpi sgt, %k, %q : index\n%ninf = arith.constant 0xFF800000 : f32\n"
    "%z = arith.constant 0.0 : f32\n%s = arith.select %c, %ninf, %z : f32\n"
)


_WRAPPED = (
    "%kt = arith.index_cast %k : index to {t}\n%qt = arith.index_cast %q : index to {t}\n"
    "%zero = arith.constant 0 : {t}\n%n = arith.constant 8 : {t}\n"
    "%neg = arith.cmpi slt, %kt, %zero : {t}\n%kn = arith.addi %kt, %n : {t}\n"
    "%kw = arith.select %neg, %kn, %kt : {t}\n%c = arith.cmpi sgt, %kw, %qt : {t}\n"
    "%ninf = arith.constant 0xFF800000 : f32\n%z = arith.constant 0.0 : f32\n"
    "%s = arith.select %c, %ninf, %z : f32\n"
)


@pytest.mark.parametrize(
    "body, offset",
    [
        (_CAUSAL_BODY + "%r = arith.addf %s, %bv : f32", 0),  # plus a (finite) bias
        # -inf + inf is NaN: not masked to -inf there
        (
            _CAUSAL_BODY + "%inf = arith.constant 0x7F800000 : f32\n%r = arith.addf %s, %inf : f32",
            None,
        ),  # fmt: skip
        # indices cast to i8 wrap (200 is -56): no longer k > q
        (
            "%k8 = arith.index_cast %k : index to i8\n%q8 = arith.index_cast %q : index to i8\n"
            "%c = arith.cmpi sgt, %k8, %q8 : i8\n%ninf = arith.constant 0xFF800000 : f32\n"
            "%z = arith.constant 0.0 : f32\n%r = arith.select %c, %ninf, %z : f32",
            None,
        ),  # fmt: skip
        # torch's index by an arange: a negative index counts from the end (never here)
        (_WRAPPED.format(t="i64") + "%r = arith.addf %s, %bv : f32", 0),
        # the same in i8, where the index does wrap: not read away
        (_WRAPPED.format(t="i8") + "%r = arith.addf %s, %bv : f32", None),
    ],
)
def test_causality_of_masks_with_other_terms(body, offset):
    context, module, mask = _mask_value(body)
    assert causal.offset(mask, 1, 2) == offset


def test_a_mask_reading_a_tensor_collapsed_to_rank_0_is_printed():
    context, module, mask = _mask_value(_CAUSAL_BODY + "%r = arith.addf %s, %bv : f32")
    code = triton_mask.mask_code(mask)
    assert isinstance(code, triton_mask.MaskCode) and code.types == ["*fp32"]


# a sliding window of 3 keys (k in [q - 2, q]) written several ways
_W = "%c2 = arith.constant 2 : index\n%lo = arith.subi %q, %c2 : index\n"
_NINF = "%ninf = arith.constant 0xFF800000 : f32\n%z = arith.constant 0.0 : f32\n"
_TRUE = "%t = arith.constant true\n"
# a condition read from a tensor (a padding input), not followed: it bounds nothing
_PAD = "%p = arith.cmpf ogt, %bv, %z : f32\n"


@pytest.mark.parametrize(
    "body, band",
    [
        # masked where k > q or k < q - 2
        (
            _W + _NINF + "%ca = arith.cmpi sgt, %k, %q : index\n"
            "%cb = arith.cmpi slt, %k, %lo : index\n%c = arith.ori %ca, %cb : i1\n"
            "%r = arith.select %c, %ninf, %z : f32",
            causal.Band(0, -2, True),
        ),  # fmt: skip
        # kept where k <= q and k >= q - 2 (masked_fill of the negation, SDPA's bool mask)
        (
            _W + _NINF + "%ca = arith.cmpi sle, %k, %q : index\n"
            "%cb = arith.cmpi sge, %k, %lo : index\n%c = arith.andi %ca, %cb : i1\n"
            "%r = arith.select %c, %z, %ninf : f32",
            causal.Band(0, -2, True),
        ),  # fmt: skip
        # the same, negated by xori and selected the other way
        (
            _W + _NINF + _TRUE + "%ca = arith.cmpi sle, %k, %q : index\n"
            "%cb = arith.cmpi sge, %k, %lo : index\n%c = arith.andi %ca, %cb : i1\n"
            "%n = arith.xori %c, %t : i1\n%r = arith.select %n, %ninf, %z : f32",
            causal.Band(0, -2, True),
        ),  # fmt: skip
        # a causal mask plus a window's, both -inf: the union
        (
            _W + _NINF + "%ca = arith.cmpi sgt, %k, %q : index\n"
            "%cb = arith.cmpi slt, %k, %lo : index\n%ma = arith.select %ca, %ninf, %z : f32\n"
            "%mb = arith.select %cb, %ninf, %z : f32\n%r = arith.addf %ma, %mb : f32",
            causal.Band(0, -2, True),
        ),  # fmt: skip
        # the window alone (no causal bound), plus a bias: not pure
        (
            _W + _NINF + "%cb = arith.cmpi slt, %k, %lo : index\n"
            "%mb = arith.select %cb, %ninf, %z : f32\n%r = arith.addf %mb, %bv : f32",
            causal.Band(None, -2, False),
        ),  # fmt: skip
        # finfo.min outside the window: every row of the 8x8 mask keeps its own key
        (
            _W + "%ninf = arith.constant 0xFF7FFFFF : f32\n%z = arith.constant 0.0 : f32\n"
            "%ca = arith.cmpi sgt, %k, %q : index\n%cb = arith.cmpi slt, %k, %lo : index\n"
            "%c = arith.ori %ca, %cb : i1\n%r = arith.select %c, %ninf, %z : f32",
            causal.Band(0, -2, True),
        ),  # fmt: skip
        # masked where both hold (an intersection of half-planes): no band
        (
            _W + _NINF + "%ca = arith.cmpi sgt, %k, %q : index\n"
            "%cb = arith.cmpi slt, %k, %lo : index\n%c = arith.andi %ca, %cb : i1\n"
            "%r = arith.select %c, %ninf, %z : f32",
            None,
        ),  # fmt: skip
        # a bound on the key alone, over many rows (a prefix): no band
        (
            _NINF + "%ca = arith.cmpi sgt, %k, %q : index\n%c2 = arith.constant 2 : index\n"
            "%cb = arith.cmpi slt, %k, %c2 : index\n%c = arith.ori %ca, %cb : i1\n"
            "%r = arith.select %c, %ninf, %z : f32",
            None,
        ),  # fmt: skip
        # kept where k <= q and the bias is positive (a padding input): the bound holds,
        # the mask is applied inside it
        (
            _NINF + _PAD + "%ca = arith.cmpi sle, %k, %q : index\n"
            "%c = arith.andi %ca, %p : i1\n%r = arith.select %c, %z, %ninf : f32",
            causal.Band(0, None, False),
        ),  # fmt: skip
        # the window, and-ed with the padding on either side of it
        (
            _W + _NINF + _PAD + "%ca = arith.cmpi sle, %k, %q : index\n"
            "%cb = arith.cmpi sge, %k, %lo : index\n%cp = arith.andi %p, %ca : i1\n"
            "%c = arith.andi %cp, %cb : i1\n%r = arith.select %c, %z, %ninf : f32",
            causal.Band(0, -2, False),
        ),  # fmt: skip
        # masked where k > q or where the padding says: the same, as a union
        (
            _NINF + _PAD + _TRUE + "%ca = arith.cmpi sgt, %k, %q : index\n"
            "%np = arith.xori %p, %t : i1\n%c = arith.ori %ca, %np : i1\n"
            "%r = arith.select %c, %ninf, %z : f32",
            causal.Band(0, None, False),
        ),  # fmt: skip
        # masked where k > q and the padding says (an intersection): no bound
        (
            _NINF + _PAD + "%ca = arith.cmpi sgt, %k, %q : index\n"
            "%c = arith.andi %ca, %p : i1\n%r = arith.select %c, %ninf, %z : f32",
            None,
        ),  # fmt: skip
        # masked where the padding alone says: no bound
        (_NINF + _PAD + "%r = arith.select %p, %z, %ninf : f32", None),
        # finfo.min beside the padding: a row could keep no key, whose fills PyTorch weighs
        (
            "%ninf = arith.constant 0xFF7FFFFF : f32\n%z = arith.constant 0.0 : f32\n"
            + _PAD
            + "%ca = arith.cmpi sle, %k, %q : index\n"
            "%c = arith.andi %ca, %p : i1\n%r = arith.select %c, %z, %ninf : f32",
            None,
        ),  # fmt: skip
    ],
)
def test_band_of_a_sliding_window(body, band):
    context, module, mask = _mask_value(body)
    assert causal.band(mask, 1, 2) == band
    # the causal bound alone is what the paths that know no window read
    assert causal.offset(mask, 1, 2) == (band.upper if band else None)
    assert not causal.is_pure(mask)


_DISTANCE = (
    "%kt = arith.index_cast %k : index to {t}\n%qt = arith.index_cast %q : index to {t}\n"
    "%d = arith.subi %qt, %kt : {t}\n%a = math.absi %d : {t}\n%w = arith.constant 2 : {t}\n"
    "%ninf = arith.constant 0xFF800000 : f32\n%z = arith.constant 0.0 : f32\n"
)


@pytest.mark.parametrize(
    "body, band",
    [
        # ModernBERT's local attention: |q - k| <= w kept, both ways
        (
            _DISTANCE.format(t="i64") + "%c = arith.cmpi sle, %a, %w : i64\n"
            "%r = arith.select %c, %z, %ninf : f32",
            causal.Band(2, -2, True),
        ),  # fmt: skip
        # the same, masked where w < |q - k|
        (
            _DISTANCE.format(t="i64") + "%c = arith.cmpi slt, %w, %a : i64\n"
            "%r = arith.select %c, %ninf, %z : f32",
            causal.Band(2, -2, True),
        ),  # fmt: skip
        # in i16 the difference can wrap: not followed
        (
            _DISTANCE.format(t="i16") + "%c = arith.cmpi sle, %a, %w : i16\n"
            "%r = arith.select %c, %z, %ninf : f32",
            None,
        ),  # fmt: skip
        # transformers' "every key" (q >= 0): nothing masked, no bound, pure
        (
            "%c0 = arith.constant 0 : index\n%c = arith.cmpi sge, %q, %c0 : index\n"
            "%ninf = arith.constant 0xFF800000 : f32\n%z = arith.constant 0.0 : f32\n"
            "%r = arith.select %c, %z, %ninf : f32",
            causal.Band(None, None, True),
        ),  # fmt: skip
    ],
)
def test_band_of_distances_and_of_every_key(body, band):
    context, module, mask = _mask_value(body)
    assert causal.band(mask, 1, 2) == band


_FILL = {"ninf": "0xFF800000", "lowest": "0xFF7FFFFF", "minus_1e9": "-1.0e9"}


@pytest.mark.parametrize(
    "fill, compare, offset",
    [
        ("lowest", "sgt", 0),  # finfo(f32).min swamps any score: as -inf where rows keep keys
        ("lowest", "sge", None),  # row 0 keeps no key: PyTorch weighs its fills equally
        ("ninf", "sge", -1),  # -inf: such a row is NaN in PyTorch too
        ("minus_1e9", "sgt", None),  # a fill that does not swamp every score
    ],
)
def test_causality_of_a_finite_fill(fill, compare, offset):
    body = (
        f"%c = arith.cmpi {compare}, %k, %q : index\n%f = arith.constant {_FILL[fill]} : f32\n"
        "%z = arith.constant 0.0 : f32\n%r = arith.select %c, %f, %z : f32"
    )
    context, module, mask = _mask_value(body)
    assert causal.offset(mask, 1, 2) == offset
    assert causal.is_pure(mask) == (offset is not None)
    # with a bias beside it, a finite fill is not followed (a row could keep no key)
    context, module, mask = _mask_value(
        body.replace("%r = ", "%s = ") + "\n%r = arith.addf %s, %bv : f32"
    )
    assert causal.offset(mask, 1, 2) == (offset if fill == "ninf" else None)
    context, module, mask = _mask_value(
        body.replace("%r = ", "%s = ") + "\n%r = arith.subf %s, %bv : f32"
    )
    assert causal.offset(mask, 1, 2) == (offset if fill == "ninf" else None)


_TABLE = """
#map2 = affine_map<(d0, d1, d2) -> (d1, d2)>
#map3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @mask(%e: tensor<2x8x8xf32>) -> tensor<2x8x8xf32> {{
  %t = arith.constant dense<{table}> : tensor<8x8xi8>
  %m = linalg.generic {{indexing_maps = [#map2, #map3], iterator_types = ["parallel",
                       "parallel", "parallel"]}} ins(%t : tensor<8x8xi8>)
                       outs(%e : tensor<2x8x8xf32>) {{
  ^bb0(%keep: i8, %o: f32):
    %zero8 = arith.constant 0 : i8
    %c = arith.cmpi ne, %keep, %zero8 : i8
    %f = arith.constant {fill} : f32
    %z = arith.constant 0.0 : f32
    %r = arith.select %c, %z, %f : f32
    linalg.yield %r : f32
  }} -> tensor<2x8x8xf32>
  return %m : tensor<2x8x8xf32>
}}
"""


def _table_mask(keep: np.ndarray, fill: str):
    """(context, module, mask) of _TABLE holding ``keep`` (8x8, 1: kept) and ``fill``."""
    table = "[" + ", ".join("[" + ", ".join(map(str, row)) + "]" for row in keep) + "]"
    context = ir.Context()
    module = parse(_TABLE.format(table=table, fill=_FILL[fill]), context)
    func = module.body.operations[0]
    return context, module, list(func.regions[0].blocks[0].operations)[-1].operands[0]


@pytest.mark.parametrize(
    "diagonal, flip, fill, offset",
    [
        (0, None, "ninf", 0),
        (3, None, "ninf", 3),
        (-2, None, "ninf", -2),
        (0, None, "lowest", 0),
        (-2, None, "lowest", None),  # rows 0 and 1 keep no key
        (0, (5, 1), "ninf", None),  # one kept key masked: not a causal pattern
        (0, (1, 5), "ninf", None),  # one key past the diagonal kept
    ],
)
def test_causality_from_the_values_of_a_constant_mask(diagonal, flip, fill, offset):
    """A tril table as a constant (a registered buffer): its values are computed and
    matched against every offset's pattern."""
    keep = np.tril(np.ones((8, 8), np.int8), diagonal)
    if flip is not None:
        keep[flip] = 1 - keep[flip]
    context, module, mask = _table_mask(keep, fill)
    assert causal.offset(mask, 1, 2) == offset
    assert causal.is_pure(mask) == (offset is not None)


@pytest.mark.parametrize(
    "window, fill, band",
    [
        (3, "ninf", causal.Band(0, -2, True)),
        (3, "lowest", causal.Band(0, -2, True)),  # every row keeps its own key
        (1, "ninf", causal.Band(0, 0, True)),  # the diagonal alone
    ],
)
def test_band_from_the_values_of_a_constant_mask(window, fill, band):
    """A sliding-window table (tril minus an earlier tril) as a constant."""
    keep = np.tril(np.ones((8, 8), np.int8)) - np.tril(np.ones((8, 8), np.int8), -window)
    context, module, mask = _table_mask(keep, fill)
    assert causal.band(mask, 1, 2) == band
    assert causal.offset(mask, 1, 2) == 0 and not causal.is_pure(mask)
    keep[6, 2] = 1  # one key outside the window kept: no band
    context, module, mask = _table_mask(keep, fill)
    assert causal.band(mask, 1, 2) is None


@pytest.mark.parametrize("fill, band", [("ninf", causal.Band(2, 1, True)), ("lowest", None)])
def test_band_whose_last_row_keeps_no_key(fill, band):
    """Keys m + 1 and m + 2 of row m: row 7 of 8 keeps none, which PyTorch gives equal
    weights over its finfo.min fills (no band then), and NaN over -inf."""
    keep = np.tril(np.ones((8, 8), np.int8), 2) - np.tril(np.ones((8, 8), np.int8), 0)
    context, module, mask = _table_mask(keep, fill)
    assert causal.band(mask, 1, 2) == band


def test_causality_from_a_dense_resource_blob_in_mlir_text():
    """A constant held as a dense_resource (as torch's importer writes buffers): its bytes
    come from the text's dialect_resources section."""
    keep = np.tril(np.ones((8, 8), np.int8))
    text = _TABLE.format(table="[[0]]", fill=_FILL["ninf"]).replace(
        "dense<[[0]]> : tensor<8x8xi8>", "dense_resource<tril_table> : tensor<8x8xi8>"
    )
    text += '{-#\n  dialect_resources: {\n    builtin: {\n      tril_table: "0x01000000'
    text += keep.tobytes().hex().upper() + '"\n    }\n  }\n#-}\n'
    context = ir.Context()
    module = parse(text, context)
    func = module.body.operations[0]
    mask = list(func.regions[0].blocks[0].operations)[-1].operands[0]
    assert causal.offset(mask, 1, 2) is None  # the bytes unknown
    with linalg.resources(context, inputs.resource_blobs(text)):
        assert causal.offset(mask, 1, 2) == 0 and causal.is_pure(mask)
