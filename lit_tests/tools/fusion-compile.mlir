// fusion-compile on torch-dialect MLIR: stop at a stage, print the IR, report remarks.
// RUN: fusion-compile %s --compile-to linalg | FileCheck %s --check-prefix=LINALG
// RUN: fusion-compile %s --compile-to fused --remarks 2>&1 | FileCheck %s --check-prefix=FUSED
// RUN: fusion-compile %s --compile-to flow | FileCheck %s --check-prefix=FLOW

// LINALG-LABEL: util.func public @main$async
// LINALG: math.exp
// LINALG-NOT: torch.aten

// FUSED: fusion-compile.mlir:18:{{[0-9]+}}: remark: softmax over dimension 1 of tensor<3x5xf32> (decomposed)
// FUSED: fusion-compile: fused for cpu (attention_ops=0, softmax_ops=1)

// FLOW: flow.executable
// FLOW: flow.dispatch @
func.func @main(%x: !torch.vtensor<[3,5],f32>) -> !torch.vtensor<[3,5],f32> {
  %int1 = torch.constant.int 1
  %none = torch.constant.none
  %y = torch.aten.softmax.int %x, %int1, %none : !torch.vtensor<[3,5],f32>, !torch.int, !torch.none -> !torch.vtensor<[3,5],f32>
  return %y : !torch.vtensor<[3,5],f32>
}
