// Orthogonal polynomials of degree n (torch.special semantics: n < 0 gives 0; closed trigonometric
// forms for large n inside (-1, 1)). Included inside namespace pd_sp.
#pragma once

inline int64_t poly_degree(double n) { return n != n ? -1 : int64_t(n); }

inline double cheb_t(double x, double nd) {
    int64_t n = poly_degree(nd);
    if (n < 0) return 0.0;
    if (std::fabs(x) == 1.0) return (x > 0 || n % 2 == 0) ? 1.0 : -1.0;
    if (n > 6 && std::fabs(x) < 1.0) return std::cos(n * std::acos(x));
    if (n == 0) return 1.0;
    double p = 1.0, q = x;
    for (int64_t k = 2; k <= n; ++k) {
        double r = 2.0 * x * q - p;
        p = q;
        q = r;
    }
    return q;
}

inline double cheb_u(double x, double nd) {
    int64_t n = poly_degree(nd);
    if (n < 0) return 0.0;
    if (std::fabs(x) == 1.0) return (x > 0 || n % 2 == 0) ? double(n + 1) : -double(n + 1);
    if (n > 8 && std::fabs(x) < 1.0) {
        double t = std::acos(x);
        if (std::sin(t) != 0) return std::sin((n + 1) * t) / std::sin(t);
        return (n + 1) * std::cos((n + 1) * t) / x;
    }
    if (n == 0) return 1.0;
    double p = 1.0, q = 2.0 * x;
    for (int64_t k = 2; k <= n; ++k) {
        double r = 2.0 * x * q - p;
        p = q;
        q = r;
    }
    return q;
}

inline double cheb_v(double x, double nd) {
    int64_t n = poly_degree(nd);
    if (n < 0) return 0.0;
    if (std::fabs(x) == 1.0) {
        if (x > 0) return 1.0;
        return n % 2 == 0 ? double(2 * n + 1) : -double(2 * n + 1);
    }
    if (n > 8 && std::fabs(x) < 1.0) {
        double t = std::acos(x);
        if (std::sin(t / 2) != 1.0) return std::cos((n + 0.5) * t) / std::cos(t / 2);
        return n % 2 == 0 ? double(2 * n + 1) : -double(2 * n + 1);
    }
    if (n == 0) return 1.0;
    double p = 1.0, q = 2.0 * x - 1.0;
    for (int64_t k = 2; k <= n; ++k) {
        double r = 2.0 * x * q - p;
        p = q;
        q = r;
    }
    return q;
}

inline double cheb_w(double x, double nd) {
    int64_t n = poly_degree(nd);
    if (n < 0) return 0.0;
    if (std::fabs(x) == 1.0) {
        if (x > 0) return double(2 * n + 1);
        return n % 2 == 0 ? 1.0 : -1.0;
    }
    if (n > 8 && std::fabs(x) < 1.0) {
        double t = std::acos(x);
        if (std::cos(t / 2) != 1.0) return std::sin((n + 0.5) * t) / std::sin(t / 2);
        if (x > 0) return double(2 * n + 1);
        return n % 2 == 0 ? 1.0 : -1.0;
    }
    if (n == 0) return 1.0;
    double p = 1.0, q = 2.0 * x + 1.0;
    for (int64_t k = 2; k <= n; ++k) {
        double r = 2.0 * x * q - p;
        p = q;
        q = r;
    }
    return q;
}

inline double hermite_h(double x, double nd) {
    int64_t n = poly_degree(nd);
    if (n < 0) return 0.0;
    if (n == 0) return 1.0;
    double p = 1.0, q = 2.0 * x;
    for (int64_t k = 1; k < n; ++k) {
        double r = 2.0 * x * q - 2.0 * k * p;
        p = q;
        q = r;
    }
    return q;
}

inline double hermite_he(double x, double nd) {
    int64_t n = poly_degree(nd);
    if (n < 0) return 0.0;
    if (n == 0) return 1.0;
    double p = 1.0, q = x;
    for (int64_t k = 1; k < n; ++k) {
        double r = x * q - k * p;
        p = q;
        q = r;
    }
    return q;
}

inline double laguerre_l(double x, double nd) {
    int64_t n = poly_degree(nd);
    if (n < 0) return 0.0;
    if (std::fabs(x) == 0.0 || n == 0) return 1.0;
    double p = 1.0, q = 1.0 - x;
    for (int64_t k = 1; k < n; ++k) {
        double r = ((2.0 * k + 1.0 - x) * q - k * p) / (k + 1.0);
        p = q;
        q = r;
    }
    return q;
}

inline double legendre_p(double x, double nd) {
    int64_t n = poly_degree(nd);
    if (n < 0) return 0.0;
    if (std::fabs(x) == 1.0) return (x > 0 || n % 2 == 0) ? 1.0 : -1.0;
    if (n == 0) return 1.0;
    double p = 1.0, q = x;
    for (int64_t k = 1; k < n; ++k) {
        double r = ((2.0 * k + 1.0) * x * q - k * p) / (k + 1.0);
        p = q;
        q = r;
    }
    return q;
}
