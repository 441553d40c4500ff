# An attention with a sink lowered by fusion-kernel-attention (CUDA sm_90): one dispatch
# of the generated kernel, its spec saying "sink", bound to Q, K, V, the mask's place,
# the (batch, rows) f32 sink logits and the sizes' place; no online_attention left.
# RUN: %PYTHON %s | FileCheck %s

import torch

import fusion_compiler as fc


class SinkAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.sinks = torch.nn.Parameter(torch.randn(2))

    def forward(self, q, k, v):
        scores = q @ k.transpose(2, 3) * 0.25
        sinks = self.sinks.reshape(1, -1, 1, 1).expand(q.shape[0], -1, q.shape[-2], -1)
        logits = torch.cat([scores, sinks], dim=-1)
        return torch.softmax(logits, dim=-1)[..., :-1] @ v


x = torch.randn(1, 2, 64, 64, dtype=torch.float16)
fused = fc.compile(SinkAttention().half(), example_args=(x, x.clone(), x.clone()),
                   target="cuda", cuda_arch="sm_90", compile_to="fused")  # fmt: skip
print(fused.mlir)
# CHECK-LABEL: util.func public @main$async
# CHECK-NOT: iree_linalg_ext.online_attention
# CHECK: flow.dispatch @fusion_attention_0::@attention(%{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}, %{{[^,)]+}})
# CHECK-SAME: \22sink\22: true
# CHECK-SAME: tensor<1x2x64x64xf16>, tensor<2x64xf32>, tensor<1x2x64x64xf16>) ->
# CHECK-NOT: iree_linalg_ext.online_attention
