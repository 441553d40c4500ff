// RUN: fusion-opt %s --split-input-file --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(fusion-online-softmax{block-q=0 block-k=0})' \
// RUN:   | FileCheck %s

// Blocks sized to the batch (the CPU pipeline's choice): 256x256 where one block's f32
// scores for every batch take at most 2 MiB (8 x 256 x 256 x 4 bytes), else 128x128.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @eight_heads(%q: tensor<8x1024x64xf32>, %k: tensor<8x1024x64xf32>, %v: tensor<8x1024x64xf32>) -> tensor<8x1024x64xf32> {
  %scale = arith.constant 0.125 : f32
  %e = tensor.empty() : tensor<8x1024x64xf32>
  // expected-remark @below {{attention rewritten as online softmax (blocks 256x256)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #o]}>
      ins(%q, %k, %v, %scale : tensor<8x1024x64xf32>, tensor<8x1024x64xf32>, tensor<8x1024x64xf32>, f32)
      outs(%e : tensor<8x1024x64xf32>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<8x1024x64xf32>
  return %o : tensor<8x1024x64xf32>
}
// CHECK-LABEL: func.func @eight_heads(
// CHECK: %[[C256:.+]] = arith.constant 256 : index
// CHECK: scf.for %{{.+}} = %{{.+}} to %{{.+}} step %[[C256]]
// CHECK: scf.for %{{.+}} = %{{.+}} to %{{.+}} step %{{.+}} iter_args

// -----

#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @sixteen_heads(%q: tensor<16x1024x64xf32>, %k: tensor<16x1024x64xf32>, %v: tensor<16x1024x64xf32>) -> tensor<16x1024x64xf32> {
  %scale = arith.constant 0.125 : f32
  %e = tensor.empty() : tensor<16x1024x64xf32>
  // expected-remark @below {{attention rewritten as online softmax (blocks 128x128)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #o]}>
      ins(%q, %k, %v, %scale : tensor<16x1024x64xf32>, tensor<16x1024x64xf32>, tensor<16x1024x64xf32>, f32)
      outs(%e : tensor<16x1024x64xf32>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<16x1024x64xf32>
  return %o : tensor<16x1024x64xf32>
}
// CHECK-LABEL: func.func @sixteen_heads(
// CHECK: %[[C128:.+]] = arith.constant 128 : index
// CHECK: scf.for %{{.+}} = %{{.+}} to %{{.+}} step %[[C128]]
