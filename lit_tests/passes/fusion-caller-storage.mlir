// RUN: fusion-opt %s --split-input-file --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(fusion-caller-storage)' | FileCheck %s

// Two results: each computed into a storage argument that follows the inputs, with its
// transient memory from the argument after them (before the fences in the $async body,
// last in the blocking one, which passes them on).
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d0)>
util.func public @main$async(%arg0: !hal.buffer_view, %arg1: !hal.fence, %arg2: !hal.fence) -> (!hal.buffer_view, !hal.buffer_view) attributes {inlining_policy = #util.inline.never, iree.abi.model = "coarse-fences", iree.abi.stub} {
  %cst = arith.constant 0.000000e+00 : f32
  %0 = hal.tensor.import wait(%arg1) => %arg0 : !hal.buffer_view -> tensor<2x8xf32>
  %1 = tensor.empty() : tensor<2xf32>
  %2 = linalg.fill ins(%cst : f32) outs(%1 : tensor<2xf32>) -> tensor<2xf32>
  %3 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "reduction"]} ins(%0 : tensor<2x8xf32>) outs(%2 : tensor<2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<2xf32>
  %4:2 = hal.tensor.barrier join(%0, %3 : tensor<2x8xf32>, tensor<2xf32>) => %arg2 : !hal.fence
  %5 = hal.tensor.export %4#0 : tensor<2x8xf32> -> !hal.buffer_view
  %6 = hal.tensor.export %4#1 : tensor<2xf32> -> !hal.buffer_view
  util.return %5, %6 : !hal.buffer_view, !hal.buffer_view
}
// expected-remark @below {{main writes its 2 result(s) into storage its caller passes, and takes its transient memory from the caller}}
util.func public @main(%arg0: !hal.buffer_view) -> (!hal.buffer_view, !hal.buffer_view) attributes {iree.abi.stub, iree.reflection = {fusion.inputs = "tensor<2x8xf32>", fusion.outputs = "tensor<2x8xf32>;tensor<2xf32>"}} {
  %0 = util.null : !hal.fence
  %c-1_i32 = arith.constant -1 : i32
  %c0 = arith.constant 0 : index
  %device_0 = hal.devices.get %c0 : !hal.device
  %fence = hal.fence.create device(%device_0 : !hal.device) flags("None") : !hal.fence
  %1:2 = util.call @main$async(%arg0, %0, %fence) : (!hal.buffer_view, !hal.fence, !hal.fence) -> (!hal.buffer_view, !hal.buffer_view)
  %status = hal.fence.await until([%fence]) timeout_millis(%c-1_i32) flags("None") : i32
  util.return %1#0, %1#1 : !hal.buffer_view, !hal.buffer_view
}
// CHECK-LABEL: util.func public @main$async(
// CHECK-SAME: %[[IN:[a-z0-9]+]]: !hal.buffer_view, %[[OUT0:[a-z0-9]+]]: !hal.buffer_view, %[[OUT1:[a-z0-9]+]]: !hal.buffer_view, %[[TMP:[a-z0-9]+]]: !hal.buffer_view, %[[WAIT:[a-z0-9]+]]: !hal.fence, %[[DONE:[a-z0-9]+]]: !hal.fence)
// CHECK: %[[X:.+]] = hal.tensor.import wait(%[[WAIT]]) => %[[IN]]
// CHECK: %[[SUM:.+]] = linalg.generic
// CHECK: %[[A0:.+]] = hal.tensor.alias wait(%[[WAIT]]) => %[[X]] : tensor<2x8xf32> to %[[OUT0]] : !hal.buffer_view
// CHECK: %[[T0:.+]] = hal.tensor.transients %[[A0]] : tensor<2x8xf32> from %[[TMP]] : !hal.buffer_view
// CHECK: %[[A1:.+]] = hal.tensor.alias wait(%[[WAIT]]) => %[[SUM]] : tensor<2xf32> to %[[OUT1]] : !hal.buffer_view
// CHECK: %[[T1:.+]] = hal.tensor.transients %[[A1]] : tensor<2xf32> from %[[TMP]] : !hal.buffer_view
// CHECK: hal.tensor.barrier join(%[[T0]], %[[T1]] : tensor<2x8xf32>, tensor<2xf32>) => %[[DONE]]
// CHECK-LABEL: util.func public @main(
// CHECK-SAME: %[[IN:[a-z0-9]+]]: !hal.buffer_view, %[[OUT0:[a-z0-9]+]]: !hal.buffer_view, %[[OUT1:[a-z0-9]+]]: !hal.buffer_view, %[[TMP:[a-z0-9]+]]: !hal.buffer_view)
// CHECK-SAME: fusion.result_storage = "2"
// CHECK: util.call @main$async(%[[IN]], %[[OUT0]], %[[OUT1]], %[[TMP]], %{{.+}}, %{{.+}})

// -----

// An input of dynamic size: the transient memory's size is known only at the call.
#map = affine_map<(d0, d1) -> (d0, d1)>
util.func public @main$async(%arg0: !hal.buffer_view, %arg1: !hal.fence, %arg2: !hal.fence) -> !hal.buffer_view attributes {inlining_policy = #util.inline.never, iree.abi.model = "coarse-fences", iree.abi.stub} {
  %c0 = arith.constant 0 : index
  %0 = hal.buffer_view.dim<%arg0 : !hal.buffer_view>[0] : index
  %1 = hal.tensor.import wait(%arg1) => %arg0 : !hal.buffer_view -> tensor<?x8xf32>{%0}
  %2 = hal.tensor.barrier join(%1 : tensor<?x8xf32>) => %arg2 : !hal.fence
  %dim = tensor.dim %2, %c0 : tensor<?x8xf32>
  %3 = hal.tensor.export %2 : tensor<?x8xf32>{%dim} -> !hal.buffer_view
  util.return %3 : !hal.buffer_view
}
// expected-remark @below {{main returns its results as IREE allocates them: an input of dynamic size}}
util.func public @main(%arg0: !hal.buffer_view) -> !hal.buffer_view attributes {iree.abi.stub} {
  %0 = util.null : !hal.fence
  %c-1_i32 = arith.constant -1 : i32
  %c0 = arith.constant 0 : index
  %device_0 = hal.devices.get %c0 : !hal.device
  %fence = hal.fence.create device(%device_0 : !hal.device) flags("None") : !hal.fence
  %1 = util.call @main$async(%arg0, %0, %fence) : (!hal.buffer_view, !hal.fence, !hal.fence) -> !hal.buffer_view
  %status = hal.fence.await until([%fence]) timeout_millis(%c-1_i32) flags("None") : i32
  util.return %1 : !hal.buffer_view
}
// CHECK-LABEL: util.func public @main$async(
// CHECK-SAME: %{{[a-z0-9]+}}: !hal.buffer_view, %{{[a-z0-9]+}}: !hal.fence, %{{[a-z0-9]+}}: !hal.fence)
// CHECK-NOT: hal.tensor.alias
// CHECK-LABEL: util.func public @main(
// CHECK-NOT: fusion.result_storage

// -----

// An online-softmax loop nest sizes its blocks' temporaries inside the loop, where IREE
// cannot hoist one transient size: the entry point keeps IREE's allocations.
util.func public @main$async(%arg0: !hal.buffer_view, %arg1: !hal.fence, %arg2: !hal.fence) -> !hal.buffer_view attributes {inlining_policy = #util.inline.never, iree.abi.model = "coarse-fences", iree.abi.stub} {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c2 = arith.constant 2 : index
  %0 = hal.tensor.import wait(%arg1) => %arg0 : !hal.buffer_view -> tensor<4x8xf32>
  %1 = scf.for %i = %c0 to %c4 step %c2 iter_args(%acc = %0) -> (tensor<4x8xf32>) {
    scf.yield %acc : tensor<4x8xf32>
  } {fusion.online_softmax}
  %2 = hal.tensor.barrier join(%1 : tensor<4x8xf32>) => %arg2 : !hal.fence
  %3 = hal.tensor.export %2 : tensor<4x8xf32> -> !hal.buffer_view
  util.return %3 : !hal.buffer_view
}
// expected-remark @below {{main returns its results as IREE allocates them: an online-softmax loop nest (its transient memory is sized per block)}}
util.func public @main(%arg0: !hal.buffer_view) -> !hal.buffer_view attributes {iree.abi.stub} {
  %0 = util.null : !hal.fence
  %c-1_i32 = arith.constant -1 : i32
  %c0 = arith.constant 0 : index
  %device_0 = hal.devices.get %c0 : !hal.device
  %fence = hal.fence.create device(%device_0 : !hal.device) flags("None") : !hal.fence
  %1 = util.call @main$async(%arg0, %0, %fence) : (!hal.buffer_view, !hal.fence, !hal.fence) -> !hal.buffer_view
  %status = hal.fence.await until([%fence]) timeout_millis(%c-1_i32) flags("None") : i32
  util.return %1 : !hal.buffer_view
}
// CHECK-LABEL: util.func public @main$async(
// CHECK-NOT: hal.tensor.alias
// CHECK: } {fusion.online_softmax}
// CHECK-LABEL: util.func public @main(
// CHECK-NOT: fusion.result_storage
