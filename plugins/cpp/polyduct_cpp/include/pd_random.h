// Philox 4x32-10, the counter-based generator of Triton's tl.rand/tl.randn/tl.randint64
// (docs/conventions.md "Random numbers"): the seed splits into two 32-bit key words and the
// 32-bit offset is the first counter word.
#pragma once

struct pd_philox4 {
    uint32_t c0, c1, c2, c3;
};

PD_INLINE uint32_t pd_umulhi(uint32_t a, uint32_t b) {
    return uint32_t((uint64_t(a) * uint64_t(b)) >> 32);
}

PD_INLINE pd_philox4 pd_philox(int64_t seed, uint32_t offset) {
    uint64_t s = uint64_t(seed);
    uint32_t k0 = uint32_t(s & 0xffffffffu), k1 = uint32_t(s >> 32);
    uint32_t c0 = offset, c1 = 0, c2 = 0, c3 = 0;
    for (int round = 0; round < 10; ++round) {
        uint32_t a = 0xD2511F53u, b = 0xCD9E8D57u;
        uint32_t p0 = c0, p2 = c2;
        c0 = pd_umulhi(b, p2) ^ c1 ^ k0;
        c2 = pd_umulhi(a, p0) ^ c3 ^ k1;
        c1 = b * p2;
        c3 = a * p0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return pd_philox4{c0, c1, c2, c3};
}

PD_INLINE float pd_uint_to_uniform(uint32_t x) {
    int32_t i = int32_t(x);
    i = i < 0 ? -i - 1 : i;
    return float(i) * 4.6566127342e-10f;
}

PD_INLINE float pd_rand(int64_t seed, int64_t offset) {
    return pd_uint_to_uniform(pd_philox(seed, uint32_t(offset)).c0);
}

PD_INLINE float pd_randn(int64_t seed, int64_t offset) {
    pd_philox4 r = pd_philox(seed, uint32_t(offset));
    float u1 = std::max(1.0e-7f, pd_uint_to_uniform(r.c0));
    float u2 = pd_uint_to_uniform(r.c1);
    float th = 6.283185307179586f * u2;
    float rad = std::sqrt(-2.0f * std::log(u1));
    return rad * std::cos(th);
}

PD_INLINE int64_t pd_randint64(int64_t seed, int64_t offset, int64_t low, int64_t high) {
    pd_philox4 r = pd_philox(seed, uint32_t(offset));
    uint64_t bits = uint64_t(r.c0) | (uint64_t(r.c1) << 32);
    uint64_t size = uint64_t(high - low);
    return int64_t(bits % size) + low;
}
