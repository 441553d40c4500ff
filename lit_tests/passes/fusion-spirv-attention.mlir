// REQUIRES: glslang
// RUN: fusion-opt %s --split-input-file --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(fusion-spirv-attention)' | FileCheck %s

// A causal attention (the mask proven causal from iota/compare and dropped): one
// dispatch of a generated SPIR-V kernel, its Spec on the dispatch, the SPIR-V in a
// hal.executable.source for Vulkan; no mask binding is read (Q is bound in its place).
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @plain(%q: tensor<4x100x64xf16>, %k: tensor<4x130x64xf16>, %v: tensor<4x130x64xf16>) -> tensor<4x100x64xf16> {
  %scale = arith.constant 0.125 : f32
  %e = tensor.empty() : tensor<4x100x64xf16>
  // expected-remark @below {{attention lowered to a generated Vulkan kernel (f16, D=64, 64 rows x 32 keys)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #o]}>
      ins(%q, %k, %v, %scale : tensor<4x100x64xf16>, tensor<4x130x64xf16>, tensor<4x130x64xf16>, f32)
      outs(%e : tensor<4x100x64xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x100x64xf16>
  return %o : tensor<4x100x64xf16>
}
// CHECK: #executable_target_vulkan_spirv_fb = #hal.executable.target<"vulkan-spirv", "vulkan-spirv-fb">
// Q, K, V and the mask binding read-only, the output written; every binding indirect (a
// slot of the binding table a recorded command buffer is submitted with)
// CHECK: #pipeline_layout = #hal.pipeline.layout<bindings = [#hal.pipeline.binding<storage_buffer, "ReadOnly|Indirect">, #hal.pipeline.binding<storage_buffer, "ReadOnly|Indirect">, #hal.pipeline.binding<storage_buffer, "ReadOnly|Indirect">, #hal.pipeline.binding<storage_buffer, "ReadOnly|Indirect">, #hal.pipeline.binding<storage_buffer, Indirect>]>
// the SPIR-V module (its magic number first)
// CHECK: hal.executable.source private @fusion_spirv_attention_0 <objects = <{#executable_target_vulkan_spirv_fb = [#hal.executable.object<{path = "fusion_spirv_attention_0.spv", data = dense<"0x03022307
// CHECK: hal.executable.export public @main ordinal(0) layout(#pipeline_layout)
// 100 rows in blocks of 64, 4 batches: 2 x 4 workgroups of 64 invocations
// CHECK: %[[X:.+]] = arith.constant 2 : index
// CHECK: %[[Y:.+]] = arith.constant 4 : index
// CHECK: hal.return %[[X]], %[[Y]]
// CHECK: workgroup_size = [64 : index, 1 : index, 1 : index]
// CHECK-LABEL: func.func @plain(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<4x100x64xf16>, %[[K:[a-z0-9]+]]: tensor<4x130x64xf16>, %[[V:[a-z0-9]+]]: tensor<4x130x64xf16>
// CHECK: %[[O:.+]] = flow.dispatch @fusion_spirv_attention_0::@main(%[[Q]], %[[K]], %[[V]], %[[Q]]) {fusion.attention_kernel = "{{.*}}\22target\22: \22vulkan\22{{.*}}"} : (tensor<4x100x64xf16>, tensor<4x130x64xf16>, tensor<4x130x64xf16>, tensor<4x100x64xf16>) -> tensor<4x100x64xf16>
// CHECK-NOT: iree_linalg_ext.attention
// CHECK: return %[[O]]

// -----

// A softcap score region (tanh, as the CUDA kernel's expression writes it) is evaluated
// in the kernel; a head dim above 256, which the kernel does not take, stays for the
// Vulkan pipeline's decomposition, with the reason.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @softcap(%q: tensor<2x16x32xf32>, %k: tensor<2x16x32xf32>, %v: tensor<2x16x32xf32>) -> tensor<2x16x32xf32> {
  %scale = arith.constant 0.125 : f32
  %e = tensor.empty() : tensor<2x16x32xf32>
  // expected-remark @below {{attention lowered to a generated Vulkan kernel (f32, D=32, 64 rows x 32 keys)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #o]}>
      ins(%q, %k, %v, %scale : tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>, f32)
      outs(%e : tensor<2x16x32xf32>) {
    ^bb0(%x: f32):
      %t = math.tanh %x : f32
      iree_linalg_ext.yield %t : f32
  } -> tensor<2x16x32xf32>
  return %o : tensor<2x16x32xf32>
}
func.func @wide(%q: tensor<2x16x512xf32>, %k: tensor<2x16x512xf32>, %v: tensor<2x16x512xf32>) -> tensor<2x16x512xf32> {
  %scale = arith.constant 0.125 : f32
  %e = tensor.empty() : tensor<2x16x512xf32>
  // expected-remark @below {{attention left for decomposition on Vulkan: head dim 512 above 256}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #o]}>
      ins(%q, %k, %v, %scale : tensor<2x16x512xf32>, tensor<2x16x512xf32>, tensor<2x16x512xf32>, f32)
      outs(%e : tensor<2x16x512xf32>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<2x16x512xf32>
  return %o : tensor<2x16x512xf32>
}
// CHECK-LABEL: func.func @softcap(
// CHECK: flow.dispatch @fusion_spirv_attention_0::@main({{.*}}\22score\22: \22(2.0 * tl_sigmoid(2.0 * x) - 1.0)\22
// CHECK-LABEL: func.func @wide(
// CHECK: iree_linalg_ext.attention

// -----

// A sliding window of 32 keys (masked where key > row or key < row - 31): the mask is
// dropped (Q is bound in its place), the spec carries both bounds, and the shader starts
// each workgroup's key loop at its first row's window.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @window(%q: tensor<4x128x64xf16>, %k: tensor<4x128x64xf16>, %v: tensor<4x128x64xf16>) -> tensor<4x128x64xf16> {
  %scale = arith.constant 0.125 : f32
  %c31 = arith.constant 31 : index
  %me = tensor.empty() : tensor<4x128x128xf16>
  %mask = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel", "parallel"]} outs(%me : tensor<4x128x128xf16>) {
  ^bb0(%out: f16):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %above = arith.cmpi sgt, %j, %i : index
    %early = arith.subi %i, %c31 : index
    %before = arith.cmpi slt, %j, %early : index
    %outside = arith.ori %above, %before : i1
    %ninf = arith.constant 0xFC00 : f16
    %zero = arith.constant 0.0 : f16
    %r = arith.select %outside, %ninf, %zero : f16
    linalg.yield %r : f16
  } -> tensor<4x128x128xf16>
  %e = tensor.empty() : tensor<4x128x64xf16>
  // expected-remark @below {{attention lowered to a generated Vulkan kernel (f16, D=64, 64 rows x 32 keys, sliding window of 32 keys, causal offset 0)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<4x128x64xf16>, tensor<4x128x64xf16>, tensor<4x128x64xf16>, f32, tensor<4x128x128xf16>)
      outs(%e : tensor<4x128x64xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x128x64xf16>
  return %o : tensor<4x128x64xf16>
}
// CHECK-LABEL: func.func @window(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<4x128x64xf16>, %[[K:[a-z0-9]+]]: tensor<4x128x64xf16>, %[[V:[a-z0-9]+]]: tensor<4x128x64xf16>
// CHECK-NOT: linalg.generic
// CHECK: flow.dispatch @fusion_spirv_attention_0::@main(%[[Q]], %[[K]], %[[V]], %[[Q]]) {fusion.attention_kernel = "{{.*}}\22causal_offset\22: 0,{{.*}}\22mask_dtype\22: null,{{.*}}\22window_start\22: -31{{.*}}"}
// CHECK-NOT: iree_linalg_ext.attention

// -----

// A padding mask from an input (B, Nk) i1: computed in the shader from that tensor, bound
// in place of the (B, Nq, Nk) mask, which is never made.
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
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<4x64x64xf16>, %[[K:[a-z0-9]+]]: tensor<4x96x64xf16>, %[[V:[a-z0-9]+]]: tensor<4x96x64xf16>, %[[KEEP:[a-z0-9]+]]: tensor<4x96xi1>
// CHECK-NOT: linalg.generic
// CHECK: flow.dispatch @fusion_spirv_attention_0::@main(%[[Q]], %[[K]], %[[V]], %[[KEEP]]) {fusion.attention_kernel = "{{.*}}\22mask_dtype\22: null, \22mask_expr\22: \22((l0[uint(int64_t(batch) * 96 + int64_t(key) * 1)] != uint8_t(0)) ? 0.0 : (-uintBitsToFloat(0x7f800000u)))\22, \22mask_inputs\22: [\22uint8_t\22]{{.*}}"} : (tensor<4x64x64xf16>, tensor<4x96x64xf16>, tensor<4x96x64xf16>, tensor<4x96xi1>) -> tensor<4x64x64xf16>

// -----

// Dynamic sequence lengths: the kernel reads (n_q, n_k) from a sizes binding before the
// output's, and the grid's x is the 64-row blocks of n_q, the dispatch's workload.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @dynamic(%q: tensor<4x?x64xf32>, %k: tensor<4x?x64xf32>, %v: tensor<4x?x64xf32>) -> tensor<4x?x64xf32> {
  %scale = arith.constant 0.125 : f32
  %c1 = arith.constant 1 : index
  %n = tensor.dim %q, %c1 : tensor<4x?x64xf32>
  %e = tensor.empty(%n) : tensor<4x?x64xf32>
  // expected-remark @below {{attention lowered to a generated Vulkan kernel (f32, D=64, 64 rows x 32 keys)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #o]}>
      ins(%q, %k, %v, %scale : tensor<4x?x64xf32>, tensor<4x?x64xf32>, tensor<4x?x64xf32>, f32)
      outs(%e : tensor<4x?x64xf32>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x?x64xf32>
  return %o : tensor<4x?x64xf32>
}
// CHECK: hal.executable.export public @main ordinal(0) layout(#pipeline{{.*}}) count(%{{.*}}: !hal.device, %[[N:.+]]: index)
// CHECK: arith.addi %[[N]]
// CHECK-LABEL: func.func @dynamic(
// CHECK: %[[SIZES:.+]] = tensor.from_elements {{.*}} : tensor<2xi32>
// CHECK: flow.dispatch @fusion_spirv_attention_0::@main[%[[NQ:.+]]](%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[SIZES]]) {{.*}} -> tensor<4x?x64xf32>{%[[NQ]]}
