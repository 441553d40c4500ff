// RUN: fusion-opt %s --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(fusion-online-softmax{block-q=4 block-k=4})' \
// RUN:   | FileCheck %s

// The key bounds the rewrite reads from a mask's own computation. No --split-input-file:
// the tril table below is a dense_resource, whose bytes fusion-opt reads from the text's
// dialect_resources (MLIR renames repeated blobs when splitting).

// A sliding window of 3 keys (masked where key > row or key < row - 2, an `ori` of two
// compares): each row block's key loop runs from i - 2 to the diagonal.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#t = affine_map<(d0, d1, d2) -> (d1, d2)>
func.func @window(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>, %v: tensor<2x8x8xf32>) -> tensor<2x8x8xf32> {
  %scale = arith.constant 0.25 : f32
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c2 = arith.constant 2 : index
  %ez = tensor.empty() : tensor<2x8x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%ez : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %mask = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%z : tensor<2x8x8xf32>) outs(%ez : tensor<2x8x8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %row = linalg.index 1 : index
    %col = linalg.index 2 : index
    %future = arith.cmpi sgt, %col, %row : index
    %early = arith.subi %row, %c2 : index
    %past = arith.cmpi slt, %col, %early : index
    %out_of_window = arith.ori %future, %past : i1
    %r = arith.select %out_of_window, %ninf, %a : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e = tensor.empty() : tensor<2x8x8xf32>
  // expected-remark @below {{attention rewritten as online softmax (blocks 4x4, key blocks above the diagonal (offset 0) skipped, keys before row-2 skipped (a sliding window))}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x8xf32>, f32, tensor<2x8x8xf32>)
      outs(%e : tensor<2x8x8xf32>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<2x8x8xf32>
  return %o : tensor<2x8x8xf32>
}
// CHECK-LABEL: func.func @window(
// CHECK: scf.for %[[I:[a-z0-9_]+]] =
// CHECK: %[[W:.+]] = arith.constant -2 : index
// CHECK: %[[START:.+]] = arith.addi %[[I]], %[[W]] : index
// CHECK: %[[POS:.+]] = arith.maxsi %[[START]], %{{.+}} : index
// from the key block holding it: the key tiles stay aligned, of static sizes
// CHECK: %[[BLOCK:.+]] = arith.divui %[[POS]], %[[BK:.+]] : index
// CHECK: %[[FIRST:.+]] = arith.muli %[[BLOCK]], %{{.+}} : index
// CHECK: scf.for %{{.+}} = %[[FIRST]] to %{{.+}} step

// A registered tril buffer, as torch's importer writes it (a dense_resource of i8): its
// values are read and proven causal.
func.func @tril_table(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>, %v: tensor<2x8x8xf32>) -> tensor<2x8x8xf32> {
  %scale = arith.constant 0.25 : f32
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %zero8 = arith.constant 0 : i8
  %table = arith.constant dense_resource<tril> : tensor<8x8xi8>
  %ez = tensor.empty() : tensor<2x8x8xf32>
  %mask = linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%table : tensor<8x8xi8>) outs(%ez : tensor<2x8x8xf32>) {
  ^bb0(%keep: i8, %out: f32):
    %kept = arith.cmpi ne, %keep, %zero8 : i8
    %r = arith.select %kept, %zero, %ninf : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e = tensor.empty() : tensor<2x8x8xf32>
  // expected-remark @below {{attention rewritten as online softmax (blocks 4x4, key blocks above the diagonal (offset 0) skipped)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x8xf32>, f32, tensor<2x8x8xf32>)
      outs(%e : tensor<2x8x8xf32>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<2x8x8xf32>
  return %o : tensor<2x8x8xf32>
}
// CHECK-LABEL: func.func @tril_table(
// CHECK: scf.for
// CHECK: arith.minsi

// A prefix-LM mask (every row sees keys 0 and 1, then the keys up to its own: masked
// where key > row and key >= 2, an intersection no band proof takes): the mask's values,
// computed at compile time, end row block 0's key loop after key block 0 (a step at
// i >= 4 lets later blocks run to the end).
func.func @prefix(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>, %v: tensor<2x8x8xf32>) -> tensor<2x8x8xf32> {
  %scale = arith.constant 0.25 : f32
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c2 = arith.constant 2 : index
  %ez = tensor.empty() : tensor<2x8x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%ez : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %mask = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%z : tensor<2x8x8xf32>) outs(%ez : tensor<2x8x8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %row = linalg.index 1 : index
    %col = linalg.index 2 : index
    %future = arith.cmpi sgt, %col, %row : index
    %late = arith.cmpi sge, %col, %c2 : index
    %hidden = arith.andi %future, %late : i1
    %r = arith.select %hidden, %ninf, %a : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e = tensor.empty() : tensor<2x8x8xf32>
  // expected-remark @below {{attention rewritten as online softmax (blocks 4x4, 25% of key blocks skipped by the mask's values)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x8xf32>, f32, tensor<2x8x8xf32>)
      outs(%e : tensor<2x8x8xf32>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<2x8x8xf32>
  return %o : tensor<2x8x8xf32>
}
// CHECK-LABEL: func.func @prefix(
// CHECK: scf.for %[[I:[a-z0-9_]+]] =
// CHECK-NOT: arith.maxsi
// CHECK: %[[AT:.+]] = arith.cmpi sge, %[[I]], %{{.+}} : index
// CHECK: %[[STEP:.+]] = arith.select %[[AT]], %{{.+}}, %{{.+}} : index
// CHECK: %[[UPTO:.+]] = arith.addi %{{.+}}, %[[STEP]] : index
// CHECK: %[[END:.+]] = arith.minsi %{{.+}}, %[[UPTO]] : index
// CHECK: scf.for %{{.+}} = %{{.+}} to %[[END]] step

// A padding mask from an input (B, Nk) i1, -inf where not kept: the mask ignores the row,
// so its kept keys are found once per call, before the loops (a reduction over batches
// per key, then over keys, read on the host), and bound every row block's key loop.
#keys = affine_map<(d0, d1, d2) -> (d0, d2)>
func.func @padding(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>, %v: tensor<2x8x8xf32>, %keep: tensor<2x8xi1>) -> tensor<2x8x8xf32> {
  %scale = arith.constant 0.25 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %em = tensor.empty() : tensor<2x8x8xf32>
  %mask = linalg.generic {indexing_maps = [#keys, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%keep : tensor<2x8xi1>) outs(%em : tensor<2x8x8xf32>) {
  ^bb0(%kept: i1, %out: f32):
    %r = arith.select %kept, %zero, %ninf : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e = tensor.empty() : tensor<2x8x8xf32>
  // expected-remark @below {{attention rewritten as online softmax (blocks 4x4, key blocks outside each query block's kept keys skipped per call)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x8xf32>, f32, tensor<2x8x8xf32>)
      outs(%e : tensor<2x8x8xf32>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<2x8x8xf32>
  return %o : tensor<2x8x8xf32>
}
// CHECK-LABEL: func.func @padding(
// CHECK-NOT: scf.for
// CHECK: %[[KEPT:.+]] = linalg.generic {{.*}}iterator_types = ["reduction", "reduction", "parallel"]} ins(%{{.+}} : tensor<2x1x8xf32>) outs(%{{.+}} : tensor<8xi1>)
// CHECK: arith.cmpf une
// CHECK: %[[SPAN:.+]]:2 = linalg.generic {{.*}}iterator_types = ["reduction"]} ins(%[[KEPT]] : tensor<8xi1>) outs(%{{.+}}, %{{.+}} : tensor<i64>, tensor<i64>)
// CHECK: %[[FIRST:.+]] = tensor.extract %[[SPAN]]#0[] : tensor<i64>
// CHECK: %[[END:.+]] = tensor.extract %[[SPAN]]#1[] : tensor<i64>
// CHECK: scf.for
// CHECK: scf.for %{{.+}} = %{{.+}} to %{{.+}} step

// Packed documents (ids an input, kept where the row's and the key's ids match): the
// mask reads the row, so each row block finds its kept keys inside the query loop.
#rows = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @documents(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>, %v: tensor<2x8x8xf32>, %ids: tensor<2x8xi64>) -> tensor<2x8x8xf32> {
  %scale = arith.constant 0.25 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %em = tensor.empty() : tensor<2x8x8xf32>
  %mask = linalg.generic {indexing_maps = [#rows, #keys, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ids, %ids : tensor<2x8xi64>, tensor<2x8xi64>) outs(%em : tensor<2x8x8xf32>) {
  ^bb0(%mine: i64, %theirs: i64, %out: f32):
    %same = arith.cmpi eq, %mine, %theirs : i64
    %r = arith.select %same, %zero, %ninf : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e = tensor.empty() : tensor<2x8x8xf32>
  // expected-remark @below {{attention rewritten as online softmax (blocks 4x4, key blocks outside each query block's kept keys skipped per call)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x8xf32>, f32, tensor<2x8x8xf32>)
      outs(%e : tensor<2x8x8xf32>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<2x8x8xf32>
  return %o : tensor<2x8x8xf32>
}
// CHECK-LABEL: func.func @documents(
// CHECK-NOT: tensor.extract
// CHECK: scf.for %[[I:[a-z0-9_]+]] =
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction", "reduction", "parallel"]} ins(%{{.+}} : tensor<2x4x8xf32>) outs(%{{.+}} : tensor<8xi1>)
// CHECK: %[[SPAN:.+]]:2 = linalg.generic {{.*}}iterator_types = ["reduction"]}
// CHECK: tensor.extract %[[SPAN]]#0[] : tensor<i64>
// CHECK: tensor.extract %[[SPAN]]#1[] : tensor<i64>
// CHECK: scf.for %{{.+}} = %{{.+}} to %{{.+}} step

{-#
  dialect_resources: {
    builtin: {
      tril: "0x0100000001000000000000000101000000000000010101000000000001010101000000000101010101000000010101010101000001010101010101000101010101010101"
    }
  }
#-}
