"""Kernel backends: a fused attention -> a kernel generated for one target, in the module.

- ``spec``: what every backend is given: the attention as a kernel sees it (``Problem``:
  element types, sizes, the strided views its operands are read through in place, the
  causal offset, the mask's kind) and a compiled ``Kernel``; each backend's spec
  (``triton.spec.TritonSpec``, ``vulkan.spec.VulkanSpec``) adds its own typed choices.
- ``plan``: what one ``iree_linalg_ext.attention`` needs from a kernel (its spec, the
  mask computed or read, the score function printed for the target), or why none can
  take it.
- ``dispatch``: a kernel's binary as a ``hal.executable.source`` and the
  ``flow.dispatch`` that runs it, so IREE links and launches it like its own.
- ``triton``: sm_90 kernels, generated from a Triton/Gluon template and compiled ahead of
  time to a cubin; ``vulkan``: a GLSL compute shader compiled to SPIR-V.

Backends read the IR through ``dialects`` only; the passes that lower attention to them
(``fusion-kernel-attention``, ``fusion-spirv-attention``) live in ``passes``. Triton and
glslang are imported only when a kernel is generated: the runtime never needs them.
"""
