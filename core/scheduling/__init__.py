"""Scheduling: lowered compute nodes -> kernels (the `schedule` pass of `polyduct.pipeline`).

`fusion.schedule` groups nodes into fusion groups in program order; `plan.plan` turns each group
into a `KernelSpec` (buffer roles, removed intermediates, in-place reuse, size args) and names
structurally identical kernels once, by their `kernel_key`.
"""
