"""fusion-kernel-concat: a concatenation that IREE would copy as it is (a KV cache grown by
the new token's keys, read by the attention kernel) becomes a generated sm_90 copy
kernel; concatenations IREE fuses into its own dispatches (RoPE's halves) stay.

No GPU here: each model is compiled for sm_90, the kernel's spec is read back from its
dispatch and the kernel runs under Triton's interpreter against PyTorch.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import kernel_specs

import fusion_compiler as fc
from fusion_compiler.backends.triton.concat_kernel import MARKER, ConcatSpec, run_interpreted

pytestmark = pytest.mark.slow  # compiles for sm_90 and runs kernels under the interpreter


def _specs(fused: fc.CompiledModule) -> list[ConcatSpec]:
    return kernel_specs(fused, MARKER, ConcatSpec)


class CacheGrowth(torch.nn.Module):
    """A decoding step with a growing cache (transformers' DynamicCache): the new token's
    K and V appended to the past, attention over the result, RoPE's rotate_half on q."""

    def forward(self, q, k, v, past_k, past_v):
        half = q.shape[-1] // 2
        q = q + torch.cat((-q[..., half:], q[..., :half]), dim=-1)
        keys = torch.cat((past_k, k), dim=2)
        values = torch.cat((past_v, v), dim=2)
        return F.scaled_dot_product_attention(q, keys, values), keys


def test_cache_concatenation_is_a_copy_kernel_and_rope_is_read_in_place() -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 1, 32).half() for _ in range(3))
    past_k, past_v = (torch.randn(2, 4, 200, 32).half() for _ in range(2))
    fused = fc.compile(
        CacheGrowth(), (q, k, v, past_k, past_v), target="cuda", cuda_arch="sm_90",
        compile_to="fused",
    )  # fmt: skip
    specs = _specs(fused)
    assert [(s.outer, s.a_row, s.b_row) for s in specs] == [(8, 200 * 32, 32)] * 2
    # rotate_half's, read in place by one elementwise op (fusion-gather-slices)
    assert "tensor.concat" not in fused.mlir
    assert any("slices of one tensor" in r.message for r in fused.remarks), fused.remarks
    for spec, past, new in zip(specs, (past_k, past_v), (k, v), strict=True):
        got = run_interpreted(spec, past.reshape(8, -1), new.reshape(8, -1))
        assert torch.equal(got.reshape(2, 4, 201, 32), torch.cat((past, new), dim=2))


def test_concatenation_of_rows_of_odd_lengths_copies_exactly() -> None:
    spec = ConcatSpec(dtype="f32", outer=3, a_row=5000, b_row=123)
    a, b = torch.randn(3, 5000), torch.randn(3, 123)
    assert torch.equal(run_interpreted(spec, a, b), torch.cat((a, b), dim=1))
