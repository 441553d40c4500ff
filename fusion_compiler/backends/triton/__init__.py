"""sm_90 attention kernels: a Triton template (``template``) or, for persistent
attention over contiguous operands, a Gluon kernel with a producer warp
(``warp_specialized``), specialised by a ``Spec`` (``spec``) and compiled ahead of time
to a cubin (``kernel``); tiles from a tuned table (``schedules``); masks computed in the
kernel from the mask's producers (``mask``)."""
