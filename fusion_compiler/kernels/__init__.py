"""Kernels generated ahead of time from fused ops (Triton), for custom dispatches.

Imports Triton only when a kernel is generated: the runtime never needs it.
"""
