// Our Python passes and MLIR's passes in one pipeline, split input, -o, IR printing.
// RUN: fusion-opt %s --split-input-file \
// RUN:   --pass-pipeline='builtin.module(fusion-find-softmax,canonicalize,func.func(cse))' \
// RUN:   | FileCheck %s
// RUN: fusion-opt %s --split-input-file --pass-pipeline='builtin.module(canonicalize)' -o %t
// RUN: FileCheck %s --check-prefix=FILE --input-file %t
// RUN: fusion-opt %s --split-input-file --mlir-print-ir-after-all \
// RUN:   --pass-pipeline='builtin.module(fusion-find-softmax,canonicalize)' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=AFTER

// CHECK-LABEL: func.func @fold
// CHECK-NEXT: %[[C:.+]] = arith.constant 5 : i32
// CHECK-NEXT: return %[[C]], %[[C]]
// FILE-LABEL: func.func @fold
// FILE: arith.constant 5 : i32
// AFTER: IR Dump After fusion-find-softmax
// AFTER: func.func @fold
// AFTER: arith.addi
// AFTER: IR Dump After Canonicalizer
// AFTER: func.func @fold
// AFTER-NOT: arith.addi
func.func @fold() -> (i32, i32) {
  %a = arith.constant 2 : i32
  %b = arith.constant 3 : i32
  %s = arith.addi %a, %b : i32
  %t = arith.addi %a, %b : i32
  return %s, %t : i32, i32
}

// -----

// CHECK: // -----
// CHECK-LABEL: func.func @second
// CHECK-NEXT: return %arg0
// FILE: // -----
// FILE-LABEL: func.func @second
func.func @second(%x: f32) -> f32 {
  return %x : f32
}
