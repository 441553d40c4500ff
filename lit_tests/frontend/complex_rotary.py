# The front end: a rotary embedding written with complex numbers (torch.polar, a complex
# product, view_as_complex / view_as_real, as Llama 4 writes it) imported with every
# complex value a pair of real ones: cos and sin of the angles, the product on the parts.
# RUN: %PYTHON %s | FileCheck %s

import torch

import fusion_compiler as fc


class ComplexRotary(torch.nn.Module):
    def forward(self, q, angles):
        rotations = torch.polar(torch.ones_like(angles), angles)
        rotated = torch.view_as_complex(q.reshape(8, 4, 2)) * rotations
        return torch.view_as_real(rotated).flatten(1)


print(fc.compile(ComplexRotary(), example_args=(torch.randn(8, 8), torch.randn(8, 4)),
                 compile_to="torch").mlir)  # fmt: skip
# CHECK-LABEL: func.func @main(
# CHECK-NOT: complex
# CHECK-DAG: torch.aten.cos
# CHECK-DAG: torch.aten.sin
# CHECK: torch.aten.stack
# CHECK: torch.aten.sub.Tensor
# CHECK: torch.aten.add.Tensor
# CHECK: torch.aten.stack
# CHECK-NOT: complex
# CHECK: return
