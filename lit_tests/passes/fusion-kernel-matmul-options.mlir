// RUN: fusion-opt %s --verify-diagnostics --pass-pipeline='builtin.module(fusion-kernel-matmul{arch=sm_90 \
// RUN:   block-m=128 block-n=128 num-warps=8 num-stages=3 programs=4})' | FileCheck %s

// The pass options replace the tiles' rule where set (for measuring tilings).
#bcast = affine_map<(d0, d1, d2) -> (d1, d2)>
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @linear(%x: tensor<2x64x256xf16>, %w: tensor<512x256xf16>) -> tensor<2x64x512xf16> {
  %te = tensor.empty() : tensor<256x512xf16>
  %t = linalg.transpose ins(%w : tensor<512x256xf16>) outs(%te : tensor<256x512xf16>) permutation = [1, 0]
  %be = tensor.empty() : tensor<2x256x512xf16>
  %b = linalg.generic {indexing_maps = [#bcast, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%t : tensor<256x512xf16>) outs(%be : tensor<2x256x512xf16>) {
  ^bb0(%in: f16, %out: f16):
    linalg.yield %in : f16
  } -> tensor<2x256x512xf16>
  %zero = arith.constant 0.0 : f32
  %ae = tensor.empty() : tensor<2x64x512xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%ae : tensor<2x64x512xf32>) -> tensor<2x64x512xf32>
  // expected-remark @below {{matrix product lowered to a generated sm_90 kernel (f16, M=128, K=256, N=512, tiles 128x128x64, 4 persistent programs, the weight read transposed)}}
  %p = linalg.batch_matmul ins(%x, %b : tensor<2x64x256xf16>, tensor<2x256x512xf16>) outs(%acc : tensor<2x64x512xf32>) -> tensor<2x64x512xf32>
  %ce = tensor.empty() : tensor<2x64x512xf16>
  %c = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p : tensor<2x64x512xf32>) outs(%ce : tensor<2x64x512xf16>) {
  ^bb0(%in: f32, %out: f16):
    %r = arith.truncf %in : f32 to f16
    linalg.yield %r : f16
  } -> tensor<2x64x512xf16>
  return %c : tensor<2x64x512xf16>
}
// CHECK-LABEL: func.func @linear(
// CHECK: flow.dispatch @fusion_matmul_0::@matmul({{.*}}\22block_m\22: 128, \22block_n\22: 128, {{.*}}\22num_stages\22: 3, \22num_warps\22: 8, {{.*}}\22programs\22: 4,
