"""The decomposition table handed to AOTAutograd / `run_decompositions`.

torch's core-aten table plus composite ops polyduct prefers decomposed (softmax, layer norm,
their backwards, dropout), minus every op the core lowers natively (addmm among them:
`polyduct.lowering.matmul` keeps it one library call or splits off a fusible bias add).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import _refs as _torch_refs
from torch._decomp import core_aten_decompositions, get_decompositions
from torch._decomp import decompositions as _torch_decomp

from polyduct.lowering.table import core_lowerings

aten = torch.ops.aten

_EXTRA = (
    aten._softmax,
    aten._log_softmax,
    aten._softmax_backward_data,
    aten._log_softmax_backward_data,
    aten.native_layer_norm,
    aten.native_layer_norm_backward,
    aten.native_dropout,
    aten.native_dropout_backward,
    aten.gelu_backward,
    aten.silu_backward,
    aten.sigmoid_backward,
    aten.tanh_backward,
    aten.threshold_backward,
    aten.native_batch_norm,
    aten._native_batch_norm_legit_functional,
    aten._native_batch_norm_legit_no_training,
    aten._native_batch_norm_legit,  # what the no_training decomposition calls (eval mode)
    aten.native_batch_norm_backward,
    aten.embedding,
    aten.embedding_dense_backward,
    aten.mse_loss,
    aten.mse_loss_backward,
    aten.nll_loss_forward,
    aten.nll_loss_backward,
    aten.rms_norm,
    # pointwise ops outside the core-aten decompositions; torch's tables write them in ops
    # polyduct lowers natively
    aten.ldexp,
    aten.elu,
    aten.elu_backward,
    aten.leaky_relu,
    aten.leaky_relu_backward,
    aten.hardtanh,
    aten.hardtanh_backward,
    aten.softplus_backward,
    aten.hardswish_backward,
    aten.hardsigmoid_backward,
    aten.mish_backward,
    aten.native_group_norm,
    aten.native_group_norm_backward,
    aten.linalg_vector_norm,
    aten.repeat,
    aten._adaptive_avg_pool2d,
    aten.max_pool2d_with_indices_backward,
)

# Fused attention kernels stay whole (extern): their decomposed forward does not compute the
# logsumexp their backward needs.
_KEEP_WHOLE = frozenset({"aten::_scaled_dot_product_flash_attention_for_cpu"})


def max_pool2d_backward(
    grad_output: torch.Tensor,
    x: torch.Tensor,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    ceil_mode: bool,
    indices: torch.Tensor,
) -> torch.Tensor:
    """Gradient of a 2-d max pool: each output's gradient is added at the input position its
    maximum came from (`indices` count within one (H, W) plane), so only the indices matter.
    Half-precision gradients accumulate in float32, as overlapping windows may add up many."""
    wide = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    grad = grad_output.new_zeros((*x.shape[:-2], x.shape[-2] * x.shape[-1]), dtype=wide)
    grad = grad.scatter_add(-1, indices.flatten(-2), grad_output.flatten(-2).to(wide))
    return grad.view(x.shape).to(x.dtype)


def softmax(x: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
    """Softmax as ATen's CPU kernel computes it: exp(x - max) times the reciprocal of the row
    sum. torch's own decomposition divides every element by the sum; one reciprocal per row and
    a multiply per element is cheaper (a division costs several multiplies) and gives eager's
    CPU bits for the normalisation. Half inputs compute in float32, as eager does."""
    wide = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    values = x.contiguous().to(wide)
    if values.numel() == 0:
        unnormalized = torch.exp(values)
    else:
        unnormalized = torch.exp(values - torch.amax(values, dim, keepdim=True))
    result = unnormalized * torch.reciprocal(torch.sum(unnormalized, dim, keepdim=True))
    return result if half_to_float else result.to(x.dtype)


def adaptive_avg_pool2d(x: torch.Tensor, output_size: Any) -> Any:
    """torch's decomposition where the pooled sizes are static; with a symbolic one, a mean
    for a 1x1 result (a CNN's head, a squeeze-excite gate), else the op stays whole (a library
    call). The decomposition picks a fixed window from the sizes' example values and guards on
    them: an exported program would be specialised to those sizes, and torch.compile would
    recompile for every new size."""
    if any(isinstance(n, torch.SymInt) for n in x.shape[-2:]):
        if list(output_size) == [1, 1]:
            return torch.mean(x, (-2, -1), keepdim=True)
        return NotImplemented
    return _torch_decomp.adaptive_avg_pool2d(x, output_size)


def repeat(x: torch.Tensor, repeats: Any) -> torch.Tensor:
    """torch's decomposition, made contiguous as eager's `repeat` always is: torch's lays the
    result out like its input, so a permuted input gave a permuted result, and a model's `view`
    of it failed while tracing (WavLM's relative position bias: permuted, then repeated over the
    batch and viewed as (batch * heads, T, T)). The copy fuses into the repeat's one kernel."""
    return _torch_refs.repeat(x, repeats).contiguous()


# Decompositions polyduct prefers over torch's own.
_PREFERRED: dict[Any, Callable[..., Any]] = {
    aten._softmax.default: softmax,
    aten.repeat.default: repeat,
    aten._adaptive_avg_pool2d.default: adaptive_avg_pool2d,
}

# Decompositions of ops some supported torch releases have none for (torch 2.11 lacks this one):
# without them the op would run as an extern call.
_OWN: dict[Any, Callable[..., Any]] = {
    aten.max_pool2d_with_indices_backward.default: max_pool2d_backward,
}


def decomposition_table() -> dict[Any, Callable[..., Any]]:
    """Decompositions to apply before lowering (ops with a native lowering are kept whole)."""
    return dict(_table())


# memo of a table derived from torch's and the core's code only: not process state
@functools.cache
def _table() -> dict[Any, Callable[..., Any]]:
    # built once per process: assembling torch's tables takes ~0.15 s, every compile used to pay it
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(list(_EXTRA)))
    table.update(_PREFERRED)
    for op, fn in _OWN.items():
        table.setdefault(op, fn)  # torch's own decomposition, where this torch has one
    native = set(core_lowerings())
    return {
        op: fn for op, fn in table.items() if str(op) not in native and op.name() not in _KEEP_WHOLE
    }
