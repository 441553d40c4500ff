#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>
#map2 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#map3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map4 = affine_map<(d0, d1, d2) -> (d0, d1)>
#map5 = affine_map<(d0, d1) -> (d0, d1)>
#map6 = affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>
module {
  util.func public @main$async(%arg0: !hal.buffer_view, %arg1: !hal.buffer_view, %arg2: !hal.buffer_view, %arg3: !hal.fence, %arg4: !hal.fence) -> !hal.buffer_view attributes {inlining_policy = #util.inline.never, iree.abi.model = "coarse-fences", iree.abi.stub} {
    %cst = arith.constant 1.250000e-01 : f32
    %0 = hal.tensor.import wait(%arg3) => %arg0 : !hal.buffer_view -> tensor<1x4x256x64xf16>
    %1 = hal.tensor.import wait(%arg3) => %arg1 : !hal.buffer_view -> tensor<1x4x256x64xf16>
    %2 = hal.tensor.import wait(%arg3) => %arg2 : !hal.buffer_view -> tensor<1x4x256x64xf16>
    %collapsed = tensor.collapse_shape %0 [[0, 1], [2], [3]] : tensor<1x4x256x64xf16> into tensor<4x256x64xf16>
    %collapsed_0 = tensor.collapse_shape %1 [[0, 1], [2], [3]] : tensor<1x4x256x64xf16> into tensor<4x256x64xf16>
    %collapsed_1 = tensor.collapse_shape %2 [[0, 1], [2], [3]] : tensor<1x4x256x64xf16> into tensor<4x256x64xf16>
    %3 = tensor.empty() : tensor<4x256x64xf16>
    %cst_2 = arith.constant 1.44269502 : f32
    %4 = arith.mulf %cst, %cst_2 : f32
    %c256 = arith.constant 256 : index
    %c0 = arith.constant 0 : index
    %c64 = arith.constant 64 : index
    %5 = scf.for %arg5 = %c0 to %c256 step %c64 iter_args(%arg6 = %3) -> (tensor<4x256x64xf16>) {
      %c256_3 = arith.constant 256 : index
      %8 = arith.subi %c256_3, %arg5 : index
      %c64_4 = arith.constant 64 : index
      %9 = arith.minsi %8, %c64_4 : index
      %extracted_slice = tensor.extract_slice %collapsed[0, %arg5, 0] [4, %9, 64] [1, 1, 1] : tensor<4x256x64xf16> to tensor<4x?x64xf16>
      %cst_5 = arith.constant -3.40282347E+38 : f32
      %10 = tensor.empty(%9) : tensor<4x?xf32>
      %11 = linalg.fill ins(%cst_5 : f32) outs(%10 : tensor<4x?xf32>) -> tensor<4x?xf32>
      %cst_6 = arith.constant 0.000000e+00 : f32
      %12 = tensor.empty(%9) : tensor<4x?xf32>
      %13 = linalg.fill ins(%cst_6 : f32) outs(%12 : tensor<4x?xf32>) -> tensor<4x?xf32>
      %cst_7 = arith.constant 0.000000e+00 : f32
      %14 = tensor.empty(%9) : tensor<4x?x64xf32>
      %15 = linalg.fill ins(%cst_7 : f32) outs(%14 : tensor<4x?x64xf32>) -> tensor<4x?x64xf32>
      %c256_8 = arith.constant 256 : index
      %c0_9 = arith.constant 0 : index
      %c64_10 = arith.constant 64 : index
      %16:3 = scf.for %arg7 = %c0_9 to %c256_8 step %c64_10 iter_args(%arg8 = %11, %arg9 = %13, %arg10 = %15) -> (tensor<4x?xf32>, tensor<4x?xf32>, tensor<4x?x64xf32>) {
        %c256_11 = arith.constant 256 : index
        %19 = arith.subi %c256_11, %arg7 : index
        %c64_12 = arith.constant 64 : index
        %20 = arith.minsi %19, %c64_12 : index
        %extracted_slice_13 = tensor.extract_slice %collapsed_0[0, %arg7, 0] [4, %20, 64] [1, 1, 1] : tensor<4x256x64xf16> to tensor<4x?x64xf16>
        %extracted_slice_14 = tensor.extract_slice %collapsed_1[0, %arg7, 0] [4, %20, 64] [1, 1, 1] : tensor<4x256x64xf16> to tensor<4x?x64xf16>
        %cst_15 = arith.constant 0.000000e+00 : f32
        %21 = tensor.empty(%9, %20) : tensor<4x?x?xf32>
        %22 = linalg.fill ins(%cst_15 : f32) outs(%21 : tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
        %23 = linalg.generic {indexing_maps = [#map, #map1, #map2], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%extracted_slice, %extracted_slice_13 : tensor<4x?x64xf16>, tensor<4x?x64xf16>) outs(%22 : tensor<4x?x?xf32>) {
        ^bb0(%in: f16, %in_17: f16, %out: f32):
          %38 = arith.extf %in : f16 to f32
          %39 = arith.extf %in_17 : f16 to f32
          %40 = arith.mulf %38, %39 : f32
          %41 = arith.addf %out, %40 : f32
          linalg.yield %41 : f32
        } -> tensor<4x?x?xf32>
        %24 = tensor.empty(%9, %20) : tensor<4x?x?xf32>
        %25 = linalg.generic {indexing_maps = [#map3, #map3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%23 : tensor<4x?x?xf32>) outs(%24 : tensor<4x?x?xf32>) {
        ^bb0(%in: f32, %out: f32):
          %38 = arith.mulf %in, %4 : f32
          linalg.yield %38 : f32
        } -> tensor<4x?x?xf32>
        %cst_16 = arith.constant 0xFF800000 : f32
        %26 = tensor.empty(%9) : tensor<4x?xf32>
        %27 = linalg.fill ins(%cst_16 : f32) outs(%26 : tensor<4x?xf32>) -> tensor<4x?xf32>
        %28 = linalg.generic {indexing_maps = [#map3, #map4], iterator_types = ["parallel", "parallel", "reduction"]} ins(%25 : tensor<4x?x?xf32>) outs(%27 : tensor<4x?xf32>) {
        ^bb0(%in: f32, %out: f32):
          %38 = arith.maximumf %in, %out : f32
          linalg.yield %38 : f32
        } -> tensor<4x?xf32>
        %29 = tensor.empty(%9) : tensor<4x?xf32>
        %30 = linalg.generic {indexing_maps = [#map5, #map5, #map5], iterator_types = ["parallel", "parallel"]} ins(%arg8, %28 : tensor<4x?xf32>, tensor<4x?xf32>) outs(%29 : tensor<4x?xf32>) {
        ^bb0(%in: f32, %in_17: f32, %out: f32):
          %38 = arith.maximumf %in, %in_17 : f32
          %39 = arith.subf %in, %38 : f32
          %40 = math.exp2 %39 : f32
          linalg.yield %40 : f32
        } -> tensor<4x?xf32>
        %31 = linalg.generic {indexing_maps = [#map5, #map5], iterator_types = ["parallel", "parallel"]} ins(%28 : tensor<4x?xf32>) outs(%arg8 : tensor<4x?xf32>) {
        ^bb0(%in: f32, %out: f32):
          %38 = arith.maximumf %out, %in : f32
          linalg.yield %38 : f32
        } -> tensor<4x?xf32>
        %32 = tensor.empty(%9, %20) : tensor<4x?x?xf32>
        %33 = linalg.generic {indexing_maps = [#map3, #map4, #map3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%25, %31 : tensor<4x?x?xf32>, tensor<4x?xf32>) outs(%32 : tensor<4x?x?xf32>) {
        ^bb0(%in: f32, %in_17: f32, %out: f32):
          %38 = arith.subf %in, %in_17 : f32
          %39 = math.exp2 %38 : f32
          linalg.yield %39 : f32
        } -> tensor<4x?x?xf32>
        %34 = linalg.generic {indexing_maps = [#map5, #map5], iterator_types = ["parallel", "parallel"]} ins(%30 : tensor<4x?xf32>) outs(%arg9 : tensor<4x?xf32>) {
        ^bb0(%in: f32, %out: f32):
          %38 = arith.mulf %out, %in : f32
          linalg.yield %38 : f32
        } -> tensor<4x?xf32>
        %35 = linalg.generic {indexing_maps = [#map3, #map4], iterator_types = ["parallel", "parallel", "reduction"]} ins(%33 : tensor<4x?x?xf32>) outs(%34 : tensor<4x?xf32>) {
        ^bb0(%in: f32, %out: f32):
          %38 = arith.addf %in, %out : f32
          linalg.yield %38 : f32
        } -> tensor<4x?xf32>
        %36 = linalg.generic {indexing_maps = [#map4, #map3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%30 : tensor<4x?xf32>) outs(%arg10 : tensor<4x?x64xf32>) {
        ^bb0(%in: f32, %out: f32):
          %38 = arith.mulf %out, %in : f32
          linalg.yield %38 : f32
        } -> tensor<4x?x64xf32>
        %37 = linalg.generic {indexing_maps = [#map, #map6, #map2], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%33, %extracted_slice_14 : tensor<4x?x?xf32>, tensor<4x?x64xf16>) outs(%36 : tensor<4x?x64xf32>) {
        ^bb0(%in: f32, %in_17: f16, %out: f32):
          %38 = arith.extf %in_17 : f16 to f32
          %39 = arith.mulf %in, %38 : f32
          %40 = arith.addf %out, %39 : f32
          linalg.yield %40 : f32
        } -> tensor<4x?x64xf32>
        scf.yield %31, %35, %37 : tensor<4x?xf32>, tensor<4x?xf32>, tensor<4x?x64xf32>
      }
      %17 = tensor.empty(%9) : tensor<4x?x64xf16>
      %18 = linalg.generic {indexing_maps = [#map3, #map4, #map3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%16#2, %16#1 : tensor<4x?x64xf32>, tensor<4x?xf32>) outs(%17 : tensor<4x?x64xf16>) {
      ^bb0(%in: f32, %in_11: f32, %out: f16):
        %19 = arith.divf %in, %in_11 : f32
        %20 = arith.truncf %19 : f32 to f16
        linalg.yield %20 : f16
      } -> tensor<4x?x64xf16>
      %c1 = arith.constant 1 : index
      %dim = tensor.dim %18, %c1 : tensor<4x?x64xf16>
      %inserted_slice = tensor.insert_slice %18 into %arg6[0, %arg5, 0] [4, %dim, 64] [1, 1, 1] : tensor<4x?x64xf16> into tensor<4x256x64xf16>
      scf.yield %inserted_slice : tensor<4x256x64xf16>
    } {fusion.online_softmax}
    %expanded = tensor.expand_shape %5 [[0, 1], [2], [3]] output_shape [1, 4, 256, 64] : tensor<4x256x64xf16> into tensor<1x4x256x64xf16>
    %6 = hal.tensor.barrier join(%expanded : tensor<1x4x256x64xf16>) => %arg4 : !hal.fence
    %7 = hal.tensor.export %6 : tensor<1x4x256x64xf16> -> !hal.buffer_view
    util.return %7 : !hal.buffer_view
  }
  util.func public @main(%arg0: !hal.buffer_view, %arg1: !hal.buffer_view, %arg2: !hal.buffer_view) -> !hal.buffer_view attributes {iree.abi.stub, iree.reflection = {fusion.inputs = "tensor<1x4x256x64xf16>;tensor<1x4x256x64xf16>;tensor<1x4x256x64xf16>", fusion.outputs = "tensor<1x4x256x64xf16>"}} {
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
