"""sm_90 kernels. Attention: a Triton template (``attention.py.tmpl``, filled by
``kernel.source_of``) or, for persistent attention over contiguous operands, a Gluon
kernel with a producer warp (``warp_specialized``; the tile order of both in ``tiles``),
specialised by a ``TritonSpec`` (``spec``) and compiled ahead of time
to a cubin (``kernel``); tiles from a tuned table (``schedules``); masks computed in the
kernel from the mask's producers (``mask``). Matrix products by a weight: one row
(``matvec``, ``matvec_kernel``) or more (``matmul``, ``matmul_kernel``). Concatenations
IREE would copy as they are (``concat``, ``concat_kernel``)."""
