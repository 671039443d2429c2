// Reduction accumulators, one per SIMD lane, stored as structure-of-arrays so the lane loop
// vectorises: add(lane, value, flat_index) and merge(lane, other, other_lane). prepare() runs
// before each block of lanes and each tail element (Welford takes its reciprocal weight there).
// Lanes are folded in a fixed tree order (pd_fold), so results are deterministic (the combine
// order differs from eager only for sums).
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

#define PD_SIMPLE_ACC(NAME, INIT, STEP)                                                    \
    template <class T, int L> struct NAME {                                                \
        T v[L];                                                                            \
        NAME() { for (int l = 0; l < L; ++l) v[l] = INIT; }                                \
        PD_MEMBER void add(int64_t l, T x, int64_t) { v[l] = STEP(v[l], x); }              \
        PD_MEMBER void merge(int64_t l, const NAME& o, int64_t k) { v[l] = STEP(v[l], o.v[k]); } \
        PD_MEMBER void prepare() {}                                                        \
    };

template <class T> PD_INLINE T pd_step_sum(T a, T b) { return T(a + b); }
template <class T> PD_INLINE T pd_step_prod(T a, T b) { return T(a * b); }
template <class T> PD_INLINE T pd_step_any(T a, T b) { return T(a || b); }
template <class T> PD_INLINE T pd_step_xor(T a, T b) { return T(a ^ b); }

PD_SIMPLE_ACC(pd_acc_sum, T(0), pd_step_sum)
PD_SIMPLE_ACC(pd_acc_prod, T(1), pd_step_prod)
PD_SIMPLE_ACC(pd_acc_max, pd_lowest<T>(), pd_maximum)
PD_SIMPLE_ACC(pd_acc_min, pd_highest<T>(), pd_minimum)
PD_SIMPLE_ACC(pd_acc_any, T(0), pd_step_any)
PD_SIMPLE_ACC(pd_acc_xor_sum, T(0), pd_step_xor)

// argmax/argmin: NaN wins (first NaN), ties keep the lowest index (torch's rules).
template <class T, int L, bool MAX> struct pd_acc_arg {
    T v[L];
    int64_t i[L];
    pd_acc_arg() {
        for (int l = 0; l < L; ++l) {
            v[l] = MAX ? pd_lowest<T>() : pd_highest<T>();
            i[l] = INT64_MAX;
        }
    }
    PD_MEMBER void add(int64_t l, T x, int64_t idx) {
        T cur = v[l];
        bool xn = pd_isnan(x), vn = pd_isnan(cur);
        bool better = MAX ? (x > cur) : (x < cur);
        bool same = (x == cur) || (xn && vn);
        bool take = (xn && !vn) || (!vn && better) || (same && idx < i[l]);
        v[l] = take ? x : cur;
        i[l] = take ? idx : i[l];
    }
    PD_MEMBER void merge(int64_t l, const pd_acc_arg& o, int64_t k) { add(l, o.v[k], o.i[k]); }
    PD_MEMBER void prepare() {}
};
template <class T, int L> using pd_acc_argmax = pd_acc_arg<T, L, true>;
template <class T, int L> using pd_acc_argmin = pd_acc_arg<T, L, false>;

// add() assumes prepare() ran since the last add to lane 0 and that every lane a block adds to has
// lane 0's weight (true of the lane blocks and of the lane-0 tail): the division by the new
// weight is one scalar reciprocal per block instead of a vector division per element.
template <class T, int L> struct pd_acc_welford {
    T mean[L], m2[L], weight[L];
    T recip = T(1);
    pd_acc_welford() {
        for (int l = 0; l < L; ++l) mean[l] = m2[l] = weight[l] = T(0);
    }
    PD_MEMBER void prepare() { recip = T(1) / (weight[0] + T(1)); }
    PD_MEMBER void add(int64_t l, T x, int64_t) { step(l, x, recip); }
    // For adds that not every lane makes (inside a masked body): lanes' weights may differ.
    PD_MEMBER void add_masked(int64_t l, T x, int64_t) { step(l, x, T(1) / (weight[l] + T(1))); }
    PD_MEMBER void step(int64_t l, T x, T rw) {
        T w = weight[l] + T(1);
        T delta = x - mean[l];
        T m = mean[l] + delta * rw;
        m2[l] += delta * (x - m);
        mean[l] = m;
        weight[l] = w;
    }
    PD_MEMBER void add3(int64_t l, T omean, T om2, T oweight) {
        if (oweight == T(0)) return;
        T w = weight[l] + oweight;
        T delta = omean - mean[l];
        T frac = oweight / w;
        m2[l] += om2 + delta * delta * weight[l] * frac;
        mean[l] += delta * frac;
        weight[l] = w;
    }
    PD_MEMBER void merge(int64_t l, const pd_acc_welford& o, int64_t k) {
        add3(l, o.mean[k], o.m2[k], o.weight[k]);
    }
};

// online softmax: running (max, sum(exp(x - max))).
template <class T, int L> struct pd_acc_softmax {
    T m[L], s[L];
    pd_acc_softmax() {
        for (int l = 0; l < L; ++l) {
            m[l] = pd_lowest<T>();
            s[l] = T(0);
        }
    }
    PD_MEMBER void add2(int64_t l, T om, T os) {
        T nm = pd_maximum(m[l], om);
        if (nm == pd_lowest<T>()) {
            s[l] += os;
            return;
        }
        s[l] = s[l] * std::exp(m[l] - nm) + os * std::exp(om - nm);
        m[l] = nm;
    }
    PD_MEMBER void add(int64_t l, T x, int64_t) { add2(l, x, T(1)); }
    PD_MEMBER void merge(int64_t l, const pd_acc_softmax& o, int64_t k) { add2(l, o.m[k], o.s[k]); }
    PD_MEMBER void prepare() {}
};

// Fold lanes 1..L-1 into lane 0 as a tree (lane l takes lane l + w for w = L/2, L/4, ... 1): each
// level is independent lanes, so the fold vectorises, and its order is fixed.
template <int L, class A> PD_INLINE void pd_fold(A& a) {
    for (int w = L / 2; w >= 1; w /= 2) {
        for (int l = 0; l < w; ++l) a.merge(l, a, l + w);
    }
}
