# An attention with a sink lowered by fusion-kernel-attention (CUDA sm_90): one dispatch
# of the generated kernel, its spec saying "sink", bound to Q, K, V, the mask's place,
# the (batch, rows) f32 sink logits and the sizes' place; no online_attention left.
# A decoding step (one query over 3000 keys, two query heads per K/V head): split-KV
# programs, split 0 taking the sink, then the combine kernel.
# RUN: %PYTHON %s | FileCheck %s

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import fusion_compiler as fc  # noqa: E402
from variants import Attention  # noqa: E402

x = torch.randn(1, 2, 64, 64, dtype=torch.float16)
fused = fc.compile(Attention(2, 64, 64, 64, sink=True).half(), example_args=(x, x.clone(), x.clone()),
                   target="cuda", cuda_arch="sm_90", compile_to="fused")  # fmt: skip
print(fused.mlir)
# CHECK-LABEL: util.func public @main$async
# CHECK-NOT: iree_linalg_ext.online_attention
# CHECK: flow.dispatch @fusion_attention_0::@attention(%{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}, %{{[^,)]+}})
# CHECK-SAME: \22sink\22: true
# CHECK-SAME: tensor<1x2x64x64xf16>, tensor<2x64xf32>, tensor<1x2x64x64xf16>) ->
# CHECK-NOT: iree_linalg_ext.online_attention

q = torch.randn(1, 4, 1, 64, dtype=torch.float16)
kv = torch.randn(1, 2, 3000, 64, dtype=torch.float16)
decode = Attention(4, 1, 3000, 64, gqa="repeat_kv", kv_heads=2, sink=True).half()
fused = fc.compile(decode, example_args=(q, kv, kv.clone()), target="cuda", cuda_arch="sm_90",
                   compile_to="fused")  # fmt: skip
print(fused.mlir)
# CHECK-LABEL: util.func public @main$async
# CHECK-NOT: iree_linalg_ext.online_attention
# CHECK: flow.dispatch @fusion_attention_0::@attention(
# CHECK-SAME: \22sink\22: true
# CHECK-SAME: \22splits\22: {{[2-9]|[1-9][0-9]+}}
# CHECK: flow.dispatch @fusion_attention_0_combine::@combine(
