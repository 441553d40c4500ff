// RUN: fusion-opt %s --split-input-file \
// RUN:   --pass-pipeline='builtin.module(fusion-expand-reshapes)' | FileCheck %s

// bmm's (B·H, N, N) scores viewed as (B, H, N, N) at a dynamic length: the shape's sizes
// are the scores' own (index casts of the length they were made with): an expand_shape.
func.func @scores_split_into_heads(%s: tensor<16x?x?xf32>, %n: index) -> tensor<2x8x?x?xf32> {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %rows = tensor.dim %s, %c1 : tensor<16x?x?xf32>
  %cols = tensor.dim %s, %c2 : tensor<16x?x?xf32>
  %r = arith.index_cast %rows : index to i64
  %c = arith.index_cast %cols : index to i64
  %b = arith.constant 2 : i64
  %h = arith.constant 8 : i64
  %shape = tensor.from_elements %b, %h, %r, %c : tensor<4xi64>
  %v = tensor.reshape %s(%shape) : (tensor<16x?x?xf32>, tensor<4xi64>) -> tensor<2x8x?x?xf32>
  return %v : tensor<2x8x?x?xf32>
}
// CHECK-LABEL: func.func @scores_split_into_heads(
// CHECK-NOT: tensor.reshape
// CHECK: tensor.expand_shape %{{.+}} {{\[}}[0, 1], [2], [3]] output_shape [2, 8, %{{.+}}, %{{.+}}] : tensor<16x?x?xf32> into tensor<2x8x?x?xf32>

// -----

// The heads merged back: a collapse_shape.
func.func @heads_merged(%s: tensor<2x8x?x64xf32>) -> tensor<16x?x64xf32> {
  %c2 = arith.constant 2 : index
  %n = tensor.dim %s, %c2 : tensor<2x8x?x64xf32>
  %ni = arith.index_cast %n : index to i64
  %bh = arith.constant 16 : i64
  %d = arith.constant 64 : i64
  %shape = tensor.from_elements %bh, %ni, %d : tensor<3xi64>
  %v = tensor.reshape %s(%shape) : (tensor<2x8x?x64xf32>, tensor<3xi64>) -> tensor<16x?x64xf32>
  return %v : tensor<16x?x64xf32>
}
// CHECK-LABEL: func.func @heads_merged(
// CHECK: tensor.collapse_shape %{{.+}} {{\[}}[0, 1], [2], [3]] : tensor<2x8x?x64xf32> into tensor<16x?x64xf32>

// -----

// A size not proven to be the source's (an argument): the reshape stays.
func.func @unproven(%s: tensor<16x?xf32>, %m: i64) -> tensor<2x8x?xf32> {
  %b = arith.constant 2 : i64
  %h = arith.constant 8 : i64
  %shape = tensor.from_elements %b, %h, %m : tensor<3xi64>
  %v = tensor.reshape %s(%shape) : (tensor<16x?xf32>, tensor<3xi64>) -> tensor<2x8x?xf32>
  return %v : tensor<2x8x?xf32>
}
// CHECK-LABEL: func.func @unproven(
// CHECK: tensor.reshape
