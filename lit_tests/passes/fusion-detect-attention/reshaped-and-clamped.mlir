// RUN: fusion-opt %s --split-input-file --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(fusion-detect-attention)' | FileCheck %s

// bmm over merged heads (BART's and XGLM's form): the (B·H, M, N) scores viewed as
// (B, H, M, N) to add the mask, viewed back for the softmax. One attention; its mask is
// the score ops replayed on zeros through the view and its undoing, in the qk space.
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d0, 0, d2, d3)>
#map2 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#map4 = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
func.func @bmm_viewed(%arg0: tensor<2x8x4xf32>, %arg1: tensor<2x8x4xf32>, %arg2: tensor<2x8x4xf32>, %arg3: tensor<1x1x8x8xf32>) -> tensor<2x8x4xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %c0_i64 = arith.constant 0 : i64
  %cst_0 = arith.constant 0xFF800000 : f32
  %cst_1 = arith.constant 5.000000e-01 : f32
  %4 = tensor.empty() : tensor<2x4x8xf32>
  %transposed = linalg.transpose ins(%arg1 : tensor<2x8x4xf32>) outs(%4 : tensor<2x4x8xf32>) permutation = [0, 2, 1]
  %5 = tensor.empty() : tensor<2x8x8xf32>
  %6 = linalg.fill ins(%cst : f32) outs(%5 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %7 = linalg.batch_matmul ins(%arg0, %transposed : tensor<2x8x4xf32>, tensor<2x4x8xf32>) outs(%6 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %expanded = tensor.expand_shape %7 [[0, 1], [2], [3]] output_shape [1, 2, 8, 8] : tensor<2x8x8xf32> into tensor<1x2x8x8xf32>
  %8 = tensor.empty() : tensor<1x2x8x8xf32>
  %9 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded : tensor<1x2x8x8xf32>) outs(%8 : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %27 = arith.mulf %in, %cst_1 : f32
    linalg.yield %27 : f32
  } -> tensor<1x2x8x8xf32>
  %10 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%9, %arg3 : tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>) outs(%8 : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %in_3: f32, %out: f32):
    %27 = arith.addf %in, %in_3 : f32
    linalg.yield %27 : f32
  } -> tensor<1x2x8x8xf32>
  %collapsed = tensor.collapse_shape %10 [[0, 1], [2], [3]] : tensor<1x2x8x8xf32> into tensor<2x8x8xf32>
  %11 = tensor.empty() : tensor<2x8xi64>
  %12 = linalg.fill ins(%c0_i64 : i64) outs(%11 : tensor<2x8xi64>) -> tensor<2x8xi64>
  %13 = tensor.empty() : tensor<2x8xf32>
  %14 = linalg.fill ins(%cst_0 : f32) outs(%13 : tensor<2x8xf32>) -> tensor<2x8xf32>
  %15:2 = linalg.generic {indexing_maps = [#map2, #map3, #map3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%collapsed : tensor<2x8x8xf32>) outs(%14, %12 : tensor<2x8xf32>, tensor<2x8xi64>) {
  ^bb0(%in: f32, %out: f32, %out_3: i64):
    %27 = linalg.index 2 : index
    %28 = arith.index_cast %27 : index to i64
    %29 = arith.maximumf %in, %out : f32
    %30 = arith.cmpf ogt, %in, %out : f32
    %31 = arith.select %30, %28, %out_3 : i64
    linalg.yield %29, %31 : f32, i64
  } -> (tensor<2x8xf32>, tensor<2x8xi64>)
  %expanded_2 = tensor.expand_shape %15#0 [[0], [1, 2]] output_shape [2, 8, 1] : tensor<2x8xf32> into tensor<2x8x1xf32>
  %16 = linalg.generic {indexing_maps = [#map2, #map4, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%collapsed, %expanded_2 : tensor<2x8x8xf32>, tensor<2x8x1xf32>) outs(%5 : tensor<2x8x8xf32>) {
  ^bb0(%in: f32, %in_3: f32, %out: f32):
    %27 = arith.subf %in, %in_3 : f32
    linalg.yield %27 : f32
  } -> tensor<2x8x8xf32>
  %17 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%16 : tensor<2x8x8xf32>) outs(%5 : tensor<2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %27 = math.exp %in : f32
    linalg.yield %27 : f32
  } -> tensor<2x8x8xf32>
  %18 = tensor.empty() : tensor<2x8x1xf32>
  %19 = linalg.fill ins(%cst : f32) outs(%18 : tensor<2x8x1xf32>) -> tensor<2x8x1xf32>
  %20 = linalg.generic {indexing_maps = [#map2, #map4], iterator_types = ["parallel", "parallel", "reduction"]} ins(%17 : tensor<2x8x8xf32>) outs(%19 : tensor<2x8x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %27 = arith.addf %in, %out : f32
    linalg.yield %27 : f32
  } -> tensor<2x8x1xf32>
  %21 = linalg.generic {indexing_maps = [#map2, #map4, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%17, %20 : tensor<2x8x8xf32>, tensor<2x8x1xf32>) outs(%5 : tensor<2x8x8xf32>) {
  ^bb0(%in: f32, %in_3: f32, %out: f32):
    %27 = arith.divf %in, %in_3 : f32
    linalg.yield %27 : f32
  } -> tensor<2x8x8xf32>
  %22 = tensor.empty() : tensor<2x8x4xf32>
  %23 = linalg.fill ins(%cst : f32) outs(%22 : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  // expected-remark @below {{fused attention (scale 0.5, with a mask)}}
  %24 = linalg.batch_matmul ins(%21, %arg2 : tensor<2x8x8xf32>, tensor<2x8x4xf32>) outs(%23 : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %24 : tensor<2x8x4xf32>
}

// CHECK-LABEL: func.func @bmm_viewed(
// CHECK: %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<2x8x8xf32>)
// CHECK: tensor.expand_shape %[[Z]] {{.*}} into tensor<1x2x8x8xf32>
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: %[[MASK:.*]] = tensor.collapse_shape {{.*}} into tensor<2x8x8xf32>
// CHECK-NOT: tensor.collapse_shape
// CHECK: iree_linalg_ext.attention {{.*}} ins(%arg0, %transposed, %arg2, %{{.*}}, %[[MASK]] :
// CHECK-NOT: linalg.batch_matmul
// CHECK: return

// -----

// XGLM's clamp of the masked scores, torch.max(s + mask, finfo.min): the score kept, the
// clamp replayed on the mask (a -inf mask becomes the finite fill).
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d0, 0, d2, d3)>
#map2 = affine_map<(d0, d1, d2, d3) -> ()>
#map3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#map4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>
func.func @clamped(%arg0: tensor<1x2x8x4xf32>, %arg1: tensor<1x2x8x4xf32>, %arg2: tensor<1x2x8x4xf32>, %arg3: tensor<1x1x8x8xf32>) -> tensor<1x2x8x4xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %c0_i64 = arith.constant 0 : i64
  %cst_0 = arith.constant 0xFF800000 : f32
  %cst_1 = arith.constant dense<-3.40282347E+38> : tensor<f32>
  %cst_2 = arith.constant 5.000000e-01 : f32
  %4 = tensor.empty() : tensor<1x2x4x8xf32>
  %transposed = linalg.transpose ins(%arg1 : tensor<1x2x8x4xf32>) outs(%4 : tensor<1x2x4x8xf32>) permutation = [0, 1, 3, 2]
  %collapsed = tensor.collapse_shape %arg0 [[0, 1], [2], [3]] : tensor<1x2x8x4xf32> into tensor<2x8x4xf32>
  %collapsed_3 = tensor.collapse_shape %transposed [[0, 1], [2], [3]] : tensor<1x2x4x8xf32> into tensor<2x4x8xf32>
  %5 = tensor.empty() : tensor<2x8x8xf32>
  %6 = linalg.fill ins(%cst : f32) outs(%5 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %7 = linalg.batch_matmul ins(%collapsed, %collapsed_3 : tensor<2x8x4xf32>, tensor<2x4x8xf32>) outs(%6 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %expanded = tensor.expand_shape %7 [[0, 1], [2], [3]] output_shape [1, 2, 8, 8] : tensor<2x8x8xf32> into tensor<1x2x8x8xf32>
  %8 = tensor.empty() : tensor<1x2x8x8xf32>
  %9 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded : tensor<1x2x8x8xf32>) outs(%8 : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.mulf %in, %cst_2 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x8x8xf32>
  %10 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%9, %arg3 : tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>) outs(%8 : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %in_8: f32, %out: f32):
    %28 = arith.addf %in, %in_8 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x8x8xf32>
  %11 = linalg.generic {indexing_maps = [#map, #map2, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%10, %cst_1 : tensor<1x2x8x8xf32>, tensor<f32>) outs(%8 : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %in_8: f32, %out: f32):
    %28 = arith.cmpf ogt, %in, %in_8 : f32
    %29 = arith.select %28, %in, %in_8 : f32
    linalg.yield %29 : f32
  } -> tensor<1x2x8x8xf32>
  %12 = tensor.empty() : tensor<1x2x8xi64>
  %13 = linalg.fill ins(%c0_i64 : i64) outs(%12 : tensor<1x2x8xi64>) -> tensor<1x2x8xi64>
  %14 = tensor.empty() : tensor<1x2x8xf32>
  %15 = linalg.fill ins(%cst_0 : f32) outs(%14 : tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
  %16:2 = linalg.generic {indexing_maps = [#map, #map3, #map3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%11 : tensor<1x2x8x8xf32>) outs(%15, %13 : tensor<1x2x8xf32>, tensor<1x2x8xi64>) {
  ^bb0(%in: f32, %out: f32, %out_8: i64):
    %28 = linalg.index 3 : index
    %29 = arith.index_cast %28 : index to i64
    %30 = arith.maximumf %in, %out : f32
    %31 = arith.cmpf ogt, %in, %out : f32
    %32 = arith.select %31, %29, %out_8 : i64
    linalg.yield %30, %32 : f32, i64
  } -> (tensor<1x2x8xf32>, tensor<1x2x8xi64>)
  %expanded_4 = tensor.expand_shape %16#0 [[0], [1], [2, 3]] output_shape [1, 2, 8, 1] : tensor<1x2x8xf32> into tensor<1x2x8x1xf32>
  %17 = linalg.generic {indexing_maps = [#map, #map4, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%11, %expanded_4 : tensor<1x2x8x8xf32>, tensor<1x2x8x1xf32>) outs(%8 : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %in_8: f32, %out: f32):
    %28 = arith.subf %in, %in_8 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x8x8xf32>
  %18 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%17 : tensor<1x2x8x8xf32>) outs(%8 : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = math.exp %in : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x8x8xf32>
  %19 = tensor.empty() : tensor<1x2x8x1xf32>
  %20 = linalg.fill ins(%cst : f32) outs(%19 : tensor<1x2x8x1xf32>) -> tensor<1x2x8x1xf32>
  %21 = linalg.generic {indexing_maps = [#map, #map4], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%18 : tensor<1x2x8x8xf32>) outs(%20 : tensor<1x2x8x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.addf %in, %out : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x8x1xf32>
  %22 = linalg.generic {indexing_maps = [#map, #map4, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%18, %21 : tensor<1x2x8x8xf32>, tensor<1x2x8x1xf32>) outs(%8 : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %in_8: f32, %out: f32):
    %28 = arith.divf %in, %in_8 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x8x8xf32>
  %collapsed_5 = tensor.collapse_shape %22 [[0, 1], [2], [3]] : tensor<1x2x8x8xf32> into tensor<2x8x8xf32>
  %collapsed_6 = tensor.collapse_shape %arg2 [[0, 1], [2], [3]] : tensor<1x2x8x4xf32> into tensor<2x8x4xf32>
  %23 = tensor.empty() : tensor<2x8x4xf32>
  %24 = linalg.fill ins(%cst : f32) outs(%23 : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  // expected-remark @below {{fused attention (scale 0.5, with a mask)}}
  %25 = linalg.batch_matmul ins(%collapsed_5, %collapsed_6 : tensor<2x8x8xf32>, tensor<2x8x4xf32>) outs(%24 : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %expanded_7 = tensor.expand_shape %25 [[0, 1], [2], [3]] output_shape [1, 2, 8, 4] : tensor<2x8x4xf32> into tensor<1x2x8x4xf32>
  return %expanded_7 : tensor<1x2x8x4xf32>
}

// CHECK-LABEL: func.func @clamped(
// CHECK: arith.addf
// CHECK: arith.cmpf ogt
// CHECK-NEXT: arith.select
// CHECK: %[[MASK:.*]] = tensor.collapse_shape {{.*}} into tensor<2x8x8xf32>
// CHECK: iree_linalg_ext.attention {{.*}}, %[[MASK]] :
// CHECK-NOT: linalg.batch_matmul
// CHECK: return

// -----

// A second view inside the first and back (Swin's window mask, added to a
// (B, nW, H, N, N) view): one view; the mask replayed through both.
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d0, 0, d2, d3)>
#map2 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#map4 = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
#map5 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
#map6 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>
func.func @viewed_twice(%arg0: tensor<2x8x4xf32>, %arg1: tensor<2x8x4xf32>, %arg2: tensor<2x8x4xf32>, %arg3: tensor<1x1x8x8xf32>) -> tensor<2x8x4xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %c0_i64 = arith.constant 0 : i64
  %cst_0 = arith.constant 0xFF800000 : f32
  %cst_1 = arith.constant 5.000000e-01 : f32
  %4 = tensor.empty() : tensor<2x4x8xf32>
  %transposed = linalg.transpose ins(%arg1 : tensor<2x8x4xf32>) outs(%4 : tensor<2x4x8xf32>) permutation = [0, 2, 1]
  %5 = tensor.empty() : tensor<2x8x8xf32>
  %6 = linalg.fill ins(%cst : f32) outs(%5 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %7 = linalg.batch_matmul ins(%arg0, %transposed : tensor<2x8x4xf32>, tensor<2x4x8xf32>) outs(%6 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %expanded = tensor.expand_shape %7 [[0, 1], [2], [3]] output_shape [1, 2, 8, 8] : tensor<2x8x8xf32> into tensor<1x2x8x8xf32>
  %8 = tensor.empty() : tensor<1x2x8x8xf32>
  %9 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded : tensor<1x2x8x8xf32>) outs(%8 : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %27 = arith.mulf %in, %cst_1 : f32
    linalg.yield %27 : f32
  } -> tensor<1x2x8x8xf32>
  %inner = tensor.expand_shape %9 [[0, 1], [2], [3], [4]] output_shape [1, 1, 2, 8, 8] : tensor<1x2x8x8xf32> into tensor<1x1x2x8x8xf32>
  %e5 = tensor.empty() : tensor<1x1x2x8x8xf32>
  %masked = linalg.generic {indexing_maps = [#map5, #map6, #map5], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%inner, %arg3 : tensor<1x1x2x8x8xf32>, tensor<1x1x8x8xf32>) outs(%e5 : tensor<1x1x2x8x8xf32>) {
  ^bb0(%in: f32, %in_3: f32, %out: f32):
    %27 = arith.addf %in, %in_3 : f32
    linalg.yield %27 : f32
  } -> tensor<1x1x2x8x8xf32>
  %10 = tensor.collapse_shape %masked [[0, 1], [2], [3], [4]] : tensor<1x1x2x8x8xf32> into tensor<1x2x8x8xf32>
  %collapsed = tensor.collapse_shape %10 [[0, 1], [2], [3]] : tensor<1x2x8x8xf32> into tensor<2x8x8xf32>
  %11 = tensor.empty() : tensor<2x8xi64>
  %12 = linalg.fill ins(%c0_i64 : i64) outs(%11 : tensor<2x8xi64>) -> tensor<2x8xi64>
  %13 = tensor.empty() : tensor<2x8xf32>
  %14 = linalg.fill ins(%cst_0 : f32) outs(%13 : tensor<2x8xf32>) -> tensor<2x8xf32>
  %15:2 = linalg.generic {indexing_maps = [#map2, #map3, #map3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%collapsed : tensor<2x8x8xf32>) outs(%14, %12 : tensor<2x8xf32>, tensor<2x8xi64>) {
  ^bb0(%in: f32, %out: f32, %out_3: i64):
    %27 = linalg.index 2 : index
    %28 = arith.index_cast %27 : index to i64
    %29 = arith.maximumf %in, %out : f32
    %30 = arith.cmpf ogt, %in, %out : f32
    %31 = arith.select %30, %28, %out_3 : i64
    linalg.yield %29, %31 : f32, i64
  } -> (tensor<2x8xf32>, tensor<2x8xi64>)
  %expanded_2 = tensor.expand_shape %15#0 [[0], [1, 2]] output_shape [2, 8, 1] : tensor<2x8xf32> into tensor<2x8x1xf32>
  %16 = linalg.generic {indexing_maps = [#map2, #map4, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%collapsed, %expanded_2 : tensor<2x8x8xf32>, tensor<2x8x1xf32>) outs(%5 : tensor<2x8x8xf32>) {
  ^bb0(%in: f32, %in_3: f32, %out: f32):
    %27 = arith.subf %in, %in_3 : f32
    linalg.yield %27 : f32
  } -> tensor<2x8x8xf32>
  %17 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%16 : tensor<2x8x8xf32>) outs(%5 : tensor<2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %27 = math.exp %in : f32
    linalg.yield %27 : f32
  } -> tensor<2x8x8xf32>
  %18 = tensor.empty() : tensor<2x8x1xf32>
  %19 = linalg.fill ins(%cst : f32) outs(%18 : tensor<2x8x1xf32>) -> tensor<2x8x1xf32>
  %20 = linalg.generic {indexing_maps = [#map2, #map4], iterator_types = ["parallel", "parallel", "reduction"]} ins(%17 : tensor<2x8x8xf32>) outs(%19 : tensor<2x8x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %27 = arith.addf %in, %out : f32
    linalg.yield %27 : f32
  } -> tensor<2x8x1xf32>
  %21 = linalg.generic {indexing_maps = [#map2, #map4, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%17, %20 : tensor<2x8x8xf32>, tensor<2x8x1xf32>) outs(%5 : tensor<2x8x8xf32>) {
  ^bb0(%in: f32, %in_3: f32, %out: f32):
    %27 = arith.divf %in, %in_3 : f32
    linalg.yield %27 : f32
  } -> tensor<2x8x8xf32>
  %22 = tensor.empty() : tensor<2x8x4xf32>
  %23 = linalg.fill ins(%cst : f32) outs(%22 : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  // expected-remark @below {{fused attention (scale 0.5, with a mask)}}
  %24 = linalg.batch_matmul ins(%21, %arg2 : tensor<2x8x8xf32>, tensor<2x8x4xf32>) outs(%23 : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %24 : tensor<2x8x4xf32>
}

// CHECK-LABEL: func.func @viewed_twice(
// CHECK: %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<2x8x8xf32>)
// CHECK: tensor.expand_shape %[[Z]] {{.*}} into tensor<1x2x8x8xf32>
// CHECK: arith.mulf
// CHECK: tensor.expand_shape {{.*}} into tensor<1x1x2x8x8xf32>
// CHECK: arith.addf
// CHECK: tensor.collapse_shape {{.*}} into tensor<1x2x8x8xf32>
// CHECK: %[[MASK:.*]] = tensor.collapse_shape {{.*}} into tensor<2x8x8xf32>
// CHECK: iree_linalg_ext.attention {{.*}} ins(%arg0, %transposed, %arg2, %{{.*}}, %[[MASK]] :
// CHECK-NOT: linalg.batch_matmul
// CHECK: return
