#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#map2 = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>
#map3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#map4 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map5 = affine_map<(d0, d1, d2) -> (d0, d1)>
#map6 = affine_map<(d0, d1) -> (d0, d1)>
#map7 = affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>
module {
  util.func public @main$async(%arg0: !hal.buffer_view, %arg1: !hal.buffer_view, %arg2: !hal.buffer_view, %arg3: !hal.fence, %arg4: !hal.fence) -> !hal.buffer_view attributes {inlining_policy = #util.inline.never, iree.abi.model = "coarse-fences", iree.abi.stub} {
    %cst = arith.constant 0.000000e+00 : f16
    %cst_0 = arith.constant 0xFC00 : f16
    %cst_1 = arith.constant 1.250000e-01 : f32
    %0 = hal.tensor.import wait(%arg3) => %arg0 : !hal.buffer_view -> tensor<1x4x256x64xf16>
    %1 = hal.tensor.import wait(%arg3) => %arg1 : !hal.buffer_view -> tensor<1x4x256x64xf16>
    %2 = hal.tensor.import wait(%arg3) => %arg2 : !hal.buffer_view -> tensor<1x4x256x64xf16>
    %collapsed = tensor.collapse_shape %0 [[0, 1], [2], [3]] : tensor<1x4x256x64xf16> into tensor<4x256x64xf16>
    %collapsed_2 = tensor.collapse_shape %1 [[0, 1], [2], [3]] : tensor<1x4x256x64xf16> into tensor<4x256x64xf16>
    %collapsed_3 = tensor.collapse_shape %2 [[0, 1], [2], [3]] : tensor<1x4x256x64xf16> into tensor<4x256x64xf16>
    %3 = tensor.empty() : tensor<4x256x64xf16>
    %cst_4 = arith.constant 1.44269502 : f32
    %4 = arith.mulf %cst_1, %cst_4 : f32
    %c256 = arith.constant 256 : index
    %c0 = arith.constant 0 : index
    %c64 = arith.constant 64 : index
    %5 = scf.for %arg5 = %c0 to %c256 step %c64 iter_args(%arg6 = %3) -> (tensor<4x256x64xf16>) {
      %c256_5 = arith.constant 256 : index
      %8 = arith.subi %c256_5, %arg5 : index
      %c64_6 = arith.constant 64 : index
      %9 = arith.minsi %8, %c64_6 : index
      %extracted_slice = tensor.extract_slice %collapsed[0, %arg5, 0] [4, %9, 64] [1, 1, 1] : tensor<4x256x64xf16> to tensor<4x?x64xf16>
      %cst_7 = arith.constant -3.40282347E+38 : f32
      %10 = tensor.empty(%9) : tensor<4x?xf32>
      %11 = linalg.fill ins(%cst_7 : f32) outs(%10 : tensor<4x?xf32>) -> tensor<4x?xf32>
      %cst_8 = arith.constant 0.000000e+00 : f32
      %12 = tensor.empty(%9) : tensor<4x?xf32>
      %13 = linalg.fill ins(%cst_8 : f32) outs(%12 : tensor<4x?xf32>) -> tensor<4x?xf32>
      %cst_9 = arith.constant 0.000000e+00 : f32
      %14 = tensor.empty(%9) : tensor<4x?x64xf32>
      %15 = linalg.fill ins(%cst_9 : f32) outs(%14 : tensor<4x?x64xf32>) -> tensor<4x?x64xf32>
      %c256_10 = arith.constant 256 : index
      %c0_11 = arith.constant 0 : index
      %c64_12 = arith.constant 64 : index
      %16:3 = scf.for %arg7 = %c0_11 to %c256_10 step %c64_12 iter_args(%arg8 = %11, %arg9 = %13, %arg10 = %15) -> (tensor<4x?xf32>, tensor<4x?xf32>, tensor<4x?x64xf32>) {
        %c256_13 = arith.constant 256 : index
        %19 = arith.subi %c256_13, %arg7 : index
        %c64_14 = arith.constant 64 : index
        %20 = arith.minsi %19, %c64_14 : index
        %extracted_slice_15 = tensor.extract_slice %collapsed_2[0, %arg7, 0] [4, %20, 64] [1, 1, 1] : tensor<4x256x64xf16> to tensor<4x?x64xf16>
        %extracted_slice_16 = tensor.extract_slice %collapsed_3[0, %arg7, 0] [4, %20, 64] [1, 1, 1] : tensor<4x256x64xf16> to tensor<4x?x64xf16>
        %21 = tensor.empty(%9, %20) : tensor<1x4x?x?xf16>
        %22 = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%21 : tensor<1x4x?x?xf16>) {
        ^bb0(%out: f16):
          %40 = linalg.index 2 : index
          %41 = arith.addi %40, %arg5 : index
          %42 = linalg.index 3 : index
          %43 = arith.addi %42, %arg7 : index
          %44 = arith.cmpi sge, %41, %43 : index
          %45 = arith.select %44, %cst, %cst_0 : f16
          linalg.yield %45 : f16
        } -> tensor<1x4x?x?xf16>
        %collapsed_17 = tensor.collapse_shape %22 [[0, 1], [2], [3]] : tensor<1x4x?x?xf16> into tensor<4x?x?xf16>
        %cst_18 = arith.constant 0.000000e+00 : f32
        %23 = tensor.empty(%9, %20) : tensor<4x?x?xf32>
        %24 = linalg.fill ins(%cst_18 : f32) outs(%23 : tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
        %25 = linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%extracted_slice, %extracted_slice_15 : tensor<4x?x64xf16>, tensor<4x?x64xf16>) outs(%24 : tensor<4x?x?xf32>) {
        ^bb0(%in: f16, %in_20: f16, %out: f32):
          %40 = arith.extf %in : f16 to f32
          %41 = arith.extf %in_20 : f16 to f32
          %42 = arith.mulf %40, %41 : f32
          %43 = arith.addf %out, %42 : f32
          linalg.yield %43 : f32
        } -> tensor<4x?x?xf32>
        %26 = tensor.empty(%9, %20) : tensor<4x?x?xf32>
        %27 = linalg.generic {indexing_maps = [#map4, #map4, #map4], iterator_types = ["parallel", "parallel", "parallel"]} ins(%25, %collapsed_17 : tensor<4x?x?xf32>, tensor<4x?x?xf16>) outs(%26 : tensor<4x?x?xf32>) {
        ^bb0(%in: f32, %in_20: f16, %out: f32):
          %40 = arith.mulf %in, %4 : f32
          %41 = arith.extf %in_20 : f16 to f32
          %cst_21 = arith.constant 1.44269502 : f32
          %42 = arith.mulf %41, %cst_21 : f32
          %43 = arith.addf %40, %42 : f32
          linalg.yield %43 : f32
        } -> tensor<4x?x?xf32>
        %cst_19 = arith.constant 0xFF800000 : f32
        %28 = tensor.empty(%9) : tensor<4x?xf32>
        %29 = linalg.fill ins(%cst_19 : f32) outs(%28 : tensor<4x?xf32>) -> tensor<4x?xf32>
        %30 = linalg.generic {indexing_maps = [#map4, #map5], iterator_types = ["parallel", "parallel", "reduction"]} ins(%27 : tensor<4x?x?xf32>) outs(%29 : tensor<4x?xf32>) {
        ^bb0(%in: f32, %out: f32):
          %40 = arith.maximumf %in, %out : f32
          linalg.yield %40 : f32
        } -> tensor<4x?xf32>
        %31 = tensor.empty(%9) : tensor<4x?xf32>
        %32 = linalg.generic {indexing_maps = [#map6, #map6, #map6], iterator_types = ["parallel", "parallel"]} ins(%arg8, %30 : tensor<4x?xf32>, tensor<4x?xf32>) outs(%31 : tensor<4x?xf32>) {
        ^bb0(%in: f32, %in_20: f32, %out: f32):
          %40 = arith.maximumf %in, %in_20 : f32
          %41 = arith.subf %in, %40 : f32
          %42 = math.exp2 %41 : f32
          linalg.yield %42 : f32
        } -> tensor<4x?xf32>
        %33 = linalg.generic {indexing_maps = [#map6, #map6], iterator_types = ["parallel", "parallel"]} ins(%30 : tensor<4x?xf32>) outs(%arg8 : tensor<4x?xf32>) {
        ^bb0(%in: f32, %out: f32):
          %40 = arith.maximumf %out, %in : f32
          linalg.yield %40 : f32
        } -> tensor<4x?xf32>
        %34 = tensor.empty(%9, %20) : tensor<4x?x?xf32>
        %35 = linalg.generic {indexing_maps = [#map4, #map5, #map4], iterator_types = ["parallel", "parallel", "parallel"]} ins(%27, %33 : tensor<4x?x?xf32>, tensor<4x?xf32>) outs(%34 : tensor<4x?x?xf32>) {
        ^bb0(%in: f32, %in_20: f32, %out: f32):
          %40 = arith.subf %in, %in_20 : f32
          %41 = math.exp2 %40 : f32
          linalg.yield %41 : f32
        } -> tensor<4x?x?xf32>
        %36 = linalg.generic {indexing_maps = [#map6, #map6], iterator_types = ["parallel", "parallel"]} ins(%32 : tensor<4x?xf32>) outs(%arg9 : tensor<4x?xf32>) {
        ^bb0(%in: f32, %out: f32):
          %40 = arith.mulf %out, %in : f32
          linalg.yield %40 : f32
        } -> tensor<4x?xf32>
        %37 = linalg.generic {indexing_maps = [#map4, #map5], iterator_types = ["parallel", "parallel", "reduction"]} ins(%35 : tensor<4x?x?xf32>) outs(%36 : tensor<4x?xf32>) {
        ^bb0(%in: f32, %out: f32):
          %40 = arith.addf %in, %out : f32
          linalg.yield %40 : f32
        } -> tensor<4x?xf32>
        %38 = linalg.generic {indexing_maps = [#map5, #map4], iterator_types = ["parallel", "parallel", "parallel"]} ins(%32 : tensor<4x?xf32>) outs(%arg10 : tensor<4x?x64xf32>) {
        ^bb0(%in: f32, %out: f32):
          %40 = arith.mulf %out, %in : f32
          linalg.yield %40 : f32
        } -> tensor<4x?x64xf32>
        %39 = linalg.generic {indexing_maps = [#map1, #map7, #map3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%35, %extracted_slice_16 : tensor<4x?x?xf32>, tensor<4x?x64xf16>) outs(%38 : tensor<4x?x64xf32>) {
        ^bb0(%in: f32, %in_20: f16, %out: f32):
          %40 = arith.extf %in_20 : f16 to f32
          %41 = arith.mulf %in, %40 : f32
          %42 = arith.addf %out, %41 : f32
          linalg.yield %42 : f32
        } -> tensor<4x?x64xf32>
        scf.yield %33, %37, %39 : tensor<4x?xf32>, tensor<4x?xf32>, tensor<4x?x64xf32>
      }
      %17 = tensor.empty(%9) : tensor<4x?x64xf16>
      %18 = linalg.generic {indexing_maps = [#map4, #map5, #map4], iterator_types = ["parallel", "parallel", "parallel"]} ins(%16#2, %16#1 : tensor<4x?x64xf32>, tensor<4x?xf32>) outs(%17 : tensor<4x?x64xf16>) {
      ^bb0(%in: f32, %in_13: f32, %out: f16):
        %19 = arith.divf %in, %in_13 : f32
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
