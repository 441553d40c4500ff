// RUN: fusion-opt %s --split-input-file --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(fusion-bf16-via-f32,canonicalize)' | FileCheck %s

// int64 -> bf16 (ALiBi's distances): through f32, then rounded to nearest even in
// integer ops that canonicalize does not fold back into the direct conversion.
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @distance(%x: tensor<5x17xi64>) -> tensor<5x17xbf16> {
  %e = tensor.empty() : tensor<5x17xbf16>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<5x17xi64>) outs(%e : tensor<5x17xbf16>) {
  ^bb0(%in: i64, %out: bf16):
    %c = arith.sitofp %in : i64 to bf16
    linalg.yield %c : bf16
  } -> tensor<5x17xbf16>
  return %r : tensor<5x17xbf16>
}
// CHECK-LABEL: func.func @distance(
// CHECK-DAG: %[[HALF:.+]] = arith.constant 32767 : i32
// CHECK-DAG: %[[NAN:.+]] = arith.constant 32704 : i32
// CHECK: ^bb0(%[[IN:.+]]: i64, %{{.+}}: bf16):
// CHECK-NOT: to bf16
// CHECK: %[[F:.+]] = arith.sitofp %[[IN]] : i64 to f32
// CHECK: %[[BITS:.+]] = arith.bitcast %[[F]] : f32 to i32
// CHECK: arith.addi %{{.+}}, %[[HALF]] : i32
// CHECK: %[[UNO:.+]] = arith.cmpf uno, %[[F]], %[[F]] : f32
// CHECK: %[[SEL:.+]] = arith.select %[[UNO]], %[[NAN]], %{{.+}} : i32
// CHECK: %[[HIGH:.+]] = arith.trunci %[[SEL]] : i32 to i16
// CHECK: %[[B:.+]] = arith.bitcast %[[HIGH]] : i16 to bf16
// CHECK: linalg.yield %[[B]] : bf16

// -----

// f64 -> bf16 goes through f32 too, and f32 -> bf16 (f16 -> bf16 is an extf to f32 and
// this) is rounded in the same integer ops: llvm-cpu computes bf16 values in f32 and drops a truncf whose
// result is extended again in the dispatch (``h.bfloat16().float()`` kept h's digits).
// int -> f32 is left as it is.
#map = affine_map<(d0) -> (d0)>
func.func @others(%d: tensor<8xf64>, %f: tensor<8xf32>, %i: tensor<8xi32>) -> (tensor<8xbf16>, tensor<8xbf16>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<8xbf16>
  %e32 = tensor.empty() : tensor<8xf32>
  %a = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%d : tensor<8xf64>) outs(%e : tensor<8xbf16>) {
  ^bb0(%in: f64, %out: bf16):
    %c = arith.truncf %in : f64 to bf16
    linalg.yield %c : bf16
  } -> tensor<8xbf16>
  %b = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%f : tensor<8xf32>) outs(%e : tensor<8xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %c = arith.truncf %in : f32 to bf16
    linalg.yield %c : bf16
  } -> tensor<8xbf16>
  %c = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%i : tensor<8xi32>) outs(%e32 : tensor<8xf32>) {
  ^bb0(%in: i32, %out: f32):
    %c = arith.sitofp %in : i32 to f32
    linalg.yield %c : f32
  } -> tensor<8xf32>
  return %a, %b, %c : tensor<8xbf16>, tensor<8xbf16>, tensor<8xf32>
}
// CHECK-LABEL: func.func @others(
// CHECK: arith.truncf %{{.+}} : f64 to f32
// CHECK: arith.bitcast %{{.+}} : i16 to bf16
// CHECK: ^bb0(%[[F:.+]]: f32, %{{.+}}: bf16):
// CHECK-NEXT: arith.bitcast %[[F]] : f32 to i32
// CHECK: arith.bitcast %{{.+}} : i16 to bf16
// CHECK-NOT: to bf16
// CHECK: arith.sitofp %{{.+}} : i32 to f32
