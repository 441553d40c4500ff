// RUN: fusion-opt %s --split-input-file --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(fusion-kernel-concat{arch=sm_90})' \
// RUN:   | FileCheck %s

// A KV cache grown by the new token's keys (transformers' DynamicCache), returned as it
// is: IREE would copy it with a strided copy; the generated kernel copies both parts.
func.func @cache(%past: tensor<2x4x200x32xf16>, %new: tensor<2x4x1x32xf16>) -> tensor<2x4x201x32xf16> {
  // expected-remark @below {{concatenation lowered to a generated sm_90 copy kernel (f16, 2x4x201x32 along dim 2)}}
  %c = tensor.concat dim(2) %past, %new : (tensor<2x4x200x32xf16>, tensor<2x4x1x32xf16>) -> tensor<2x4x201x32xf16>
  return %c : tensor<2x4x201x32xf16>
}
// CHECK-LABEL: func.func @cache(
// CHECK-SAME: %[[P:[a-z0-9]+]]: tensor<2x4x200x32xf16>, %[[N:[a-z0-9]+]]: tensor<2x4x1x32xf16>
// CHECK: %[[R:.+]]:3 = flow.dispatch @fusion_concat_0::@concat(%[[P]], %[[N]]) {fusion.concat_kernel = "{\22a_row\22: 6400, \22arch\22: 90, \22b_row\22: 32, {{.*}}\22outer\22: 8}"}
// CHECK-NOT: tensor.concat
// CHECK: return %[[R]]#0

// -----

// Read by an elementwise op (RoPE's rotated halves): IREE fuses it into that dispatch.
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @fused(%a: tensor<4x16xf32>, %b: tensor<4x16xf32>) -> tensor<4x32xf32> {
  %c = tensor.concat dim(1) %a, %b : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x32xf32>
  %e = tensor.empty() : tensor<4x32xf32>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%c : tensor<4x32xf32>) outs(%e : tensor<4x32xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.negf %in : f32
    linalg.yield %r : f32
  } -> tensor<4x32xf32>
  return %n : tensor<4x32xf32>
}
// CHECK-LABEL: func.func @fused(
// CHECK: tensor.concat
// CHECK-NOT: flow.dispatch
