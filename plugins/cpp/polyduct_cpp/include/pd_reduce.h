// Reduction accumulators, one per SIMD lane, stored as structure-of-arrays so the lane loop
// vectorises: add(lane, value, flat_index) and merge(lane, other, other_lane). prepare() runs
// before each block of lanes and each tail element (Welford takes its reciprocal weight there),
// finish() once lane 0 holds every lane (max/min put a NaN seen into the result there).
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

// Lane folds: lanes 1..L-1 go into lane 0 as a tree (lane l takes lane l + w for w = L/2, L/4,
// ... 1), a fixed order. For float/double/int32/int64 lanes each level is one vector operation
// (GCC vector extensions); other accumulators run the same tree on scalars.
template <class T>
constexpr bool pd_vec_lanes = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                              std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>;

template <class T, int N> struct pd_vec_of {
    typedef T type __attribute__((vector_size(N * sizeof(T))));
};
template <class T, int N> using pd_vec = typename pd_vec_of<T, N>::type;

template <class T, int N, class Step, size_t... I>
PD_INLINE T pd_fold_halves(pd_vec<T, N> a, Step step, std::index_sequence<I...>) {
    if constexpr (N == 1) {
        return a[0];
    } else {
        constexpr int W = N / 2;
        pd_vec<T, W> lo = __builtin_shufflevector(a, a, I...);
        pd_vec<T, W> hi = __builtin_shufflevector(a, a, (I + W)...);
        return pd_fold_halves<T, W>(step(lo, hi), step, std::make_index_sequence<W / 2>{});
    }
}

// The lanes are copied whole into one vector value (GCC keeps the accumulator's lanes in registers
// through the accumulating loop; copying parts of them would not), then halve log2(L) times.
template <int L, class T, class Step> PD_INLINE void pd_fold_vec(T* v, Step step) {
    pd_vec<T, L> a;
    std::memcpy(&a, v, sizeof(a));
    v[0] = pd_fold_halves<T, L>(a, step, std::make_index_sequence<L / 2>{});
}

template <int L, class A> PD_INLINE void pd_fold_tree(A& a) {
#pragma GCC unroll 8
    for (int w = L / 2; w >= 1; w /= 2) {
#pragma GCC unroll 32
        for (int l = 0; l < w; ++l) a.merge(l, a, l + w);
    }
}

#define PD_SIMPLE_ACC(NAME, INIT, STEP, VEC)                                                    \
    template <class T, int L> struct NAME {                                                \
        T v[L];                                                                            \
        NAME() { for (int l = 0; l < L; ++l) v[l] = INIT; }                                \
        PD_MEMBER void add(int64_t l, T x, int64_t) { v[l] = STEP(v[l], x); }              \
        PD_MEMBER void merge(int64_t l, const NAME& o, int64_t k) { v[l] = STEP(v[l], o.v[k]); } \
        PD_MEMBER void prepare() {}                                                        \
        PD_MEMBER void fold() {                                                            \
            if constexpr (VEC && pd_vec_lanes<T>)                                          \
                pd_fold_vec<L>(v, [](auto a, auto b) { return STEP(a, b); });              \
            else                                                                           \
                pd_fold_tree<L>(*this);                                                    \
        }                                                                                  \
        PD_MEMBER void finish() {}                                                         \
    };

template <class T> PD_INLINE T pd_step_sum(T a, T b) { return T(a + b); }
template <class T> PD_INLINE T pd_step_prod(T a, T b) { return T(a * b); }
template <class T> PD_INLINE T pd_step_any(T a, T b) { return T(a || b); }
template <class T> PD_INLINE T pd_step_xor(T a, T b) { return T(a ^ b); }

PD_SIMPLE_ACC(pd_acc_sum, T(0), pd_step_sum, true)
PD_SIMPLE_ACC(pd_acc_prod, T(1), pd_step_prod, true)
// max/min: the running extreme ignores NaN (x > v ? x : v is one vmaxps with no extra dependence
// on v), and a NaN seen is kept in its own lanes, merged into the result by finish(): the loop's
// dependence chain is one instruction long.
template <class T, int L, bool MAX> struct pd_acc_extreme {
    T v[L], nan[L];
    pd_acc_extreme() {
        for (int l = 0; l < L; ++l) {
            v[l] = MAX ? pd_lowest<T>() : pd_highest<T>();
            nan[l] = T(0);
        }
    }
    PD_MEMBER void add(int64_t l, T x, int64_t) {
        v[l] = (MAX ? x > v[l] : x < v[l]) ? x : v[l];
        if constexpr (std::is_floating_point_v<T>) nan[l] = x != x ? x : nan[l];
    }
    PD_MEMBER void merge(int64_t l, const pd_acc_extreme& o, int64_t k) {
        add(l, o.v[k], 0);
        if constexpr (std::is_floating_point_v<T>) nan[l] = o.nan[k] != o.nan[k] ? o.nan[k] : nan[l];
    }
    PD_MEMBER void prepare() {}
    PD_MEMBER void fold() {
        if constexpr (pd_vec_lanes<T>) {
            pd_fold_vec<L>(v, [](auto a, auto b) { return (MAX ? b > a : b < a) ? b : a; });
            if constexpr (std::is_floating_point_v<T>)
                pd_fold_vec<L>(nan, [](auto a, auto b) { return b != b ? b : a; });
        } else {
            pd_fold_tree<L>(*this);
        }
    }
    PD_MEMBER void finish() {
        if constexpr (std::is_floating_point_v<T>) v[0] = nan[0] != nan[0] ? nan[0] : v[0];
    }
};
template <class T, int L> using pd_acc_max = pd_acc_extreme<T, L, true>;
template <class T, int L> using pd_acc_min = pd_acc_extreme<T, L, false>;
PD_SIMPLE_ACC(pd_acc_any, T(0), pd_step_any, false)
PD_SIMPLE_ACC(pd_acc_xor_sum, T(0), pd_step_xor, true)

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
    PD_MEMBER void fold() { pd_fold_tree<L>(*this); }
    PD_MEMBER void finish() {}
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
    PD_MEMBER void fold() { pd_fold_tree<L>(*this); }
    PD_MEMBER void finish() {}
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
    PD_MEMBER void fold() { pd_fold_tree<L>(*this); }
    PD_MEMBER void finish() {}
};

// Every lane into lane 0, then the accumulator's last step.
template <int L, class A> PD_INLINE void pd_fold(A& a) {
    a.fold();
    a.finish();
}
