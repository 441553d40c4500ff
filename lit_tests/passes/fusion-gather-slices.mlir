// RUN: fusion-opt %s --split-input-file --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(fusion-gather-slices)' | FileCheck %s

// RoPE's rotate_half: cat(-x[..., 32:], x[..., :32]) -> one generic over the result's
// index space reading x at index + 32 below 32 (negated), index - 32 from 32 on.
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @rotate_half
// CHECK-SAME: (%[[X:.*]]: tensor<1x32x1x64xf16>)
func.func @rotate_half(%x: tensor<1x32x1x64xf16>) -> tensor<1x32x1x64xf16> {
  %lo = tensor.extract_slice %x[0, 0, 0, 0] [1, 32, 1, 32] [1, 1, 1, 1] : tensor<1x32x1x64xf16> to tensor<1x32x1x32xf16>
  %hi = tensor.extract_slice %x[0, 0, 0, 32] [1, 32, 1, 32] [1, 1, 1, 1] : tensor<1x32x1x64xf16> to tensor<1x32x1x32xf16>
  %e = tensor.empty() : tensor<1x32x1x32xf16>
  %neg = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%hi : tensor<1x32x1x32xf16>) outs(%e : tensor<1x32x1x32xf16>) {
  ^bb0(%in: f16, %out: f16):
    %n = arith.negf %in : f16
    linalg.yield %n : f16
  } -> tensor<1x32x1x32xf16>
  // CHECK-NOT: tensor.concat
  // CHECK-NOT: tensor.extract_slice
  // CHECK: linalg.generic
  // CHECK-SAME: outs(%{{.*}} : tensor<1x32x1x64xf16>)
  // The index each piece reads, then a select of them (not a selected shift added to
  // the index: MLIR's vectorizer reads index + anything as a contiguous load).
  // CHECK: %[[AT:.*]] = linalg.index 3 : index
  // CHECK: %[[C32:.*]] = arith.constant 32 : index
  // CHECK: %[[FIRST:.*]] = arith.cmpi ult, %[[AT]], %[[C32]] : index
  // CHECK: %[[UP:.*]] = arith.addi %[[AT]], %{{.*}} : index
  // CHECK: %[[M32:.*]] = arith.constant -32 : index
  // CHECK: %[[DOWN:.*]] = arith.addi %[[AT]], %[[M32]] : index
  // CHECK: %[[SRC:.*]] = arith.select %[[FIRST]], %[[UP]], %[[DOWN]] : index
  // CHECK: %[[V:.*]] = tensor.extract %[[X]][%{{.*}}, %{{.*}}, %{{.*}}, %[[SRC]]]
  // CHECK: %[[N:.*]] = arith.negf %[[V]] : f16
  // CHECK: %[[R:.*]] = arith.select %[[FIRST]], %[[N]], %[[V]] : f16
  // CHECK: linalg.yield %[[R]] : f16
  // expected-remark @below {{concatenation of 2 slices of one tensor along dim 3 read in place}}
  %c = tensor.concat dim(3) %neg, %lo : (tensor<1x32x1x32xf16>, tensor<1x32x1x32xf16>) -> tensor<1x32x1x64xf16>
  return %c : tensor<1x32x1x64xf16>
}

// -----

// Slices of two tensors, and a slice that is not whole along another dimension: left.
// CHECK-LABEL: func.func @not_one_source
func.func @not_one_source(%x: tensor<4x64xf32>, %y: tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>) {
  %a = tensor.extract_slice %x[0, 32] [4, 32] [1, 1] : tensor<4x64xf32> to tensor<4x32xf32>
  %b = tensor.extract_slice %y[0, 0] [4, 32] [1, 1] : tensor<4x64xf32> to tensor<4x32xf32>
  // CHECK: tensor.concat dim(1)
  %c = tensor.concat dim(1) %a, %b : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x64xf32>
  %d = tensor.extract_slice %x[0, 0] [2, 64] [1, 1] : tensor<4x64xf32> to tensor<2x64xf32>
  %f = tensor.extract_slice %x[2, 0] [2, 64] [1, 1] : tensor<4x64xf32> to tensor<2x64xf32>
  // CHECK: tensor.concat dim(1)
  %g = tensor.concat dim(1) %d, %f : (tensor<2x64xf32>, tensor<2x64xf32>) -> tensor<2x128xf32>
  %h = tensor.extract_slice %g[0, 0] [2, 64] [1, 1] : tensor<2x128xf32> to tensor<2x64xf32>
  %i = tensor.concat dim(0) %h, %h : (tensor<2x64xf32>, tensor<2x64xf32>) -> tensor<4x64xf32>
  return %c, %i : tensor<4x64xf32>, tensor<4x64xf32>
}

// -----

// rotate_half twice: the second concatenation's slices read the first's result, which
// the first rewrite replaced; a rank-reducing slice and an integer division are left.
// CHECK-LABEL: func.func @twice
// CHECK-NOT: tensor.concat
// CHECK: %[[FIRST:.*]] = linalg.generic
// CHECK: linalg.generic
// CHECK: tensor.extract %[[FIRST]]
func.func @twice(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %a = tensor.extract_slice %x[0, 32] [4, 32] [1, 1] : tensor<4x64xf32> to tensor<4x32xf32>
  %b = tensor.extract_slice %x[0, 0] [4, 32] [1, 1] : tensor<4x64xf32> to tensor<4x32xf32>
  // expected-remark @below {{concatenation of 2 slices of one tensor along dim 1 read in place}}
  %c = tensor.concat dim(1) %a, %b : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x64xf32>
  %d = tensor.extract_slice %c[0, 32] [4, 32] [1, 1] : tensor<4x64xf32> to tensor<4x32xf32>
  %e = tensor.extract_slice %c[0, 0] [4, 32] [1, 1] : tensor<4x64xf32> to tensor<4x32xf32>
  // expected-remark @below {{concatenation of 2 slices of one tensor along dim 1 read in place}}
  %f = tensor.concat dim(1) %d, %e : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x64xf32>
  return %f : tensor<4x64xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @left
func.func @left(%x: tensor<8x64x1xf32>, %y: tensor<4x8xi32>) -> (tensor<8x64xf32>, tensor<4x8xi32>) {
  %a = tensor.extract_slice %x[4, 0, 0] [4, 64, 1] [1, 1, 1] : tensor<8x64x1xf32> to tensor<4x64xf32>
  %b = tensor.extract_slice %x[0, 0, 0] [4, 64, 1] [1, 1, 1] : tensor<8x64x1xf32> to tensor<4x64xf32>
  // CHECK: tensor.concat dim(0)
  %c = tensor.concat dim(0) %a, %b : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<8x64xf32>
  %lo = tensor.extract_slice %y[0, 0] [4, 4] [1, 1] : tensor<4x8xi32> to tensor<4x4xi32>
  %hi = tensor.extract_slice %y[0, 4] [4, 4] [1, 1] : tensor<4x8xi32> to tensor<4x4xi32>
  %e = tensor.empty() : tensor<4x4xi32>
  %q = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%hi : tensor<4x4xi32>) outs(%e : tensor<4x4xi32>) {
  ^bb0(%in: i32, %out: i32):
    %h = arith.constant 100 : i32
    %r = arith.divsi %h, %in : i32
    linalg.yield %r : i32
  } -> tensor<4x4xi32>
  // CHECK: tensor.concat dim(1)
  %d = tensor.concat dim(1) %q, %lo : (tensor<4x4xi32>, tensor<4x4xi32>) -> tensor<4x8xi32>
  return %c, %d : tensor<8x64xf32>, tensor<4x8xi32>
}
