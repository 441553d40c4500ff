// RUN: fusion-opt %s --split-input-file --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(fusion-schedule{arch=sm_90})' | FileCheck %s

// A shape class measured on the H200 (fusion_compiler/backends/triton/schedules.json) gets its
// tuned tiles.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @tuned(%q: tensor<16x4096x128xf16>, %k: tensor<16x4096x128xf16>, %v: tensor<16x4096x128xf16>) -> tensor<16x4096x128xf16> {
  %scale = arith.constant 0.088 : f32
  %e = tensor.empty() : tensor<16x4096x128xf16>
  // expected-remark @below {{schedule 128x64 tiles, 4 warps, 2 stages (tuned sm_90/f16/d128/full/n4096; class sm_90/f16/d128/full/n4096)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #o]}>
      ins(%q, %k, %v, %scale : tensor<16x4096x128xf16>, tensor<16x4096x128xf16>, tensor<16x4096x128xf16>, f32)
      outs(%e : tensor<16x4096x128xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<16x4096x128xf16>
  return %o : tensor<16x4096x128xf16>
}
// CHECK-LABEL: func.func @tuned(
// CHECK: iree_linalg_ext.attention {{.*}} {fusion.schedule = {block_m = 128 : i64, block_n = 64 : i64, num_stages = 2 : i64, num_warps = 4 : i64, pack_gqa = 0 : i64, persistent = 0 : i64, splits = 1 : i64}}

// -----

// No tuned entry (head dim 256): the model's tiles, sized to fit shared memory.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @model(%q: tensor<2x100x256xbf16>, %k: tensor<2x150x256xbf16>, %v: tensor<2x150x256xbf16>) -> tensor<2x100x256xbf16> {
  %scale = arith.constant 0.0625 : f32
  %e = tensor.empty() : tensor<2x100x256xbf16>
  // expected-remark @below {{schedule 64x32 tiles, 4 warps, 3 stages (model; class sm_90/bf16/d256/full/n1024)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #o]}>
      ins(%q, %k, %v, %scale : tensor<2x100x256xbf16>, tensor<2x150x256xbf16>, tensor<2x150x256xbf16>, f32)
      outs(%e : tensor<2x100x256xbf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<2x100x256xbf16>
  return %o : tensor<2x100x256xbf16>
}
// CHECK-LABEL: func.func @model(
// CHECK: {fusion.schedule = {block_m = 64 : i64, block_n = 32 : i64, num_stages = 3 : i64, num_warps = 4 : i64, pack_gqa = 0 : i64, persistent = 0 : i64, splits = 1 : i64}}

// -----

// A decode step (one query row per head, 32 heads): row blocks of 16 rows, which stream
// K and V through key blocks of 128 three stages deep; the 32 programs they make are too
// few for the GPU's 132 multiprocessors, so each head's keys are split over 4 programs
// (split-KV), one wave.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @decode(%q: tensor<32x1x128xf16>, %k: tensor<32x32768x128xf16>, %v: tensor<32x32768x128xf16>) -> tensor<32x1x128xf16> {
  %scale = arith.constant 0.088 : f32
  %e = tensor.empty() : tensor<32x1x128xf16>
  // expected-remark @below {{schedule 16x128 tiles, 4 warps, 3 stages, split-KV 4 (tuned sm_90/f16/d128/full/n16384; class sm_90/f16/d128/full/n16384)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #o]}>
      ins(%q, %k, %v, %scale : tensor<32x1x128xf16>, tensor<32x32768x128xf16>, tensor<32x32768x128xf16>, f32)
      outs(%e : tensor<32x1x128xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<32x1x128xf16>
  return %o : tensor<32x1x128xf16>
}
// CHECK-LABEL: func.func @decode(
// CHECK: {fusion.schedule = {block_m = 16 : i64, block_n = 128 : i64, num_stages = 3 : i64, num_warps = 4 : i64, pack_gqa = 0 : i64, persistent = 0 : i64, splits = 4 : i64}}

// -----

// Causal over 4096 keys: 1024 short tiles (64 row blocks x 16 heads), more than the 264
// programs the GPU holds at once, so 264 persistent programs take them longest first.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @causal_persistent(%q: tensor<16x4096x128xf16>, %k: tensor<16x4096x128xf16>, %v: tensor<16x4096x128xf16>) -> tensor<16x4096x128xf16> {
  %scale = arith.constant 0.088 : f32
  %me = tensor.empty() : tensor<16x4096x4096xf16>
  %mask = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel", "parallel"]} outs(%me : tensor<16x4096x4096xf16>) {
  ^bb0(%out: f16):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %above = arith.cmpi sgt, %j, %i : index
    %ninf = arith.constant 0xFC00 : f16
    %zero = arith.constant 0.0 : f16
    %r = arith.select %above, %ninf, %zero : f16
    linalg.yield %r : f16
  } -> tensor<16x4096x4096xf16>
  %e = tensor.empty() : tensor<16x4096x128xf16>
  // expected-remark @below {{schedule 64x64 tiles, 4 warps, 3 stages, 264 persistent programs (tuned sm_90/f16/d128/causal/n4096; class sm_90/f16/d128/causal/n4096)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<16x4096x128xf16>, tensor<16x4096x128xf16>, tensor<16x4096x128xf16>, f32, tensor<16x4096x4096xf16>)
      outs(%e : tensor<16x4096x128xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<16x4096x128xf16>
  return %o : tensor<16x4096x128xf16>
}
// CHECK-LABEL: func.func @causal_persistent(
// CHECK: {fusion.schedule = {block_m = 64 : i64, block_n = 64 : i64, num_stages = 3 : i64, num_warps = 4 : i64, pack_gqa = 0 : i64, persistent = 264 : i64, splits = 1 : i64}}
