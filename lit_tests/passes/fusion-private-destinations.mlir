// RUN: fusion-opt %s --split-input-file \
// RUN:   --pass-pipeline='builtin.module(fusion-private-destinations)' | FileCheck %s

// Two scatters into one table computed from no input: both update one clone of it,
// made behind a barrier.
#id = affine_map<(d0) -> (d0)>
func.func @scatters_into_an_arange(%u: tensor<2xf32>, %i: tensor<2x1xi32>, %j: tensor<2x1xi32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %e = tensor.empty() : tensor<16xf32>
  %table = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel"]} outs(%e : tensor<16xf32>) {
  ^bb0(%out: f32):
    %n = linalg.index 0 : index
    %c = arith.index_cast %n : index to i32
    %f = arith.sitofp %c : i32 to f32
    linalg.yield %f : f32
  } -> tensor<16xf32>
  %a = iree_linalg_ext.scatter dimension_map = [0] unique_indices(true) ins(%u, %i : tensor<2xf32>, tensor<2x1xi32>) outs(%table : tensor<16xf32>) {
  ^bb0(%x: f32, %y: f32):
    iree_linalg_ext.yield %x : f32
  } -> tensor<16xf32>
  %b = iree_linalg_ext.scatter dimension_map = [0] unique_indices(true) ins(%u, %j : tensor<2xf32>, tensor<2x1xi32>) outs(%table : tensor<16xf32>) {
  ^bb0(%x: f32, %y: f32):
    iree_linalg_ext.yield %x : f32
  } -> tensor<16xf32>
  return %a, %b : tensor<16xf32>, tensor<16xf32>
}
// CHECK-LABEL: func.func @scatters_into_an_arange(
// CHECK: %[[TABLE:.+]] = linalg.generic
// CHECK: %[[HIDDEN:.+]] = util.optimization_barrier %[[TABLE]] : tensor<16xf32>
// CHECK: %[[COPY:.+]] = flow.tensor.clone %[[HIDDEN]] : tensor<16xf32>
// CHECK: iree_linalg_ext.scatter {{.*}} outs(%[[COPY]] : tensor<16xf32>)
// CHECK-NOT: flow.tensor.clone
// CHECK: iree_linalg_ext.scatter {{.*}} outs(%[[COPY]] : tensor<16xf32>)

// -----

// A sort sorts a copy of its positions' arange, made behind a barrier; a scatter into
// an input, into a fill and a sort of an input are left as they are.
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @sort_and_left_alone(%x: tensor<4x8xf32>, %dest: tensor<16xf32>, %u: tensor<2xf32>, %i: tensor<2x1xi32>) -> (tensor<4x8xi64>, tensor<16xf32>, tensor<16xf32>) {
  %e = tensor.empty() : tensor<4x8xi64>
  %iota = linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<4x8xi64>) {
  ^bb0(%out: i64):
    %n = linalg.index 1 : index
    %c = arith.index_cast %n : index to i64
    linalg.yield %c : i64
  } -> tensor<4x8xi64>
  %s:2 = iree_linalg_ext.sort dimension(1) outs(%x, %iota : tensor<4x8xf32>, tensor<4x8xi64>) {
  ^bb0(%a: f32, %b: f32, %c: i64, %d: i64):
    %lt = arith.cmpf olt, %a, %b : f32
    iree_linalg_ext.yield %lt : i1
  } -> tensor<4x8xf32>, tensor<4x8xi64>
  %into_input = iree_linalg_ext.scatter dimension_map = [0] unique_indices(true) ins(%u, %i : tensor<2xf32>, tensor<2x1xi32>) outs(%dest : tensor<16xf32>) {
  ^bb0(%p: f32, %q: f32):
    iree_linalg_ext.yield %p : f32
  } -> tensor<16xf32>
  %zero = arith.constant 0.0 : f32
  %e16 = tensor.empty() : tensor<16xf32>
  %zeros = linalg.fill ins(%zero : f32) outs(%e16 : tensor<16xf32>) -> tensor<16xf32>
  %into_fill = iree_linalg_ext.scatter dimension_map = [0] unique_indices(true) ins(%u, %i : tensor<2xf32>, tensor<2x1xi32>) outs(%zeros : tensor<16xf32>) {
  ^bb0(%p: f32, %q: f32):
    iree_linalg_ext.yield %p : f32
  } -> tensor<16xf32>
  return %s#1, %into_input, %into_fill : tensor<4x8xi64>, tensor<16xf32>, tensor<16xf32>
}
// CHECK-LABEL: func.func @sort_and_left_alone(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4x8xf32>, %[[DEST:[a-z0-9]+]]: tensor<16xf32>
// CHECK: %[[IOTA:.+]] = linalg.generic
// CHECK: %[[HIDDEN:.+]] = util.optimization_barrier %[[IOTA]] : tensor<4x8xi64>
// CHECK: %[[COPY:.+]] = flow.tensor.clone %[[HIDDEN]] : tensor<4x8xi64>
// CHECK: iree_linalg_ext.sort dimension(1) outs(%[[X]], %[[COPY]] :
// CHECK: iree_linalg_ext.scatter {{.*}} outs(%[[DEST]] : tensor<16xf32>)
// CHECK: %[[ZEROS:.+]] = linalg.fill
// CHECK: iree_linalg_ext.scatter {{.*}} outs(%[[ZEROS]] : tensor<16xf32>)
// CHECK-NOT: flow.tensor.clone

// -----

// The same at a dynamic length: the copy is made behind a barrier with its size tied
// back (IREE 3.13 folded a bare clone of a dynamic tensor away).
#id = affine_map<(d0) -> (d0)>
func.func @scatters_into_a_dynamic_arange(%n: index, %u: tensor<2xf32>, %i: tensor<2x1xi32>, %j: tensor<2x1xi32>) -> (tensor<?xf32>, tensor<?xf32>) {
  %e = tensor.empty(%n) : tensor<?xf32>
  %table = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel"]} outs(%e : tensor<?xf32>) {
  ^bb0(%out: f32):
    %k = linalg.index 0 : index
    %c = arith.index_cast %k : index to i32
    %f = arith.sitofp %c : i32 to f32
    linalg.yield %f : f32
  } -> tensor<?xf32>
  %a = iree_linalg_ext.scatter dimension_map = [0] unique_indices(true) ins(%u, %i : tensor<2xf32>, tensor<2x1xi32>) outs(%table : tensor<?xf32>) {
  ^bb0(%x: f32, %y: f32):
    iree_linalg_ext.yield %x : f32
  } -> tensor<?xf32>
  %b = iree_linalg_ext.scatter dimension_map = [0] unique_indices(true) ins(%u, %j : tensor<2xf32>, tensor<2x1xi32>) outs(%table : tensor<?xf32>) {
  ^bb0(%x: f32, %y: f32):
    iree_linalg_ext.yield %x : f32
  } -> tensor<?xf32>
  return %a, %b : tensor<?xf32>, tensor<?xf32>
}
// CHECK-LABEL: func.func @scatters_into_a_dynamic_arange(
// CHECK: %[[TABLE:.+]] = linalg.generic
// CHECK: %[[DIM:.+]] = tensor.dim %[[TABLE]]
// CHECK: %[[HIDDEN:.+]] = util.optimization_barrier %[[TABLE]] : tensor<?xf32>
// CHECK: %[[TIED:.+]] = flow.tensor.tie_shape %[[HIDDEN]] : tensor<?xf32>{%[[DIM]]}
// CHECK: %[[COPY:.+]] = flow.tensor.clone %[[TIED]] : tensor<?xf32>{%[[DIM]]}
// CHECK: iree_linalg_ext.scatter {{.*}} outs(%[[COPY]] : tensor<?xf32>)
// CHECK: iree_linalg_ext.scatter {{.*}} outs(%[[COPY]] : tensor<?xf32>)

// -----

// A table updated in place and also read by an op that does not update it: the reader
// reads the barrier the copy is made from (IREE 3.13 elided a copy that was its
// source's only user, and the update wrote the buffer the reader read).
#id = affine_map<(d0) -> (d0)>
func.func @scattered_and_read(%u: tensor<2xf32>, %i: tensor<2x1xi32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %e = tensor.empty() : tensor<16xf32>
  %table = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel"]} outs(%e : tensor<16xf32>) {
  ^bb0(%out: f32):
    %k = linalg.index 0 : index
    %c = arith.index_cast %k : index to i32
    %f = arith.sitofp %c : i32 to f32
    linalg.yield %f : f32
  } -> tensor<16xf32>
  %a = iree_linalg_ext.scatter dimension_map = [0] unique_indices(true) ins(%u, %i : tensor<2xf32>, tensor<2x1xi32>) outs(%table : tensor<16xf32>) {
  ^bb0(%x: f32, %y: f32):
    iree_linalg_ext.yield %x : f32
  } -> tensor<16xf32>
  %e2 = tensor.empty() : tensor<16xf32>
  %twice = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%table : tensor<16xf32>) outs(%e2 : tensor<16xf32>) {
  ^bb0(%x: f32, %out: f32):
    %d = arith.addf %x, %x : f32
    linalg.yield %d : f32
  } -> tensor<16xf32>
  return %a, %twice : tensor<16xf32>, tensor<16xf32>
}
// CHECK-LABEL: func.func @scattered_and_read(
// CHECK: %[[TABLE:.+]] = linalg.generic
// CHECK: %[[HIDDEN:.+]] = util.optimization_barrier %[[TABLE]] : tensor<16xf32>
// CHECK: %[[COPY:.+]] = flow.tensor.clone %[[HIDDEN]] : tensor<16xf32>
// CHECK: iree_linalg_ext.scatter {{.*}} outs(%[[COPY]] : tensor<16xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[HIDDEN]] : tensor<16xf32>)

// -----

// Slices written into one table computed from no input: each a select over the table
// (IREE 3.13 updated one copy for both, behind a barrier or bare, and a scatter's copy
// with a slice's), no copy left.
#id3 = affine_map<(d0) -> (d0)>
func.func @slices_into_an_arange(%u: tensor<2xf32>, %w: tensor<4xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %e = tensor.empty() : tensor<16xf32>
  %table = linalg.generic {indexing_maps = [#id3], iterator_types = ["parallel"]} outs(%e : tensor<16xf32>) {
  ^bb0(%out: f32):
    %n = linalg.index 0 : index
    %c = arith.index_cast %n : index to i32
    %f = arith.sitofp %c : i32 to f32
    linalg.yield %f : f32
  } -> tensor<16xf32>
  %a = tensor.insert_slice %u into %table[2] [2] [1] : tensor<2xf32> into tensor<16xf32>
  %b = tensor.insert_slice %w into %table[5] [4] [1] : tensor<4xf32> into tensor<16xf32>
  return %a, %b : tensor<16xf32>, tensor<16xf32>
}
// CHECK-LABEL: func.func @slices_into_an_arange(
// CHECK-SAME: %[[U:.+]]: tensor<2xf32>, %[[W:.+]]: tensor<4xf32>
// CHECK-NOT: flow.tensor.clone
// CHECK-NOT: tensor.insert_slice
// CHECK: %[[TABLE:.+]] = linalg.generic
// CHECK: %[[A:.+]] = linalg.generic {{.*}} ins(%[[TABLE]] : tensor<16xf32>)
// CHECK: %[[IN_A:.+]] = arith.andi
// CHECK: %[[U_AT:.+]] = tensor.extract %[[U]][
// CHECK: arith.select %[[IN_A]], %[[U_AT]], %{{.+}} : f32
// CHECK: %[[B:.+]] = linalg.generic {{.*}} ins(%[[TABLE]] : tensor<16xf32>)
// CHECK: tensor.extract %[[W]][
// CHECK: return %[[A]], %[[B]]

// -----

// A scatter and a slice written into one table: the slice a select, which reads the
// table behind the barrier of the scatter's copy (a bare clone gave both results wrong;
// one clone updated by both, the scatter's result took the slice).
#id4 = affine_map<(d0) -> (d0)>
func.func @scatter_and_slice(%u: tensor<2xf32>, %i: tensor<2x1xi32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %e = tensor.empty() : tensor<16xf32>
  %table = linalg.generic {indexing_maps = [#id4], iterator_types = ["parallel"]} outs(%e : tensor<16xf32>) {
  ^bb0(%out: f32):
    %n = linalg.index 0 : index
    %c = arith.index_cast %n : index to i32
    %f = arith.sitofp %c : i32 to f32
    linalg.yield %f : f32
  } -> tensor<16xf32>
  %a = iree_linalg_ext.scatter dimension_map = [0] unique_indices(true) ins(%u, %i : tensor<2xf32>, tensor<2x1xi32>) outs(%table : tensor<16xf32>) {
  ^bb0(%x: f32, %y: f32):
    iree_linalg_ext.yield %x : f32
  } -> tensor<16xf32>
  %b = tensor.insert_slice %u into %table[2] [2] [1] : tensor<2xf32> into tensor<16xf32>
  return %a, %b : tensor<16xf32>, tensor<16xf32>
}
// CHECK-LABEL: func.func @scatter_and_slice(
// CHECK: %[[TABLE:.+]] = linalg.generic
// CHECK: %[[HIDDEN:.+]] = util.optimization_barrier %[[TABLE]] : tensor<16xf32>
// CHECK: %[[COPY:.+]] = flow.tensor.clone %[[HIDDEN]] : tensor<16xf32>
// CHECK: iree_linalg_ext.scatter {{.*}} outs(%[[COPY]] : tensor<16xf32>)
// CHECK-NOT: tensor.insert_slice
// CHECK: linalg.generic {{.*}} ins(%[[HIDDEN]] : tensor<16xf32>)

// -----

// A scatter into a table that a gather reads inside its body: the gather is a reader
// too, and reads the copy's source behind the barrier (read before, at a dynamic length
// IREE elided the copy and the gather took the update).
#id5 = affine_map<(d0) -> (d0)>
func.func @gathered_in_a_body(%u: tensor<2xi64>, %i: tensor<2x1xi32>, %x: tensor<16xf32>) -> (tensor<16xi64>, tensor<16xf32>) {
  %e = tensor.empty() : tensor<16xi64>
  %table = linalg.generic {indexing_maps = [#id5], iterator_types = ["parallel"]} outs(%e : tensor<16xi64>) {
  ^bb0(%out: i64):
    %n = linalg.index 0 : index
    %c = arith.index_cast %n : index to i64
    linalg.yield %c : i64
  } -> tensor<16xi64>
  %a = iree_linalg_ext.scatter dimension_map = [0] unique_indices(true) ins(%u, %i : tensor<2xi64>, tensor<2x1xi32>) outs(%table : tensor<16xi64>) {
  ^bb0(%y: i64, %z: i64):
    iree_linalg_ext.yield %y : i64
  } -> tensor<16xi64>
  %f = tensor.empty() : tensor<16xf32>
  %g = linalg.generic {indexing_maps = [#id5], iterator_types = ["parallel"]} outs(%f : tensor<16xf32>) {
  ^bb0(%out: f32):
    %n = linalg.index 0 : index
    %t = tensor.extract %table[%n] : tensor<16xi64>
    %j = arith.index_cast %t : i64 to index
    %v = tensor.extract %x[%j] : tensor<16xf32>
    linalg.yield %v : f32
  } -> tensor<16xf32>
  return %a, %g : tensor<16xi64>, tensor<16xf32>
}
// CHECK-LABEL: func.func @gathered_in_a_body(
// CHECK: %[[TABLE:.+]] = linalg.generic
// CHECK: %[[HIDDEN:.+]] = util.optimization_barrier %[[TABLE]] : tensor<16xi64>
// CHECK: %[[COPY:.+]] = flow.tensor.clone %[[HIDDEN]] : tensor<16xi64>
// CHECK: iree_linalg_ext.scatter {{.*}} outs(%[[COPY]] : tensor<16xi64>)
// CHECK: linalg.generic
// CHECK: tensor.extract %[[HIDDEN]][
