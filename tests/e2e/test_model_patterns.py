"""Patterns taken from real models (transformers) that the synthetic e2e programs missed."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from polyduct.frontend.export import compile_exported
from polyduct.kernel_choice import kernel_contents
from polyduct.wrapper.ir import ExternCall, GraphInputs

from .helpers import assert_same, check, compile_fn, traced_ops


def _same_gradients(
    loss: Callable[..., torch.Tensor], backends: tuple[str, str], *inputs: torch.Tensor
) -> list[Any]:
    """Compile `loss`, check the gradients of its inputs against eager's; the compiled graphs."""
    compiled, graphs = compile_fn(loss, backends)
    compiled(*inputs).backward()
    got = [x.grad for x in inputs]
    for x in inputs:
        x.grad = None
    loss(*inputs).backward()
    assert_same(got, [x.grad for x in inputs], atol=1e-5)
    return graphs


def _t5_bias(n: int, w: torch.Tensor) -> torch.Tensor:
    """T5's relative position bias: bucketed distances (log-spaced far buckets) gathered from an
    embedding and permuted to (1, heads, n, n); costly enough to be computed into a buffer."""
    pos = torch.arange(n, device=w.device)
    rel = pos[None, :] - pos[:, None]
    far = 4 + (torch.log(rel.abs().float() / 4) / math.log(16 / 4) * 4).to(torch.long)
    far = torch.min(far, torch.full_like(far, 7))
    bucket = (rel > 0).long() * 8 + torch.where(rel.abs() < 4, rel.abs(), far)
    return w[bucket].permute(2, 0, 1).unsqueeze(0)


def test_buffer_written_and_reread_in_one_kernel_is_allocated(
    backends: tuple[str, str], device: str
) -> None:
    """The bias is stored by one member of a fused kernel, read back (forwarded) by the next
    (its contiguous copy) and read again by a later kernel: the kernel writes it, so the wrapper
    must allocate it (it was taken for an input: `UnboundLocalError` in the wrapper)."""

    def fn(q: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        bias = _t5_bias(q.shape[2], w)
        a = F.scaled_dot_product_attention(q, q, q, attn_mask=bias.contiguous())
        return F.scaled_dot_product_attention(a, a, a, attn_mask=bias.contiguous())

    q, w = torch.randn(2, 4, 10, 16, device=device), torch.randn(16, 4, device=device)
    check(fn, backends, q, w, atol=1e-4, rtol=1e-4)


def test_saved_expanded_value_keeps_stride_zero(backends: tuple[str, str], device: str) -> None:
    """BERT's `token_type_ids`: zeros made in the graph and expanded over the batch feed an
    embedding; the forward saves the expanded indices for backward (stride 0 along the batch),
    and the backward graph asserts that layout (it got a materialised copy before)."""
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 8).to(device)

    def fn(x: torch.Tensor) -> torch.Tensor:
        ids = torch.zeros(1, x.shape[1], dtype=torch.long, device=x.device) + 3
        return (emb(ids.expand(x.shape[0], -1)) * x[..., None]).sin().sum()

    x = torch.randn(4, 6, device=device)
    compiled, graphs = compile_fn(fn, backends)
    compiled(x).backward()
    got = emb.weight.grad.clone()
    emb.zero_grad()
    fn(x).backward()
    assert_same(got, emb.weight.grad, atol=1e-5)
    assert len(graphs) == 2, "expected a forward and a backward graph"


class _Keywords(torch.nn.Module):
    """A model called with keyword arguments (as transformers models are), returning a dict."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(20, 8)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, scale: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        h = self.emb(input_ids) * attention_mask[..., None] * scale
        return {"hidden": h, "pooled": h.mean(1)}


def test_export_takes_the_keyword_arguments_it_was_exported_with(
    backends: tuple[str, str], device: str
) -> None:
    model = _Keywords().to(device)
    kw = {
        "input_ids": torch.randint(0, 20, (2, 5), device=device),
        "attention_mask": torch.randint(0, 2, (2, 5), device=device),
    }
    scale = torch.randn(8, device=device)
    kernels, wrapper = backends
    run = compile_exported(
        torch.export.export(model, (), {**kw, "scale": scale}),
        {"kernels": kernels, "wrapper": wrapper},
    )
    with torch.no_grad():
        want = model(**kw, scale=scale)
        got = run(scale=scale, attention_mask=kw["attention_mask"], input_ids=kw["input_ids"])
        assert set(got) == {"hidden", "pooled"}
        assert_same([got["hidden"], got["pooled"]], [want["hidden"], want["pooled"]])
    with pytest.raises(TypeError, match="attention_mask"):
        run(input_ids=kw["input_ids"], scale=scale)


class _Flagged(torch.nn.Module):
    """A keyword flag the graph is specialised to (ViT's `interpolate_pos_encoding`)."""

    def forward(self, x: torch.Tensor, double: bool = False, factor: float = 1.0) -> torch.Tensor:
        return (x * 2 if double else x).tanh() * factor


def test_export_with_plain_python_keyword_values(backends: tuple[str, str], device: str) -> None:
    x = torch.randn(3, 5, device=device)
    kernels, wrapper = backends
    ep = torch.export.export(_Flagged(), (x,), {"double": True, "factor": 0.5})
    run = compile_exported(ep, {"kernels": kernels, "wrapper": wrapper})
    assert_same(run(x, double=True, factor=0.5), (x * 2).tanh() * 0.5)
    with pytest.raises(ValueError, match="double"):
        run(x, double=False, factor=0.5)


def test_sliding_window_slice_under_dynamic_shapes(backends: tuple[str, str], device: str) -> None:
    """Mistral's sliding window keeps the last `window` positions: under dynamic shapes the
    slice starts at `Max(0, s0 - window)`, an index expression every kernel must print."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        start = max(0, x.shape[1] - 5)
        return (x[:, start:] * 2).sin()

    compiled, _ = compile_fn(fn, backends, dynamic=True)
    for n in (9, 12, 3):
        x = torch.randn(2, n, 4, device=device)
        assert_same(compiled(x), fn(x))


def _padding_causal_mask(mask: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """transformers' mask functions: a padding mask indexed by `arange` coordinates."""
    n, length = mask.shape
    b = torch.arange(n, device=mask.device)[:, None, None]
    q = torch.arange(length, device=mask.device)[None, :, None]
    k = torch.arange(length, device=mask.device)[None, None, :]
    keep = mask[b, k + 0].bool() & (k <= q)
    return torch.where(keep, x, torch.finfo(x.dtype).min)


def test_arange_index_addresses_memory_directly(backends: tuple[str, str], device: str) -> None:
    """An index tensor that is an affine function of its coordinates, provably in range, is
    read at those coordinates: no indirect load, no bounds check (each costs per element)."""
    mask = torch.randint(0, 2, (3, 10), device=device)
    x = torch.randn(3, 10, 10, device=device)
    graphs = check(_padding_causal_mask, backends, mask, x)
    used = set().union(*(kernel_contents(s)[1] for g in graphs for s in g.specs))
    assert "indirect_indexing" not in used, used


def _raising(backends: tuple[str, str], device: str) -> dict[str, Any]:
    """Options under which a failed index check raises on `device` (on a GPU, Triton's kernels
    assert on the device by default, which ends the CUDA context)."""
    cuda_triton = device.startswith("cuda") and backends[0] == "triton"
    return {"kernel_options": {"index_errors": "raise"}} if cuda_triton else {}


def test_arange_index_out_of_range_is_still_checked(backends: tuple[str, str], device: str) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x[torch.arange(x.shape[0], device=x.device) + 1] * 2

    compiled, _ = compile_fn(fn, backends, _raising(backends, device))
    with pytest.raises(Exception, match="(?i)index"):
        compiled(torch.randn(5, device=device))


def test_checked_gather_on_a_gpu_does_not_wait_for_it(backends: tuple[str, str], device: str) -> None:
    """An embedding lookup's index check on a GPU is a device-side assert, as in eager and
    Inductor: the call never synchronises (it did after each checked kernel, to raise
    `KernelIndexError`, about a tenth of GPT-2's forward on an H100); `index_errors="raise"`
    still waits and raises."""
    if not device.startswith("cuda") or backends[0] != "triton":
        pytest.skip("Triton's kernels on a GPU")
    table, ids = torch.randn(10, 4, device=device), torch.tensor([[1, 9], [0, 3]], device=device)
    compiled, _ = compile_fn(lambda t, i: t[i].relu() + 1, backends)
    want = table[ids].relu() + 1
    compiled(table, ids)  # compiles (and tunes) first
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        got = compiled(table, ids)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert_same(got, want)
    raising, _ = compile_fn(lambda t, i: t[i] + 1, backends, _raising(backends, device))
    with pytest.raises(Exception, match="(?i)index"):
        raising(table, torch.tensor([10], device=device))


_OUT_OF_RANGE = """
import sys, torch
table, ids = torch.randn(10, 4, device=sys.argv[1]), torch.tensor([[1, 9], [0, 10]], device=sys.argv[1])
fn = torch.compile(lambda t, i: t[i] + 1, backend="polyduct",
                   options={"kernels": "triton", "wrapper": sys.argv[2]})
try:
    print(fn(table, ids).sum().item())  # the first call tunes, which may synchronise
    torch.cuda.synchronize()
except Exception as exc:
    print(f"RAISED {exc}", file=sys.stderr)
    sys.exit(3)
"""


def test_an_out_of_range_gather_on_a_gpu_is_a_device_side_assert(
    backends: tuple[str, str], device: str
) -> None:
    """By default a failed index check on a GPU is a device-side assert on the one flag word a
    failed check clears: the program stops with CUDA's error, as eager's does, never with a
    result (a fresh process, as the assert ends its CUDA context)."""
    if not device.startswith("cuda") or backends[0] != "triton":
        pytest.skip("Triton's kernels on a GPU")
    run = subprocess.run([sys.executable, "-c", _OUT_OF_RANGE, device, backends[1]],
                         check=False, capture_output=True, text=True, timeout=300)
    assert run.returncode == 3, (run.stdout, run.stderr[-2000:])
    assert "RAISED" in run.stderr and "assert" in run.stderr.lower(), run.stderr[-2000:]


def test_saved_attention_inputs_keep_eager_strides(backends: tuple[str, str], device: str) -> None:
    """Llama's rotary embedding is pointwise on a transposed view, so eager's result is
    transposed too; attention saves it for backward, whose graph asserts those strides. A
    computed library-call argument takes eager's strides (it was made row-major)."""
    torch.manual_seed(0)
    proj = torch.nn.Linear(32, 96).to(device)

    def fn(x: torch.Tensor, cos: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        q, k, v = proj(x).view(b, n, 3, 4, 8).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        q, k = q * cos + q.flip(-1), k * cos - k.flip(-1)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).sum()

    x = torch.randn(2, 6, 32, device=device)
    cos = torch.randn(6, 8, device=device)
    compiled, graphs = compile_fn(fn, backends)
    compiled(x, cos).backward()
    got = [p.grad.clone() for p in proj.parameters()]
    proj.zero_grad()
    fn(x, cos).backward()
    assert_same(got, [p.grad for p in proj.parameters()], atol=1e-4)
    assert len(graphs) == 2, "expected a forward and a backward graph"


def test_pooled_input_is_computed_once(backends: tuple[str, str], device: str) -> None:
    """ResNet's stem: batch norm and ReLU, then a 3x3 max pool. Each pooled element reads nine
    inputs; the normalisation is computed into memory once, not nine times per output."""

    def fn(x: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
        y = torch.relu(x / torch.sqrt(var[:, None, None] + 1e-5))
        return F.max_pool2d(y, 3, 2, 1) + F.avg_pool2d(y, 2)[..., :4, :4]

    x = torch.randn(2, 3, 8, 8, device=device)
    var = torch.rand(3, device=device)
    graphs = check(fn, backends, x, var)
    sqrts = traced_ops(graphs, "sqrt")
    assert sqrts == 1, f"the normalisation is traced {sqrts} times"


def test_padded_pool_windows_need_no_masked_loads(backends: tuple[str, str], device: str) -> None:
    """ResNet's stem pool (3x3, stride 2, padding 1): its out-of-bounds cells were masked loads,
    which kept the C++ loop scalar (181 us of a 1.5 ms forward). They are read at the nearest edge
    and selected away (a max pool's clamped cells repeat their own window's); NaN, ints, ceil."""

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        v, i = F.max_pool2d(x, 3, 2, 1, return_indices=True)
        return v, i, F.max_pool2d(x, 2, 3, 1, ceil_mode=True), F.avg_pool2d(x, 3, 2, 1)

    x = torch.randn(2, 3, 9, 7, device=device)
    x[0, 0, 0, 0], x[1, 1, 4, 3], x[0, 2] = float("nan"), float("inf"), -float("inf")
    graphs = check(fn, backends, x.transpose(2, 3))
    assert traced_ops(graphs, "masked") == 0
    check(lambda t: F.max_pool2d(t, 3, 1, 1), backends, torch.randint(-9, 9, (2, 5, 6), device=device))


def test_expanded_mask_saved_for_backward_keeps_stride_zero(
    backends: tuple[str, str], device: str
) -> None:
    """A padding mask made in the graph and expanded over heads (stride 0) is an argument of
    attention, which saves it for backward: it reaches memory expanded, as eager's is, and the
    backward graph's assertion of that layout holds (GPU attention expands its bias so)."""
    torch.manual_seed(0)
    proj = torch.nn.Linear(16, 48).to(device)

    def fn(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        q, k, v = proj(x).view(b, n, 3, 2, 8).permute(2, 0, 3, 1, 4)
        bias = ((1.0 - keep[:, None, None, :]) * -1e4).expand(b, 2, n, n)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias).square().sum()

    x = torch.randn(2, 5, 16, device=device)
    keep = torch.tensor([[1.0, 1, 1, 0, 0], [1, 1, 1, 1, 1]], device=device)
    compiled, graphs = compile_fn(fn, backends)
    compiled(x, keep).backward()
    assert len(graphs) == 2, "expected a forward and a backward graph"
    got = [p.grad.clone() for p in proj.parameters()]
    proj.zero_grad()
    fn(x, keep).backward()
    assert_same(got, [p.grad for p in proj.parameters()], atol=1e-4)


def test_ceil_of_a_size_ratio_under_dynamic_shapes(backends: tuple[str, str], device: str) -> None:
    """MobileViT pads a feature map to whole patches: `math.ceil(h / patch)` of a symbolic size
    reaches index expressions as torch's CeilToInt(IntTrueDiv(...)), an integer division here."""
    import math

    def fn(x: torch.Tensor) -> torch.Tensor:
        n = math.ceil(x.shape[1] / 4) * 4
        return F.pad(x, (0, 0, 0, n - x.shape[1])).reshape(x.shape[0], n // 4, 4, -1).sum(2)

    compiled, _ = compile_fn(fn, backends, dynamic=True)
    for n in (9, 12, 5):
        x = torch.randn(2, n, 3, device=device)
        assert_same(compiled(x), fn(x), atol=1e-5)


def test_interpolation_scale_of_sizes_under_dynamic_shapes(
    backends: tuple[str, str], device: str
) -> None:
    """SegFormer resizes every feature map to the first one's size: under dynamic shapes the
    bilinear scale is a ratio of sizes (a float), never an integer index expression."""

    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        up = F.interpolate(b, size=a.shape[2:], mode="bilinear", align_corners=False)
        return a + up

    compiled, _ = compile_fn(fn, backends, dynamic=True)
    for n in (8, 12, 6):
        a = torch.randn(2, 3, n, n, device=device)
        b = torch.randn(2, 3, n // 2, n // 2, device=device)
        assert_same(compiled(a, b), fn(a, b), atol=1e-5)


def test_costly_value_broadcast_over_heads_is_computed_once(
    backends: tuple[str, str], device: str
) -> None:
    """Llama's rotary embedding: cos and sin of a (sequence, dim) table, broadcast over batch
    and heads when applied to the queries and keys. The table is computed once, not per head."""

    def fn(q: torch.Tensor, k: torch.Tensor, inv_freq: torch.Tensor) -> tuple[torch.Tensor, ...]:
        pos = torch.arange(q.shape[2], device=q.device, dtype=torch.float32)
        freqs = torch.cat([pos[:, None] * inv_freq, pos[:, None] * inv_freq], -1)
        cos, sin = freqs.cos(), freqs.sin()
        return q * cos + q.flip(-1) * sin, k * cos + k.flip(-1) * sin

    q, k = torch.randn(2, 4, 16, 8, device=device), torch.randn(2, 4, 16, 8, device=device)
    inv_freq = torch.rand(4, device=device)
    graphs = check(fn, backends, q, k, inv_freq)
    cosines = traced_ops(graphs, "cos")
    assert cosines == 1, f"cos is traced {cosines} times"


def test_rotary_backward_scatters_its_halves_in_a_kernel(
    backends: tuple[str, str], device: str
) -> None:
    """Llama's `rotate_half` takes the two halves of the last dim; its backward puts each half's
    gradient back with `slice_scatter`, which was a library call (eight per training step)."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), -1) * 2 + x

    graphs = _same_gradients(lambda x: (fn(x) ** 2).sum(), backends,
                             torch.randn(2, 3, 5, 16, device=device, requires_grad=True))
    calls = [ln.op for g in graphs for ln in g.program.lines if isinstance(ln, ExternCall)]
    assert len(graphs) == 2 and not [op for op in calls if "scatter" in op], calls


def test_reduction_of_a_few_elements_is_pointwise(backends: tuple[str, str], device: str) -> None:
    """Grouped-query attention's backward sums the gradients of the query heads sharing one key
    head: two to eight elements per output. A reduction loop per output cost 50 us where the sum
    of two loads costs one; such sums, products, maxima and minima are pointwise."""

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        groups = x.view(2, 2, 2, 8, 16)
        return groups.sum(2), groups.amax(2, keepdim=True), groups.mean((1, 2)), x.sum(-1)

    x = torch.randn(2, 4, 8, 16, device=device)
    x[0, 0, 0, 0], x[1, 1, 1, 1], x[0, 1, 2, 3] = float("nan"), float("inf"), -0.0
    graphs = check(fn, backends, x)
    kinds = sorted(s.kind for g in graphs for s in g.specs)
    assert kinds.count("reduction") <= 1, kinds  # only the sum over 16 loops


def test_gathered_bias_broadcast_over_the_batch_is_computed_once(
    backends: tuple[str, str], device: str
) -> None:
    """Swin's relative position bias: a table gathered by a constant index, broadcast over the
    batch and added to the attention scores before a softmax. Inlined, the gather and its bounds
    check ran in every pass of the softmax for every batch row, scalar; it is computed once."""

    def fn(scores: torch.Tensor, table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        n, heads = scores.shape[-1], table.shape[1]
        bias = table[index.view(-1)].view(n, n, heads).permute(2, 0, 1)
        return torch.softmax(scores + bias[None], -1)

    n = 9
    scores, table = torch.randn(4, 2, n, n, device=device), torch.randn(25, 2, device=device)
    index = torch.randint(0, 25, (n, n), device=device)
    graphs = check(fn, backends, scores, table, index)
    gathers = traced_ops(graphs, "indirect_indexing")
    assert gathers == 1, f"the bias is gathered {gathers} times"


def test_training_recomputes_cheap_values_instead_of_saving_them(
    backends: tuple[str, str], device: str
) -> None:
    """The forward graph saves for backward what is costly to recompute and recomputes the rest
    (AOTAutograd's min-cut partitioner, as Inductor does): it saved every pointwise
    intermediate, memory traffic that made training steps a fifth slower than Inductor's."""

    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return ((x.sin() * w).cos() * w).tanh().sum()

    x = torch.randn(8, 32, device=device, requires_grad=True)
    graphs = _same_gradients(fn, backends, x, torch.randn(32, device=device, requires_grad=True))
    (inputs,) = [line for line in graphs[1].program.lines if isinstance(line, GraphInputs)]
    # x, w, the tanh (its own derivative) and the incoming gradient; all six saved before
    assert len(inputs.names) <= 4, f"the backward reads {inputs.names}"


def test_exported_metadata_checks_are_not_library_calls(
    backends: tuple[str, str], device: str
) -> None:
    """torch.export records `.to(dtype)` of a value already of that dtype as a metadata check;
    run as a library call it failed on a CPU scalar constant the lowering computes on the
    accelerator (DeBERTa-v2 on CUDA: `Tensor device mismatch! Expected: cpu, Got: cuda:0`)."""

    class Scaled(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * torch.tensor(3).type_as(x) + torch.tensor(2.0).to(x.dtype)

    x = torch.randn(4, 5, device=device)
    kernels, wrapper = backends
    run = compile_exported(torch.export.export(Scaled(), (x,)),
                           {"kernels": kernels, "wrapper": wrapper})
    assert_same([run(x)], [Scaled()(x)])
    assert "assert_tensor_metadata" not in run.compiled.source
