// RUN: fusion-opt %s --split-input-file --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(fusion-additive-mask)' | FileCheck %s

// SDPA's boolean mask (true: attend) becomes select(m, 0, -inf) in Q's type, a producer
// of the attention's mask; no i1 operand is left on the op.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @boolean(%q: tensor<4x8x16xf16>, %k: tensor<4x8x16xf16>, %v: tensor<4x8x16xf16>,
                   %mask: tensor<4x8x8xi1>) -> tensor<4x8x16xf16> {
  %scale = arith.constant 0.25 : f16
  %e = tensor.empty() : tensor<4x8x16xf16>
  // expected-remark @below {{boolean attention mask made additive}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<4x8x16xf16>, tensor<4x8x16xf16>, tensor<4x8x16xf16>, f16, tensor<4x8x8xi1>)
      outs(%e : tensor<4x8x16xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x8x16xf16>
  return %o : tensor<4x8x16xf16>
}
// CHECK-LABEL: func.func @boolean(
// CHECK-SAME: %[[MASK:[a-z0-9]+]]: tensor<4x8x8xi1>
// CHECK: %[[ADD:.+]] = linalg.generic {{.*}} ins(%[[MASK]] : tensor<4x8x8xi1>) outs(%{{.+}} : tensor<4x8x8xf16>)
// CHECK: ^bb0(%[[KEEP:.+]]: i1, %{{.+}}: f16):
// CHECK-DAG: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f16
// CHECK-DAG: %[[NINF:.+]] = arith.constant 0xFC00 : f16
// CHECK: arith.select %[[KEEP]], %[[ZERO]], %[[NINF]] : f16
// CHECK: iree_linalg_ext.attention
// CHECK-SAME: %[[ADD]] : {{.*}}tensor<4x8x8xf16>)
// CHECK-NOT: xi1>)

// -----

// A float mask is left as it is.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @additive(%q: tensor<4x8x16xf32>, %k: tensor<4x8x16xf32>, %v: tensor<4x8x16xf32>,
                    %mask: tensor<4x8x8xf32>) -> tensor<4x8x16xf32> {
  %scale = arith.constant 0.25 : f32
  %e = tensor.empty() : tensor<4x8x16xf32>
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>, f32, tensor<4x8x8xf32>)
      outs(%e : tensor<4x8x16xf32>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x8x16xf32>
  return %o : tensor<4x8x16xf32>
}
// CHECK-LABEL: func.func @additive(
// CHECK-NOT: linalg.generic
// CHECK: iree_linalg_ext.attention
