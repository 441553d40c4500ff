"""Runs one generated attention kernel under Triton's interpreter (TRITON_INTERPRET=1):
``main(CALL.pt)`` writes CALL.out.pt, and with a block map CALL.map.pt.

``run_interpreted`` calls ``main`` in the child process of ``interpreter_process``:
Triton chooses the interpreter when it is first imported.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from fusion_compiler.backends.triton.kernel import load_source
from fusion_compiler.backends.triton.spec import TritonSpec

_DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


_patched = False


def patch_interpreter() -> None:
    """Two defects of Triton 3.6's interpreter, mended here: it turns a program id (a
    1-element array) into a loop bound with int(), which NumPy 2 refuses (it reads the
    element instead after this); and it multiplies bf16 operands, which it holds as their
    uint16 bits, as those integers (rel. error ~1e11): ``tl.dot`` reads them as the floats
    they are after this, as the GPU does, and elementwise arithmetic of bf16 (a product's
    epilogue) computes on the floats and rounds to bf16. Once per process (the
    interpreter's process runs many kernels)."""
    global _patched
    if _patched:
        return
    _patched = True
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    patch_tensor = interpreter._patch_lang_tensor

    def patched(tensor, scope) -> None:
        patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    interpreter._patch_lang_tensor = patched
    dot = interpreter.InterpreterBuilder.create_dot

    def bf16_as_floats(handle):
        if handle.dtype.scalar != tl.bfloat16:
            return handle
        floats = (handle.data.astype(np.uint32) << 16).view(np.float32)
        return interpreter.TensorHandle(floats, tl.float32)

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        a, b = bf16_as_floats(a), bf16_as_floats(b)
        return dot(self, a, b, d, input_precision, max_num_imprecise_acc)

    interpreter.InterpreterBuilder.create_dot = create_dot
    binary = interpreter.InterpreterBuilder.binary_op
    compares = (np.less, np.greater, np.less_equal, np.greater_equal, np.equal, np.not_equal)

    def binary_op(self, lhs, rhs, op):
        """bf16 arithmetic as the GPU does it: on the floats, rounded to bf16 (a
        comparison's result as it is), not on their bits."""
        if lhs.dtype.scalar != tl.bfloat16:
            return binary(self, lhs, rhs, op)
        result = binary(self, bf16_as_floats(lhs), bf16_as_floats(rhs), op)
        if op in compares:
            return result
        return interpreter.TensorHandle(bf16_bits(result.data), tl.bfloat16)

    interpreter.InterpreterBuilder.binary_op = binary_op

    def bf16_bits(floats):
        """float32 values as bf16 bits, rounded to nearest even (as the GPU and PyTorch)."""
        bits = np.asarray(floats, dtype=np.float32).view(np.uint32)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)

    def get_bf16(self, value):  # a constant in a bf16 expression
        return interpreter.TensorHandle(bf16_bits(np.array([value])), tl.bfloat16)

    interpreter.InterpreterBuilder.get_bf16 = get_bf16


def main(path: Path) -> None:
    call = torch.load(path)
    spec = TritonSpec(**call["spec"])
    q, k, v, mask, sizes = call["args"]
    n_q = int(sizes[0]) if spec.dynamic else spec.n_q
    out = torch.empty(spec.batch, n_q, spec.dv, dtype=_DTYPES[spec.out_dtype or spec.dtype])
    grid = spec.grid_for(n_q)
    patch_interpreter()
    with tempfile.TemporaryDirectory() as directory:  # the interpreter re-reads the source
        kernel = load_source(spec, Path(directory))
        if spec.mask_expr is not None:
            masks = list(mask or [])  # the tensors the computed mask reads
        else:
            masks = [q if mask is None else mask]
        sizes = q if sizes is None else sizes
        if spec.block_map:  # computed first, read by the attention after the mask's inputs
            scratch = torch.empty(spec.map_scratch_elements, dtype=torch.int32)
            block_map = torch.empty(spec.map_elements, dtype=torch.int32)
            classes = load_source(spec, Path(directory), "block_classes")
            classes[spec.classes_grid](*masks, scratch, **spec.map_constants())
            lists = load_source(spec, Path(directory), "block_lists")
            lists[spec.map_grid](scratch, block_map, **spec.lists_constants())
            masks = [*masks, block_map]
            torch.save(block_map, path.with_suffix(".map.pt"))
        if spec.sink:  # after the map, as ``TritonSpec.pointers`` orders them
            masks = [*masks, call["sink"]]
        if spec.splits > 1:
            partial = torch.empty(spec.partial_elements, dtype=torch.float32)
            kernel[grid](q, k, v, *masks, sizes, partial, **spec.constants())
            combine = load_source(spec, Path(directory), "combine")
            combine[spec.combine_grid](partial, out, **spec.combine_constants())
        else:
            kernel[grid](q, k, v, *masks, sizes, out, **spec.constants())
    torch.save(out, path.with_suffix(".out.pt"))
