// REQUIRES: glslang
// RUN: fusion-opt %s --split-input-file --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(fusion-spirv-attention{int64=0 fp64=0 b16=0 b8=0})' | FileCheck %s

// vp_android_baseline_2022's options (targets.spirv_attention): a padding mask from an
// input (B, Nk) i1 is computed with 32-bit integers (every index fits), its bytes read
// from 32-bit words.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#keys = affine_map<(d0, d1, d2) -> (d0, d2)>
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @padding(%q: tensor<4x64x64xf16>, %k: tensor<4x96x64xf16>, %v: tensor<4x96x64xf16>, %keep: tensor<4x96xi1>) -> tensor<4x64x64xf16> {
  %scale = arith.constant 0.125 : f32
  %me = tensor.empty() : tensor<4x64x96xf16>
  %mask = linalg.generic {indexing_maps = [#keys, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%keep : tensor<4x96xi1>) outs(%me : tensor<4x64x96xf16>) {
  ^bb0(%kept: i1, %out: f16):
    %ninf = arith.constant 0xFC00 : f16
    %zero = arith.constant 0.0 : f16
    %r = arith.select %kept, %zero, %ninf : f16
    linalg.yield %r : f16
  } -> tensor<4x64x96xf16>
  %e = tensor.empty() : tensor<4x64x64xf16>
  // expected-remark @below {{attention lowered to a generated Vulkan kernel (f16, D=64, 64 rows x 32 keys, its mask computed in the kernel from 1 tensor)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<4x64x64xf16>, tensor<4x96x64xf16>, tensor<4x96x64xf16>, f32, tensor<4x64x96xf16>)
      outs(%e : tensor<4x64x64xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x64x64xf16>
  return %o : tensor<4x64x64xf16>
}
// CHECK-LABEL: func.func @padding(
// CHECK: flow.dispatch @fusion_spirv_attention_0::@main({{.*}}) {fusion.attention_kernel = "{{.*}}\22b16\22: false, \22b8\22: false{{.*}}\22int64\22: false{{.*}}\22mask_expr\22: \22((l0_bits(uint(int(batch) * 96 + int(key) * 1)) != 0u) ? 0.0 : (-uintBitsToFloat(0x7f800000u)))\22, \22mask_inputs\22: [\22uint8_t\22]{{.*}}"}

// -----

// Document ids of i64 (torch's default integer type), only compared: each read as its
// two 32-bit words, compared word by word.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#rows = affine_map<(d0, d1, d2) -> (d0, d1)>
#keys = affine_map<(d0, d1, d2) -> (d0, d2)>
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @documents(%q: tensor<4x64x64xf32>, %k: tensor<4x64x64xf32>, %v: tensor<4x64x64xf32>, %doc: tensor<4x64xi64>) -> tensor<4x64x64xf32> {
  %scale = arith.constant 0.125 : f32
  %me = tensor.empty() : tensor<4x64x64xf32>
  %mask = linalg.generic {indexing_maps = [#rows, #keys, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%doc, %doc : tensor<4x64xi64>, tensor<4x64xi64>) outs(%me : tensor<4x64x64xf32>) {
  ^bb0(%a: i64, %b: i64, %out: f32):
    %ninf = arith.constant 0xFF800000 : f32
    %zero = arith.constant 0.0 : f32
    %same = arith.cmpi eq, %a, %b : i64
    %r = arith.select %same, %zero, %ninf : f32
    linalg.yield %r : f32
  } -> tensor<4x64x64xf32>
  %e = tensor.empty() : tensor<4x64x64xf32>
  // expected-remark @below {{attention lowered to a generated Vulkan kernel (f32, D=64, 64 rows x 32 keys, its mask computed in the kernel from 2 tensors)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<4x64x64xf32>, tensor<4x64x64xf32>, tensor<4x64x64xf32>, f32, tensor<4x64x64xf32>)
      outs(%e : tensor<4x64x64xf32>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x64x64xf32>
  return %o : tensor<4x64x64xf32>
}
// CHECK-LABEL: func.func @documents(
// CHECK-SAME: %[[DOC:[a-z0-9]+]]: tensor<4x64xi64>
// CHECK-NOT: linalg.generic
// CHECK: flow.dispatch @fusion_spirv_attention_0::@main({{.*}}, %[[DOC]], %[[DOC]]) {fusion.attention_kernel = "{{.*}}\22mask_expr\22: \22((l0_pair(uint(int(batch) * 64 + int(row) * 1)) == l1_pair(uint(int(batch) * 64 + int(key) * 1))) ? 0.0 : (-uintBitsToFloat(0x7f800000u)))\22, \22mask_inputs\22: [\22int64_t\22, \22int64_t\22]{{.*}}"}
