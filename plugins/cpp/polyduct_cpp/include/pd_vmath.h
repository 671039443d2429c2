// glibc's vector math library (libmvec, linked with -lmvec) for the libm functions below, so
// that loops calling them vectorise; included by polyduct_cpp.h under PD_VECTOR_MATH.
//
// One implementation per function for every call. GCC calls a vector variant of a function
// (_ZGV<isa>N<lanes>v_<name>) in a vectorised loop, a narrower one in its epilogue, and the scalar
// function in scalar code and loop tails; libmvec's variants and glibc's scalar libm round
// differently (expf: half of all floats), so a value a program computes twice (a softmax's
// input, once for the row maximum and once for the exponentials) could differ between the two,
// and `x - max(x)` be positive. Each function is therefore declared under another symbol
// (pd_vm_<name>) whose scalar and vector variants are assembler stubs that all run the widest
// libmvec variant the target has (AVX-512: 16 floats or 8 doubles; AVX2: 8 or 4): a narrower
// argument is repeated to fill its lanes, and the result's low lanes are the answer in the
// caller's register. Every call gives the same bits for the same argument, and the stubs cost
// the compiler nothing. Without AVX2 the libm functions themselves are declared vectorisable,
// and scalar and vector calls may differ.
#pragma once

#if defined(__AVX2__)
// The instructions that fill the canonical vector from a scalar (s), an SSE vector (b) and an
// AVX vector (cd); zmm/ymm register n. The 16-lane variant is canonical only where loops use
// 512-bit vectors (PD_VECTOR_WIDTH, from the vector_width option).
#if defined(__AVX512F__) && defined(PD_VECTOR_WIDTH) && PD_VECTOR_WIDTH >= 512
#define PD_VM_CANON_F "_ZGVeN16"
#define PD_VM_CANON_D "_ZGVeN8"
#define PD_VM_FILL_S_F(n) "\tvbroadcastss %xmm" #n ", %zmm" #n "\n"
#define PD_VM_FILL_S_D(n) "\tvbroadcastsd %xmm" #n ", %zmm" #n "\n"
#define PD_VM_FILL_B(n) "\tvshuff64x2 $0, %zmm" #n ", %zmm" #n ", %zmm" #n "\n"
#define PD_VM_FILL_CD(n) "\tvshuff64x2 $0x44, %zmm" #n ", %zmm" #n ", %zmm" #n "\n"
#else
#define PD_VM_CANON_F "_ZGVdN8"
#define PD_VM_CANON_D "_ZGVdN4"
#define PD_VM_FILL_S_F(n) "\tvbroadcastss %xmm" #n ", %ymm" #n "\n"
#define PD_VM_FILL_S_D(n) "\tvbroadcastsd %xmm" #n ", %ymm" #n "\n"
#define PD_VM_FILL_B(n) "\tvinsertf128 $1, %xmm" #n ", %ymm" #n ", %ymm" #n "\n"
#define PD_VM_FILL_CD(n) ""
#endif

// a hidden function `sym` of this shared object: `fill`, then a tail call of `target`
#define PD_VM_STUB(sym, fill, target) \
    ".globl " sym "\n.hidden " sym "\n.type " sym ",@function\n" sym ":\n" fill "\tjmp " target "@PLT\n"
#define PD_VM_FILL1(F) F(0)
#define PD_VM_FILL2(F) F(0) F(1)

// `name` (scalar type S, `args` v or vv, n of them; FILL_S the scalar fill) under the symbol
// pd_vm_<name>, its variants for b, c, d, e lanes running the canonical variant CANON
#define PD_VM(name, S, params, args, n, CANON, FILL_S, nb, nc, nd, ne) \
    extern "C" __attribute__((simd("notinbranch"))) S name params __asm__("pd_vm_" #name); \
    asm(PD_VM_STUB("pd_vm_" #name, PD_VM_FILL##n(FILL_S), CANON #args "_" #name) \
        PD_VM_STUB("_ZGVbN" #nb #args "_pd_vm_" #name, PD_VM_FILL##n(PD_VM_FILL_B), \
                   CANON #args "_" #name) \
        PD_VM_STUB("_ZGVcN" #nc #args "_pd_vm_" #name, PD_VM_FILL##n(PD_VM_FILL_CD), \
                   CANON #args "_" #name) \
        PD_VM_STUB("_ZGVdN" #nd #args "_pd_vm_" #name, PD_VM_FILL##n(PD_VM_FILL_CD), \
                   CANON #args "_" #name) \
        PD_VM_E(name, args, ne));
#if defined(__AVX512F__)
// libmvec's 16-lane variant: the canonical one under PD_VECTOR_WIDTH 512; with 256-bit
// vectors preferred, loops do not call it
#define PD_VM_E(name, args, ne) \
    PD_VM_STUB("_ZGVeN" #ne #args "_pd_vm_" #name, "", "_ZGVeN" #ne #args "_" #name)
#else
#define PD_VM_E(name, args, ne) ""
#endif

#define PD_VM_F1(name) PD_VM(name, float, (float), v, 1, PD_VM_CANON_F, PD_VM_FILL_S_F, 4, 8, 8, 16)
#define PD_VM_F2(name) \
    PD_VM(name, float, (float, float), vv, 2, PD_VM_CANON_F, PD_VM_FILL_S_F, 4, 8, 8, 16)
#define PD_VM_D1(name) PD_VM(name, double, (double), v, 1, PD_VM_CANON_D, PD_VM_FILL_S_D, 2, 4, 4, 8)
#define PD_VM_D2(name) \
    PD_VM(name, double, (double, double), vv, 2, PD_VM_CANON_D, PD_VM_FILL_S_D, 2, 4, 4, 8)
#else
#define PD_VM_F1(name) extern "C" __attribute__((simd("notinbranch"))) float name(float);
#define PD_VM_F2(name) extern "C" __attribute__((simd("notinbranch"))) float name(float, float);
#define PD_VM_D1(name) extern "C" __attribute__((simd("notinbranch"))) double name(double);
#define PD_VM_D2(name) extern "C" __attribute__((simd("notinbranch"))) double name(double, double);
#endif

#define PD_VM_BOTH1(name) PD_VM_D1(name) PD_VM_F1(name##f)
PD_VM_BOTH1(acos) PD_VM_BOTH1(acosh) PD_VM_BOTH1(asin) PD_VM_BOTH1(asinh) PD_VM_BOTH1(atan)
PD_VM_BOTH1(atanh) PD_VM_BOTH1(cbrt) PD_VM_BOTH1(cos) PD_VM_BOTH1(cosh) PD_VM_BOTH1(erf)
PD_VM_BOTH1(erfc) PD_VM_BOTH1(exp) PD_VM_BOTH1(exp10) PD_VM_BOTH1(exp2) PD_VM_BOTH1(expm1)
PD_VM_BOTH1(log) PD_VM_BOTH1(log10) PD_VM_BOTH1(log1p) PD_VM_BOTH1(log2) PD_VM_BOTH1(sin)
PD_VM_BOTH1(sinh) PD_VM_BOTH1(tan) PD_VM_BOTH1(tanh)
PD_VM_D2(atan2) PD_VM_F2(atan2f) PD_VM_D2(hypot) PD_VM_F2(hypotf) PD_VM_D2(pow) PD_VM_F2(powf)
