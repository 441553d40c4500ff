// RUN: fusion-opt %s --split-input-file --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(fusion-kernel-matmul{arch=sm_90})' \
// RUN:   | FileCheck %s

// A Linear on (B, M, K) activations, as torch-mlir writes it: PyTorch's (N, K) weight
// transposed, broadcast over the batch, a batch_matmul into f32 and a cast back to f16.
// The kernel takes the batch's rows as one (B·M, K) matrix, reads the weight in place
// and writes the f16 result: the transpose, the broadcast and the cast are gone.
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
  // expected-remark @below {{matrix product lowered to a generated sm_90 kernel (f16, M=128, K=256, N=512, tiles 64x64x64, the weight read transposed)}}
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
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x64x256xf16>, %[[W:[a-z0-9]+]]: tensor<512x256xf16>
// CHECK-NOT: linalg.transpose
// CHECK: %[[R:.+]]:3 = flow.dispatch @fusion_matmul_0::@matmul(%[[X]], %[[W]]) {fusion.matmul_kernel = "{{.*}}\22m\22: 128, {{.*}}\22w_t\22: true}"} : (tensor<2x64x256xf16>, tensor<512x256xf16>) -> (tensor<2x64x512xf16>, tensor<{{[0-9]+}}xi8>, tensor<1xi8>)
// CHECK-NOT: linalg.batch_matmul
// CHECK: return %[[R]]#0

// -----

// K = 100: rows of 200 bytes, which TMA cannot read; left to IREE, with a remark.
func.func @unaligned(%x: tensor<4x100xf16>, %w: tensor<100x64xf16>) -> tensor<4x64xf32> {
  %zero = arith.constant 0.0 : f32
  %ae = tensor.empty() : tensor<4x64xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%ae : tensor<4x64xf32>) -> tensor<4x64xf32>
  // expected-remark @below {{matrix product left to IREE: K=100 or N=64 not a multiple of 8 (TMA's 16-byte rows)}}
  %p = linalg.matmul ins(%x, %w : tensor<4x100xf16>, tensor<100x64xf16>) outs(%acc : tensor<4x64xf32>) -> tensor<4x64xf32>
  return %p : tensor<4x64xf32>
}
// CHECK-LABEL: func.func @unaligned(
// CHECK: linalg.matmul
// CHECK-NOT: flow.dispatch

// -----

// GPT-2's projection: the product, its bias added (broadcast along the rows), the
// reshape back to (B, N, D) and the residual added. The kernel computes all of it
// before its store, reading the bias and the residual in place: no generic is left.
#row = affine_map<(d0, d1) -> (d1)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @bias_and_residual(%x: tensor<128x256xf16>, %w: tensor<256x256xf16>, %b: tensor<256xf16>, %r: tensor<2x64x256xf16>) -> tensor<2x64x256xf16> {
  %zero = arith.constant 0.0 : f16
  %pe = tensor.empty() : tensor<128x256xf16>
  %acc = linalg.fill ins(%zero : f16) outs(%pe : tensor<128x256xf16>) -> tensor<128x256xf16>
  // expected-remark @below {{matrix product lowered to a generated sm_90 kernel (f16, M=128, K=256, N=256, tiles 64x64x64); the 2 elementwise op(s) after it computed before its store (reading 2 more tensor(s))}}
  %p = linalg.matmul ins(%x, %w : tensor<128x256xf16>, tensor<256x256xf16>) outs(%acc : tensor<128x256xf16>) -> tensor<128x256xf16>
  %biased = linalg.generic {indexing_maps = [#row, #id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%b, %p : tensor<256xf16>, tensor<128x256xf16>) outs(%pe : tensor<128x256xf16>) {
  ^bb0(%bias: f16, %in: f16, %out: f16):
    %s = arith.addf %bias, %in : f16
    linalg.yield %s : f16
  } -> tensor<128x256xf16>
  %e = tensor.expand_shape %biased [[0, 1], [2]] output_shape [2, 64, 256] : tensor<128x256xf16> into tensor<2x64x256xf16>
  %re = tensor.empty() : tensor<2x64x256xf16>
  %sum = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%r, %e : tensor<2x64x256xf16>, tensor<2x64x256xf16>) outs(%re : tensor<2x64x256xf16>) {
  ^bb0(%a: f16, %c: f16, %out: f16):
    %s = arith.addf %a, %c : f16
    linalg.yield %s : f16
  } -> tensor<2x64x256xf16>
  return %sum : tensor<2x64x256xf16>
}
// CHECK-LABEL: func.func @bias_and_residual(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<128x256xf16>, %[[W:[a-z0-9]+]]: tensor<256x256xf16>, %[[B:[a-z0-9]+]]: tensor<256xf16>, %[[RES:[a-z0-9]+]]: tensor<2x64x256xf16>
// CHECK: %[[D:.+]]:3 = flow.dispatch @fusion_matmul_0::@matmul(%[[X]], %[[W]], %[[RES]], %[[B]]) {fusion.matmul_kernel = "{{.*}}\22epilogue_inputs\22: [\22f16\22, \22f16\22]{{.*}}"} : (tensor<128x256xf16>, tensor<256x256xf16>, tensor<2x64x256xf16>, tensor<256xf16>) -> (tensor<2x64x256xf16>, tensor<{{[0-9]+}}xi8>, tensor<1xi8>)
// CHECK-NOT: linalg.generic
// CHECK: return %[[D]]#0

// -----

// The biased product is returned as well as its square: the kernel's epilogue stops at
// the bias (what leaves the kernel must be its one result), the square stays after it.
#row2 = affine_map<(d0, d1) -> (d1)>
#idb = affine_map<(d0, d1) -> (d0, d1)>
func.func @escaping(%x: tensor<128x256xf16>, %w: tensor<256x256xf16>, %b: tensor<256xf16>) -> (tensor<128x256xf16>, tensor<128x256xf16>) {
  %zero = arith.constant 0.0 : f16
  %pe = tensor.empty() : tensor<128x256xf16>
  %acc = linalg.fill ins(%zero : f16) outs(%pe : tensor<128x256xf16>) -> tensor<128x256xf16>
  // expected-remark @below {{the 1 elementwise op(s) after it computed before its store (reading 1 more tensor(s))}}
  %p = linalg.matmul ins(%x, %w : tensor<128x256xf16>, tensor<256x256xf16>) outs(%acc : tensor<128x256xf16>) -> tensor<128x256xf16>
  %biased = linalg.generic {indexing_maps = [#row2, #idb, #idb], iterator_types = ["parallel", "parallel"]} ins(%b, %p : tensor<256xf16>, tensor<128x256xf16>) outs(%pe : tensor<128x256xf16>) {
  ^bb0(%bias: f16, %in: f16, %out: f16):
    %s = arith.addf %bias, %in : f16
    linalg.yield %s : f16
  } -> tensor<128x256xf16>
  %sq = linalg.generic {indexing_maps = [#idb, #idb], iterator_types = ["parallel", "parallel"]} ins(%biased : tensor<128x256xf16>) outs(%pe : tensor<128x256xf16>) {
  ^bb0(%in: f16, %out: f16):
    %s = arith.mulf %in, %in : f16
    linalg.yield %s : f16
  } -> tensor<128x256xf16>
  return %biased, %sq : tensor<128x256xf16>, tensor<128x256xf16>
}
// CHECK-LABEL: func.func @escaping(
// CHECK: %[[D:.+]]:3 = flow.dispatch @fusion_matmul_0::@matmul(
// CHECK: %[[SQ:.+]] = linalg.generic {{.*}} ins(%[[D]]#0 :
// CHECK: arith.mulf
// CHECK: return %[[D]]#0, %[[SQ]]

// -----

// %g reads %v3, computed from the product, at the transposed element: it is not
// elementwise in the product however the ops are ordered (%v2 is defined before %v1, so
// a walk in program order meets %g's reads in either order). Nothing after the product
// can be computed before its store without %g reading values that never exist: the
// product is the kernel's alone and every generic stays.
#idt = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
func.func @transposed_read(%a: tensor<64x64xf16>, %w: tensor<64x64xf16>) -> tensor<64x64xf16> {
  %zero = arith.constant 0.0 : f16
  %pe = tensor.empty() : tensor<64x64xf16>
  %acc = linalg.fill ins(%zero : f16) outs(%pe : tensor<64x64xf16>) -> tensor<64x64xf16>
  // expected-remark @below {{matrix product lowered to a generated sm_90 kernel (f16, M=64, K=64, N=64, tiles 64x128x64)}}
  %c = linalg.matmul ins(%a, %w : tensor<64x64xf16>, tensor<64x64xf16>) outs(%acc : tensor<64x64xf16>) -> tensor<64x64xf16>
  %v2 = linalg.generic {indexing_maps = [#idt, #idt], iterator_types = ["parallel", "parallel"]} ins(%c : tensor<64x64xf16>) outs(%pe : tensor<64x64xf16>) {
  ^bb0(%in: f16, %out: f16):
    %k = arith.constant 3.0 : f16
    %r = arith.mulf %in, %k : f16
    linalg.yield %r : f16
  } -> tensor<64x64xf16>
  %v1 = linalg.generic {indexing_maps = [#idt, #idt], iterator_types = ["parallel", "parallel"]} ins(%c : tensor<64x64xf16>) outs(%pe : tensor<64x64xf16>) {
  ^bb0(%in: f16, %out: f16):
    %k = arith.constant 2.0 : f16
    %r = arith.mulf %in, %k : f16
    linalg.yield %r : f16
  } -> tensor<64x64xf16>
  %v3 = linalg.generic {indexing_maps = [#idt, #idt], iterator_types = ["parallel", "parallel"]} ins(%v1 : tensor<64x64xf16>) outs(%pe : tensor<64x64xf16>) {
  ^bb0(%in: f16, %out: f16):
    %k = arith.constant 5.0 : f16
    %r = arith.mulf %in, %k : f16
    linalg.yield %r : f16
  } -> tensor<64x64xf16>
  %g = linalg.generic {indexing_maps = [#idt, #tr, #idt], iterator_types = ["parallel", "parallel"]} ins(%v2, %v3 : tensor<64x64xf16>, tensor<64x64xf16>) outs(%pe : tensor<64x64xf16>) {
  ^bb0(%i0: f16, %i1: f16, %out: f16):
    %r = arith.addf %i0, %i1 : f16
    linalg.yield %r : f16
  } -> tensor<64x64xf16>
  return %g : tensor<64x64xf16>
}
// CHECK-LABEL: func.func @transposed_read(
// CHECK: %[[D:.+]]:3 = flow.dispatch @fusion_matmul_0::@matmul(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}) {fusion.matmul_kernel = "{{.*}}\22epilogue\22: null
// CHECK-COUNT-4: linalg.generic

// -----

// Two 128x128 output tiles over K = 4096: too few programs for the GPU, so four share
// each tile's K (split-K), writing their f32 partial products; a second kernel adds them
// and the bias before the store.
#row2 = affine_map<(d0, d1) -> (d1)>
#id22 = affine_map<(d0, d1) -> (d0, d1)>
func.func @split_k(%x: tensor<128x4096xf16>, %w: tensor<4096x256xf16>, %b: tensor<256xf16>) -> tensor<128x256xf16> {
  %zero = arith.constant 0.0 : f16
  %pe = tensor.empty() : tensor<128x256xf16>
  %acc = linalg.fill ins(%zero : f16) outs(%pe : tensor<128x256xf16>) -> tensor<128x256xf16>
  // expected-remark @below {{matrix product lowered to a generated sm_90 kernel (f16, M=128, K=4096, N=256, tiles 128x128x64, split-K 4); the 1 elementwise op(s) after it computed before its store (reading 1 more tensor(s))}}
  %p = linalg.matmul ins(%x, %w : tensor<128x4096xf16>, tensor<4096x256xf16>) outs(%acc : tensor<128x256xf16>) -> tensor<128x256xf16>
  %biased = linalg.generic {indexing_maps = [#row2, #id22, #id22], iterator_types = ["parallel", "parallel"]} ins(%b, %p : tensor<256xf16>, tensor<128x256xf16>) outs(%pe : tensor<128x256xf16>) {
  ^bb0(%bias: f16, %in: f16, %out: f16):
    %s = arith.addf %bias, %in : f16
    linalg.yield %s : f16
  } -> tensor<128x256xf16>
  return %biased : tensor<128x256xf16>
}
// CHECK-LABEL: func.func @split_k(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<128x4096xf16>, %[[W:[a-z0-9]+]]: tensor<4096x256xf16>, %[[B:[a-z0-9]+]]: tensor<256xf16>
// CHECK: %[[P:.+]]:3 = flow.dispatch @fusion_matmul_0::@matmul(%[[X]], %[[W]]) {fusion.matmul_kernel = "{{.*}}\22split_k\22: 4{{.*}}"} : (tensor<128x4096xf16>, tensor<4096x256xf16>) -> (tensor<4x128x256xf32>, tensor<{{[0-9]+}}xi8>, tensor<1xi8>)
// CHECK: %[[S:.+]]:3 = flow.dispatch @fusion_matmul_0_sum::@matmul_sum(%[[P]]#0, %[[B]]) : (tensor<4x128x256xf32>, tensor<256xf16>) -> (tensor<128x256xf16>, tensor<1xi8>, tensor<1xi8>)
// CHECK-NOT: linalg.generic
// CHECK: return %[[S]]#0

// -----

// 4096 rows by 768 outputs: more 128x128 tiles than multiprocessors, so the kernel is
// persistent: 96 programs of 128x256 tiles (as full a last round as 192 of 128x128).
func.func @persistent(%x: tensor<4096x256xf16>, %w: tensor<256x768xf16>) -> tensor<4096x768xf16> {
  %zero = arith.constant 0.0 : f16
  %pe = tensor.empty() : tensor<4096x768xf16>
  %acc = linalg.fill ins(%zero : f16) outs(%pe : tensor<4096x768xf16>) -> tensor<4096x768xf16>
  // expected-remark @below {{matrix product lowered to a generated sm_90 kernel (f16, M=4096, K=256, N=768, tiles 128x256x64, 96 persistent programs)}}
  %p = linalg.matmul ins(%x, %w : tensor<4096x256xf16>, tensor<256x768xf16>) outs(%acc : tensor<4096x768xf16>) -> tensor<4096x768xf16>
  return %p : tensor<4096x768xf16>
}
// CHECK-LABEL: func.func @persistent(
// CHECK: flow.dispatch @fusion_matmul_0::@matmul({{.*}}) {fusion.matmul_kernel = "{{.*}}\22programs\22: 96{{.*}}"} : (tensor<4096x256xf16>, tensor<256x768xf16>) -> (tensor<4096x768xf16>, tensor<{{[0-9]+}}xi8>, tensor<1xi8>)

// -----

// The same product with a bias: its 128x256 kernel fits (8 bytes of spills, within
// what is tolerated; its shared memory within a block's), so it is taken.
#prow = affine_map<(d0, d1) -> (d1)>
#pid = affine_map<(d0, d1) -> (d0, d1)>
func.func @persistent_bias(%x: tensor<4096x256xf16>, %w: tensor<256x768xf16>, %b: tensor<768xf16>) -> tensor<4096x768xf16> {
  %zero = arith.constant 0.0 : f16
  %pe = tensor.empty() : tensor<4096x768xf16>
  %acc = linalg.fill ins(%zero : f16) outs(%pe : tensor<4096x768xf16>) -> tensor<4096x768xf16>
  // expected-remark @below {{matrix product lowered to a generated sm_90 kernel (f16, M=4096, K=256, N=768, tiles 128x256x64, 96 persistent programs); the 1 elementwise op(s) after it computed before its store (reading 1 more tensor(s))}}
  %p = linalg.matmul ins(%x, %w : tensor<4096x256xf16>, tensor<256x768xf16>) outs(%acc : tensor<4096x768xf16>) -> tensor<4096x768xf16>
  %biased = linalg.generic {indexing_maps = [#prow, #pid, #pid], iterator_types = ["parallel", "parallel"]} ins(%b, %p : tensor<768xf16>, tensor<4096x768xf16>) outs(%pe : tensor<4096x768xf16>) {
  ^bb0(%bias: f16, %in: f16, %out: f16):
    %s = arith.addf %bias, %in : f16
    linalg.yield %s : f16
  } -> tensor<4096x768xf16>
  return %biased : tensor<4096x768xf16>
}
// CHECK-LABEL: func.func @persistent_bias(
// CHECK: flow.dispatch @fusion_matmul_0::@matmul({{.*}}) {fusion.matmul_kernel = "{{.*}}\22block_n\22: 256{{.*}}\22programs\22: 96{{.*}}"}

// -----

// With GELU's erf after the bias, the 128x256 kernel spills (the next tile's
// accumulator lives beside this one's epilogue): 128x128 tiles are taken, and the
// remark says why.
#grow = affine_map<(d0, d1) -> (d1)>
#gid = affine_map<(d0, d1) -> (d0, d1)>
func.func @persistent_gelu(%x: tensor<4096x256xf16>, %w: tensor<256x768xf16>, %b: tensor<768xf16>) -> tensor<4096x768xf16> {
  %zero = arith.constant 0.0 : f16
  %pe = tensor.empty() : tensor<4096x768xf16>
  %acc = linalg.fill ins(%zero : f16) outs(%pe : tensor<4096x768xf16>) -> tensor<4096x768xf16>
  // expected-remark @below {{matrix product lowered to a generated sm_90 kernel (f16, M=4096, K=256, N=768, tiles 128x128x64, 132 persistent programs (128x256 tiles need }}
  %p = linalg.matmul ins(%x, %w : tensor<4096x256xf16>, tensor<256x768xf16>) outs(%acc : tensor<4096x768xf16>) -> tensor<4096x768xf16>
  %g = linalg.generic {indexing_maps = [#grow, #gid, #gid], iterator_types = ["parallel", "parallel"]} ins(%b, %p : tensor<768xf16>, tensor<4096x768xf16>) outs(%pe : tensor<4096x768xf16>) {
  ^bb0(%bias: f16, %in: f16, %out: f16):
    %s = arith.addf %bias, %in : f16
    %f = arith.extf %s : f16 to f32
    %half = arith.constant 0.5 : f32
    %rsqrt2 = arith.constant 0.707106769 : f32
    %one = arith.constant 1.0 : f32
    %scaled = arith.mulf %f, %rsqrt2 : f32
    %erf = math.erf %scaled : f32
    %onep = arith.addf %erf, %one : f32
    %halfx = arith.mulf %f, %half : f32
    %y = arith.mulf %halfx, %onep : f32
    %t = arith.truncf %y : f32 to f16
    linalg.yield %t : f16
  } -> tensor<4096x768xf16>
  return %g : tensor<4096x768xf16>
}
// CHECK-LABEL: func.func @persistent_gelu(
// CHECK: flow.dispatch @fusion_matmul_0::@matmul({{.*}}) {fusion.matmul_kernel = "{{.*}}\22block_n\22: 128{{.*}}\22programs\22: 132{{.*}}"}

// -----

// 512 rows by 2048 outputs: 64 tiles of 128x128 would leave half the multiprocessors
// idle; 128 tiles of 64x128 fill one round.
func.func @one_round(%x: tensor<512x256xf16>, %w: tensor<256x2048xf16>) -> tensor<512x2048xf16> {
  %zero = arith.constant 0.0 : f16
  %pe = tensor.empty() : tensor<512x2048xf16>
  %acc = linalg.fill ins(%zero : f16) outs(%pe : tensor<512x2048xf16>) -> tensor<512x2048xf16>
  // expected-remark @below {{matrix product lowered to a generated sm_90 kernel (f16, M=512, K=256, N=2048, tiles 64x128x64)}}
  %p = linalg.matmul ins(%x, %w : tensor<512x256xf16>, tensor<256x2048xf16>) outs(%acc : tensor<512x2048xf16>) -> tensor<512x2048xf16>
  return %p : tensor<512x2048xf16>
}
// CHECK-LABEL: func.func @one_round(
// CHECK: flow.dispatch @fusion_matmul_0::@matmul({{.*}}) {fusion.matmul_kernel = "{{.*}}\22block_m\22: 64, \22block_n\22: 128{{.*}}"}
