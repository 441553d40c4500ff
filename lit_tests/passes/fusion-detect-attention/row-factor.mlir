// RUN: fusion-opt %s --split-input-file --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(fusion-detect-attention)' | FileCheck %s

// A factor per query row dividing the scores (a temperature): folded into Q.
#q = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#r = affine_map<(d0, d1, d2) -> (d0, d1)>
#r1 = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
func.func @per_row(%q: tensor<4x10x16xf32>, %kt: tensor<4x16x12xf32>, %v: tensor<4x12x8xf32>, %t: tensor<4x10x1xf32>) -> tensor<4x10x8xf32> {
  %f0 = arith.constant 0.0 : f32
  %eqk = tensor.empty() : tensor<4x10x12xf32>
  %zqk = linalg.fill ins(%f0 : f32) outs(%eqk : tensor<4x10x12xf32>) -> tensor<4x10x12xf32>
  %qk = linalg.batch_matmul ins(%q, %kt : tensor<4x10x16xf32>, tensor<4x16x12xf32>) outs(%zqk : tensor<4x10x12xf32>) -> tensor<4x10x12xf32>
  %escaled = tensor.empty() : tensor<4x10x12xf32>
  %scaled = linalg.generic {indexing_maps = [#q, #r1, #q], iterator_types = ["parallel", "parallel", "parallel"]} ins(%qk, %t : tensor<4x10x12xf32>, tensor<4x10x1xf32>) outs(%escaled : tensor<4x10x12xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.divf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x10x12xf32>
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : i64
  %em = tensor.empty() : tensor<4x10xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%em : tensor<4x10xf32>) -> tensor<4x10xf32>
  %ei = tensor.empty() : tensor<4x10xi64>
  %i0 = linalg.fill ins(%c0 : i64) outs(%ei : tensor<4x10xi64>) -> tensor<4x10xi64>
  %max:2 = linalg.generic {indexing_maps = [#q, #r, #r], iterator_types = ["parallel", "parallel", "reduction"]} ins(%scaled : tensor<4x10x12xf32>) outs(%m0, %i0 : tensor<4x10xf32>, tensor<4x10xi64>) {
  ^bb0(%in: f32, %out: f32, %idx: i64):
    %i = linalg.index 2 : index
    %ii = arith.index_cast %i : index to i64
    %mx = arith.maximumf %in, %out : f32
    %gt = arith.cmpf ogt, %in, %out : f32
    %sel = arith.select %gt, %ii, %idx : i64
    linalg.yield %mx, %sel : f32, i64
  } -> (tensor<4x10xf32>, tensor<4x10xi64>)
  %mexp = tensor.expand_shape %max#0 [[0], [1, 2]] output_shape [4, 10, 1] : tensor<4x10xf32> into tensor<4x10x1xf32>
  %esm = tensor.empty() : tensor<4x10x12xf32>
  %sub = linalg.generic {indexing_maps = [#q, #r1, #q], iterator_types = ["parallel", "parallel", "parallel"]} ins(%scaled, %mexp : tensor<4x10x12xf32>, tensor<4x10x1xf32>) outs(%esm : tensor<4x10x12xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    linalg.yield %d : f32
  } -> tensor<4x10x12xf32>
  %exp = linalg.generic {indexing_maps = [#q, #q], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sub : tensor<4x10x12xf32>) outs(%esm : tensor<4x10x12xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  } -> tensor<4x10x12xf32>
  %e1 = tensor.empty() : tensor<4x10x1xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x10x1xf32>) -> tensor<4x10x1xf32>
  %sum = linalg.generic {indexing_maps = [#q, #r1], iterator_types = ["parallel", "parallel", "reduction"]} ins(%exp : tensor<4x10x12xf32>) outs(%s0 : tensor<4x10x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<4x10x1xf32>
  %p = linalg.generic {indexing_maps = [#q, #r1, #q], iterator_types = ["parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<4x10x12xf32>, tensor<4x10x1xf32>) outs(%esm : tensor<4x10x12xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.divf %a, %b : f32
    linalg.yield %d : f32
  } -> tensor<4x10x12xf32>
  %epv = tensor.empty() : tensor<4x10x8xf32>
  %zpv = linalg.fill ins(%f0 : f32) outs(%epv : tensor<4x10x8xf32>) -> tensor<4x10x8xf32>
  // expected-remark @below {{fused attention (scale 1, without a mask, a factor per query row folded into Q)}}
  %o = linalg.batch_matmul ins(%p, %v : tensor<4x10x12xf32>, tensor<4x12x8xf32>) outs(%zpv : tensor<4x10x8xf32>) -> tensor<4x10x8xf32>
  return %o : tensor<4x10x8xf32>
}
// CHECK-LABEL: func.func @per_row(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<4x10x16xf32>, %[[KT:[a-z0-9]+]]: tensor<4x16x12xf32>, %[[V:[a-z0-9]+]]: tensor<4x12x8xf32>, %[[T:[a-z0-9]+]]: tensor<4x10x1xf32>
// CHECK: %[[ROWS:.+]] = linalg.generic {{.*}} ins(%[[T]] : tensor<4x10x1xf32>) outs({{.*}} : tensor<4x10xf32>)
// CHECK: %[[QT:.+]] = linalg.generic {{.*}} ins(%[[Q]], %[[ROWS]] : tensor<4x10x16xf32>, tensor<4x10xf32>)
// CHECK: arith.divf
// CHECK: %[[ATT:.+]] = iree_linalg_ext.attention
// CHECK-SAME: ins(%[[QT]], %[[KT]], %[[V]], %{{.+}} : tensor<4x10x16xf32>, tensor<4x16x12xf32>, tensor<4x12x8xf32>, f32)
// CHECK: return %[[ATT]]
// CHECK-NOT: linalg.batch_matmul
