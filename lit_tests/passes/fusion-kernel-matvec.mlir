// RUN: fusion-opt %s --split-input-file --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(fusion-kernel-matvec{arch=sm_90})' \
// RUN:   | FileCheck %s

// One row times PyTorch's (N, K) Linear weight, as torch-mlir writes it: the weight
// transposed, broadcast to a batch of one, a batch_matmul into f32 and a cast back to
// f16. The kernel reads the weight in place (K along its rows) and writes the f16 result:
// the transpose, the broadcast and the cast are gone.
#bcast = affine_map<(d0, d1, d2) -> (d1, d2)>
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @linear(%x: tensor<1x1x256xf16>, %w: tensor<512x256xf16>) -> tensor<1x1x512xf16> {
  %te = tensor.empty() : tensor<256x512xf16>
  %t = linalg.transpose ins(%w : tensor<512x256xf16>) outs(%te : tensor<256x512xf16>) permutation = [1, 0]
  %be = tensor.empty() : tensor<1x256x512xf16>
  %b = linalg.generic {indexing_maps = [#bcast, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%t : tensor<256x512xf16>) outs(%be : tensor<1x256x512xf16>) {
  ^bb0(%in: f16, %out: f16):
    linalg.yield %in : f16
  } -> tensor<1x256x512xf16>
  %zero = arith.constant 0.0 : f32
  %ae = tensor.empty() : tensor<1x1x512xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%ae : tensor<1x1x512xf32>) -> tensor<1x1x512xf32>
  // expected-remark @below {{matrix-vector product lowered to a generated sm_90 kernel (f16, K=256, N=512}}
  %p = linalg.batch_matmul ins(%x, %b : tensor<1x1x256xf16>, tensor<1x256x512xf16>) outs(%acc : tensor<1x1x512xf32>) -> tensor<1x1x512xf32>
  %ce = tensor.empty() : tensor<1x1x512xf16>
  %c = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p : tensor<1x1x512xf32>) outs(%ce : tensor<1x1x512xf16>) {
  ^bb0(%in: f32, %out: f16):
    %r = arith.truncf %in : f32 to f16
    linalg.yield %r : f16
  } -> tensor<1x1x512xf16>
  return %c : tensor<1x1x512xf16>
}
// CHECK-LABEL: func.func @linear(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<1x1x256xf16>, %[[W:[a-z0-9]+]]: tensor<512x256xf16>
// CHECK-NOT: linalg.transpose
// CHECK: %[[R:.+]]:3 = flow.dispatch @fusion_matvec_0::@matvec(%[[X]], %[[W]]) {fusion.matvec_kernel = "{{.*}}\22sk\22: 1, \22sn\22: 256{{.*}}"} : (tensor<1x1x256xf16>, tensor<512x256xf16>) -> (tensor<1x1x512xf16>, tensor<1xi8>, tensor<1xi8>)
// CHECK-NOT: linalg.batch_matmul
// CHECK: return %[[R]]#0

// -----

// Two rows: not a matrix-vector product, left to IREE.
func.func @two_rows(%x: tensor<1x2x64xf16>, %w: tensor<1x64x64xf16>) -> tensor<1x2x64xf32> {
  %zero = arith.constant 0.0 : f32
  %ae = tensor.empty() : tensor<1x2x64xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%ae : tensor<1x2x64xf32>) -> tensor<1x2x64xf32>
  %p = linalg.batch_matmul ins(%x, %w : tensor<1x2x64xf16>, tensor<1x64x64xf16>) outs(%acc : tensor<1x2x64xf32>) -> tensor<1x2x64xf32>
  return %p : tensor<1x2x64xf32>
}
// CHECK-LABEL: func.func @two_rows(
// CHECK: linalg.batch_matmul
// CHECK-NOT: flow.dispatch
