# An attention with a sink after fusion-online-softmax (the CPU) and after
# fusion-decompose-attention (Vulkan's path): the loop nest starts each row's running
# max from the sink and leaves no online_attention; the decomposition reads the sink as
# the running max's start and adds it to the sum.
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


x = torch.randn(1, 2, 8, 16)
for lowering in ("fusion-online-softmax", "fusion-decompose-attention"):
    fused = fc.compile(SinkAttention(), example_args=(x, x.clone(), x.clone()),
                       pipeline=f"builtin.module(fusion-detect-attention, canonicalize, {lowering})",
                       compile_to="fused")  # fmt: skip
    print(fused.mlir)
# CHECK-LABEL: util.func public @main$async
# CHECK-NOT: iree_linalg_ext.online_attention
# CHECK: scf.for
# CHECK: math.exp2
# CHECK: arith.divf
# CHECK: } {fusion.online_softmax}
# CHECK-LABEL: util.func public @main$async
# CHECK-NOT: iree_linalg_ext.online_attention
# CHECK: linalg.generic
# CHECK: arith.maximumf
# CHECK: math.exp2
# CHECK-NOT: iree_linalg_ext.online_attention
# CHECK: util.func public @main(
