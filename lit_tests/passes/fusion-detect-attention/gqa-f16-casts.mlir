// RUN: fusion-opt %s --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(fusion-detect-attention)' | FileCheck %s

// GQA (K/V heads repeated by repeat_interleave) in fp16 with the casts a model puts
// around softmax: f16 QKᵀ accumulated in f32 and truncated, divided by sqrt(d), upcast
// to f32 for the softmax, truncated back to f16 for P·V. This is the IR IREE's torch
// input pipeline makes of examples-style code (torch.export of
//   k = k.repeat_interleave(2, 1); v = v.repeat_interleave(2, 1)
//   s = (q @ k.transpose(-2, -1)) / math.sqrt(16)
//   softmax(s.float(), -1).to(q.dtype) @ v).
// The repeated K/V and the f16 scale feed the fused op; the casts on the scores go (the
// op accumulates in f32); the final truncation of the output stays.

// CHECK-LABEL: util.func public @main$async
// CHECK: %[[K:.+]] = linalg.generic {{.*}} ins(%{{.+}} : tensor<2x2x10x16xf16>) outs(%{{.+}} : tensor<2x2x2x10x16xf16>)
// CHECK: %[[V:.+]] = linalg.generic {{.*}} ins(%{{.+}} : tensor<2x2x10x16xf16>) outs(%{{.+}} : tensor<2x2x2x10x16xf16>)
// CHECK: %[[SCALE:.+]] = arith.constant 2.500000e-01 : f32
// CHECK: %[[ATT:.+]] = iree_linalg_ext.attention
// CHECK-SAME: ins(%{{.+}}, %{{.+}}, %{{.+}}, %[[SCALE]] : tensor<8x10x16xf16>, tensor<8x16x10xf16>, tensor<8x10x16xf16>, f32)
// CHECK-SAME: outs(%{{.+}} : tensor<8x10x16xf32>)
// CHECK: arith.truncf %{{.+}} : f32 to f16
// CHECK-NOT: linalg.batch_matmul
// CHECK-NOT: math.exp
#map = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>
#map1 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
#map2 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#map5 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>
module {
  util.func public @main$async(%arg0: !hal.buffer_view, %arg1: !hal.buffer_view, %arg2: !hal.buffer_view, %arg3: !hal.fence, %arg4: !hal.fence) -> !hal.buffer_view attributes {inlining_policy = #util.inline.never, iree.abi.model = "coarse-fences", iree.abi.stub} {
    %cst = arith.constant 0.000000e+00 : f32
    %c0_i64 = arith.constant 0 : i64
    %cst_0 = arith.constant 0xFF800000 : f32
    %cst_1 = arith.constant 4.000000e+00 : f16
    %0 = hal.tensor.import wait(%arg3) => %arg0 : !hal.buffer_view -> tensor<2x4x10x16xf16>
    %1 = hal.tensor.import wait(%arg3) => %arg1 : !hal.buffer_view -> tensor<2x2x10x16xf16>
    %2 = hal.tensor.import wait(%arg3) => %arg2 : !hal.buffer_view -> tensor<2x2x10x16xf16>
    %3 = tensor.empty() : tensor<2x2x2x10x16xf16>
    %4 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%1 : tensor<2x2x10x16xf16>) outs(%3 : tensor<2x2x2x10x16xf16>) {
    ^bb0(%in: f16, %out: f16):
      linalg.yield %in : f16
    } -> tensor<2x2x2x10x16xf16>
    %collapsed = tensor.collapse_shape %4 [[0], [1, 2], [3], [4]] : tensor<2x2x2x10x16xf16> into tensor<2x4x10x16xf16>
    %5 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%2 : tensor<2x2x10x16xf16>) outs(%3 : tensor<2x2x2x10x16xf16>) {
    ^bb0(%in: f16, %out: f16):
      linalg.yield %in : f16
    } -> tensor<2x2x2x10x16xf16>
    %6 = tensor.empty() : tensor<2x4x16x10xf16>
    %transposed = linalg.transpose ins(%collapsed : tensor<2x4x10x16xf16>) outs(%6 : tensor<2x4x16x10xf16>) permutation = [0, 1, 3, 2] 
    %collapsed_2 = tensor.collapse_shape %0 [[0, 1], [2], [3]] : tensor<2x4x10x16xf16> into tensor<8x10x16xf16>
    %collapsed_3 = tensor.collapse_shape %transposed [[0, 1], [2], [3]] : tensor<2x4x16x10xf16> into tensor<8x16x10xf16>
    %7 = tensor.empty() : tensor<8x10x10xf32>
    %8 = linalg.fill ins(%cst : f32) outs(%7 : tensor<8x10x10xf32>) -> tensor<8x10x10xf32>
    %9 = linalg.batch_matmul ins(%collapsed_2, %collapsed_3 : tensor<8x10x16xf16>, tensor<8x16x10xf16>) outs(%8 : tensor<8x10x10xf32>) -> tensor<8x10x10xf32>
    %10 = tensor.empty() : tensor<8x10x10xf16>
    %11 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%9 : tensor<8x10x10xf32>) outs(%10 : tensor<8x10x10xf16>) {
    ^bb0(%in: f32, %out: f16):
      %35 = arith.truncf %in : f32 to f16
      linalg.yield %35 : f16
    } -> tensor<8x10x10xf16>
    %expanded = tensor.expand_shape %11 [[0, 1], [2], [3]] output_shape [2, 4, 10, 10] : tensor<8x10x10xf16> into tensor<2x4x10x10xf16>
    %12 = tensor.empty() : tensor<2x4x10x10xf16>
    %13 = linalg.generic {indexing_maps = [#map3, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded : tensor<2x4x10x10xf16>) outs(%12 : tensor<2x4x10x10xf16>) {
    ^bb0(%in: f16, %out: f16):
      %35 = arith.divf %in, %cst_1 : f16
      linalg.yield %35 : f16
    } -> tensor<2x4x10x10xf16>
    %14 = tensor.empty() : tensor<2x4x10x10xf32>
    %15 = linalg.generic {indexing_maps = [#map3, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%13 : tensor<2x4x10x10xf16>) outs(%14 : tensor<2x4x10x10xf32>) {
    ^bb0(%in: f16, %out: f32):
      %35 = arith.extf %in : f16 to f32
      linalg.yield %35 : f32
    } -> tensor<2x4x10x10xf32>
    %16 = tensor.empty() : tensor<2x4x10xi64>
    %17 = linalg.fill ins(%c0_i64 : i64) outs(%16 : tensor<2x4x10xi64>) -> tensor<2x4x10xi64>
    %18 = tensor.empty() : tensor<2x4x10xf32>
    %19 = linalg.fill ins(%cst_0 : f32) outs(%18 : tensor<2x4x10xf32>) -> tensor<2x4x10xf32>
    %20:2 = linalg.generic {indexing_maps = [#map3, #map4, #map4], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%15 : tensor<2x4x10x10xf32>) outs(%19, %17 : tensor<2x4x10xf32>, tensor<2x4x10xi64>) {
    ^bb0(%in: f32, %out: f32, %out_8: i64):
      %35 = linalg.index 3 : index
      %36 = arith.index_cast %35 : index to i64
      %37 = arith.maximumf %in, %out : f32
      %38 = arith.cmpf ogt, %in, %out : f32
      %39 = arith.select %38, %36, %out_8 : i64
      linalg.yield %37, %39 : f32, i64
    } -> (tensor<2x4x10xf32>, tensor<2x4x10xi64>)
    %expanded_4 = tensor.expand_shape %20#0 [[0], [1], [2, 3]] output_shape [2, 4, 10, 1] : tensor<2x4x10xf32> into tensor<2x4x10x1xf32>
    %21 = linalg.generic {indexing_maps = [#map3, #map5, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%15, %expanded_4 : tensor<2x4x10x10xf32>, tensor<2x4x10x1xf32>) outs(%14 : tensor<2x4x10x10xf32>) {
    ^bb0(%in: f32, %in_8: f32, %out: f32):
      %35 = arith.subf %in, %in_8 : f32
      linalg.yield %35 : f32
    } -> tensor<2x4x10x10xf32>
    %22 = linalg.generic {indexing_maps = [#map3, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%21 : tensor<2x4x10x10xf32>) outs(%14 : tensor<2x4x10x10xf32>) {
    ^bb0(%in: f32, %out: f32):
      %35 = math.exp %in : f32
      linalg.yield %35 : f32
    } -> tensor<2x4x10x10xf32>
    %23 = tensor.empty() : tensor<2x4x10x1xf32>
    %24 = linalg.fill ins(%cst : f32) outs(%23 : tensor<2x4x10x1xf32>) -> tensor<2x4x10x1xf32>
    %25 = linalg.generic {indexing_maps = [#map3, #map5], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%22 : tensor<2x4x10x10xf32>) outs(%24 : tensor<2x4x10x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %35 = arith.addf %in, %out : f32
      linalg.yield %35 : f32
    } -> tensor<2x4x10x1xf32>
    %26 = linalg.generic {indexing_maps = [#map3, #map5, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%22, %25 : tensor<2x4x10x10xf32>, tensor<2x4x10x1xf32>) outs(%14 : tensor<2x4x10x10xf32>) {
    ^bb0(%in: f32, %in_8: f32, %out: f32):
      %35 = arith.divf %in, %in_8 : f32
      linalg.yield %35 : f32
    } -> tensor<2x4x10x10xf32>
    %27 = linalg.generic {indexing_maps = [#map3, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%26 : tensor<2x4x10x10xf32>) outs(%12 : tensor<2x4x10x10xf16>) {
    ^bb0(%in: f32, %out: f16):
      %35 = arith.truncf %in : f32 to f16
      linalg.yield %35 : f16
    } -> tensor<2x4x10x10xf16>
    %collapsed_5 = tensor.collapse_shape %27 [[0, 1], [2], [3]] : tensor<2x4x10x10xf16> into tensor<8x10x10xf16>
    %collapsed_6 = tensor.collapse_shape %5 [[0, 1, 2], [3], [4]] : tensor<2x2x2x10x16xf16> into tensor<8x10x16xf16>
    %28 = tensor.empty() : tensor<8x10x16xf32>
    %29 = linalg.fill ins(%cst : f32) outs(%28 : tensor<8x10x16xf32>) -> tensor<8x10x16xf32>
    // expected-remark @below {{fused attention (scale 0.25, without a mask)}}
    %30 = linalg.batch_matmul ins(%collapsed_5, %collapsed_6 : tensor<8x10x10xf16>, tensor<8x10x16xf16>) outs(%29 : tensor<8x10x16xf32>) -> tensor<8x10x16xf32>
    %31 = tensor.empty() : tensor<8x10x16xf16>
    %32 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%30 : tensor<8x10x16xf32>) outs(%31 : tensor<8x10x16xf16>) {
    ^bb0(%in: f32, %out: f16):
      %35 = arith.truncf %in : f32 to f16
      linalg.yield %35 : f16
    } -> tensor<8x10x16xf16>
    %expanded_7 = tensor.expand_shape %32 [[0, 1], [2], [3]] output_shape [2, 4, 10, 16] : tensor<8x10x16xf16> into tensor<2x4x10x16xf16>
    %33 = hal.tensor.barrier join(%expanded_7 : tensor<2x4x10x16xf16>) => %arg4 : !hal.fence
    %34 = hal.tensor.export %33 : tensor<2x4x10x16xf16> -> !hal.buffer_view
    util.return %34 : !hal.buffer_view
  }
  util.func public @main(%arg0: !hal.buffer_view, %arg1: !hal.buffer_view, %arg2: !hal.buffer_view) -> !hal.buffer_view attributes {iree.abi.stub, iree.reflection = {fusion.inputs = "tensor<2x4x10x16xf16>;tensor<2x2x10x16xf16>;tensor<2x2x10x16xf16>", fusion.outputs = "tensor<2x4x10x16xf16>"}} {
    %0 = util.null : !hal.fence
    %c-1_i32 = arith.constant -1 : i32
    %c0 = arith.constant 0 : index
    %device_0 = hal.devices.get %c0 : !hal.device
    %fence = hal.fence.create device(%device_0 : !hal.device) flags("None") : !hal.fence
    %1 = util.call @main$async(%arg0, %arg1, %arg2, %0, %fence) : (!hal.buffer_view, !hal.buffer_view, !hal.buffer_view, !hal.fence, !hal.fence) -> !hal.buffer_view
    %status = hal.fence.await until([%fence]) timeout_millis(%c-1_i32) flags("None") : i32
    util.return %1 : !hal.buffer_view
  }
}
