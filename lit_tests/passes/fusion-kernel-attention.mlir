// RUN: fusion-opt %s --split-input-file --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(fusion-kernel-attention{arch=sm_90})' \
// RUN:   | FileCheck %s

// A causal mask built from indices is proven purely causal: it is dropped and the
// kernel masks (and skips) key blocks itself. Q is bound again where the mask would go.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @causal(%q: tensor<4x128x64xf16>, %k: tensor<4x128x64xf16>, %v: tensor<4x128x64xf16>) -> tensor<4x128x64xf16> {
  %scale = arith.constant 0.125 : f32
  %me = tensor.empty() : tensor<4x128x128xf16>
  %mask = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel", "parallel"]} outs(%me : tensor<4x128x128xf16>) {
  ^bb0(%out: f16):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %above = arith.cmpi sgt, %j, %i : index
    %ninf = arith.constant 0xFC00 : f16
    %zero = arith.constant 0.0 : f16
    %r = arith.select %above, %ninf, %zero : f16
    linalg.yield %r : f16
  } -> tensor<4x128x128xf16>
  %e = tensor.empty() : tensor<4x128x64xf16>
  // expected-remark @below {{attention lowered to a generated sm_90 kernel (f16, D=64, tiles 64x64, causal offset 0)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<4x128x64xf16>, tensor<4x128x64xf16>, tensor<4x128x64xf16>, f32, tensor<4x128x128xf16>)
      outs(%e : tensor<4x128x64xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x128x64xf16>
  return %o : tensor<4x128x64xf16>
}
// CHECK: hal.executable.source private @fusion_attention_0 <objects = <{#executable_target_cuda_nvptx_fb = [#hal.executable.object<{path = "fusion_attention_0.cubin", data = dense<"0x7F454C46{{[0-9A-F]+}}"> : vector<{{[0-9]+}}xi8>}>]}>>
// CHECK: hal.executable.export public @attention ordinal(0)
// CHECK: %[[X:.+]] = arith.constant 2 : index
// CHECK: %[[Y:.+]] = arith.constant 4 : index
// CHECK: hal.return %[[X]], %[[Y]], %{{.+}} : index, index, index
// CHECK: } <workgroup_size = [128 : index, 1 : index, 1 : index], workgroup_local_memory = {{[0-9]+}}>
// CHECK-LABEL: func.func @causal(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<4x128x64xf16>, %[[K:[a-z0-9]+]]: tensor<4x128x64xf16>, %[[V:[a-z0-9]+]]: tensor<4x128x64xf16>
// CHECK-NOT: linalg.generic
// CHECK: %[[D:.+]]:3 = flow.dispatch @fusion_attention_0::@attention(%[[Q]], %[[K]], %[[V]], %[[Q]], %[[Q]]) {fusion.attention_kernel = "{{.*}}\22causal_offset\22: 0,{{.*}}\22mask_dtype\22: null,{{.*}}"} : (tensor<4x128x64xf16>, tensor<4x128x64xf16>, tensor<4x128x64xf16>, tensor<4x128x64xf16>, tensor<4x128x64xf16>) -> (tensor<4x128x64xf16>, tensor<1xi8>, tensor<1xi8>)
// CHECK-NOT: iree_linalg_ext.attention
// CHECK: return %[[D]]#0

// -----

// A sliding window of 32 keys (masked where key > row or key < row - 31, an `ori`): the
// mask is dropped, the spec carries both bounds, and the kernel starts each row block's
// key loop at the window.
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
  // expected-remark @below {{attention lowered to a generated sm_90 kernel (f16, D=64, tiles 64x64, sliding window of 32 keys, causal offset 0)}}
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
// CHECK: flow.dispatch @fusion_attention_0::@attention(%[[Q]], %[[K]], %[[V]], %[[Q]], %[[Q]]) {fusion.attention_kernel = "{{.*}}\22causal_offset\22: 0,{{.*}}\22mask_dtype\22: null,{{.*}}\22window_start\22: -31{{.*}}"}
// CHECK-NOT: iree_linalg_ext.attention

// -----

// A softcap region becomes the kernel's score expression; a mask that is not provably
// causal is computed in the kernel from its producers: here an input, loaded per tile.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @softcap_bias(%q: tensor<2x64x128xbf16>, %k: tensor<2x96x128xbf16>, %v: tensor<2x96x128xbf16>, %bias: tensor<2x64x96xf32>) -> tensor<2x64x128xbf16> {
  %scale = arith.constant 0.088 : f32
  %e = tensor.empty() : tensor<2x64x128xbf16>
  // expected-remark @below {{attention lowered to a generated sm_90 kernel (bf16, D=128, tiles 64x64)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %bias : tensor<2x64x128xbf16>, tensor<2x96x128xbf16>, tensor<2x96x128xbf16>, f32, tensor<2x64x96xf32>)
      outs(%e : tensor<2x64x128xbf16>) {
    ^bb0(%x: f32):
      %inv = arith.constant 0.02 : f32
      %y = arith.mulf %x, %inv : f32
      %t = math.tanh %y : f32
      %cap = arith.constant 50.0 : f32
      %z = arith.mulf %t, %cap : f32
      iree_linalg_ext.yield %z : f32
  } -> tensor<2x64x128xbf16>
  return %o : tensor<2x64x128xbf16>
}
// CHECK-LABEL: func.func @softcap_bias(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<2x64x128xbf16>, %[[K:[a-z0-9]+]]: tensor<2x96x128xbf16>, %[[V:[a-z0-9]+]]: tensor<2x96x128xbf16>, %[[B:[a-z0-9]+]]: tensor<2x64x96xf32>
// CHECK: flow.dispatch @fusion_attention_0::@attention(%[[Q]], %[[K]], %[[V]], %[[B]], %[[Q]]) {fusion.attention_kernel = "{{.*}}\22mask_dtype\22: null, \22mask_expr\22: \22tl.load(L0 + (batch) * 6144 + (rows[:, None]) * 96 + (keys[None, :]) * 1, mask=(rows[:, None] < n_q) & (keys[None, :] < n_k), other=0)\22, \22mask_inputs\22: [\22*fp32\22],{{.*}}\22score\22: \22((2.0 * tl.sigmoid(2.0 * (x * 0.019999999552965164)) - 1.0) * 50.0)\22{{.*}}"}

// -----

// f32 attention stays for IREE's code generation, with the reason.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @f32(%q: tensor<2x16x32xf32>, %k: tensor<2x16x32xf32>, %v: tensor<2x16x32xf32>) -> tensor<2x16x32xf32> {
  %scale = arith.constant 0.125 : f32
  %e = tensor.empty() : tensor<2x16x32xf32>
  // expected-remark @below {{attention left to IREE's code generation: Q, K and V are not all f16 or all bf16}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #o]}>
      ins(%q, %k, %v, %scale : tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>, f32)
      outs(%e : tensor<2x16x32xf32>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<2x16x32xf32>
  return %o : tensor<2x16x32xf32>
}
// CHECK-LABEL: func.func @f32(
// CHECK-NOT: flow.dispatch
// CHECK: iree_linalg_ext.attention

// -----

// Dynamic sequence lengths: the kernel reads them from a sizes tensor; the grid comes
// from the workload (the query length); the strides are expressions of n_q and n_k.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @dynamic(%q: tensor<4x?x64xf16>, %k: tensor<4x?x64xf16>, %v: tensor<4x?x64xf16>) -> tensor<4x?x64xf16> {
  %scale = arith.constant 0.125 : f32
  %c1 = arith.constant 1 : index
  %n = tensor.dim %q, %c1 : tensor<4x?x64xf16>
  %e = tensor.empty(%n) : tensor<4x?x64xf16>
  // expected-remark @below {{attention lowered to a generated sm_90 kernel (f16, D=64, tiles 64x128)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #o]}>
      ins(%q, %k, %v, %scale : tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<4x?x64xf16>, f32)
      outs(%e : tensor<4x?x64xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x?x64xf16>
  return %o : tensor<4x?x64xf16>
}
// CHECK: hal.executable.export public @attention ordinal(0) layout(#pipeline_layout{{[0-9]*}}) count(%{{.+}}: !hal.device, %[[N:.+]]: index) -> (index, index, index) {
// CHECK: %[[PADDED:.+]] = arith.addi %[[N]], %{{.+}} : index
// CHECK: arith.divui %[[PADDED]], %{{.+}} : index
// CHECK-LABEL: func.func @dynamic(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<4x?x64xf16>, %[[K:[a-z0-9]+]]: tensor<4x?x64xf16>, %[[V:[a-z0-9]+]]: tensor<4x?x64xf16>
// CHECK: %[[NQ:.+]] = tensor.dim %[[Q]], %{{.+}} : tensor<4x?x64xf16>
// CHECK: %[[NK:.+]] = tensor.dim %[[K]], %{{.+}} : tensor<4x?x64xf16>
// CHECK: %[[SIZES:.+]] = tensor.from_elements %{{.+}}, %{{.+}} : tensor<2xi32>
// CHECK: flow.dispatch @fusion_attention_0::@attention[%[[NQ]]](%[[Q]], %[[K]], %[[V]], %[[Q]], %[[SIZES]]) {fusion.attention_kernel = "{{.*}}\22n_k\22: -1, \22n_q\22: -1,{{.*}}\22views\22: {{\[\[}}\22n_q * 64\22, 0, 1, 64, 1], {{\[}}\22n_k * 64\22{{.*}}"} : (tensor<4x?x64xf16>{%{{.+}}}, tensor<4x?x64xf16>{%{{.+}}}, tensor<4x?x64xf16>{%{{.+}}}, tensor<4x?x64xf16>{%{{.+}}}, tensor<2xi32>) -> (tensor<4x?x64xf16>{%[[NQ]]}, tensor<1xi8>, tensor<1xi8>)

// -----

// The causal mask of IREE's SDPA lowering keeps where key <= row: select(row >= key,
// 0, -inf). Proven causal (offset 0) too, and dropped.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @sdpa_causal(%q: tensor<4x128x64xf16>, %k: tensor<4x128x64xf16>, %v: tensor<4x128x64xf16>) -> tensor<4x128x64xf16> {
  %scale = arith.constant 0.125 : f32
  %me = tensor.empty() : tensor<4x128x128xf16>
  %mask = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel", "parallel"]} outs(%me : tensor<4x128x128xf16>) {
  ^bb0(%out: f16):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %keep = arith.cmpi sge, %i, %j : index
    %zero = arith.constant 0.0 : f16
    %ninf = arith.constant 0xFC00 : f16
    %r = arith.select %keep, %zero, %ninf : f16
    linalg.yield %r : f16
  } -> tensor<4x128x128xf16>
  %e = tensor.empty() : tensor<4x128x64xf16>
  // expected-remark @below {{attention lowered to a generated sm_90 kernel (f16, D=64, tiles 64x64, causal offset 0)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<4x128x64xf16>, tensor<4x128x64xf16>, tensor<4x128x64xf16>, f32, tensor<4x128x128xf16>)
      outs(%e : tensor<4x128x64xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x128x64xf16>
  return %o : tensor<4x128x64xf16>
}
// CHECK-LABEL: func.func @sdpa_causal(
// CHECK-NOT: linalg.generic
// CHECK: flow.dispatch @fusion_attention_0::@attention({{.*}}) {fusion.attention_kernel = "{{.*}}\22causal_offset\22: 0,{{.*}}\22mask_dtype\22: null, \22mask_expr\22: null,{{.*}}"}

// -----

// Split-KV (a decode step: 8 heads, one query row each, 4096 keys): the attention kernel
// writes each split's partial rows and log-sum-exps to a float32 buffer, and a second
// generated kernel merges them into the output.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @decode(%q: tensor<8x1x128xf16>, %k: tensor<8x4096x128xf16>, %v: tensor<8x4096x128xf16>) -> tensor<8x1x128xf16> {
  %scale = arith.constant 0.088 : f32
  %e = tensor.empty() : tensor<8x1x128xf16>
  // expected-remark @below {{attention lowered to a generated sm_90 kernel (f16, D=128, tiles 16x128, split-KV 16)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #o]}>
      ins(%q, %k, %v, %scale : tensor<8x1x128xf16>, tensor<8x4096x128xf16>, tensor<8x4096x128xf16>, f32)
      outs(%e : tensor<8x1x128xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<8x1x128xf16>
  return %o : tensor<8x1x128xf16>
}
// 16 splits x 8 rows x (128 + 1) floats
// CHECK: hal.executable.source private @fusion_attention_{{[0-9]+}}_combine
// CHECK: count(%{{.*}}: !hal.device)
// CHECK: arith.constant 8 : index
// CHECK-LABEL: func.func @decode(
// CHECK: %[[PARTIAL:.+]]:3 = flow.dispatch @fusion_attention_{{[0-9]+}}::@attention({{.*}}) {fusion.attention_kernel = "{{.*}}\22splits\22: 16{{.*}}"} : {{.*}} -> (tensor<16512xf32>, tensor<1xi8>, tensor<1xi8>)
// CHECK: %[[OUT:.+]]:3 = flow.dispatch @fusion_attention_{{[0-9]+}}_combine::@combine(%[[PARTIAL]]#0) {{.*}} -> (tensor<8x1x128xf16>, tensor<1xi8>, tensor<1xi8>)
// CHECK: return %[[OUT]]#0

// -----

// Causal attention with more row blocks than the GPU holds, D128, operands contiguous:
// persistent programs (as many as fit, 264 on sm_90) of the producer-warp kernel
// (backends/triton/warp_specialized.py: 8 warps), whose TMA descriptors for K, V and the output are made
// on the GPU, in Triton's global scratch: a result of 384 bytes per program.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @causal_long_producer_warp(%q: tensor<16x4096x128xf16>, %k: tensor<16x4096x128xf16>, %v: tensor<16x4096x128xf16>) -> tensor<16x4096x128xf16> {
  %scale = arith.constant 0.0883883 : f32
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
  // expected-remark @below {{attention lowered to a generated sm_90 kernel (f16, D=128, tiles 64x64, causal offset 0, 264 persistent programs, a producer warp)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<16x4096x128xf16>, tensor<16x4096x128xf16>, tensor<16x4096x128xf16>, f32, tensor<16x4096x4096xf16>)
      outs(%e : tensor<16x4096x128xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<16x4096x128xf16>
  return %o : tensor<16x4096x128xf16>
}
// CHECK: hal.executable.export public @attention ordinal(0)
// CHECK: %[[X:.+]] = arith.constant 264 : index
// CHECK: hal.return %[[X]], %{{.+}}, %{{.+}} : index, index, index
// CHECK-LABEL: func.func @causal_long_producer_warp(
// CHECK: flow.dispatch @fusion_attention_{{[0-9]+}}::@attention({{.*}}) {fusion.attention_kernel = "{{.*}}\22persistent\22: 264{{.*}}"} : {{.*}} -> (tensor<16x4096x128xf16>, tensor<101376xi8>, tensor<1xi8>)

// -----

// The same with D64 (the FlashAttention-2 template): persistent programs (as many as
// fit, 396 on sm_90) that read K and V through TMA descriptors made on the GPU, in
// Triton's global scratch: a result of 256 bytes (two descriptors) per program.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @causal_long_tma(%q: tensor<32x4096x64xf16>, %k: tensor<32x4096x64xf16>, %v: tensor<32x4096x64xf16>) -> tensor<32x4096x64xf16> {
  %scale = arith.constant 0.125 : f32
  %me = tensor.empty() : tensor<32x4096x4096xf16>
  %mask = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel", "parallel"]} outs(%me : tensor<32x4096x4096xf16>) {
  ^bb0(%out: f16):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %above = arith.cmpi sgt, %j, %i : index
    %ninf = arith.constant 0xFC00 : f16
    %zero = arith.constant 0.0 : f16
    %r = arith.select %above, %ninf, %zero : f16
    linalg.yield %r : f16
  } -> tensor<32x4096x4096xf16>
  %e = tensor.empty() : tensor<32x4096x64xf16>
  // expected-remark @below {{attention lowered to a generated sm_90 kernel (f16, D=64, tiles 64x64, causal offset 0, 396 persistent programs)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<32x4096x64xf16>, tensor<32x4096x64xf16>, tensor<32x4096x64xf16>, f32, tensor<32x4096x4096xf16>)
      outs(%e : tensor<32x4096x64xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<32x4096x64xf16>
  return %o : tensor<32x4096x64xf16>
}
// CHECK: hal.executable.export public @attention ordinal(0)
// CHECK: %[[X:.+]] = arith.constant 396 : index
// CHECK: hal.return %[[X]], %{{.+}}, %{{.+}} : index, index, index
// CHECK-LABEL: func.func @causal_long_tma(
// CHECK: flow.dispatch @fusion_attention_{{[0-9]+}}::@attention({{.*}}) {fusion.attention_kernel = "{{.*}}\22persistent\22: 396{{.*}}"} : {{.*}} -> (tensor<32x4096x64xf16>, tensor<101376xi8>, tensor<1xi8>)

// -----

// A decoding step over a cache: keys after `position`, a (1,) input, are masked. The
// kernel computes the mask and reads the position through a scalar pointer (one element
// per program: a tile's mask on it is not valid Triton).
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#first = affine_map<(d0, d1, d2) -> (0)>
func.func @decode_position(%q: tensor<8x1x32xf16>, %k: tensor<8x300x32xf16>, %v: tensor<8x300x32xf16>, %position: tensor<1xi64>) -> tensor<8x1x32xf16> {
  %scale = arith.constant 0.176776695 : f32
  %me = tensor.empty() : tensor<8x1x300xf16>
  %mask = linalg.generic {indexing_maps = [#first, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%position : tensor<1xi64>) outs(%me : tensor<8x1x300xf16>) {
  ^bb0(%p: i64, %out: f16):
    %j = linalg.index 2 : index
    %key = arith.index_cast %j : index to i64
    %later = arith.cmpi sgt, %key, %p : i64
    %ninf = arith.constant 0xFC00 : f16
    %zero = arith.constant 0.0 : f16
    %r = arith.select %later, %ninf, %zero : f16
    linalg.yield %r : f16
  } -> tensor<8x1x300xf16>
  %e = tensor.empty() : tensor<8x1x32xf16>
  // expected-remark @below {{attention lowered to a generated sm_90 kernel}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<8x1x32xf16>, tensor<8x300x32xf16>, tensor<8x300x32xf16>, f32, tensor<8x1x300xf16>)
      outs(%e : tensor<8x1x32xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<8x1x32xf16>
  return %o : tensor<8x1x32xf16>
}
// CHECK-LABEL: func.func @decode_position(
// CHECK: flow.dispatch @fusion_attention_0::@attention({{.*}}) {fusion.attention_kernel = "{{.*}}\22mask_expr\22: \22{{.*}}tl.load(L0 + 0){{.*}}\22, \22mask_inputs\22: [\22*i64\22]{{.*}}"}

// -----

// A padding mask from a (batch, keys) input, over several key blocks: block_classes and
// block_lists run first and list, per row block, the key blocks holding a kept key (those
// with no mask work first); the attention reads its map after the mask's input and
// visits only those.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#keys = affine_map<(d0, d1, d2) -> (d0, d2)>
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @padding_block_map(%q: tensor<4x256x64xf16>, %k: tensor<4x512x64xf16>, %v: tensor<4x512x64xf16>, %keep: tensor<4x512xi1>) -> tensor<4x256x64xf16> {
  %scale = arith.constant 0.125 : f32
  %me = tensor.empty() : tensor<4x256x512xf16>
  %mask = linalg.generic {indexing_maps = [#keys, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%keep : tensor<4x512xi1>) outs(%me : tensor<4x256x512xf16>) {
  ^bb0(%kept: i1, %out: f16):
    %ninf = arith.constant 0xFC00 : f16
    %zero = arith.constant 0.0 : f16
    %r = arith.select %kept, %zero, %ninf : f16
    linalg.yield %r : f16
  } -> tensor<4x256x512xf16>
  %e = tensor.empty() : tensor<4x256x64xf16>
  // expected-remark @below {{a block map of the mask's key blocks per call, from input 3}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<4x256x64xf16>, tensor<4x512x64xf16>, tensor<4x512x64xf16>, f32, tensor<4x256x512xf16>)
      outs(%e : tensor<4x256x64xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x256x64xf16>
  return %o : tensor<4x256x64xf16>
}
// CHECK-LABEL: func.func @padding_block_map(
// CHECK: %[[CLASSES:.+]]:3 = flow.dispatch @fusion_attention_0_block_classes::@block_classes(%{{.+}}) : (tensor<4x512xi1>) -> (tensor<{{[0-9]+}}xi32>, tensor<1xi8>, tensor<1xi8>)
// CHECK: %[[MAP:.+]]:3 = flow.dispatch @fusion_attention_0_block_lists::@block_lists(%[[CLASSES]]#0) : (tensor<{{[0-9]+}}xi32>) -> (tensor<{{[0-9]+}}xi32>, tensor<1xi8>, tensor<1xi8>)
// CHECK: flow.dispatch @fusion_attention_0::@attention(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[MAP]]#0, %{{.+}}) {{.*}}\22block_map\22: true
// the map's classes from the mask's bounds: the padding input's least and most per key block
// CHECK-SAME: \22mask_bounds\22: [\22v{{[0-9]+}} = tl.load(L0 + {{.*}}, mask=kk < n_k, other=0)

// -----

// Padding over many 64-row tiles at D128 (B·H 16, N 2048: 512 tiles): the producer-warp
// kernel visits the key blocks the map lists, the mask added in Gluon where needed.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#keys = affine_map<(d0, d1, d2) -> (d0, d2)>
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @padding_producer_warp(%q: tensor<16x2048x128xf16>, %k: tensor<16x2048x128xf16>, %v: tensor<16x2048x128xf16>, %keep: tensor<16x2048xi1>) -> tensor<16x2048x128xf16> {
  %scale = arith.constant 0.0883883461 : f32
  %me = tensor.empty() : tensor<16x2048x2048xf16>
  %mask = linalg.generic {indexing_maps = [#keys, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%keep : tensor<16x2048xi1>) outs(%me : tensor<16x2048x2048xf16>) {
  ^bb0(%kept: i1, %out: f16):
    %ninf = arith.constant 0xFC00 : f16
    %zero = arith.constant 0.0 : f16
    %r = arith.select %kept, %zero, %ninf : f16
    linalg.yield %r : f16
  } -> tensor<16x2048x2048xf16>
  %e = tensor.empty() : tensor<16x2048x128xf16>
  // expected-remark @below {{tiles 64x64, 264 persistent programs, a producer warp, a block map of the mask's key blocks per call, from input 3}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<16x2048x128xf16>, tensor<16x2048x128xf16>, tensor<16x2048x128xf16>, f32, tensor<16x2048x2048xf16>)
      outs(%e : tensor<16x2048x128xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<16x2048x128xf16>
  return %o : tensor<16x2048x128xf16>
}
// CHECK-LABEL: func.func @padding_producer_warp(
// CHECK: flow.dispatch @fusion_attention_0_block_lists::@block_lists
// CHECK: flow.dispatch @fusion_attention_0::@attention({{.*}}\22block_map\22: true
// CHECK-SAME: \22mask_expr\22: \22{{.+}}\22

// -----

// The same mask from a constant (a model's own buffer): the map's kernel would read
// constants alone, which IREE's const-eval runs at compile time for the host (IREE 3.13
// segfaults on a GPU kernel there); its inputs pass through an optimization barrier.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#keys = affine_map<(d0, d1, d2) -> (d0, d2)>
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @constant_padding_block_map(%q: tensor<2x64x64xf16>, %k: tensor<2x256x64xf16>, %v: tensor<2x256x64xf16>) -> tensor<2x64x64xf16> {
  %scale = arith.constant 0.125 : f32
  %keep = arith.constant dense<"0x0101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000001010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101010101000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"> : tensor<2x256xi1>
  %me = tensor.empty() : tensor<2x64x256xf16>
  %mask = linalg.generic {indexing_maps = [#keys, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%keep : tensor<2x256xi1>) outs(%me : tensor<2x64x256xf16>) {
  ^bb0(%kept: i1, %out: f16):
    %ninf = arith.constant 0xFC00 : f16
    %zero = arith.constant 0.0 : f16
    %r = arith.select %kept, %zero, %ninf : f16
    linalg.yield %r : f16
  } -> tensor<2x64x256xf16>
  %e = tensor.empty() : tensor<2x64x64xf16>
  // expected-remark @below {{a block map of the mask's key blocks per call, from a constant tensor}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<2x64x64xf16>, tensor<2x256x64xf16>, tensor<2x256x64xf16>, f32, tensor<2x64x256xf16>)
      outs(%e : tensor<2x64x64xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<2x64x64xf16>
  return %o : tensor<2x64x64xf16>
}
// CHECK-LABEL: func.func @constant_padding_block_map(
// CHECK: %[[KEEP:.+]] = arith.constant dense<"0x{{[0-9A-F]+}}"> : tensor<2x256xi1>
// CHECK: %[[HELD:.+]] = util.optimization_barrier %[[KEEP]] : tensor<2x256xi1>
// CHECK: flow.dispatch @fusion_attention_0_block_classes::@block_classes(%[[HELD]])

// -----

// K transposed after the head merge (bmm over merged heads: k.transpose(1, 2)) is read
// in place: the dispatch takes K itself, and the transpose goes.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#kt = affine_map<(d0, d1, d2, d3, d4) -> (d0, d3, d4)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @k_transposed(%q: tensor<4x128x64xf16>, %k: tensor<4x128x64xf16>, %v: tensor<4x128x64xf16>) -> tensor<4x128x64xf16> {
  %scale = arith.constant 0.125 : f32
  %te = tensor.empty() : tensor<4x64x128xf16>
  %kt = linalg.transpose ins(%k : tensor<4x128x64xf16>) outs(%te : tensor<4x64x128xf16>) permutation = [0, 2, 1]
  %e = tensor.empty() : tensor<4x128x64xf16>
  // expected-remark @below {{attention lowered to a generated sm_90 kernel (f16, D=64}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #kt, #v, #s, #o]}>
      ins(%q, %kt, %v, %scale : tensor<4x128x64xf16>, tensor<4x64x128xf16>, tensor<4x128x64xf16>, f32)
      outs(%e : tensor<4x128x64xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x128x64xf16>
  return %o : tensor<4x128x64xf16>
}
// CHECK-LABEL: func.func @k_transposed(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<4x128x64xf16>, %[[K:[a-z0-9]+]]: tensor<4x128x64xf16>, %[[V:[a-z0-9]+]]: tensor<4x128x64xf16>
// CHECK-NOT: linalg.transpose
// CHECK: flow.dispatch @fusion_attention_0::@attention(%[[Q]], %[[K]], %[[V]],
// CHECK-NOT: iree_linalg_ext.attention
