# An attention with a sink after fusion-online-softmax (the CPU) and after
# fusion-decompose-attention (Vulkan's path): the loop nest starts each row's running
# max from the sink and leaves no online_attention; the decomposition reads the sink as
# the running max's start and adds it to the sum.
# RUN: %PYTHON %s | FileCheck %s

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import fusion_compiler as fc  # noqa: E402
from variants import Attention  # noqa: E402

x = torch.randn(1, 2, 8, 16)
for lowering in ("fusion-online-softmax", "fusion-decompose-attention"):
    fused = fc.compile(Attention(2, 8, 8, 16, sink=True), example_args=(x, x.clone(), x.clone()),
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
