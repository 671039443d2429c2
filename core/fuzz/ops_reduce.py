"""Reduction, softmax, scan and sort generators over any dims, 0-d, size-1 and empty included."""

from __future__ import annotations

from polyduct.fuzz.gen import Emit, Gen, Val

# (template, exactness): "keep" preserves the input's exactness, "int" is exact for integer
# results, "disc" needs an exact input and is exact.
REDUCTIONS = (
    ("torch.sum({x}{dims})", "int"),
    ("torch.nansum({x}{dims})", "int"),
    ("{x}.sum({dims0})", "int"),
    ("torch.prod({xc}{dim1})", "int"),
    ("torch.mean({x}{dims})", "float"),
    ("torch.amax({x}{dims})", "keep"),
    ("torch.amin({x}{dims})", "keep"),
    ("torch.max({x}{one})[0]", "keep"),
    ("torch.min({x}{one})[0]", "keep"),
    ("torch.max({x}{one})[1]", "disc"),
    ("torch.argmax({x}{dim1})", "disc"),
    ("torch.argmin({x}{dim1})", "disc"),
    ("torch.any({x}{dims})", "disc"),
    ("torch.all({x}{dims})", "disc"),
    ("torch.count_nonzero({x}{dims_nokeep})", "disc"),
    ("torch.var({x}{dims}, correction={corr})", "float"),
    ("torch.std({x}{dims}, correction={corr})", "float"),
    ("torch.var_mean({x}{dims}, correction={corr})[{i}]", "float"),
    ("torch.logsumexp({x}{dims_req})", "float"),
    ("torch.linalg.vector_norm({x}, {ord}{dims})", "float"),
    ("torch.softmax({x}, {d})", "float"),
    ("torch.log_softmax({x}, {d})", "float"),
)
FLOAT_ONLY = ("mean", "var", "std", "logsumexp", "norm", "softmax")
SCANS = (
    ("torch.cumsum({x}, {d})", "int"),
    ("torch.cumprod({xc}, {d})", "int"),
    ("torch.cummax({x}, {d})[0]", "keep"),
    ("torch.cummin({x}, {d})[0]", "keep"),
    ("torch.cummax({x}, {d})[1]", "disc"),
    ("torch.cummin({x}, {d})[1]", "disc"),
    ("torch.logcumsumexp({x}, {d})", "float"),
)
SORTS = (
    ("torch.sort({x}, dim={d}, descending={desc}, stable=True)[0]", "keep"),
    ("torch.sort({x}, dim={d}, descending={desc}, stable=True)[1]", "disc"),
    ("torch.argsort({x}, dim={d}, descending={desc}, stable=True)", "disc"),
    ("torch.msort({x})", "keep"),
    ("torch.topk({x}, {k}, dim={d}, largest={desc})[0]", "keep"),
)


def _bounded(x: Val) -> str:
    """`x` for a float product: factors near 1, so that no order of multiplying overflows."""
    return f"{x.name}.clamp(-1.25, 1.25)" if x.is_float() else x.name


def _exact(kind: str, x: Val) -> bool | None:
    if kind == "keep":
        return x.exact
    if kind == "int":
        return None if x.exact else False
    return kind == "disc"


def _dims(g: Gen, x: Val) -> dict[str, str]:
    """Dim arguments in several spellings: all dims, one dim, a tuple of dims, keepdim."""
    keep = f", keepdim={g.chance(0.3)}"
    d = g.dim(x)
    one = f", {d}{keep}"
    if x.rank >= 2 and g.chance(0.4):
        picks = g.rng.sample(range(x.rank), g.rng.randint(2, x.rank))
        many = f", dim=({', '.join(map(str, picks))},){keep}"
    else:
        many = one
    dims = "" if g.chance(0.35) else many
    return {
        "dims": dims, "dims0": dims.removeprefix(", "), "dim1": "" if g.chance(0.3) else one, "one": one,
        "dims_req": many, "dims_nokeep": dims.split(", keepdim")[0], "d": str(d),
        "corr": str(g.choice((0, 1))), "i": str(g.choice((0, 1))),
        "ord": str(g.choice((2, 1, "float('inf')", 3))),
    }


def _tags(x: Val, prefix: str) -> tuple[str, ...]:
    tags = []
    if x.rank == 0:
        tags.append(f"{prefix}0d")
    if 0 in x.shape:
        tags.append(f"{prefix}_empty")
    return tuple(tags)


def reduction(g: Gen) -> Emit | None:
    x = g.pick()
    if x is None:
        return None
    template, kind = g.rng.choice(REDUCTIONS)
    if kind == "disc" and not x.exact:
        return None
    if any(f in template for f in FLOAT_ONLY) and not x.is_float():
        return None
    expr = template.format(x=x.name, xc=_bounded(x), **_dims(g, x))
    return Emit(expr, _exact(kind, x), _tags(x, "reduce"))


def scan(g: Gen) -> Emit | None:
    x = g.pick()
    if x is None:
        return None
    template, kind = g.rng.choice(SCANS)
    if (kind == "disc" and not x.exact) or ("logcumsumexp" in template and not x.is_float()):
        return None
    expr = template.format(x=x.name, xc=_bounded(x), d=g.dim(x))
    return Emit(expr, _exact(kind, x), _tags(x, "scan"))


def sort(g: Gen) -> Emit | None:
    x = g.pick(lambda v: not v.is_bool() or not g.train)
    if x is None:
        return None
    template, kind = g.rng.choice(SORTS)
    if kind == "disc" and not x.exact:
        return None
    if ("topk" in template or "msort" in template) and g.train:
        # which of tied elements (NaNs included) topk or the unstable msort puts first is
        # unspecified, and so is the gradient that follows it (CUDA seed 11, program 1981)
        return None
    if "msort" in template and x.rank == 0:
        return None
    d = g.dim(x)
    size = x.shape[d] if x.rank else 1
    k = g.rng.randint(0, size) if size else 0
    if not x.rank:
        # eager's CUDA topk returns before writing anything when k is 0, which leaves a 0-d
        # input's one-element result unwritten (CUDA seed 43, program 132); the CPU's holds the
        # element
        k = 1
    expr = template.format(x=x.name, d=d, desc=g.chance(0.5), k=k)
    return Emit(expr, _exact(kind, x), _tags(x, "sort"))


OPS = (
    ("reduction", 16, reduction),
    ("scan", 6, scan),
    ("sort", 5, sort),
)
