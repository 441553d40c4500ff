// Malformed MLIR: the diagnostic names file, line and column; the exit code is non-zero.
// RUN: not fusion-opt %s 2>&1 | FileCheck %s
// RUN: not fusion-opt %s --pass-pipeline='builtin.module(no-such-pass)' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=UNKNOWN
// RUN: not fusion-opt %s.missing 2>&1 | FileCheck %s --check-prefix=MISSING

// CHECK: fusion-opt-errors.mlir:12:10: error: use of undeclared SSA value name
// UNKNOWN: fusion-opt: cannot parse pass pipeline element 'no-such-pass'
// MISSING: fusion-opt: cannot read {{.*}}fusion-opt-errors.mlir.missing: No such file or directory
func.func @f() -> i32 {
  %0 = arith.constant 1 : i32
  return %1 : i32
}
