# The front end: an attention block written as matmul/softmax/matmul, exported with
# torch.export, imported to the torch dialect and lowered to Linalg on tensors.
# RUN: %PYTHON %s | FileCheck %s

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import fusion_compiler as fc  # noqa: E402
from models import ExplicitAttentionBlock  # noqa: E402

model = ExplicitAttentionBlock(dim=32, heads=2).eval()
x = torch.randn(1, 10, 32)

print(fc.compile(model, example_args=(x,), compile_to="torch").mlir)
# CHECK-LABEL: func.func @main(%{{.+}}: !torch.vtensor<[1,10,32],f32>) -> !torch.vtensor<[1,10,32],f32>
# CHECK: torch.aten.matmul
# CHECK: torch.aten.softmax.int
# CHECK: torch.aten.matmul

linalg = fc.compile(model, example_args=(x,), compile_to="linalg")
print(linalg.mlir)
# CHECK-LABEL: util.func public @main$async
# CHECK: %[[SCORES:.+]] = linalg.batch_matmul
# CHECK: arith.maximumf
# CHECK: math.exp
# CHECK: arith.divf
# CHECK: linalg.batch_matmul
# CHECK-NOT: torch.
# CHECK-LABEL: util.func public @main(
# CHECK-SAME: iree.reflection = {fusion.input_names = "x", fusion.inputs = "tensor<1x10x32xf32>", fusion.outputs = "tensor<1x10x32xf32>"}
