// RUN: fusion-opt %s --split-input-file --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(fusion-guard-masked-rows)' | FileCheck %s

// An f32 mask left for IREE's op: finite values clamped (finfo.min would overflow in
// IREE's exp2 domain), -inf kept; rows with no key above -inf set to 0 after the op.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @masked(%q: tensor<4x8x16xf32>, %k: tensor<4x10x16xf32>, %v: tensor<4x10x16xf32>,
                  %mask: tensor<4x8x10xf32>) -> tensor<4x8x16xf32> {
  %scale = arith.constant 0.25 : f32
  %e = tensor.empty() : tensor<4x8x16xf32>
  // expected-remark @below {{masked attention left to IREE}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<4x8x16xf32>, tensor<4x10x16xf32>, tensor<4x10x16xf32>, f32, tensor<4x8x10xf32>)
      outs(%e : tensor<4x8x16xf32>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x8x16xf32>
  return %o : tensor<4x8x16xf32>
}
// CHECK-LABEL: func.func @masked(
// CHECK-SAME: %[[MASK:[a-z0-9]+]]: tensor<4x8x10xf32>
// CHECK: %[[CLAMPED:.+]] = linalg.generic {{.*}} ins(%[[MASK]] : tensor<4x8x10xf32>)
// CHECK: arith.maximumf %{{.+}}, %{{.+}} : f32
// CHECK: arith.cmpf oeq
// CHECK: arith.select
// CHECK: %[[O:.+]] = iree_linalg_ext.attention
// CHECK-SAME: %[[CLAMPED]] : {{.*}}tensor<4x8x10xf32>)
// CHECK: %[[ROWS:.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]{{.*}} ins(%[[CLAMPED]] : tensor<4x8x10xf32>) outs(%{{.+}} : tensor<4x8xi1>)
// CHECK: arith.cmpf une
// CHECK: arith.ori
// CHECK: %[[OUT:.+]] = linalg.generic {{.*}} ins(%[[O]], %[[ROWS]] : tensor<4x8x16xf32>, tensor<4x8xi1>)
// CHECK: arith.select
// CHECK: return %[[OUT]]

// -----

// No mask: nothing to guard.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @plain(%q: tensor<4x8x16xf32>, %k: tensor<4x10x16xf32>, %v: tensor<4x10x16xf32>) -> tensor<4x8x16xf32> {
  %scale = arith.constant 0.25 : f32
  %e = tensor.empty() : tensor<4x8x16xf32>
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #o]}>
      ins(%q, %k, %v, %scale : tensor<4x8x16xf32>, tensor<4x10x16xf32>, tensor<4x10x16xf32>, f32)
      outs(%e : tensor<4x8x16xf32>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x8x16xf32>
  return %o : tensor<4x8x16xf32>
}
// CHECK-LABEL: func.func @plain(
// CHECK-NOT: linalg.generic
// CHECK: return

// -----

// An fp16 fill at the bottom of its type (finfo(f16).min) among the mask's producers,
// one mask for every batch row: PyTorch's fp16 sum s + fill is the fill, so rows whose
// keys all hold it read a zero query (IREE's op adds in f32; q = 0 leaves softmax(fill)).
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @half_fill(%q: tensor<4x8x16xf16>, %k: tensor<4x10x16xf16>, %v: tensor<4x10x16xf16>,
                     %keep: tensor<8x10xi1>) -> tensor<4x8x16xf16> {
  %scale = arith.constant 0.25 : f16
  %zero = arith.constant 0.0 : f16
  %fill = arith.constant -65504.0 : f16
  %me = tensor.empty() : tensor<8x10xf16>
  %mask = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%keep : tensor<8x10xi1>) outs(%me : tensor<8x10xf16>) {
    ^bb0(%b: i1, %out: f16):
      %m = arith.select %b, %zero, %fill : f16
      linalg.yield %m : f16
  } -> tensor<8x10xf16>
  %e = tensor.empty() : tensor<4x8x16xf16>
  // the mask added by the model to fp16 scores (found by detection): its fill swamps them
  // expected-remark @below {{fp16 fills swamp the score}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}> {fusion.mask_in_score_type}
      ins(%q, %k, %v, %scale, %mask : tensor<4x8x16xf16>, tensor<4x10x16xf16>, tensor<4x10x16xf16>, f16, tensor<8x10xf16>)
      outs(%e : tensor<4x8x16xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x8x16xf16>
  return %o : tensor<4x8x16xf16>
}
// CHECK-LABEL: func.func @half_fill(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<4x8x16xf16>
// CHECK: %[[MASK:.+]] = linalg.generic {{.*}} outs(%{{.+}} : tensor<8x10xf16>)
// CHECK: %[[SWAMPED:.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]{{.*}} ins(%[[MASK]] : tensor<8x10xf16>) outs(%{{.+}} : tensor<8xi1>)
// CHECK: arith.cmpf ugt
// CHECK: %[[Q0:.+]] = linalg.generic {indexing_maps = [#{{.+}}, #[[ROW:.+]], #{{.+}}]{{.*}} ins(%[[Q]], %[[SWAMPED]] : tensor<4x8x16xf16>, tensor<8xi1>)
// CHECK: arith.select
// CHECK: iree_linalg_ext.attention {{.*}} ins(%[[Q0]], {{.*}}, %[[MASK]] :
// CHECK: return

// -----

// SDPA's attn_mask (no fusion.mask_in_score_type): PyTorch adds it to f32 scores, where
// an fp16 fill keeps the score's digits: the queries are left as they are.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @half_fill_of_sdpa(%q: tensor<4x8x16xf16>, %k: tensor<4x10x16xf16>, %v: tensor<4x10x16xf16>,
                     %keep: tensor<8x10xi1>) -> tensor<4x8x16xf16> {
  %scale = arith.constant 0.25 : f16
  %zero = arith.constant 0.0 : f16
  %fill = arith.constant -65504.0 : f16
  %me = tensor.empty() : tensor<8x10xf16>
  %mask = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%keep : tensor<8x10xi1>) outs(%me : tensor<8x10xf16>) {
    ^bb0(%b: i1, %out: f16):
      %m = arith.select %b, %zero, %fill : f16
      linalg.yield %m : f16
  } -> tensor<8x10xf16>
  %e = tensor.empty() : tensor<4x8x16xf16>
  // expected-remark @below {{f32/bf16 fills clamped, rows with no key set to 0}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<4x8x16xf16>, tensor<4x10x16xf16>, tensor<4x10x16xf16>, f16, tensor<8x10xf16>)
      outs(%e : tensor<4x8x16xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x8x16xf16>
  return %o : tensor<4x8x16xf16>
}
// CHECK-LABEL: func.func @half_fill_of_sdpa(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<4x8x16xf16>
// CHECK-NOT: arith.cmpf ugt
// CHECK: iree_linalg_ext.attention {{.*}} ins(%[[Q]], {{.*}} :
// CHECK: return
