// Reduction accumulators. Each has add(value, flat_index) and merge(other); kernels keep one per
// SIMD lane and merge lanes at the end, so combine order differs from eager only for sum/prod.
#pragma once

template <class T> PD_INLINE bool pd_isnan(T x) {
    if constexpr (std::is_floating_point_v<T>) return x != x;
    else return false;
}

template <class T> PD_INLINE T pd_lowest() {
    if constexpr (std::is_floating_point_v<T>) return -std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::lowest();
}

template <class T> PD_INLINE T pd_highest() {
    if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::max();
}

template <class T> struct pd_acc_sum {
    T v = T(0);
    PD_MEMBER void add(T x, int64_t) { v += x; }
    PD_MEMBER void merge(const pd_acc_sum& o) { v += o.v; }
};

template <class T> struct pd_acc_prod {
    T v = T(1);
    PD_MEMBER void add(T x, int64_t) { v *= x; }
    PD_MEMBER void merge(const pd_acc_prod& o) { v *= o.v; }
};

template <class T> struct pd_acc_max {
    T v = pd_lowest<T>();
    PD_MEMBER void add(T x, int64_t) { v = pd_maximum(v, x); }
    PD_MEMBER void merge(const pd_acc_max& o) { v = pd_maximum(v, o.v); }
};

template <class T> struct pd_acc_min {
    T v = pd_highest<T>();
    PD_MEMBER void add(T x, int64_t) { v = pd_minimum(v, x); }
    PD_MEMBER void merge(const pd_acc_min& o) { v = pd_minimum(v, o.v); }
};

template <class T> struct pd_acc_any {
    T v = T(0);
    PD_MEMBER void add(T x, int64_t) { v = v || x; }
    PD_MEMBER void merge(const pd_acc_any& o) { v = v || o.v; }
};

template <class T> struct pd_acc_xor_sum {
    T v = T(0);
    PD_MEMBER void add(T x, int64_t) { v = T(v ^ x); }
    PD_MEMBER void merge(const pd_acc_xor_sum& o) { v = T(v ^ o.v); }
};

// argmax/argmin: NaN wins (first NaN), ties keep the lowest index (torch's rules).
template <class T, bool MAX> struct pd_acc_arg {
    T v = MAX ? pd_lowest<T>() : pd_highest<T>();
    int64_t i = INT64_MAX;
    PD_MEMBER void add(T x, int64_t idx) { take(x, idx); }
    PD_MEMBER void merge(const pd_acc_arg& o) { take(o.v, o.i); }
    PD_MEMBER void take(T x, int64_t idx) {
        bool xn = pd_isnan(x), vn = pd_isnan(v);
        bool better = MAX ? (x > v) : (x < v);
        bool same = (x == v) || (xn && vn);
        if ((xn && !vn) || (!vn && better) || (same && idx < i)) {
            v = x;
            i = idx;
        }
    }
};
template <class T> using pd_acc_argmax = pd_acc_arg<T, true>;
template <class T> using pd_acc_argmin = pd_acc_arg<T, false>;

template <class T> struct pd_acc_welford {
    T mean = T(0), m2 = T(0), weight = T(0);
    PD_MEMBER void add(T x, int64_t) {
        weight += T(1);
        T delta = x - mean;
        mean += delta / weight;
        m2 += delta * (x - mean);
    }
    PD_MEMBER void add3(T omean, T om2, T oweight) {
        if (oweight == T(0)) return;
        T w = weight + oweight;
        T delta = omean - mean;
        T frac = oweight / w;
        mean += delta * frac;
        m2 += om2 + delta * delta * weight * frac;
        weight = w;
    }
    PD_MEMBER void merge(const pd_acc_welford& o) { add3(o.mean, o.m2, o.weight); }
};

// online softmax: running (max, sum(exp(x - max))).
template <class T> struct pd_acc_softmax {
    T m = pd_lowest<T>(), s = T(0);
    PD_MEMBER void add2(T om, T os) {
        T nm = pd_maximum(m, om);
        if (nm == pd_lowest<T>()) {
            s += os;
            return;
        }
        s = s * std::exp(m - nm) + os * std::exp(om - nm);
        m = nm;
    }
    PD_MEMBER void add(T x, int64_t) { add2(x, T(1)); }
    PD_MEMBER void merge(const pd_acc_softmax& o) { add2(o.m, o.s); }
};
