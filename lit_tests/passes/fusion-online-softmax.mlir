// RUN: fusion-opt %s --split-input-file --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(fusion-online-softmax{block-q=32 block-k=64})' \
// RUN:   | FileCheck %s

// Q tiled by 32 rows, a loop over 64-key blocks with running max, running sum and a
// rescaled accumulator; exp2 with the scale folded in; one division after the loop.
// No tensor of 100x120 scores anywhere.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @plain(%q: tensor<4x100x16xf16>, %k: tensor<4x120x16xf16>, %v: tensor<4x120x8xf16>) -> tensor<4x100x8xf16> {
  %scale = arith.constant 0.25 : f32
  %e = tensor.empty() : tensor<4x100x8xf16>
  // expected-remark @below {{attention rewritten as online softmax (blocks 32x64)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #o]}>
      ins(%q, %k, %v, %scale : tensor<4x100x16xf16>, tensor<4x120x16xf16>, tensor<4x120x8xf16>, f32)
      outs(%e : tensor<4x100x8xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x100x8xf16>
  return %o : tensor<4x100x8xf16>
}
// CHECK-LABEL: func.func @plain(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<4x100x16xf16>, %[[K:[a-z0-9]+]]: tensor<4x120x16xf16>, %[[V:[a-z0-9]+]]: tensor<4x120x8xf16>
// CHECK: %[[LOG2E:.+]] = arith.constant 1.44269502 : f32
// CHECK: %[[SCALE2:.+]] = arith.mulf %{{.+}}, %[[LOG2E]] : f32
// CHECK-DAG: %[[C100:.+]] = arith.constant 100 : index
// CHECK-DAG: %[[C32:.+]] = arith.constant 32 : index
// The output starts in a buffer of its own (not the op's tensor.empty, which CSE shares
// with any attention of this shape: IREE would update one buffer for both).
// CHECK: %[[START:.+]] = flow.tensor.alloca : tensor<4x100x8xf16>
// CHECK: %[[OUT:.+]] = scf.for %[[I:[a-z0-9_]+]] = %{{.+}} to %[[C100]] step %[[C32]] iter_args(%[[ACC_O:.+]] = %[[START]]) -> (tensor<4x100x8xf16>)
// CHECK: %[[QI:.+]] = tensor.extract_slice %[[Q]][0, %[[I]], 0] [4, %{{.+}}, 16] [1, 1, 1]
// CHECK: %[[M0:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<4x?xf32>)
// CHECK: %[[C120:.+]] = arith.constant 120 : index
// CHECK: %[[C64:.+]] = arith.constant 64 : index
// CHECK: %[[LOOP:.+]]:3 = scf.for %[[J:[a-z0-9_]+]] = %{{.+}} to %[[C120]] step %[[C64]] iter_args(%[[M:.+]] = %[[M0]], %[[L:.+]] = %{{.+}}, %[[ACC:.+]] = %{{.+}}) -> (tensor<4x?xf32>, tensor<4x?xf32>, tensor<4x?x8xf32>)
// CHECK: %[[KJ:.+]] = tensor.extract_slice %[[K]][0, %[[J]], 0] [4, %{{.+}}, 16] [1, 1, 1]
// CHECK: %[[VJ:.+]] = tensor.extract_slice %[[V]][0, %[[J]], 0] [4, %{{.+}}, 8] [1, 1, 1]
// CHECK: linalg.generic {{.*}} ins(%[[QI]], %[[KJ]] : tensor<4x?x16xf16>, tensor<4x?x16xf16>) outs(%{{.+}} : tensor<4x?x?xf32>)
// CHECK: arith.mulf %{{.+}}, %[[SCALE2]] : f32
// CHECK: arith.maximumf
// CHECK: math.exp2
// CHECK: math.exp2
// CHECK: linalg.generic {{.*}} ins(%{{.+}}, %[[VJ]] : tensor<4x?x?xf32>, tensor<4x?x8xf16>)
// CHECK: scf.yield
// A row with no key left (l = 0) gives 0, not 0/0.
// CHECK: %[[EMPTY:.+]] = arith.cmpf oeq, %[[L_OUT:.+]], %{{.+}} : f32
// CHECK: %[[DIV:.+]] = arith.divf %{{.+}}, %[[L_OUT]] : f32
// CHECK: arith.select %[[EMPTY]], %{{.+}}, %[[DIV]] : f32
// CHECK: arith.truncf %{{.+}} : f32 to f16
// The output is written into a barrier's result, so IREE updates it in place. With
// four query blocks of two key steps each, the host never waits.
// CHECK: %[[FENCE:.+]] = hal.fence.create device(%{{.+}} : !hal.device) flags("None") : !hal.fence
// CHECK: %[[READY:.+]] = hal.tensor.barrier join(%[[ACC_O]] : tensor<4x100x8xf16>) => %[[FENCE]] : !hal.fence
// CHECK-NOT: hal.fence.await
// CHECK: tensor.insert_slice %{{.+}} into %[[READY]][0, %[[I]], 0]
// CHECK: } {fusion.online_softmax}
// CHECK: return %[[OUT]]
// CHECK-NOT: tensor<4x100x120x

// -----

// A mask is read one (32, 64) block at a time; K stored transposed (batch, k1, k2);
// the score region (a softcap) is inlined into the block's logits. A fill at the bottom
// of the mask's type swamps the score (the logit is the fill alone), and the masked
// logit is clamped at the lowest f32 unless the mask is -inf, so finfo.min stays finite
// in the exp2 domain.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#kt = affine_map<(d0, d1, d2, d3, d4) -> (d0, d3, d4)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @masked(%q: tensor<4x100x16xf32>, %kt: tensor<4x16x120xf32>, %v: tensor<4x120x8xf32>,
                  %mask: tensor<4x100x120xf32>) -> tensor<4x100x8xf32> {
  %scale = arith.constant 0.25 : f32
  %e = tensor.empty() : tensor<4x100x8xf32>
  // expected-remark @below {{attention rewritten as online softmax}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #kt, #v, #s, #m, #o]}>
      ins(%q, %kt, %v, %scale, %mask : tensor<4x100x16xf32>, tensor<4x16x120xf32>, tensor<4x120x8xf32>, f32, tensor<4x100x120xf32>)
      outs(%e : tensor<4x100x8xf32>) {
    ^bb0(%x: f32):
      %c = arith.constant 0.0231049061 : f32
      %in = arith.mulf %x, %c : f32
      %t = math.tanh %in : f32
      %cap = arith.constant 43.2808495 : f32
      %y = arith.mulf %t, %cap : f32
      iree_linalg_ext.yield %y : f32
  } -> tensor<4x100x8xf32>
  return %o : tensor<4x100x8xf32>
}
// CHECK-LABEL: func.func @masked(
// CHECK-SAME: %[[KT:[a-z0-9]+]]: tensor<4x16x120xf32>, %{{.+}}: tensor<4x120x8xf32>, %[[MASK:[a-z0-9]+]]: tensor<4x100x120xf32>
// CHECK: scf.for %[[I:[a-z0-9_]+]] =
// CHECK: scf.for %[[J:[a-z0-9_]+]] =
// CHECK: tensor.extract_slice %[[KT]][0, 0, %[[J]]] [4, 16, %{{.+}}]
// CHECK: %[[MIJ:.+]] = tensor.extract_slice %[[MASK]][0, %[[I]], %[[J]]] [4, %{{.+}}, %{{.+}}]
// CHECK: linalg.generic {{.*}} ins(%{{.+}}, %[[MIJ]] : tensor<4x?x?xf32>, tensor<4x?x?xf32>)
// CHECK: ^bb0(%{{.+}}: f32, %[[M:.+]]: f32, %{{.+}}: f32):
// CHECK: math.tanh
// CHECK: %[[SHIFTED:.+]] = arith.addf
// CHECK: %[[SWAMPED:.+]] = arith.cmpf ole, %[[M]], %{{.+}} : f32
// CHECK: %[[VALUE:.+]] = arith.select %[[SWAMPED]], %{{.+}}, %[[SHIFTED]] : f32
// CHECK: %[[FLOORED:.+]] = arith.maximumf %[[VALUE]], %{{.+}} : f32
// CHECK: %[[NINF:.+]] = arith.cmpf oeq, %[[M]], %{{.+}} : f32
// CHECK: arith.select %[[NINF]], %[[VALUE]], %[[FLOORED]] : f32
// CHECK: math.exp2

// -----

// Dynamic sizes stay with IREE's op, and the remark says why.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @dynamic(%q: tensor<4x?x16xf32>, %k: tensor<4x?x16xf32>, %v: tensor<4x?x8xf32>, %e: tensor<4x?x8xf32>) -> tensor<4x?x8xf32> {
  %scale = arith.constant 0.25 : f32
  // expected-remark @below {{attention left to IREE: dynamic shapes}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #o]}>
      ins(%q, %k, %v, %scale : tensor<4x?x16xf32>, tensor<4x?x16xf32>, tensor<4x?x8xf32>, f32)
      outs(%e : tensor<4x?x8xf32>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x?x8xf32>
  return %o : tensor<4x?x8xf32>
}
// CHECK-LABEL: func.func @dynamic(
// CHECK: iree_linalg_ext.attention
// CHECK-NOT: scf.for

// -----

// A causal mask generated from iota/compare (as fusion-detect-attention makes it):
// re-run on each (32, 64) block inside the loop, with linalg.index shifted to global
// row and column; no 100x120 mask is built. It is proven causal (keys > row masked),
// so each row block's key loop stops at the diagonal: i + tm + 0, at most 120.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @generated_mask(%q: tensor<4x100x16xf32>, %k: tensor<4x120x16xf32>, %v: tensor<4x120x8xf32>) -> tensor<4x100x8xf32> {
  %scale = arith.constant 0.25 : f32
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %ez = tensor.empty() : tensor<4x100x120xf32>
  %z = linalg.fill ins(%zero : f32) outs(%ez : tensor<4x100x120xf32>) -> tensor<4x100x120xf32>
  %mask = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%z : tensor<4x100x120xf32>) outs(%ez : tensor<4x100x120xf32>) {
  ^bb0(%a: f32, %out: f32):
    %row = linalg.index 1 : index
    %col = linalg.index 2 : index
    %future = arith.cmpi ugt, %col, %row : index
    %r = arith.select %future, %ninf, %a : f32
    linalg.yield %r : f32
  } -> tensor<4x100x120xf32>
  %e = tensor.empty() : tensor<4x100x8xf32>
  // expected-remark @below {{attention rewritten as online softmax (blocks 32x64, key blocks above the diagonal (offset 0) skipped)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #m, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<4x100x16xf32>, tensor<4x120x16xf32>, tensor<4x120x8xf32>, f32, tensor<4x100x120xf32>)
      outs(%e : tensor<4x100x8xf32>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<4x100x8xf32>
  return %o : tensor<4x100x8xf32>
}
// CHECK-LABEL: func.func @generated_mask(
// CHECK-NOT: tensor<4x100x120xf32>
// CHECK: scf.for %[[I:[a-z0-9_]+]] =
// CHECK: %[[TM:.+]] = arith.minsi
// CHECK: %[[C120:.+]] = arith.constant 120 : index
// CHECK: %[[END:.+]] = arith.addi %[[I]], %[[TM]] : index
// CHECK: %[[DIAG:.+]] = arith.addi %[[END]], %{{.+}} : index
// CHECK: %[[POS:.+]] = arith.maxsi %[[DIAG]], %{{.+}} : index
// CHECK: %[[UB:.+]] = arith.minsi %[[POS]], %[[C120]] : index
// CHECK: scf.for %[[J:[a-z0-9_]+]] = %{{.+}} to %[[UB]] step
// CHECK: %[[ZT:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<4x?x?xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[ZT]] : tensor<4x?x?xf32>)
// CHECK: %[[ROW:.+]] = linalg.index 1 : index
// CHECK: %[[GROW:.+]] = arith.addi %[[ROW]], %[[I]] : index
// CHECK: %[[COL:.+]] = linalg.index 2 : index
// CHECK: %[[GCOL:.+]] = arith.addi %[[COL]], %[[J]] : index
// CHECK: arith.cmpi ugt, %[[GCOL]], %[[GROW]] : index
// CHECK-NOT: tensor<4x100x120xf32>

// -----

// Eight query blocks of 32 key steps each: having enqueued block i, the host waits for
// block i - 2 (two blocks hold the 64 steps kept queued). The fence of the block before
// rides along in the loop, starting as none.
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @long(%q: tensor<2x256x16xf32>, %k: tensor<2x2048x16xf32>, %v: tensor<2x2048x8xf32>) -> tensor<2x256x8xf32> {
  %scale = arith.constant 0.25 : f32
  %e = tensor.empty() : tensor<2x256x8xf32>
  // expected-remark @below {{attention rewritten as online softmax (blocks 32x64)}}
  %o = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #o]}>
      ins(%q, %k, %v, %scale : tensor<2x256x16xf32>, tensor<2x2048x16xf32>, tensor<2x2048x8xf32>, f32)
      outs(%e : tensor<2x256x8xf32>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<2x256x8xf32>
  return %o : tensor<2x256x8xf32>
}
// CHECK-LABEL: func.func @long(
// CHECK: %[[NONE:.+]] = util.null : !hal.fence
// CHECK: scf.for %[[I:[a-z0-9_]+]] = {{.+}} iter_args(%[[ACC_O:.+]] = %{{.+}}, %[[BEFORE:.+]] = %[[NONE]]) -> (tensor<2x256x8xf32>, !hal.fence)
// CHECK: %[[FENCE:.+]] = hal.fence.create device(%{{.+}} : !hal.device) flags("None") : !hal.fence
// CHECK: %[[READY:.+]] = hal.tensor.barrier join(%[[ACC_O]] : tensor<2x256x8xf32>) => %[[FENCE]] : !hal.fence
// CHECK: hal.fence.await until([%[[BEFORE]]]) timeout_millis(%{{.+}}) flags("None") : i32
// CHECK: %[[OUT:.+]] = tensor.insert_slice %{{.+}} into %[[READY]][0, %[[I]], 0]
// CHECK: scf.yield %[[OUT]], %[[FENCE]] : tensor<2x256x8xf32>, !hal.fence
// CHECK: } {fusion.online_softmax}
