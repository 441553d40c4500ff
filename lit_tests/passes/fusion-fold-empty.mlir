// RUN: fusion-opt %s --split-input-file --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(fusion-fold-empty)' | FileCheck %s

// No keys: the output is zeros, written into the op's init; the attention is gone.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @no_keys(%q: tensor<4x8x16xf16>, %k: tensor<4x0x16xf16>, %v: tensor<4x0x16xf16>) -> tensor<4x8x16xf16> {
  %scale = arith.constant 0.25 : f16
  %e = tensor.empty() : tensor<4x8x16xf16>
  // expected-remark @below {{attention with an extent of 0 folded to zeros}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #o]}>
      ins(%q, %k, %v, %scale : tensor<4x8x16xf16>, tensor<4x0x16xf16>, tensor<4x0x16xf16>, f16)
      outs(%e : tensor<4x8x16xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x8x16xf16>
  return %o : tensor<4x8x16xf16>
}
// CHECK-LABEL: func.func @no_keys(
// CHECK-DAG: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f16
// CHECK-DAG: %[[INIT:.+]] = tensor.empty() : tensor<4x8x16xf16>
// CHECK: %[[FILL:.+]] = linalg.fill ins(%[[ZERO]] : f16) outs(%[[INIT]] : tensor<4x8x16xf16>)
// CHECK-NOT: iree_linalg_ext.attention
// CHECK: return %[[FILL]]

// -----

// Keys and rows present: left as it is.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @keys(%q: tensor<4x8x16xf16>, %k: tensor<4x8x16xf16>, %v: tensor<4x8x16xf16>) -> tensor<4x8x16xf16> {
  %scale = arith.constant 0.25 : f16
  %e = tensor.empty() : tensor<4x8x16xf16>
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #o]}>
      ins(%q, %k, %v, %scale : tensor<4x8x16xf16>, tensor<4x8x16xf16>, tensor<4x8x16xf16>, f16)
      outs(%e : tensor<4x8x16xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x8x16xf16>
  return %o : tensor<4x8x16xf16>
}
// CHECK-LABEL: func.func @keys(
// CHECK-NOT: linalg.fill
// CHECK: iree_linalg_ext.attention

// -----

// A contraction over no keys runs no iteration: its result is its init (the zero fill).
func.func @sum_over_nothing(%p: tensor<4x8x0xf32>, %v: tensor<4x0x16xf32>) -> tensor<4x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<4x8x0xf32>, tensor<4x0x16xf32>)
      outs(%init : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  return %o : tensor<4x8x16xf32>
}
// CHECK-LABEL: func.func @sum_over_nothing(
// CHECK: %[[INIT:.+]] = linalg.fill
// CHECK-NOT: linalg.batch_matmul
// CHECK: return %[[INIT]]
