# An attention with a sink (GPT-OSS's eager attention: the sinks concatenated to the
# scores, the row max subtracted, softmax, the sink column dropped) after
# fusion-detect-attention: IREE's online_attention started from the sink (max log2(e)·sink,
# sum 1, accumulator 0), then accumulator / sum; no concatenation of the scores is left.
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
        logits = logits - logits.max(dim=-1, keepdim=True).values
        return torch.softmax(logits, dim=-1)[..., :-1] @ v


x = torch.randn(1, 2, 8, 16)
fused = fc.compile(SinkAttention(), example_args=(x, x.clone(), x.clone()),
                   pipeline="builtin.module(fusion-detect-attention, canonicalize)",
                   compile_to="fused")  # fmt: skip
print(fused.mlir)
# CHECK-LABEL: util.func public @main$async
# CHECK-NOT: tensor.concat
# CHECK-DAG: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
# CHECK-DAG: %[[LOG2E:.+]] = arith.constant 1.44269502 : f32
# CHECK: %[[SINK:.+]] = linalg.generic {{.+}} ins(%{{.+}} : tensor<2x8xf32>) outs(%{{.+}} : tensor<2x8xf32>)
# CHECK: arith.mulf %{{.+}}, %[[LOG2E]] : f32
# CHECK: %[[SUM:.+]] = linalg.fill ins(%[[ONE]] : f32) outs(%{{.+}} : tensor<2x8xf32>)
# CHECK: %[[ONLINE:.+]]:3 = iree_linalg_ext.online_attention
# CHECK-SAME: outs(%{{.+}}, %[[SINK]], %[[SUM]] : tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
# CHECK: linalg.generic
# CHECK-SAME: ins(%[[ONLINE]]#0, %[[ONLINE]]#2
# CHECK: arith.divf
# CHECK-NOT: tensor.concat
