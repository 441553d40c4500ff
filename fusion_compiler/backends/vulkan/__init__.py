"""Vulkan attention: a FlashAttention-2 GLSL compute shader (``attention.comp``)
specialised by a ``VulkanSpec`` (``spec``) and compiled to SPIR-V with glslangValidator
(``glsl``)."""
