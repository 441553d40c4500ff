// RUN: fusion-opt %s --split-input-file --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(fusion-reduction-input-in-memory)' | FileCheck %s

// Scores with a bias added, softmax over a dynamic number of keys: the biased scores go
// through a barrier carrying their sizes, which the softmax reads.
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @dynamic_keys(%s: tensor<8x?xf32>, %bias: tensor<8x?xf32>) -> tensor<8x?xf32> {
  %c1 = arith.constant 1 : index
  %n = tensor.dim %s, %c1 : tensor<8x?xf32>
  %e = tensor.empty(%n) : tensor<8x?xf32>
  %x = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%s, %bias : tensor<8x?xf32>, tensor<8x?xf32>) outs(%e : tensor<8x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<8x?xf32>
  // expected-remark @below {{softmax over dynamic dimension 1 reads its input from memory}}
  %y = linalg.softmax dimension(1) ins(%x : tensor<8x?xf32>) outs(%e : tensor<8x?xf32>) -> tensor<8x?xf32>
  return %y : tensor<8x?xf32>
}
// CHECK-LABEL: func.func @dynamic_keys
// CHECK: %[[X:.+]] = linalg.generic
// CHECK: arith.addf
// CHECK: %[[KEYS:.+]] = tensor.dim %[[X]], %{{.+}} : tensor<8x?xf32>
// CHECK: %[[READ:.+]] = "iree_tensor_ext.compute_barrier.start"(%[[X]], %[[KEYS]]) : (tensor<8x?xf32>, index) -> tensor<8x?xf32>
// CHECK: linalg.softmax dimension(1) ins(%[[READ]] : tensor<8x?xf32>)

// -----

// The decomposition the torch input pipeline makes: the max and the subtraction both
// read the barrier, and a second use of the input (scores returned) does too.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#row1 = affine_map<(d0, d1) -> (d0, 0)>
func.func @decomposed(%s: tensor<?x?xf16>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %m = tensor.dim %s, %c0 : tensor<?x?xf16>
  %n = tensor.dim %s, %c1 : tensor<?x?xf16>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%s : tensor<?x?xf16>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%a: f16, %o: f32):
    %r = arith.extf %a : f16 to f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  %er = tensor.empty(%m) : tensor<?xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%er : tensor<?xf32>) -> tensor<?xf32>
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<?x?xf32>) outs(%m0 : tensor<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<?xf32>
  %mexp = tensor.expand_shape %max [[0, 1]] output_shape [%m, 1] : tensor<?xf32> into tensor<?x1xf32>
  %sub = linalg.generic {indexing_maps = [#id, #row1, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %mexp : tensor<?x?xf32>, tensor<?x1xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.subf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  %exp = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%sub : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  %es = tensor.empty(%m) : tensor<?x1xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%es : tensor<?x1xf32>) -> tensor<?x1xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row1], iterator_types = ["parallel", "reduction"]} ins(%exp : tensor<?x?xf32>) outs(%s0 : tensor<?x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<?x1xf32>
  // expected-remark @below {{softmax over dynamic dimension 1 reads its input from memory}}
  %div = linalg.generic {indexing_maps = [#id, #row1, #id], iterator_types = ["parallel", "parallel"]} ins(%exp, %sum : tensor<?x?xf32>, tensor<?x1xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  return %div, %x : tensor<?x?xf32>, tensor<?x?xf32>
}
// CHECK-LABEL: func.func @decomposed
// CHECK: %[[X:.+]] = linalg.generic
// CHECK: arith.extf
// CHECK: %[[READ:.+]] = "iree_tensor_ext.compute_barrier.start"(%[[X]], %{{.+}}, %{{.+}}) : (tensor<?x?xf32>, index, index)
// CHECK-NOT: compute_barrier
// CHECK: linalg.generic {{.*}} ins(%[[READ]] : tensor<?x?xf32>)
// CHECK: arith.maximumf
// CHECK: linalg.generic {{.*}} ins(%[[READ]], %{{.+}} : tensor<?x?xf32>, tensor<?x1xf32>)
// CHECK: arith.subf
// CHECK: return %{{.+}}, %[[READ]]

// -----

// A static number of keys: IREE tiles the rows within the stack limit; left as it is.
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @static_keys(%s: tensor<?x4096xf32>, %bias: tensor<?x4096xf32>) -> tensor<?x4096xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %s, %c0 : tensor<?x4096xf32>
  %e = tensor.empty(%m) : tensor<?x4096xf32>
  %x = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%s, %bias : tensor<?x4096xf32>, tensor<?x4096xf32>) outs(%e : tensor<?x4096xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<?x4096xf32>
  %y = linalg.softmax dimension(1) ins(%x : tensor<?x4096xf32>) outs(%e : tensor<?x4096xf32>) -> tensor<?x4096xf32>
  return %y : tensor<?x4096xf32>
}
// CHECK-LABEL: func.func @static_keys
// CHECK-NOT: compute_barrier
// CHECK: linalg.softmax

// -----

// The input is the function's argument: in memory already; left as it is.
func.func @argument(%x: tensor<8x?xf32>) -> tensor<8x?xf32> {
  %c1 = arith.constant 1 : index
  %n = tensor.dim %x, %c1 : tensor<8x?xf32>
  %e = tensor.empty(%n) : tensor<8x?xf32>
  %y = linalg.softmax dimension(1) ins(%x : tensor<8x?xf32>) outs(%e : tensor<8x?xf32>) -> tensor<8x?xf32>
  return %y : tensor<8x?xf32>
}
// CHECK-LABEL: func.func @argument
// CHECK-NOT: compute_barrier
// CHECK: linalg.softmax

// -----

// Two softmaxes of one input (over each dim): one barrier, which both read.
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @two_softmaxes(%s: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %s, %c0 : tensor<?x?xf32>
  %n = tensor.dim %s, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%s : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.negf %a : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  // expected-remark @below {{softmax over dynamic dimension 0 reads its input from memory}}
  %y0 = linalg.softmax dimension(0) ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %y1 = linalg.softmax dimension(1) ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %y0, %y1 : tensor<?x?xf32>, tensor<?x?xf32>
}
// CHECK-LABEL: func.func @two_softmaxes
// CHECK: %[[READ:.+]] = "iree_tensor_ext.compute_barrier.start"
// CHECK-NOT: compute_barrier
// CHECK: linalg.softmax dimension(0) ins(%[[READ]]
// CHECK: linalg.softmax dimension(1) ins(%[[READ]]

// -----

// A log-softmax's max over a dynamic number of keys (not a softmax): the biased scores
// are read by the max and the subtraction, so they go through a barrier too.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @log_softmax_max(%s: tensor<8x?xf16>, %bias: tensor<8x?xf32>) -> tensor<8x?xf32> {
  %c1 = arith.constant 1 : index
  %ninf = arith.constant 0xFF800000 : f32
  %n = tensor.dim %s, %c1 : tensor<8x?xf16>
  %e = tensor.empty(%n) : tensor<8x?xf32>
  %x = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%s, %bias : tensor<8x?xf16>, tensor<8x?xf32>) outs(%e : tensor<8x?xf32>) {
  ^bb0(%a: f16, %b: f32, %o: f32):
    %w = arith.extf %a : f16 to f32
    %r = arith.addf %w, %b : f32
    linalg.yield %r : f32
  } -> tensor<8x?xf32>
  %er = tensor.empty() : tensor<8xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%er : tensor<8xf32>) -> tensor<8xf32>
  // expected-remark @below {{reduction over dynamic dimension 1 reads its input from memory}}
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<8x?xf32>) outs(%m0 : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %sub = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %max : tensor<8x?xf32>, tensor<8xf32>) outs(%e : tensor<8x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.subf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<8x?xf32>
  return %sub : tensor<8x?xf32>
}
// CHECK-LABEL: func.func @log_softmax_max
// CHECK: %[[X:.+]] = linalg.generic
// CHECK: arith.addf
// CHECK: %[[READ:.+]] = "iree_tensor_ext.compute_barrier.start"(%[[X]], %{{.+}}) : (tensor<8x?xf32>, index)
// CHECK: linalg.generic {{.*}} ins(%[[READ]] : tensor<8x?xf32>)
// CHECK: arith.maximumf
// CHECK: linalg.generic {{.*}} ins(%[[READ]], %{{.+}} : tensor<8x?xf32>, tensor<8xf32>)

// -----

// Read by the reduction alone (IREE fuses it element by element), or reduced over a
// static extent: left as they are.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @one_reader_or_static(%s: tensor<8x?xf32>, %t: tensor<?x64xf32>) -> (tensor<8xf32>, tensor<?xf32>, tensor<?x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %s, %c1 : tensor<8x?xf32>
  %e = tensor.empty(%n) : tensor<8x?xf32>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%s : tensor<8x?xf32>) outs(%e : tensor<8x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<8x?xf32>
  %er = tensor.empty() : tensor<8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%er : tensor<8xf32>) -> tensor<8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<8x?xf32>) outs(%z : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %m = tensor.dim %t, %c0 : tensor<?x64xf32>
  %et = tensor.empty(%m) : tensor<?x64xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t : tensor<?x64xf32>) outs(%et : tensor<?x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<?x64xf32>
  %ey = tensor.empty(%m) : tensor<?xf32>
  %zy = linalg.fill ins(%zero : f32) outs(%ey : tensor<?xf32>) -> tensor<?xf32>
  %rows = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%y : tensor<?x64xf32>) outs(%zy : tensor<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<?xf32>
  return %sum, %rows, %y : tensor<8xf32>, tensor<?xf32>, tensor<?x64xf32>
}
// CHECK-LABEL: func.func @one_reader_or_static
// CHECK-NOT: compute_barrier
// CHECK: return
