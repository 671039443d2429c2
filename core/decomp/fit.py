"""Hand-run generator of the Chebyshev tables in `polyduct.decomp.bessel_tables` (needs mpmath).

Each table is the Chebyshev expansion, on t in [-1, 1], of a smooth function built from a special
function (scaled so that it varies slowly), computed at 40 significant digits from mpmath's values
and cut where the coefficients fall below 1e-18 of the largest. Run
`python -m polyduct.decomp.fit MODULE > core/decomp/MODULE.py` for MODULE one of `bessel_tables`,
`jy_tables`, `airy_tables` to regenerate; the output is deterministic.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import mpmath

Fn = Callable[[mpmath.mpf], mpmath.mpf]


def chebyshev_coeffs(f: Fn, n: int = 64, cutoff: float = 1e-18) -> tuple[float, ...]:
    """Chebyshev coefficients c_k (c_0 already halved) of f on [-1, 1], trailing tiny ones cut."""
    nodes = [mpmath.cos(mpmath.pi * (j + mpmath.mpf(0.5)) / n) for j in range(n)]
    values = [f(t) for t in nodes]
    coeffs = []
    for k in range(n):
        s = mpmath.fsum(
            v * mpmath.cos(mpmath.pi * k * (j + mpmath.mpf(0.5)) / n) for j, v in enumerate(values)
        )
        coeffs.append(2 * s / n)
    coeffs[0] /= 2
    big = max(abs(c) for c in coeffs)
    last = max(k for k, c in enumerate(coeffs) if abs(c) > cutoff * big)
    return tuple(float(c) for c in coeffs[: last + 1])


def _i0e_small(t: mpmath.mpf) -> mpmath.mpf:  # x = 4 (t + 1) in [0, 8]
    x = 4 * (t + 1)
    return mpmath.exp(-x) * mpmath.besseli(0, x)


def _i0e_large(t: mpmath.mpf) -> mpmath.mpf:  # x = 8 / u, u = (t + 1) / 2 in (0, 1]
    x = 16 / (t + 1)
    return mpmath.sqrt(x) * mpmath.exp(-x) * mpmath.besseli(0, x)


def _i1e_small(t: mpmath.mpf) -> mpmath.mpf:
    x = 4 * (t + 1)
    return mpmath.exp(-x) * mpmath.besseli(1, x) / x


def _i1e_large(t: mpmath.mpf) -> mpmath.mpf:
    x = 16 / (t + 1)
    return mpmath.sqrt(x) * mpmath.exp(-x) * mpmath.besseli(1, x)


def _k0_small(t: mpmath.mpf) -> mpmath.mpf:  # y = x^2 = 2 (t + 1) in [0, 4]
    x = mpmath.sqrt(2 * (t + 1))
    return mpmath.besselk(0, x) + mpmath.log(x / 2) * mpmath.besseli(0, x)


def _k1_small(t: mpmath.mpf) -> mpmath.mpf:
    x = mpmath.sqrt(2 * (t + 1))
    return (mpmath.besselk(1, x) - mpmath.log(x / 2) * mpmath.besseli(1, x) - 1 / x) / x


def _k0e_large(t: mpmath.mpf) -> mpmath.mpf:  # x = 2 / u, u = (t + 1) / 2 in (0, 1]
    x = 4 / (t + 1)
    return mpmath.sqrt(x) * mpmath.exp(x) * mpmath.besselk(0, x)


def _k1e_large(t: mpmath.mpf) -> mpmath.mpf:
    x = 4 / (t + 1)
    return mpmath.sqrt(x) * mpmath.exp(x) * mpmath.besselk(1, x)


def _x_small(t: mpmath.mpf) -> mpmath.mpf:  # x^2 = 32 (t + 1) in [0, 64]
    return mpmath.sqrt(32 * (t + 1))


def _j0_small(t: mpmath.mpf) -> mpmath.mpf:
    return mpmath.besselj(0, _x_small(t))


def _j1_small(t: mpmath.mpf) -> mpmath.mpf:
    x = _x_small(t)
    return mpmath.besselj(1, x) / x


def _y0_small(t: mpmath.mpf) -> mpmath.mpf:  # Y0 - (2/pi) log(x/2) J0: even and entire
    x = _x_small(t)
    return mpmath.bessely(0, x) - 2 / mpmath.pi * mpmath.log(x / 2) * mpmath.besselj(0, x)


def _y1_small(t: mpmath.mpf) -> mpmath.mpf:  # (Y1 - (2/pi) (log(x/2) J1 - 1/x)) / x
    x = _x_small(t)
    log_part = mpmath.log(x / 2) * mpmath.besselj(1, x) - 1 / x
    return (mpmath.bessely(1, x) - 2 / mpmath.pi * log_part) / x


def _hankel_pq(order: int, t: mpmath.mpf, which: str) -> mpmath.mpf:
    """P (which "p") or Q/u of J/Y = sqrt(2/(pi x)) (P cos|sin chi -+ Q sin|cos chi),
    chi = x - (2 order + 1) pi/4, at x = 8/u, u^2 = (t + 1)/2 in (0, 1]."""
    u = mpmath.sqrt((t + 1) / 2)
    x = 8 / u
    chi = x - (2 * order + 1) * mpmath.pi / 4
    j, y = mpmath.besselj(order, x), mpmath.bessely(order, x)
    s = mpmath.sqrt(2 / (mpmath.pi * x))
    if which == "p":
        return (j * mpmath.cos(chi) + y * mpmath.sin(chi)) / s
    return (y * mpmath.cos(chi) - j * mpmath.sin(chi)) / (s * u)


JY_TABLES: dict[str, Fn] = {
    "J0_SMALL": _j0_small,
    "J1_SMALL": _j1_small,
    "Y0_SMALL": _y0_small,
    "Y1_SMALL": _y1_small,
    "P0_LARGE": lambda t: _hankel_pq(0, t, "p"),
    "Q0_LARGE": lambda t: _hankel_pq(0, t, "q"),
    "P1_LARGE": lambda t: _hankel_pq(1, t, "p"),
    "Q1_LARGE": lambda t: _hankel_pq(1, t, "q"),
}

AIRY_MID = (-8, 2)  # Ai itself is fitted on this interval


def _ai_mid(t: mpmath.mpf) -> mpmath.mpf:
    lo, hi = AIRY_MID
    return mpmath.airyai((hi - lo) / 2 * t + mpmath.mpf(hi + lo) / 2)


def _ai_pos(t: mpmath.mpf) -> mpmath.mpf:  # 2 sqrt(pi) x^(1/4) e^zeta Ai(x), zeta = zeta(2) / u
    zeta = mpmath.mpf(2) / 3 * mpmath.mpf(AIRY_MID[1]) ** 1.5 / ((t + 1) / 2)
    x = (1.5 * zeta) ** (mpmath.mpf(2) / 3)
    return 2 * mpmath.sqrt(mpmath.pi) * x**0.25 * mpmath.exp(zeta) * mpmath.airyai(x)


def _ai_neg(t: mpmath.mpf, which: str) -> mpmath.mpf:
    """P (which "p") or Q/u of Ai(-z) = (P sin chi - Q cos chi) / (sqrt(pi) z^(1/4)),
    chi = zeta + pi/4, zeta = zeta(8) / u, u^2 = (t + 1)/2 in (0, 1]."""
    u = mpmath.sqrt((t + 1) / 2)
    zeta = mpmath.mpf(2) / 3 * mpmath.mpf(-AIRY_MID[0]) ** 1.5 / u
    z = (1.5 * zeta) ** (mpmath.mpf(2) / 3)
    chi = zeta + mpmath.pi / 4
    s = 1 / (mpmath.sqrt(mpmath.pi) * z**0.25)
    ai, bi = mpmath.airyai(-z), mpmath.airybi(-z)
    if which == "p":
        return (ai * mpmath.sin(chi) + bi * mpmath.cos(chi)) / s
    return (bi * mpmath.sin(chi) - ai * mpmath.cos(chi)) / (s * u)


AIRY_TABLES: dict[str, Fn] = {
    "AI_MID": _ai_mid,
    "AI_POS": _ai_pos,
    "AI_NEG_P": lambda t: _ai_neg(t, "p"),
    "AI_NEG_Q": lambda t: _ai_neg(t, "q"),
}

BESSEL_TABLES: dict[str, Fn] = {
    "I0E_SMALL": _i0e_small,
    "I0E_LARGE": _i0e_large,
    "I1E_SMALL": _i1e_small,
    "I1E_LARGE": _i1e_large,
    "K0_SMALL": _k0_small,
    "K1_SMALL": _k1_small,
    "K0E_LARGE": _k0e_large,
    "K1E_LARGE": _k1e_large,
}

MODULES: dict[str, tuple[str, dict[str, Fn], int]] = {  # name: (doc, tables, Chebyshev nodes)
    "bessel_tables": ("the Bessel decompositions", BESSEL_TABLES, 48),
    "jy_tables": ("the Bessel J/Y decompositions", JY_TABLES, 64),
    "airy_tables": ("the Airy decomposition", AIRY_TABLES, 96),
}


def main(argv: list[str]) -> None:
    """Print the tables module named by argv[0] (default bessel_tables)."""
    mpmath.mp.dps = 40
    doc, tables, nodes = MODULES[argv[0] if argv else "bessel_tables"]
    print(f'"""Chebyshev tables of {doc}; generated by polyduct.decomp.fit."""')
    print()
    print("from __future__ import annotations")
    for name, f in tables.items():
        print()
        print(f"{name} = (")
        for c in chebyshev_coeffs(f, nodes):
            print(f"    {c!r},")
        print(")")


if __name__ == "__main__":
    main(sys.argv[1:])
