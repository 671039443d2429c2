// polyduct C++ kernel helpers: dtype conversion, integer semantics, NaN-aware min/max,
// reduction accumulators, Philox RNG and run-time error reporting. No ATen, no torch headers.
#pragma once
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#ifdef _OPENMP
#include <omp.h>
#endif


#ifdef PD_VECTOR_MATH
#include "pd_vmath.h"  // libmvec, one implementation per function for every call
#endif

#define PD_INLINE static inline __attribute__((always_inline))

#ifdef _OPENMP
// Items per chunk of a threaded loop over `count` items doing `work` elements of work in all:
// about four chunks per thread, none under ~16K elements (the cost of claiming one is an atomic).
PD_INLINE int64_t pd_chunk_size(int64_t count, int64_t work) {
    const int64_t per_item = std::max<int64_t>(1, work / std::max<int64_t>(1, count));
    const int64_t by_threads = (count + 4 * omp_get_num_threads() - 1) / (4 * omp_get_num_threads());
    return std::max<int64_t>({int64_t(1), by_threads, 16384 / per_item});
}
#endif
#define PD_MEMBER inline __attribute__((always_inline))

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels answer EINVAL and nothing happens
#endif
#endif
// Outputs of at least this many bytes are faulted in ahead (pd_prefault); above the second
// threshold by all threads. Both can be set with -D (extra_flags).
#ifndef PD_PREFAULT_MIN_BYTES
#define PD_PREFAULT_MIN_BYTES (int64_t(1) << 20)
#endif
#ifndef PD_PREFAULT_THREADS_BYTES
#define PD_PREFAULT_THREADS_BYTES (int64_t(8) << 20)
#endif

// Fault in the pages of a freshly allocated output with one madvise(MADV_POPULATE_WRITE) per
// thread instead of one page fault per page as the kernel first writes it (a large fresh
// allocation is a new mapping: 16384 faults for 64 MiB, more time than a softmax over it). A
// hint only, contents unchanged: skipped for small buffers, when the first page is already
// resident (memory reused from the heap, an in-place output), off Linux, or when it fails.
static inline void pd_prefault(const void* ptr, int64_t bytes, bool threads) {
#if defined(__linux__)
    if (bytes < PD_PREFAULT_MIN_BYTES) return;
    static const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    const uintptr_t lo = (uintptr_t(ptr) + page - 1) / page * page;
    const uintptr_t hi = (uintptr_t(ptr) + uintptr_t(bytes)) / page * page;
    unsigned char resident = 0;
    if (hi <= lo || mincore((void*)lo, page, &resident) != 0 || (resident & 1)) return;
    const uintptr_t pages = (hi - lo) / page;
#ifdef _OPENMP
    if (threads && bytes >= PD_PREFAULT_THREADS_BYTES) {
#pragma omp parallel
        {
            const uintptr_t t = uintptr_t(omp_get_thread_num()), n = uintptr_t(omp_get_num_threads());
            const uintptr_t a = lo + pages * t / n * page, b = lo + pages * (t + 1) / n * page;
            if (b > a) madvise((void*)a, b - a, MADV_POPULATE_WRITE);
        }
        return;
    }
#endif
    (void)threads;
    madvise((void*)lo, hi - lo, MADV_POPULATE_WRITE);
#else
    (void)ptr; (void)bytes; (void)threads;
#endif
}

// A heap array owned by a scope (in place of std::unique_ptr<T[]>: <memory> alone adds ~0.1 s
// to every cold compile). Never empty, so a zero-length row still has a valid pointer.
template <class T> struct pd_array {
    T* p;
    explicit pd_array(int64_t n) : p(new T[n > 0 ? n : 1]) {}
    ~pd_array() { delete[] p; }
    pd_array(const pd_array&) = delete;
    pd_array& operator=(const pd_array&) = delete;
    PD_MEMBER T& operator[](int64_t i) const { return p[i]; }
    PD_MEMBER T* get() const { return p; }
};
#define PD_UNLIKELY(x) __builtin_expect(!!(x), 0)

typedef _Float16 pd_half;
typedef uint16_t pd_bf16;

template <class To, class From> PD_INLINE To pd_bitcast(From v) {
    static_assert(sizeof(To) == sizeof(From), "bitcast needs equal sizes");
    To out;
    std::memcpy(&out, &v, sizeof(To));
    return out;
}

PD_INLINE float pd_bf16_to_f32(pd_bf16 b) { return pd_bitcast<float>(uint32_t(b) << 16); }

PD_INLINE pd_bf16 pd_f32_to_bf16(float f) {
    // Round to nearest even, as torch does; NaN stays a quiet NaN.
    uint32_t u = pd_bitcast<uint32_t>(f);
    if (f != f) return pd_bf16((u >> 16) | 0x0040u);  // keep sign and payload, force quiet
    u += 0x7fffu + ((u >> 16) & 1u);
    return pd_bf16(u >> 16);
}

PD_INLINE float pd_round_f16(float x) { return float(pd_half(x)); }
PD_INLINE float pd_round_bf16(float x) { return pd_bf16_to_f32(pd_f32_to_bf16(x)); }

// Integer semantics (docs/conventions.md): torch floor division and Python remainder.
template <class T> PD_INLINE T pd_floordiv(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
        return std::floor(a / b);
    } else {
        T q = a / b;
        return (a % b != 0 && ((a < 0) != (b < 0))) ? T(q - 1) : q;
    }
}

// Floats: C fmod (exact) and Python's float % (a zero takes b's sign); torch's vectorised CPU
// path gives NaN where a/b overflows, which is wrong (docs/conformance.md, oracle audit).
template <class T> PD_INLINE T pd_remainder(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
        T r = std::fmod(a, b);  // a zero keeps fmod's sign (a's), as torch's kernels do
        return (r != 0 && ((r < 0) != (b < 0))) ? T(r + b) : r;
    } else {
        T r = a % b;
        return (r != 0 && ((r < 0) != (b < 0))) ? T(r + b) : r;
    }
}

template <class T> PD_INLINE T pd_mod(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return std::fmod(a, b);
    else return T(a % b);
}

// Shifts as torch: a shift by >= the bit width gives 0 (or the sign for signed right shifts).
template <class T> PD_INLINE T pd_shl(T a, T b) {
    using U = std::make_unsigned_t<T>;
    constexpr int64_t bits = sizeof(T) * 8;
    if (int64_t(b) < 0 || int64_t(b) >= bits) return T(0);
    return T(U(a) << U(b));
}

template <class T> PD_INLINE T pd_shr(T a, T b) {
    constexpr int64_t bits = sizeof(T) * 8;
    if (int64_t(b) < 0 || int64_t(b) >= bits) return (std::is_signed_v<T> && a < 0) ? T(-1) : T(0);
    return T(a >> b);
}

template <class T> PD_INLINE T pd_ipow(T base, T exp) {
    if (exp < 0) {
        if (base == 1) return T(1);
        if (base == -1) return (exp & 1) ? T(-1) : T(1);
        return T(0);
    }
    using U = std::make_unsigned_t<T>;
    U result = 1, b = U(base);
    uint64_t e = uint64_t(exp);
    while (e) {
        if (e & 1) result = U(result * b);
        b = U(b * b);
        e >>= 1;
    }
    return T(result);
}

// NaN-propagating maximum/minimum (torch.maximum/minimum).
template <class T> PD_INLINE T pd_maximum(T a, T b) {
    // A NaN in a wins through the second select, a NaN in b because a > NaN is false. Two
    // selects (no short-circuit ||) keep the scalar lane fold free of branches.
    if constexpr (std::is_floating_point_v<T>) {
        const T r = a > b ? a : b;
        return a != a ? a : r;
    } else {
        return a > b ? a : b;
    }
}

template <class T> PD_INLINE T pd_minimum(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
        const T r = a < b ? a : b;
        return a != a ? a : r;
    } else {
        return a < b ? a : b;
    }
}

template <class T> PD_INLINE T pd_sign(T x) {
    if constexpr (std::is_floating_point_v<T>) {
        return T((T(0) < x) - (x < T(0)));  // sign(NaN) is 0 in torch
    } else if constexpr (std::is_same_v<T, bool>) {
        return x;
    } else {
        return T((T(0) < x) - (x < T(0)));
    }
}

template <class T> PD_INLINE T pd_nextafter(T x, T y) { return std::nextafter(x, y); }

// nextafter of float16 (H = pd_half) or bfloat16 (H = pd_bf16) values held in float: the
// neighbour in H itself, by stepping its 16-bit pattern (a float step would round back to x).
template <class H> PD_INLINE float pd_nextafter16(float x, float y) {
    if (x != x || y != y) return x + y;
    if (x == y) return y;
    uint16_t h;
    if constexpr (std::is_same_v<H, pd_half>) h = pd_bitcast<uint16_t>(pd_half(x));
    else h = pd_f32_to_bf16(x);
    if (x == 0) h = uint16_t(y > 0 ? 0x0001u : 0x8001u);  // the smallest subnormal toward y
    else h = uint16_t(((y > x) == (x > 0)) ? h + 1 : h - 1);
    if constexpr (std::is_same_v<H, pd_half>) return float(pd_bitcast<pd_half>(h));
    else return pd_bf16_to_f32(h);
}

// cosh/sinh are finite up to the top of the range (torch's float32 CPU kernel overflows past 89).
template <class T> PD_INLINE T pd_cosh(T x) { return std::cosh(x); }
template <class T> PD_INLINE T pd_sinh(T x) { return std::sinh(x); }

// The normal CDF as erfc(-x/sqrt 2)/2: no cancellation in the lower tail, unlike torch's (1 + erf(x/sqrt 2))/2.
template <class T> PD_INLINE T pd_ndtr(T x) {
    return T(0.5) * std::erfc(x * T(-0.70710678118654752440));
}

#if defined(__FMA__)
#define PD_FMAF(a, b, c) __builtin_fmaf(a, b, c)
#else
#define PD_FMAF(a, b, c) ((a) * (b) + (c))
#endif

// e^y for y in [-87, 0] (below clamps to -87; NaN stays NaN): 2^n e^r with |r| <= ln2/2, n
// rounded by the 1.5 * 2^23 shift, ln2 in two parts (n * hi exact), e^r = 1 + r + r^2 P(r).
PD_INLINE float pd_exp_nonpositive(float y) {
    y = y < -87.0f ? -87.0f : y;
    const float k = PD_FMAF(y, 1.44269504f, 12582912.0f);
    const float n = k - 12582912.0f;
    float r = PD_FMAF(n, -0.693145751953125f, y);
    r = PD_FMAF(n, -1.428606765330187e-06f, r);
    float p = 1.381461159e-03f;
    p = PD_FMAF(p, r, 8.368710056e-03f);
    p = PD_FMAF(p, r, 4.166838899e-02f);
    p = PD_FMAF(p, r, 1.666652113e-01f);
    p = PD_FMAF(p, r, 4.999999404e-01f);
    p = PD_FMAF(p, r * r, r) + 1.0f;
    return p * pd_bitcast<float>((pd_bitcast<int32_t>(k) - 0x4B400000 + 127) << 23);
}

// float erf, within 1.6 ulp of the exact value and 1 from |x| = 3.92 on, where it rounds there
// (glibc's vector erff, used before: 4 ulp, 1 from 3.65, which lgamma(erf(x)) turned into inf
// where eager gives 16.6). |x| < 0.921875: x + x P(x^2); beyond: 1 - t e^(Q(t) - x^2), the
// tail erfc, with t = 1 / (1 + |x|/2). Both are evaluated and one selected, so loops stay SIMD;
// as fast as glibc's (4M elements, one core). Coefficients fitted to float64 erf/erfc
// (least squares reweighted towards the largest error).
PD_INLINE float pd_erf(float x) {
    const float a = std::fabs(x);
    const float s = x * x;
    float p = -5.990851205e-04f;
    p = PD_FMAF(p, s, 4.993179813e-03f);
    p = PD_FMAF(p, s, -2.676661685e-02f);
    p = PD_FMAF(p, s, 1.128181592e-01f);
    p = PD_FMAF(p, s, -3.761249483e-01f);
    p = PD_FMAF(p, s, 1.283791512e-01f);
    const float t = 1.0f / PD_FMAF(0.5f, a, 1.0f);
    float q = -2.770306468e-01f;
    q = PD_FMAF(q, t, 1.079747200e+00f);
    q = PD_FMAF(q, t, -1.502984285e+00f);
    q = PD_FMAF(q, t, 7.625002861e-01f);
    q = PD_FMAF(q, t, -2.360633314e-01f);
    q = PD_FMAF(q, t, 4.479861856e-01f);
    q = PD_FMAF(q, t, 9.906278253e-01f);
    q = PD_FMAF(q, t, -1.264991403e+00f);
    const float tail = t * pd_exp_nonpositive(q - s);
    return a < 0.921875f ? PD_FMAF(x, p, x) : std::copysign(1.0f - tail, x);
}
template <class T> PD_INLINE auto pd_erf(T x) -> decltype(std::erf(x)) { return std::erf(x); }

// signbit through the bits (std::signbit on float trips a GCC 12 vectoriser ICE).
template <class T> PD_INLINE bool pd_signbit(T x) {
    if constexpr (std::is_same_v<T, float>) return (pd_bitcast<uint32_t>(x) >> 31) != 0;
    else if constexpr (std::is_same_v<T, double>) return (pd_bitcast<uint64_t>(x) >> 63) != 0;
    else if constexpr (std::is_signed_v<T>) return x < 0;
    else return false;
}

template <class T> PD_INLINE T pd_frexp(T x, int32_t* e) {
    int ex = 0;
    if (!std::isfinite(x)) {
        *e = 0;
        return x;
    }
    T m = std::frexp(x, &ex);
    *e = int32_t(ex);
    return m;
}

template <class T> PD_INLINE T pd_sigmoid(T x) { return T(1) / (T(1) + std::exp(-x)); }

template <class T> PD_INLINE T pd_lgamma(T x) {
    int sign = 0;
    if constexpr (std::is_same_v<T, float>) return ::lgammaf_r(x, &sign);
    else return ::lgamma_r(x, &sign);
}

template <class T> PD_INLINE T pd_round(T x) { return std::nearbyint(x); }

template <class T> PD_INLINE T pd_ldexp(T x, T n) { return x * std::exp2(n); }

// Error slot shared by every thread of a kernel call: [code, what, index, size].
PD_INLINE void pd_report(int64_t* err, int64_t code, int64_t what, int64_t index, int64_t size) {
    int64_t expected = 0;
    if (__atomic_compare_exchange_n(&err[0], &expected, -1, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        err[1] = what;
        err[2] = index;
        err[3] = size;
        __atomic_store_n(&err[0], code, __ATOMIC_RELEASE);
    }
}

// Checked index: reports and returns 0 (a safe address) when out of [0, size).
PD_INLINE int64_t pd_check_index(int64_t* err, int64_t what, int64_t index, int64_t raw,
                               int64_t size) {
    if (PD_UNLIKELY(index < 0 || index >= size)) {
        pd_report(err, 1, what, raw, size);
        return 0;
    }
    return index;
}

// searchsorted over n boundaries read through `at(i)` (a lambda doing the load).
template <class T, class F> PD_INLINE int64_t pd_bucketize(T v, int64_t n, bool right, F at) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        auto m = at(mid);
        bool go_right = right ? !(v < m) : (m < v);
        if (go_right) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

#include "pd_reduce.h"
#include "pd_random.h"
#include "pd_special.h"

// Sort order as torch: NaN sorts above every number (last ascending, first descending).
template <bool DESC, class T> PD_INLINE bool pd_sort_less(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
        if (DESC) return (a != a && b == b) || a > b;
        return (a == a && b != b) || a < b;
    } else {
        return DESC ? (a > b) : (a < b);
    }
}
