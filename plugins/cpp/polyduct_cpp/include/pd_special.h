// Special functions (torch.special semantics), computed in double and rounded to the value type.
// glibc provides j0/j1/y0/y1 and erf/erfc; libstdc++ (C++17) the modified Bessel functions; the
// rest are written here from their series, recurrences and asymptotic expansions.
#pragma once
#include <cmath>

namespace pd_sp {

constexpr double kPi = 3.14159265358979323846;
constexpr double kEuler = 0.57721566490153286061;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

inline double ndtr(double x) { return 0.5 * std::erfc(-x * 0.70710678118654752440); }

inline double erfcx(double x) {
    if (x != x) return x;
    if (x < 0) {
        if (x < -26.7) return kInf;
        return 2.0 * std::exp(x * x) - erfcx(-x);
    }
    if (x < 25.0) return std::exp(x * x) * std::erfc(x);
    // Asymptotic series 1/(x sqrt(pi)) * sum (-1)^k (2k-1)!! / (2x^2)^k.
    double inv = 1.0 / (2.0 * x * x), term = 1.0, sum = 1.0;
    for (int k = 1; k < 12; ++k) {
        term *= -(2.0 * k - 1.0) * inv;
        sum += term;
    }
    return sum / (x * 1.77245385090551602730);
}

inline double log_ndtr(double x) {
    if (x > 6.0) return std::log1p(-0.5 * std::erfc(x * 0.70710678118654752440));
    if (x > -1.0) return std::log(ndtr(x));
    double z = -x * 0.70710678118654752440;
    return std::log(0.5 * erfcx(z)) - z * z;
}

// Inverse of the normal CDF from below (p) with q = 1 - p given exactly by the caller.
inline double ndtri_pq(double p, double q) {
    if (p != p || q != q) return kNaN;
    if (p <= 0) return p == 0 ? -kInf : kNaN;
    if (q <= 0) return q == 0 ? kInf : kNaN;
    bool lower = p < q;
    double tail = lower ? p : q;
    double t = std::sqrt(-2.0 * std::log(tail));
    double x = t - (2.515517 + 0.802853 * t + 0.010328 * t * t) /
                       (1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t);
    x = -x;  // approximation of the lower-tail quantile of `tail`
    for (int it = 0; it < 4; ++it) {
        double e = 0.5 * std::erfc(-x * 0.70710678118654752440) - tail;
        double u = e * 2.50662827463100050242 * std::exp(0.5 * x * x);
        x = x - u / (1.0 + 0.5 * x * u);
    }
    return lower ? x : -x;
}

inline double erfinv(double y);

inline double ndtri(double p) {
    if (p >= 0.25 && p <= 0.75) return 1.41421356237309504880 * erfinv(2.0 * p - 1.0);
    return ndtri_pq(p, 1.0 - p);
}

inline double erfinv(double y) {
    if (y != y || y < -1.0 || y > 1.0) return kNaN;
    if (y == 1.0) return kInf;
    if (y == -1.0) return -kInf;
    double a = std::fabs(y), x;
    if (a < 0.5) {
        x = 0.88622692545275801365 * a * (1.0 + 0.26179938779914943654 * a * a);
        for (int it = 0; it < 4; ++it) {
            double e = std::erf(x) - a;
            x -= e / (1.12837916709551257390 * std::exp(-x * x));
        }
    } else {
        double q = (1.0 - a) * 0.5;
        x = -ndtri_pq(q, 1.0 - q) * 0.70710678118654752440;
        for (int it = 0; it < 2; ++it) {
            double e = std::erfc(x) - (1.0 - a);
            x += e / (1.12837916709551257390 * std::exp(-x * x));
        }
    }
    return y < 0 ? -x : x;
}

inline double digamma(double x) {
    if (x != x || x == kInf) return x;
    if (x == 0) return std::signbit(x) ? kInf : -kInf;
    if (x == -kInf) return kNaN;
    double result = 0.0;
    if (x < 0) {
        if (x == std::floor(x)) return kNaN;
        // Reflection: psi(1 - x) - psi(x) = pi / tan(pi x).
        double r = std::remainder(x, 1.0);
        result = -kPi / std::tan(kPi * r);
        x = 1.0 - x;
    }
    while (x < 10.0) {
        result -= 1.0 / x;
        x += 1.0;
    }
    double z = 1.0 / (x * x);
    double poly = z * (1.0 / 12 - z * (1.0 / 120 - z * (1.0 / 252 - z * (1.0 / 240 - z * (1.0 / 132)))));
    return result + std::log(x) - 0.5 / x - poly;
}

inline double trigamma(double x) {
    if (x != x) return x;
    double sign = 1.0, result = 0.0;
    if (x < 0.5) {
        // psi1(1 - x) + psi1(x) = pi^2 / sin^2(pi x)
        double s = std::sin(kPi * x);
        if (s == 0) return kInf;
        result = kPi * kPi / (s * s);
        sign = -1.0;
        x = 1.0 - x;
    }
    double acc = 0.0;
    while (x < 10.0) {
        acc += 1.0 / (x * x);
        x += 1.0;
    }
    double z = 1.0 / (x * x);
    double tail = 1.0 / x + z / 2.0 +
                  z / x * (1.0 / 6 - z * (1.0 / 30 - z * (1.0 / 42 - z * (1.0 / 30 - z * 5.0 / 66))));
    return result + sign * (acc + tail);
}

// Hurwitz zeta by Euler-Maclaurin summation.
inline double zeta(double s, double q) {
    // Checks in torch's order: a NaN order still gives inf for q in {0, -1, ...}.
    if (s == 1.0) return kInf;
    if (s < 1.0) return kNaN;
    if (q <= 0.0) {
        if (q == std::floor(q)) return kInf;
        if (s != std::floor(s)) return kNaN;
    }
    if (s != s || q != q || q == kInf) return kNaN;
    static const double b2k[12] = {1.0 / 6,          -1.0 / 30,         1.0 / 42,
                                   -1.0 / 30,        5.0 / 66,          -691.0 / 2730,
                                   7.0 / 6,          -3617.0 / 510,     43867.0 / 798,
                                   -174611.0 / 330,  854513.0 / 138,    -236364091.0 / 2730};
    // As Cephes (and torch): direct terms until q + n > 9, at least nine, then the tail; a
    // fixed nine left the tail to start below 9 (or below 0) for negative q.
    int n = 9;
    while (q + n <= 9.0 && n < (1 << 24)) ++n;
    double sum = 0.0;
    for (int k = 0; k < n; ++k) {
        double t = std::pow(q + k, -s);
        sum += t;
        if (std::fabs(t) < 1e-17 * std::fabs(sum)) return sum;
    }
    double a = q + n;
    double tail = std::pow(a, 1.0 - s) / (s - 1.0) + 0.5 * std::pow(a, -s);
    double fact = 1.0, rising = s, apow = std::pow(a, -s - 1.0);
    for (int j = 1; j <= 12; ++j) {
        fact *= (2.0 * j - 1.0) * (2.0 * j);
        double term = b2k[j - 1] / fact * rising * apow;
        tail += term;
        if (std::fabs(term) < 1e-17 * std::fabs(sum + tail)) break;
        rising *= (s + 2.0 * j - 1.0) * (s + 2.0 * j);
        apow /= a * a;
    }
    return sum + tail;
}

inline double polygamma(double n, double x) {
    if (x == kInf && n >= 2) return kNaN;  // torch's zeta(n + 1, inf)
    if (n == 0) return digamma(x);
    if (n == 1) return trigamma(x);
    double sign = std::fmod(n, 2.0) == 0 ? -1.0 : 1.0;
    return sign * std::exp(std::lgamma(n + 1.0)) * zeta(n + 1.0, x);
}

// Regularised incomplete gamma: series for P when x < a + 1, Lentz continued fraction for Q.
inline double igamma_series(double a, double x) {
    double sum = 1.0 / a, term = sum;
    for (int n = 1; n < 2000; ++n) {
        term *= x / (a + n);
        sum += term;
        if (std::fabs(term) < std::fabs(sum) * 1e-17) break;
    }
    return sum * std::exp(-x + a * std::log(x) - std::lgamma(a));
}

inline double igammac_cfrac(double a, double x) {
    const double tiny = 1e-300;
    double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
    for (int i = 1; i < 2000; ++i) {
        double an = -i * (i - a);
        b += 2.0;
        d = an * d + b;
        if (std::fabs(d) < tiny) d = tiny;
        c = b + an / c;
        if (std::fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        double delta = d * c;
        h *= delta;
        if (std::fabs(delta - 1.0) < 1e-16) break;
    }
    return std::exp(-x + a * std::log(x) - std::lgamma(a)) * h;
}

inline double igamma(double a, double x) {
    if (a < 0 || x < 0) return kNaN;  // NaN operands fall through torch's order of checks
    if (a == 0) return x > 0 ? 1.0 : kNaN;
    if (x == 0) return 0.0;
    if (std::isinf(a)) return std::isinf(x) ? kNaN : 0.0;
    if (std::isinf(x)) return 1.0;
    if (a != a || x != x) return kNaN;
    return x < a + 1.0 ? igamma_series(a, x) : 1.0 - igammac_cfrac(a, x);
}

inline double igammac(double a, double x) {
    if (a < 0 || x < 0) return kNaN;
    if (a == 0) return x > 0 ? 0.0 : kNaN;
    if (x == 0) return 1.0;
    if (std::isinf(a)) return std::isinf(x) ? kNaN : 1.0;
    if (std::isinf(x)) return 0.0;
    if (a != a || x != x) return kNaN;
    return x < a + 1.0 ? 1.0 - igamma_series(a, x) : igammac_cfrac(a, x);
}

// exp-scaled modified Bessel I_nu(x) for large x: asymptotic series.
inline double bessel_i_scaled_asym(double nu, double x) {
    double mu = 4.0 * nu * nu, term = 1.0, sum = 1.0;
    for (int k = 1; k < 30; ++k) {
        double next = -term * (mu - (2.0 * k - 1) * (2.0 * k - 1)) / (k * 8.0 * x);
        if (std::fabs(next) > std::fabs(term)) break;
        term = next;
        sum += term;
    }
    return sum / std::sqrt(2.0 * kPi * x);
}

inline double bessel_k_scaled_asym(double nu, double x) {
    double mu = 4.0 * nu * nu, term = 1.0, sum = 1.0;
    for (int k = 1; k < 30; ++k) {
        double next = term * (mu - (2.0 * k - 1) * (2.0 * k - 1)) / (k * 8.0 * x);
        if (std::fabs(next) > std::fabs(term)) break;
        term = next;
        sum += term;
    }
    return sum * std::sqrt(kPi / (2.0 * x));
}

inline double bessel_i(int nu, double x) {
    if (x != x || std::isinf(x)) return kNaN;  // torch gives NaN at +-inf
    double a = std::fabs(x);
    double v = std::isinf(a) ? kInf : std::cyl_bessel_i(double(nu), a);
    return (nu == 1 && x < 0) ? -v : v;
}

inline double bessel_ie(int nu, double x) {
    if (x != x) return x;
    double a = std::fabs(x);
    double v = a > 500.0 ? bessel_i_scaled_asym(nu, a) : std::cyl_bessel_i(double(nu), a) * std::exp(-a);
    return (nu == 1 && x < 0) ? -v : v;
}

inline double bessel_k(int nu, double x) {
    if (x != x) return x;
    if (x < 0) return kNaN;
    if (x == 0) return kInf;
    if (x > 700.0) return 0.0;
    return std::cyl_bessel_k(double(nu), x);
}

inline double bessel_ke(int nu, double x) {
    if (x != x) return x;
    if (x < 0) return kNaN;
    if (x == 0) return kInf;
    if (x > 500.0) return bessel_k_scaled_asym(nu, x);
    return std::cyl_bessel_k(double(nu), x) * std::exp(x);
}

inline double bessel_j(int nu, double x) {
    if (std::isinf(x)) return kNaN;  // as torch
    return nu == 0 ? ::j0(x) : ::j1(x);
}

inline double bessel_y(int nu, double x) {
    if (x != x || x == kInf) return kNaN;
    if (x < 0) return kNaN;
    if (x == 0) return -kInf;
    return nu == 0 ? ::y0(x) : ::y1(x);
}

inline double airy_ai(double x) {
    if (x != x) return x;
    if (std::isinf(x)) return kNaN;  // as torch
    if (std::fabs(x) <= 1.0) {
        // Maclaurin series Ai = c1 f - c2 g.
        const double c1 = 0.355028053887817239260, c2 = 0.258819403792806798405;
        double x3 = x * x * x, f = 1.0, g = x, tf = 1.0, tg = x;
        for (int k = 1; k < 40; ++k) {
            tf *= x3 / ((3.0 * k - 1) * (3.0 * k));
            tg *= x3 / ((3.0 * k) * (3.0 * k + 1));
            f += tf;
            g += tg;
        }
        return c1 * f - c2 * g;
    }
    double z = 2.0 / 3.0 * std::pow(std::fabs(x), 1.5);
    if (x > 0) {
        if (z > 700.0) return 0.0;
        return std::sqrt(x / 3.0) / kPi * std::cyl_bessel_k(1.0 / 3.0, z);
    }
    double j = std::cyl_bessel_j(1.0 / 3.0, z), y = std::cyl_neumann(1.0 / 3.0, z);
    return std::sqrt(-x) / 3.0 * (1.5 * j - 0.86602540378443864676 * y);
}

inline double spherical_j0(double x) {
    if (std::isinf(x)) return 0.0;
    if (std::fabs(x) < 0.5) {
        double x2 = x * x;
        return 1.0 - x2 / 6.0 * (1.0 - x2 / 20.0 * (1.0 - x2 / 42.0 * (1.0 - x2 / 72.0 * (1.0 - x2 / 110.0))));
    }
    return std::sin(x) / x;
}

#include "pd_poly.h"

}  // namespace pd_sp
