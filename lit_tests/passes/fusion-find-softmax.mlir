// RUN: fusion-opt %s --split-input-file --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(fusion-find-softmax)' | FileCheck %s

// The decomposition IREE's torch input pipeline makes of torch.softmax: max (with
// argmax), subtract, exp, sum, divide. The pass reports it at the divide and leaves
// the IR as it was.
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#row = affine_map<(d0, d1, d2) -> (d0, d1)>
#row1 = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
func.func @decomposed(%x: tensor<4x10x12xf32>) -> tensor<4x10x12xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c0 = arith.constant 0 : i64
  %e0 = tensor.empty() : tensor<4x10xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%e0 : tensor<4x10xf32>) -> tensor<4x10xf32>
  %ei = tensor.empty() : tensor<4x10xi64>
  %i0 = linalg.fill ins(%c0 : i64) outs(%ei : tensor<4x10xi64>) -> tensor<4x10xi64>
  %max:2 = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x : tensor<4x10x12xf32>) outs(%m0, %i0 : tensor<4x10xf32>, tensor<4x10xi64>) {
  ^bb0(%in: f32, %out: f32, %idx: i64):
    %i = linalg.index 2 : index
    %ii = arith.index_cast %i : index to i64
    %mx = arith.maximumf %in, %out : f32
    %gt = arith.cmpf ogt, %in, %out : f32
    %sel = arith.select %gt, %ii, %idx : i64
    linalg.yield %mx, %sel : f32, i64
  } -> (tensor<4x10xf32>, tensor<4x10xi64>)
  %mexp = tensor.expand_shape %max#0 [[0], [1, 2]] output_shape [4, 10, 1] : tensor<4x10xf32> into tensor<4x10x1xf32>
  %e = tensor.empty() : tensor<4x10x12xf32>
  %sub = linalg.generic {indexing_maps = [#id, #row1, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %mexp : tensor<4x10x12xf32>, tensor<4x10x1xf32>) outs(%e : tensor<4x10x12xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.subf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x10x12xf32>
  %exp = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sub : tensor<4x10x12xf32>) outs(%e : tensor<4x10x12xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<4x10x12xf32>
  %es = tensor.empty() : tensor<4x10x1xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%es : tensor<4x10x1xf32>) -> tensor<4x10x1xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row1], iterator_types = ["parallel", "parallel", "reduction"]} ins(%exp : tensor<4x10x12xf32>) outs(%s0 : tensor<4x10x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x10x1xf32>
  // expected-remark @below {{softmax over dimension 2 of tensor<4x10x12xf32> (decomposed)}}
  %div = linalg.generic {indexing_maps = [#id, #row1, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<4x10x12xf32>, tensor<4x10x1xf32>) outs(%e : tensor<4x10x12xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x10x12xf32>
  return %div : tensor<4x10x12xf32>
}
// CHECK-LABEL: func.func @decomposed
// CHECK: %[[EXP:[0-9]+]] = linalg.generic {indexing_maps = [#map, #map]
// CHECK-NEXT: ^bb0
// CHECK-NEXT: math.exp
// CHECK: %[[DIV:.+]] = linalg.generic {{.*}} ins(%[[EXP]], %{{.+}} : tensor<4x10x12xf32>, tensor<4x10x1xf32>)
// CHECK: arith.divf
// CHECK: return %[[DIV]]

// -----

// linalg.softmax, as IREE's global optimisation raises it.
func.func @named(%x: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  %e = tensor.empty() : tensor<2x8x16xf32>
  // expected-remark @below {{softmax over dimension 1 of tensor<2x8x16xf32> (linalg.softmax)}}
  %y = linalg.softmax dimension(1) ins(%x : tensor<2x8x16xf32>) outs(%e : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}
// CHECK-LABEL: func.func @named
// CHECK: linalg.softmax dimension(1)

// -----

// exp / sum(exp) with no max subtracted overflows for large scores: a near miss.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row1 = affine_map<(d0, d1) -> (d0, 0)>
func.func @no_max(%x: tensor<10x12xf32>) -> tensor<10x12xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<10x12xf32>
  %exp = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<10x12xf32>) outs(%e : tensor<10x12xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<10x12xf32>
  %es = tensor.empty() : tensor<10x1xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%es : tensor<10x1xf32>) -> tensor<10x1xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row1], iterator_types = ["parallel", "reduction"]} ins(%exp : tensor<10x12xf32>) outs(%s0 : tensor<10x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<10x1xf32>
  // expected-remark @below {{not a softmax: exp's input is not shifted by the row max}}
  %div = linalg.generic {indexing_maps = [#id, #row1, #id], iterator_types = ["parallel", "parallel"]} ins(%exp, %sum : tensor<10x12xf32>, tensor<10x1xf32>) outs(%e : tensor<10x12xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<10x12xf32>
  return %div : tensor<10x12xf32>
}
// CHECK-LABEL: func.func @no_max

// -----

// A plain elementwise division is nothing like a softmax: no remark at all
// (--verify-diagnostics fails on any remark not expected).
#id = affine_map<(d0) -> (d0)>
func.func @plain_div(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  %d = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]} ins(%a, %b : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %r = arith.divf %x, %y : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  return %d : tensor<8xf32>
}
// CHECK-LABEL: func.func @plain_div
// CHECK: arith.divf

// -----

// An fp16 softmax whose sum PyTorch (and the front end) accumulates in f32 and narrows
// before the division: still a softmax.
#hid = affine_map<(d0, d1) -> (d0, d1)>
#hrow = affine_map<(d0, d1) -> (d0)>
#hrow1 = affine_map<(d0, d1) -> (d0, 0)>
func.func @widened_sum(%x: tensor<10x12xf16>) -> tensor<10x12xf16> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFC00 : f16
  %e0 = tensor.empty() : tensor<10xf16>
  %m0 = linalg.fill ins(%ninf : f16) outs(%e0 : tensor<10xf16>) -> tensor<10xf16>
  %max = linalg.generic {indexing_maps = [#hid, #hrow], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<10x12xf16>) outs(%m0 : tensor<10xf16>) {
  ^bb0(%in: f16, %out: f16):
    %mx = arith.maximumf %in, %out : f16
    linalg.yield %mx : f16
  } -> tensor<10xf16>
  %mexp = tensor.expand_shape %max [[0, 1]] output_shape [10, 1] : tensor<10xf16> into tensor<10x1xf16>
  %e = tensor.empty() : tensor<10x12xf16>
  %sub = linalg.generic {indexing_maps = [#hid, #hrow1, #hid], iterator_types = ["parallel", "parallel"]} ins(%x, %mexp : tensor<10x12xf16>, tensor<10x1xf16>) outs(%e : tensor<10x12xf16>) {
  ^bb0(%a: f16, %b: f16, %o: f16):
    %r = arith.subf %a, %b : f16
    linalg.yield %r : f16
  } -> tensor<10x12xf16>
  %exp = linalg.generic {indexing_maps = [#hid, #hid], iterator_types = ["parallel", "parallel"]} ins(%sub : tensor<10x12xf16>) outs(%e : tensor<10x12xf16>) {
  ^bb0(%a: f16, %o: f16):
    %r = math.exp %a : f16
    linalg.yield %r : f16
  } -> tensor<10x12xf16>
  %es = tensor.empty() : tensor<10x1xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%es : tensor<10x1xf32>) -> tensor<10x1xf32>
  %sum = linalg.generic {indexing_maps = [#hid, #hrow1], iterator_types = ["parallel", "reduction"]} ins(%exp : tensor<10x12xf16>) outs(%s0 : tensor<10x1xf32>) {
  ^bb0(%a: f16, %o: f32):
    %w = arith.extf %a : f16 to f32
    %r = arith.addf %w, %o : f32
    linalg.yield %r : f32
  } -> tensor<10x1xf32>
  %en = tensor.empty() : tensor<10x1xf16>
  %narrow = linalg.generic {indexing_maps = [#hid, #hid], iterator_types = ["parallel", "parallel"]} ins(%sum : tensor<10x1xf32>) outs(%en : tensor<10x1xf16>) {
  ^bb0(%a: f32, %o: f16):
    %r = arith.truncf %a : f32 to f16
    linalg.yield %r : f16
  } -> tensor<10x1xf16>
  // expected-remark @below {{softmax over dimension 1 of tensor<10x12xf16> (decomposed)}}
  %div = linalg.generic {indexing_maps = [#hid, #hrow1, #hid], iterator_types = ["parallel", "parallel"]} ins(%exp, %narrow : tensor<10x12xf16>, tensor<10x1xf16>) outs(%e : tensor<10x12xf16>) {
  ^bb0(%a: f16, %b: f16, %o: f16):
    %r = arith.divf %a, %b : f16
    linalg.yield %r : f16
  } -> tensor<10x12xf16>
  return %div : tensor<10x12xf16>
}
// CHECK-LABEL: func.func @widened_sum
// CHECK: arith.extf
// CHECK: arith.truncf
// CHECK: arith.divf
