"""View generators (share storage: the aliasing that in-place ops test) and copying shape ops."""

from __future__ import annotations

import math

import torch

from polyduct.fuzz.gen import Emit, Gen, Val

SAME_SIZE_VIEWS = {
    torch.float32: "torch.int32", torch.int32: "torch.float32", torch.float16: "torch.bfloat16",
    torch.bfloat16: "torch.int16", torch.int16: "torch.float16", torch.float64: "torch.int64",
    torch.int64: "torch.float64", torch.uint8: "torch.int8", torch.int8: "torch.uint8",
}


def _of_size(g: Gen, x: Val, d: int) -> str:
    """An index written with the size of `x`'s dim `d` (`-(n // 2 + 1)`): under dynamic shapes
    an expression of a size symbol whose sign only the sizes settle (Longformer's chunks)."""
    n = f"{x.name}.shape[{d}]"
    return g.choice((f"-{n}", f"{n} // 2", f"-({n} // 2 + 1)", f"{n} - 1", f"-({n} + 1)"))


def _bound(g: Gen, x: Val, d: int) -> str:
    if g.chance(0.2):
        return _of_size(g, x, d)
    size = x.shape[d]
    return str(g.rng.randint(-size - 1, size + 1)) if g.chance(0.7) else ""


def _slice(g: Gen, x: Val) -> str:
    d = g.rng.randrange(x.rank)
    step = g.choice((1, 1, 2, 3))
    parts = [":"] * d + [f"{_bound(g, x, d)}:{_bound(g, x, d)}" +
                         (f":{step}" if step != 1 else "")]
    if g.chance(0.3):
        parts = ["..."] + parts[d:]
    return f"{x.name}[{', '.join(parts)}]"


def _reshape(g: Gen, x: Val) -> str:
    form = g.rng.randrange(5)
    if form == 0 or x.rank == 0:
        return f"{x.name}.reshape(-1)"
    if form == 1:
        return f"{x.name}.flatten({g.rng.randrange(x.rank)})"
    if form == 2:
        return f"{x.name}.reshape({x.shape[0]}, -1)"
    d = g.rng.randrange(x.rank)
    divisors = [k for k in range(1, x.shape[d] + 1) if x.shape[d] % k == 0] or [1]
    k = g.rng.choice(divisors)
    if form == 3:
        return f"{x.name}.unflatten({d}, ({k}, -1))"
    return f"{x.name}.view({', '.join(map(str, x.shape[:d]))}{', ' if d else ''}{k}, -1)"


def _expand(g: Gen, x: Val) -> str | None:
    y = g.pick(lambda v: v.rank >= x.rank and _expands_to(x, v))
    if y is not None and g.chance(0.7):
        return f"{x.name}.expand_as({y.name})"
    n = g.choice(g.sizes)
    return f"{x.name}.expand({n}, *{x.name}.shape)" if n * math.prod(x.shape) <= 2048 else None


def _expands_to(x: Val, y: Val) -> bool:
    try:
        return bool(torch.broadcast_shapes(x.shape, y.shape) == y.shape)
    except RuntimeError:
        return False


def view(g: Gen) -> Emit | None:
    x = g.pick()
    if x is None:
        return None
    r = x.rank
    forms = ["unsqueeze", "reshape", "expand", "squeeze"]
    if r >= 1:
        forms += ["slice", "slice", "select", "narrow", "movedim"]
    if r >= 2:
        forms += ["transpose", "permute", "diagonal", "mT", "unfold"]
    form = g.rng.choice(forms)
    expr: str | None
    if form == "unsqueeze":
        expr = f"{x.name}.unsqueeze({g.rng.randint(-r - 1, r)})"
    elif form == "squeeze":
        expr = f"{x.name}.squeeze({g.dim(x)})" if r and g.chance(0.7) else f"{x.name}.squeeze()"
    elif form == "reshape":
        expr = _reshape(g, x)
    elif form == "expand":
        expr = _expand(g, x)
    elif form == "slice":
        expr = _slice(g, x)
    elif form == "select":
        d = g.rng.randrange(r)
        size, n = x.shape[d], f"{x.name}.shape[{d}]"
        expr = None
        if size:  # an index written with the size is in range at every size >= 1
            index = g.choice((f"-{n}", f"{n} // 2", f"-({n} // 2) - 1")) if g.chance(0.25) else (
                g.rng.randint(-size, size - 1))
            expr = f"{x.name}.select({d}, {index})"
    elif form == "narrow":
        d = g.rng.randrange(r)
        start = g.rng.randint(0, x.shape[d])
        expr = f"{x.name}.narrow({d}, {start}, {g.rng.randint(0, x.shape[d] - start)})"
        if g.chance(0.25):  # n // 3 + n // 2 <= n at every size
            n = f"{x.name}.shape[{d}]"
            expr = f"{x.name}.narrow({d}, {n} // 3, {n} // 2)"
    elif form == "movedim":
        expr = f"{x.name}.movedim({g.dim(x)}, {g.dim(x)})"
    elif form == "transpose":
        expr = f"{x.name}.transpose({g.dim(x)}, {g.dim(x)})"
    elif form == "permute":
        expr = f"{x.name}.permute({', '.join(map(str, g.rng.sample(range(r), r)))})"
    elif form == "diagonal":
        expr = f"{x.name}.diagonal({g.rng.randint(-2, 2)}, {g.rng.randrange(r)}, {r - 1})"
    elif form == "mT":
        expr = f"{x.name}.mT"
    else:
        d = g.rng.randrange(r)
        size, step = g.rng.randint(1, max(x.shape[d], 1)), g.choice((1, 2))
        if g.train:  # overlapping windows with a gradient: torch's AOTAutograd copies the
            step = max(step, size)  # incoming gradient into that layout and loses elements
        expr = f"{x.name}.unfold({d}, {size}, {step})"
    return None if expr is None else Emit(expr, x.exact)


def reinterpret(g: Gen) -> Emit | None:
    x = g.pick(lambda v: v.dtype in SAME_SIZE_VIEWS and not g.train)
    if x is None or SAME_SIZE_VIEWS[x.dtype] not in {f"{d}" for d in g.dtypes}:
        return None
    # Reinterpreting float bits makes NaN payloads and signed zeros observable: exact only.
    return Emit(f"{x.name}.view({SAME_SIZE_VIEWS[x.dtype]})", x.exact) if x.exact else None


def _cat_partner(g: Gen, x: Val, d: int) -> Val | None:
    def fits(v: Val) -> bool:
        return v.rank == x.rank and all(
            a == b for i, (a, b) in enumerate(zip(v.shape, x.shape, strict=True)) if i != d)
    return g.pick(fits)


def copy_shape(g: Gen) -> Emit | None:
    x = g.pick()
    if x is None:
        return None
    r = x.rank
    form = g.rng.choice(["cat", "stack", "pad", "flip", "roll", "repeat", "contiguous", "tri",
                         "repeat_interleave"])
    if form in ("cat", "stack") and r:
        d = g.dim(x)
        y = _cat_partner(g, x, d if form == "cat" else -100) or x
        fn = "torch.cat" if form == "cat" else "torch.stack"
        return Emit(f"{fn}([{x.name}, {y.name}], {d})", x.exact and y.exact)
    if form == "pad" and r:
        k = g.rng.randint(1, min(r, 3))
        widths = [g.rng.randint(-1, 2) for _ in range(2 * k)]
        mode = g.choice(("constant", "constant", "reflect", "replicate", "circular"))
        if mode == "circular":  # eager reads memory no one wrote for a negative one (CUDA seed
            widths = [max(w, 0) for w in widths]  # 12, program 1716): undefined, not tested
        pads = ", ".join(map(str, widths))
        if mode == "constant":
            value = g.choice(("0", "1", "-2")) if not x.is_float() else g.choice(("0.5", "-1.0"))
            return Emit(f"torch.nn.functional.pad({x.name}, ({pads}), value={value})", x.exact)
        return Emit(f"torch.nn.functional.pad({x.name}, ({pads}), mode='{mode}')", x.exact)
    if form == "flip" and r:
        return Emit(f"torch.flip({x.name}, ({g.dim(x)},))", x.exact)
    if form == "roll":
        return Emit(f"torch.roll({x.name}, {g.rng.randint(-3, 3)}, {g.dim(x)})" if r
                    else f"torch.roll({x.name}, 1)", x.exact)
    if form == "repeat":
        reps = ", ".join(str(g.choice((1, 1, 2))) for _ in range(r + g.rng.randint(0, 1)))
        return Emit(f"{x.name}.repeat({reps or 2})", x.exact)
    if form == "tri" and r >= 2:
        fn = g.choice(("torch.tril", "torch.triu"))
        return Emit(f"{fn}({x.name}, {g.rng.randint(-2, 2)})", x.exact)
    if form == "repeat_interleave" and r:
        return Emit(f"{x.name}.repeat_interleave(2, {g.dim(x)})", x.exact)
    return Emit(f"{x.name}.contiguous()", x.exact)


def matmul(g: Gen) -> Emit | None:
    x = g.pick(lambda v: v.dtype in (torch.float32, torch.float64) and v.rank >= 2)
    if x is None:
        return None
    form = g.rng.randrange(3)
    if form == 0:
        return Emit(f"({x.name} @ {x.name}.mT)", False)
    if form == 1:
        return Emit(f"torch.matmul({x.name}.mT, {x.name})", False)
    w = g.pick(lambda v: v.dtype == x.dtype and v.rank == 2 and v.shape[0] == x.shape[-1])
    return None if w is None else Emit(f"({x.name} @ {w.name})", False)


OPS = (
    ("view", 22, view),
    ("reinterpret", 1, reinterpret),
    ("copy_shape", 10, copy_shape),
    ("matmul", 2, matmul),
)
