# An attention with a sink (GPT-OSS's eager attention: the sinks concatenated to the
# scores, the row max subtracted, softmax, the sink column dropped) after
# fusion-detect-attention: IREE's online_attention started from the sink (max log2(e)·sink,
# sum 1, accumulator 0), then accumulator / sum; no concatenation of the scores is left.
# RUN: %PYTHON %s | FileCheck %s

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import fusion_compiler as fc  # noqa: E402
from variants import Attention  # noqa: E402

x = torch.randn(1, 2, 8, 16)
fused = fc.compile(Attention(2, 8, 8, 16, sink=True), example_args=(x, x.clone(), x.clone()),
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

# With a dynamic length the sink's column is dropped by a slice of computed sizes (torch's
# [..., :-1]); detection proves them and fuses it all the same, the sizes read from the
# operands after the cleanup the default pipelines run after detection.
n = torch.export.Dim("n", min=2, max=64)
fused = fc.compile(Attention(2, 8, 8, 16, sink=True), example_args=(x, x.clone(), x.clone()),
                   dynamic_shapes=({2: n},) * 3,
                   pipeline="builtin.module(fusion-detect-attention, "
                            "resolve-ranked-shaped-type-result-dims, canonicalize, cse)",
                   compile_to="fused")  # fmt: skip
print(fused.mlir)
# CHECK-LABEL: util.func public @main$async
# CHECK-NOT: tensor.concat
# CHECK-NOT: tensor.extract_slice
# CHECK: iree_linalg_ext.online_attention
# CHECK-SAME: outs(%{{.+}}, %{{.+}}, %{{.+}} : tensor<2x?x16xf32>, tensor<2x?xf32>, tensor<2x?xf32>)
# CHECK: arith.divf
# CHECK-NOT: tensor.concat
