"""What a generated Triton kernel module tells its runtime (`KernelFacts`), and the candidate
launch configs (XBLOCK, RBLOCK, num_warps) for a kernel and a problem size, heuristic first."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

Config = tuple[int, int, int]  # (XBLOCK, RBLOCK, num_warps)
# Autotuning times at most MAX_CONFIGS candidates per shape class.
MAX_CONFIGS = 3
# Reductions up to this many elements per row keep the whole row in registers on GPUs.
PERSISTENT_MAX = 8192


@dataclasses.dataclass(frozen=True, eq=False)
class KernelFacts:
    """The per-kernel facts `launcher.render_launcher` writes into a generated module, which
    passes them to its `KernelRuntime`.

    `kind`: the kernel's kind (pointwise, reduction, scan, sort); `heavy`: a long body (one
    element per thread); `light`: a short body (16-bit types take 16 bytes per pointwise
    thread); `itemsize`: the widest argument's bytes; `block_merges`: a reduction merges per
    block; `fp_fusion`: the kernel may contract a*b+c; `autotune`: large problems benchmark
    candidates; `digest`: SHA-256 of the kernel and its helpers; `written`: indices of the
    tensors the kernel writes; `checked`: the buffer of each index check; `asserts`: the
    message of each check slot that is a device assert.
    """

    name: str
    path: str
    interpret: bool
    kind: str
    heavy: bool
    light: bool
    itemsize: int
    block_merges: bool
    fp_fusion: bool
    autotune: bool
    digest: str
    written: frozenset[int]
    checked: tuple[str, ...]
    asserts: Mapping[int, str]


def pow2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 << max(0, int(n) - 1).bit_length()


def _dedup(configs: list[Config]) -> list[Config]:
    out: list[Config] = []
    for c in configs:
        if c not in out:
            out.append(c)
    return out[:MAX_CONFIGS]


def candidate_configs(facts: KernelFacts, xnumel: int, rnumel: int) -> list[Config]:
    """Candidate (XBLOCK, RBLOCK, num_warps) for this kernel kind and shape, heuristic first.

    On GPUs a pointwise thread holds 8 bytes of the kernel's widest type (`itemsize` bytes;
    float32: 2 elements), 16 in `light` kernels of 16-bit or narrower types (short, memory-bound: 16-byte
    loads ran bfloat16's pointwise3 2-5% faster; float32 ran alike at 8 and 16), 8 bytes of
    32-bit values in longer kernels of narrower types (which compute in float32); a persistent
    reduction row 32 bytes. In long kernels more elements per thread run no faster and cost
    Triton more to compile (H200, bench/triton_configs.py: the 30-op chain took 2.0 s at 8
    float32 elements per thread, 0.47 s at 2, with a faster kernel; in bfloat16, for sm_90 on
    the 2-core CPU, 2.1 s at 4 elements and 0.66 s at 2).
    """
    xp, rp = pow2(xnumel), pow2(rnumel)
    if facts.kind == "pointwise":
        if facts.interpret:
            return [(min(1024, xp), 1, 4)]
        if facts.heavy:  # one element per thread: compile time grows with elements per thread
            xb = min(128, xp)
            return [(xb, 1, max(1, min(4, xb // 32)))]
        # longer bodies compute in 32 bits
        width = facts.itemsize if facts.light else max(facts.itemsize, 4)
        per_thread = max(1, min(8, (16 if facts.light and facts.itemsize <= 2 else 8) // width))
        xb = min(1024, 512 * per_thread)

        def fit(xb: int, warps: int) -> Config:  # small problems: a smaller block, no more warps than it fills
            xb = min(xb, xp)
            return xb, 1, max(1, min(warps, xb // 32))

        warps = xb // (32 * per_thread)
        configs = [fit(xb, warps), fit(xb // 2, warps // 2)]
        if per_thread > 1:  # half the elements per thread: compute-heavy kernels prefer it
            configs.append(fit(xb, 2 * warps))
        return _dedup(configs)
    if facts.kind == "sort":
        budget = 1 << 16 if facts.interpret else 1 << 14
        return [(max(1, min(xp, budget // (rp * rp))), rp, 8)]
    budget = 1 << 14 if facts.interpret else (1024 if facts.heavy else 4096)
    if facts.kind == "scan" or rp <= (4096 if facts.interpret else 1024):
        rb = rp
    else:
        rb = 4096 if facts.interpret else 1024
    first = (max(1, min(xp, budget // rb)), rb, 8 if rb >= 512 else 4)
    if facts.interpret:
        return [first]
    if not facts.heavy and facts.kind == "reduction" and 1024 < rp <= PERSISTENT_MAX:
        # Persistent: a row of up to PERSISTENT_MAX elements is read from memory once, however
        # many stages (max, sum, normalise) use it; looping would read it once per stage.
        warps = max(4, min(16, rp * facts.itemsize // 1024))  # 32 bytes per thread
        if facts.itemsize <= 2:  # 8 and 16 warps; two rows per program: bfloat16 softmax's fastest
            return _dedup([(1, rp, warps), (1, rp, 8), (1, rp, 16), (2, rp, 16)])
        # Wider types never ran fastest at two rows, nor at 8 warps where 16 fit (float32 4096-
        # element rows: within 0.4% at best, and 10-50% longer to compile). The row in two looped
        # halves at 16 warps reads it from L2 after the first pass (float32 rmsnorm: 0.130 ms
        # against 0.134 persistent, Inductor's 0.129); not where a reduction merges per block,
        # a reduction across warps per half (float32 layernorm's welford: 0.167 against 0.133).
        configs = [(1, rp, warps), (1, rp, 16)]
        return _dedup(configs if facts.block_merges else [*configs, (1, rp // 2, 16)])
    if rb == rp and rb < 64:
        return _dedup([first, (max(1, min(xp, 1024 // rb)), rb, 4)])
    if rb == rp:
        return [first]
    return _dedup([first, (max(1, min(xp, budget // 256)), 256, 4)])
