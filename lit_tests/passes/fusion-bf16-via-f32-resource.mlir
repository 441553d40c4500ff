// RUN: fusion-opt %s --pass-pipeline='builtin.module(fusion-bf16-via-f32)' | FileCheck %s
// (one input: the bytes of a blob are known by name in an unsplit file only)

// A small bf16 dense_resource constant (a bias table IREE copies into the dispatch that
// reads it) becomes the same dense constant; llvm-cpu's bf16 emulation cannot retype a
// resource.
func.func @table() -> tensor<2x2xbf16> {
  %t = arith.constant dense_resource<table_bf16> : tensor<2x2xbf16>
  return %t : tensor<2x2xbf16>
}
// CHECK-LABEL: func.func @table(
// CHECK: arith.constant dense<{{\[}}[-1.375000e+00, -1.195310e+00], [1.127930e-01, 7.929680e-01]]> : tensor<2x2xbf16>
// CHECK-NOT: dense_resource<

{-#
  dialect_resources: {
    builtin: {
      table_bf16: "0x02000000B0BF99BFE73D4B3F"
    }
  }
#-}
