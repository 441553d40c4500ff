"""Vulkan attention: a FlashAttention-2 GLSL compute shader (``attention.comp``)
specialised by a ``Spec`` and compiled to SPIR-V with glslangValidator (``glsl``)."""
