// RUN: fusion-opt %s --split-input-file --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(fusion-tile-and-fuse,canonicalize)' | FileCheck %s

// The head split (reshape, transpose, fold into the batch) of Q, K and V and the head
// merge after attention become the op's indexing maps: two batch dims (B, H), Q and V
// read in their (B, N, H, D) layout, K in its (B, N, H, D) layout though the op took Kᵀ,
// the output written as (B, N, H, D). No transpose is left.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d3, d4)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @heads(%q: tensor<2x16x2x32xf32>, %k: tensor<2x24x2x32xf32>, %v: tensor<2x24x2x32xf32>) -> tensor<2x16x64xf32> {
  %scale = arith.constant 0.125 : f32
  %eq = tensor.empty() : tensor<2x2x16x32xf32>
  %qt = linalg.transpose ins(%q : tensor<2x16x2x32xf32>) outs(%eq : tensor<2x2x16x32xf32>) permutation = [0, 2, 1, 3]
  %ek = tensor.empty() : tensor<2x2x32x24xf32>
  %kt = linalg.transpose ins(%k : tensor<2x24x2x32xf32>) outs(%ek : tensor<2x2x32x24xf32>) permutation = [0, 2, 3, 1]
  %ev = tensor.empty() : tensor<2x2x24x32xf32>
  %vt = linalg.transpose ins(%v : tensor<2x24x2x32xf32>) outs(%ev : tensor<2x2x24x32xf32>) permutation = [0, 2, 1, 3]
  %q3 = tensor.collapse_shape %qt [[0, 1], [2], [3]] : tensor<2x2x16x32xf32> into tensor<4x16x32xf32>
  %k3 = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<2x2x32x24xf32> into tensor<4x32x24xf32>
  %v3 = tensor.collapse_shape %vt [[0, 1], [2], [3]] : tensor<2x2x24x32xf32> into tensor<4x24x32xf32>
  %e = tensor.empty() : tensor<4x16x32xf32>
  // expected-remark @below {{head split and merge fused into attention (batch split into its heads, 4 transposes folded into its indexing maps)}}
  %a = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #o]}>
      ins(%q3, %k3, %v3, %scale : tensor<4x16x32xf32>, tensor<4x32x24xf32>, tensor<4x24x32xf32>, f32)
      outs(%e : tensor<4x16x32xf32>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x16x32xf32>
  %a4 = tensor.expand_shape %a [[0, 1], [2], [3]] output_shape [2, 2, 16, 32] : tensor<4x16x32xf32> into tensor<2x2x16x32xf32>
  %eo = tensor.empty() : tensor<2x16x2x32xf32>
  %ot = linalg.transpose ins(%a4 : tensor<2x2x16x32xf32>) outs(%eo : tensor<2x16x2x32xf32>) permutation = [0, 2, 1, 3]
  %o = tensor.collapse_shape %ot [[0], [1], [2, 3]] : tensor<2x16x2x32xf32> into tensor<2x16x64xf32>
  return %o : tensor<2x16x64xf32>
}
// (d0, d1, d2, d3, d4, d5) = (B, H, m, n, k1, k2)
// CHECK-DAG: #[[Q:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d2, d1, d4)>
// CHECK-DAG: #[[KV_K:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d5, d1, d4)>
// CHECK-DAG: #[[KV_V:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d5, d1, d3)>
// CHECK-DAG: #[[O:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d2, d1, d3)>
// CHECK-LABEL: func.func @heads(
// CHECK-SAME: %[[QI:[a-z0-9]+]]: tensor<2x16x2x32xf32>, %[[KI:[a-z0-9]+]]: tensor<2x24x2x32xf32>, %[[VI:[a-z0-9]+]]: tensor<2x24x2x32xf32>
// CHECK-NOT: linalg.transpose
// CHECK: %[[A:.+]] = iree_linalg_ext.attention <indexing_maps = [#[[Q]], #[[KV_K]], #[[KV_V]], #{{.+}}, #[[O]]]> ins(%[[QI]], %[[KI]], %[[VI]], %{{.+}} : tensor<2x16x2x32xf32>, tensor<2x24x2x32xf32>, tensor<2x24x2x32xf32>, f32) outs(%{{.+}} : tensor<2x16x2x32xf32>)
// CHECK-NOT: linalg.transpose
// CHECK: %[[R:.+]] = tensor.collapse_shape %[[A]] {{\[}}[0], [1], [2, 3]] : tensor<2x16x2x32xf32> into tensor<2x16x64xf32>
// CHECK: return %[[R]]

// -----

// A mask over the folded batch is reshaped to match the split; Q, K, V folded without a
// transpose keep their order.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @mask(%q: tensor<2x2x16x32xf16>, %k: tensor<2x2x24x32xf16>, %v: tensor<2x2x24x32xf16>, %mask: tensor<4x16x24xf16>) -> tensor<4x16x32xf16> {
  %scale = arith.constant 0.125 : f32
  %q3 = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<2x2x16x32xf16> into tensor<4x16x32xf16>
  %k3 = tensor.collapse_shape %k [[0, 1], [2], [3]] : tensor<2x2x24x32xf16> into tensor<4x24x32xf16>
  %v3 = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<2x2x24x32xf16> into tensor<4x24x32xf16>
  %e = tensor.empty() : tensor<4x16x32xf16>
  // expected-remark @below {{head split and merge fused into attention (batch split into its heads, 0 transposes folded into its indexing maps)}}
  %a = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q3, %k3, %v3, %scale, %mask : tensor<4x16x32xf16>, tensor<4x24x32xf16>, tensor<4x24x32xf16>, f32, tensor<4x16x24xf16>)
      outs(%e : tensor<4x16x32xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x16x32xf16>
  return %a : tensor<4x16x32xf16>
}
// CHECK-LABEL: func.func @mask(
// CHECK-SAME: %[[QI:[a-z0-9]+]]: tensor<2x2x16x32xf16>, %[[KI:[a-z0-9]+]]: tensor<2x2x24x32xf16>, %[[VI:[a-z0-9]+]]: tensor<2x2x24x32xf16>, %[[MI:[a-z0-9]+]]: tensor<4x16x24xf16>
// CHECK: %[[M4:.+]] = tensor.expand_shape %[[MI]] {{\[}}[0, 1], [2], [3]] output_shape [2, 2, 16, 24]
// CHECK: %[[A:.+]] = iree_linalg_ext.attention {{.+}} ins(%[[QI]], %[[KI]], %[[VI]], %{{.+}}, %[[M4]] : {{.+}}) outs(%{{.+}} : tensor<2x2x16x32xf16>)
// CHECK: %[[R:.+]] = tensor.collapse_shape %[[A]] {{\[}}[0, 1], [2], [3]] : tensor<2x2x16x32xf16> into tensor<4x16x32xf16>
// CHECK: return %[[R]]

// -----

// Q, K and V cut from one fused projection: slices of a (3, B, H, N, D) transpose. Each
// becomes a slice of the projection's (B, N, 3, H, D) layout read through the map; the
// transpose goes.
#q = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3, d5)>
#k = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d6, d5)>
#v = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d6, d4)>
#s = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3, d4)>
func.func @fused_qkv(%qkv: tensor<2x48x3x4x16xf32>) -> tensor<1x2x4x48x16xf32> {
  %scale = arith.constant 0.25 : f32
  %e5 = tensor.empty() : tensor<3x2x4x48x16xf32>
  %t = linalg.transpose ins(%qkv : tensor<2x48x3x4x16xf32>) outs(%e5 : tensor<3x2x4x48x16xf32>) permutation = [2, 0, 3, 1, 4]
  %q = tensor.extract_slice %t[0, 0, 0, 0, 0] [1, 2, 4, 48, 16] [1, 1, 1, 1, 1] : tensor<3x2x4x48x16xf32> to tensor<1x2x4x48x16xf32>
  %k = tensor.extract_slice %t[1, 0, 0, 0, 0] [1, 2, 4, 48, 16] [1, 1, 1, 1, 1] : tensor<3x2x4x48x16xf32> to tensor<1x2x4x48x16xf32>
  %v = tensor.extract_slice %t[2, 0, 0, 0, 0] [1, 2, 4, 48, 16] [1, 1, 1, 1, 1] : tensor<3x2x4x48x16xf32> to tensor<1x2x4x48x16xf32>
  %e = tensor.empty() : tensor<1x2x4x48x16xf32>
  // expected-remark @below {{head split and merge fused into attention (3 transposes folded into its indexing maps)}}
  %a = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #o]}>
      ins(%q, %k, %v, %scale : tensor<1x2x4x48x16xf32>, tensor<1x2x4x48x16xf32>, tensor<1x2x4x48x16xf32>, f32)
      outs(%e : tensor<1x2x4x48x16xf32>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<1x2x4x48x16xf32>
  return %a : tensor<1x2x4x48x16xf32>
}
// (d0, ..., d6) = (1, B, H, m, n, k1, k2): Q at (B, m, 0, H, k1) of the (B, N, 3, H, D) tensor
// CHECK-DAG: #[[FQ:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d3, d0, d2, d5)>
// CHECK-DAG: #[[FK:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d6, d0, d2, d5)>
// CHECK-DAG: #[[FV:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d6, d0, d2, d4)>
// CHECK-LABEL: func.func @fused_qkv(
// CHECK-SAME: %[[QKV:[a-z0-9]+]]: tensor<2x48x3x4x16xf32>
// CHECK-NOT: linalg.transpose
// CHECK-DAG: %[[Q:.+]] = tensor.extract_slice %[[QKV]][0, 0, 0, 0, 0] [2, 48, 1, 4, 16] [1, 1, 1, 1, 1]
// CHECK-DAG: %[[K:.+]] = tensor.extract_slice %[[QKV]][0, 0, 1, 0, 0] [2, 48, 1, 4, 16] [1, 1, 1, 1, 1]
// CHECK-DAG: %[[V:.+]] = tensor.extract_slice %[[QKV]][0, 0, 2, 0, 0] [2, 48, 1, 4, 16] [1, 1, 1, 1, 1]
// CHECK: iree_linalg_ext.attention <indexing_maps = [#[[FQ]], #[[FK]], #[[FV]], #{{.+}}, #{{.+}}]> ins(%[[Q]], %[[K]], %[[V]], %{{.+}} : tensor<2x48x1x4x16xf32>, tensor<2x48x1x4x16xf32>, tensor<2x48x1x4x16xf32>, f32)

// -----

// Q, K and V are not reshaped from a (B, H, ...) layout: nothing to fuse, and the
// remark says why.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @plain(%q: tensor<4x16x32xf32>, %k: tensor<4x24x32xf32>, %v: tensor<4x24x32xf32>) -> tensor<4x16x32xf32> {
  %scale = arith.constant 0.125 : f32
  %e = tensor.empty() : tensor<4x16x32xf32>
  // expected-remark @below {{head split and merge not fused into attention: Q, K and V are not all reshaped from a (batch, heads, ...) layout}}
  %a = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #o]}>
      ins(%q, %k, %v, %scale : tensor<4x16x32xf32>, tensor<4x24x32xf32>, tensor<4x24x32xf32>, f32)
      outs(%e : tensor<4x16x32xf32>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x16x32xf32>
  return %a : tensor<4x16x32xf32>
}
// CHECK-LABEL: func.func @plain(
// CHECK: iree_linalg_ext.attention <indexing_maps = [#{{.+}}, #{{.+}}, #{{.+}}, #{{.+}}, #{{.+}}]> ins(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : tensor<4x16x32xf32>, tensor<4x24x32xf32>, tensor<4x24x32xf32>, f32)
