// RUN: fusion-opt %s --split-input-file --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(fusion-decompose-attention{above-head-dim=128})' \
// RUN:   | FileCheck %s
// RUN: fusion-opt %s --split-input-file \
// RUN:   --pass-pipeline='builtin.module(fusion-decompose-attention)' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=ALL

// Head dim 160 with a mask, f16 in and out: QKᵀ and P·V sum in f32, softmax in f32, a
// fill that swamps any f32 score (finfo(f32).min) taken alone as PyTorch's sum gives
// it, rows with no key above -inf set to 0, one truncation at the end.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @wide(%q: tensor<4x10x160xf16>, %k: tensor<4x12x160xf16>, %v: tensor<4x12x64xf16>,
                %mask: tensor<4x10x12xf32>) -> tensor<4x10x64xf16> {
  %scale = arith.constant 0.125 : f32
  %e = tensor.empty() : tensor<4x10x64xf16>
  // expected-remark @below {{attention decomposed into matmul, softmax, matmul: head dim 160 is above 128}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<4x10x160xf16>, tensor<4x12x160xf16>, tensor<4x12x64xf16>, f32, tensor<4x10x12xf32>)
      outs(%e : tensor<4x10x64xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x10x64xf16>
  return %o : tensor<4x10x64xf16>
}
// CHECK-LABEL: func.func @wide(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<4x10x160xf16>, %[[K:[a-z0-9]+]]: tensor<4x12x160xf16>, %[[V:[a-z0-9]+]]: tensor<4x12x64xf16>, %[[MASK:[a-z0-9]+]]: tensor<4x10x12xf32>
// CHECK: %[[S:.+]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "reduction", "parallel"]
// CHECK-SAME: ins(%[[Q]], %[[K]] : tensor<4x10x160xf16>, tensor<4x12x160xf16>)
// CHECK-SAME: outs(%{{.+}} : tensor<4x10x12xf32>)
// CHECK: arith.extf
// CHECK: %[[L:.+]] = linalg.generic
// CHECK-SAME: ins(%[[S]], %[[MASK]] : tensor<4x10x12xf32>, tensor<4x10x12xf32>)
// CHECK: ^bb0(%[[SCORE:.+]]: f32, %[[BIAS:.+]]: f32, %{{.+}}: f32):
// CHECK: %[[SCALED:.+]] = arith.mulf %[[SCORE]]
// CHECK: %[[SUM:.+]] = arith.addf %[[SCALED]], %[[BIAS]]
// CHECK: %[[SWAMPS:.+]] = arith.constant -1.70141173E+38 : f32
// CHECK: %[[SWAMPED:.+]] = arith.cmpf ole, %[[BIAS]], %[[SWAMPS]]
// CHECK: arith.select %[[SWAMPED]], %[[BIAS]], %[[SUM]]
// CHECK: %[[P:.+]] = linalg.softmax dimension(2) ins(%[[L]] : tensor<4x10x12xf32>)
// CHECK: %[[O:.+]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK-SAME: ins(%[[P]], %[[V]] : tensor<4x10x12xf32>, tensor<4x12x64xf16>)
// CHECK: %[[ROWS:.+]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "reduction"]
// CHECK-SAME: ins(%[[MASK]] : tensor<4x10x12xf32>) outs(%{{.+}} : tensor<4x10xi1>)
// CHECK: arith.cmpf une
// CHECK: arith.ori
// CHECK: %[[KEPT:.+]] = linalg.generic
// CHECK-SAME: ins(%[[O]], %[[ROWS]] : tensor<4x10x64xf32>, tensor<4x10xi1>)
// CHECK: arith.select
// CHECK: %[[T:.+]] = linalg.generic
// CHECK-SAME: ins(%[[KEPT]] : tensor<4x10x64xf32>)
// CHECK: arith.truncf
// CHECK: return %[[T]] : tensor<4x10x64xf16>
// CHECK-NOT: iree_linalg_ext.attention
// ALL-LABEL: func.func @wide(
// ALL: linalg.softmax

// -----

// Head dim 64: left fused with above-head-dim=128; decomposed without the option.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @narrow(%q: tensor<4x10x64xf32>, %k: tensor<4x12x64xf32>, %v: tensor<4x12x64xf32>) -> tensor<4x10x64xf32> {
  %scale = arith.constant 0.125 : f32
  %e = tensor.empty() : tensor<4x10x64xf32>
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #o]}>
      ins(%q, %k, %v, %scale : tensor<4x10x64xf32>, tensor<4x12x64xf32>, tensor<4x12x64xf32>, f32)
      outs(%e : tensor<4x10x64xf32>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x10x64xf32>
  return %o : tensor<4x10x64xf32>
}
// CHECK-LABEL: func.func @narrow(
// CHECK: iree_linalg_ext.attention
// CHECK-NOT: linalg.softmax
// ALL-LABEL: func.func @narrow(
// ALL-NOT: iree_linalg_ext.attention
// ALL: linalg.softmax
// ALL-NOT: arith.truncf
// ALL: return

// -----

// A score region (softcap) is inlined into the logits, converted from IREE's base-2
// domain: x = scale·log2(e)·s in, y / log2(e) out.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @softcap(%q: tensor<4x10x256xf32>, %k: tensor<4x12x256xf32>, %v: tensor<4x12x64xf32>) -> tensor<4x10x64xf32> {
  %scale = arith.constant 0.0625 : f32
  %e = tensor.empty() : tensor<4x10x64xf32>
  // expected-remark @below {{attention decomposed into matmul, softmax, matmul: head dim 256 is above 128}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #o]}>
      ins(%q, %k, %v, %scale : tensor<4x10x256xf32>, tensor<4x12x256xf32>, tensor<4x12x64xf32>, f32)
      outs(%e : tensor<4x10x64xf32>) {
    ^bb0(%x: f32):
      %c = arith.constant 0.693147182 : f32
      %in = arith.mulf %x, %c : f32
      %t = math.tanh %in : f32
      %cap = arith.constant 72.1347504 : f32
      %y = arith.mulf %t, %cap : f32
      iree_linalg_ext.yield %y : f32
  } -> tensor<4x10x64xf32>
  return %o : tensor<4x10x64xf32>
}
// CHECK-LABEL: func.func @softcap(
// CHECK: %[[S:.+]] = linalg.generic
// CHECK: %[[L:.+]] = linalg.generic
// CHECK-SAME: ins(%[[S]] : tensor<4x10x12xf32>)
// CHECK: ^bb0(%[[IN:.+]]: f32, %{{.+}}: f32):
// CHECK: %[[SC:.+]] = arith.mulf %[[IN]], %{{.+}} : f32
// CHECK: %[[X:.+]] = arith.mulf %[[SC]], %{{.+}} : f32
// CHECK: %[[A:.+]] = arith.mulf %[[X]], %{{.+}} : f32
// CHECK: %[[T:.+]] = math.tanh %[[A]] : f32
// CHECK: %[[Y:.+]] = arith.mulf %[[T]], %{{.+}} : f32
// CHECK: %[[OUT:.+]] = arith.mulf %[[Y]], %{{.+}} : f32
// CHECK: linalg.yield %[[OUT]] : f32
// CHECK: linalg.softmax dimension(2) ins(%[[L]]
// CHECK-NOT: iree_linalg_ext.attention
// ALL-LABEL: func.func @softcap(
// ALL: math.tanh
// ALL: linalg.softmax
