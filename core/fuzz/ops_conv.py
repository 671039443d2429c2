"""Convolution generators: `conv1d` / `conv2d` of a pool value with a fresh weight input (and a
bias), over strides, padding, dilation and depthwise groups. On the CPU the compiler may lay a
2-d convolution's input and the values computed from its result out channels-last
(`polyduct.lowering.layouts`): views, in-place writes and outputs around it must still see
eager's strides."""

from __future__ import annotations

import torch

from polyduct.fuzz.gen import Emit, Gen, Val

CONV_DTYPES = (torch.float32, torch.float64, torch.bfloat16)


def _channels(g: Gen, x: Val, dim: int) -> tuple[int, int | None]:
    """(channels of `x` along `dim`, the same at the second call's shapes or None)."""
    alt = g.alt.get(x.name)
    return x.shape[dim], alt.shape[dim] if alt is not None and alt.dim() == x.rank else None


def conv(g: Gen) -> Emit | None:
    x = g.pick(lambda v: v.dtype in CONV_DTYPES and v.rank in (2, 3, 4) and 0 not in v.shape)
    if x is None:
        return None
    # (spatial dims, x's channel dim, x as the convolution reads it): a rank-3 value is mostly
    # one image of a batch (2-d, the case the CPU lays out channels-last), else a batch of rows
    if x.rank == 4 or (x.rank == 3 and g.chance(0.8)):
        spatial, c_dim, source = 2, x.rank - 3, x.name if x.rank == 4 else f"{x.name}[None]"
    else:
        spatial, c_dim, source = 1, x.rank - 2, x.name
    c, alt_c = _channels(g, x, c_dim)
    depthwise = c > 1 and g.chance(0.3)  # groups = channels, read from the input's shape
    per = g.choice((1, 2))
    out_c = c * per if depthwise else g.choice((1, 2, 3, 4, 8))
    kernel = tuple(g.choice((1, 1, 2, 3)) for _ in range(spatial))
    shape = (out_c, 1 if depthwise else c, *kernel)
    alt = None
    if alt_c is not None:
        alt = (alt_c * per if depthwise else out_c, 1 if depthwise else alt_c, *kernel)
    weight = g.shaped_input(shape, alt, x.dtype)
    bias = "None"
    if g.chance(0.5):
        bias = g.shaped_input((out_c,), None if alt is None else (alt[0],), x.dtype).name
    stride, dilation = g.choice((1, 1, 2)), g.choice((1, 1, 2))
    padding = g.choice((0, 1, "'same'") if stride == 1 else (0, 1))
    groups = f"{x.name}.shape[{c_dim}]" if depthwise else "1"
    # a computed input and a result read by a pointwise op: what the channels-last plan takes
    source = f"{source}.relu()" if g.chance(0.5) else source
    expr = (f"torch.nn.functional.conv{spatial}d({source}, {weight.name}, {bias}, "
            f"stride={stride}, padding={padding}, dilation={dilation}, groups={groups})")
    if g.chance(0.5):
        expr = f"{g.choice(('torch.tanh', 'torch.sigmoid', 'torch.nn.functional.silu'))}({expr})"
    return Emit(expr, False, ("conv",))


OPS = (("conv", 6, conv),)
