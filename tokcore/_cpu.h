/* The one CPU probe every kernel header uses: what the compiler targets (fixed when the
 * module is built) and, on x86-64, what this CPU offers (read at run time, so one wheel runs
 * the best kernels of every x86-64 CPU it meets).
 *
 * Compile time:
 *   TOK_CPU_SSE2  the compiler targets SSE2 (every x86-64 CPU; MSVC's x64 too)
 *   TOK_CPU_X86   x86-64 (or i386) with GCC or clang: kernels for AVX2 and AVX-512 are built
 *                 with target attributes and picked at run time
 *   TOK_CPU_NEON  little-endian aarch64 with NEON (part of every aarch64 CPU), GCC or clang
 * Run time (x86 only; 0 elsewhere): tok_cpu_has(TOK_CPU_AVX2 | TOK_CPU_BMI2 ...) is whether the
 * CPU, and the OS's saved register state (libgcc checks XCR0), have every feature asked for.
 * A header's own switch (TOK_SCAN_PORTABLE, TOK_B64_HAVE_AVX2=0 ...) still builds its portable
 * code alone, as other hosts get it. Every function here is GIL-free.
 */
#ifndef TOKCORE_CPU_H
#define TOKCORE_CPU_H

#if defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
#  define TOK_CPU_SSE2 1
#else
#  define TOK_CPU_SSE2 0
#endif

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#  define TOK_CPU_X86 1
#else
#  define TOK_CPU_X86 0
#endif

#if defined(__aarch64__) && defined(__ARM_NEON) && (defined(__GNUC__) || defined(__clang__)) \
    && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#  define TOK_CPU_NEON 1
#else
#  define TOK_CPU_NEON 0
#endif

/* the features the kernels ask for, as bits of one mask */
enum {
    TOK_CPU_AVX2 = 1 << 0,
    TOK_CPU_BMI1 = 1 << 1,
    TOK_CPU_BMI2 = 1 << 2,
    TOK_CPU_POPCNT = 1 << 3,
    TOK_CPU_PCLMUL = 1 << 4,
    TOK_CPU_AVX512F = 1 << 5,
    TOK_CPU_AVX512BW = 1 << 6,
    TOK_CPU_AVX512VBMI = 1 << 7
};

/* Every feature of the list above that this CPU has. The modules call it when they are
 * imported (their kernels' choice is made once), so it is not cached. */
static inline unsigned tok_cpu_features(void) {
    unsigned found = 0;
#if TOK_CPU_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) found |= TOK_CPU_AVX2;
    if (__builtin_cpu_supports("bmi")) found |= TOK_CPU_BMI1;
    if (__builtin_cpu_supports("bmi2")) found |= TOK_CPU_BMI2;
    if (__builtin_cpu_supports("popcnt")) found |= TOK_CPU_POPCNT;
    if (__builtin_cpu_supports("pclmul")) found |= TOK_CPU_PCLMUL;
    if (__builtin_cpu_supports("avx512f")) found |= TOK_CPU_AVX512F;
    if (__builtin_cpu_supports("avx512bw")) found |= TOK_CPU_AVX512BW;
    if (__builtin_cpu_supports("avx512vbmi")) found |= TOK_CPU_AVX512VBMI;
#endif
    return found;
}

/* whether the CPU has every feature in ``wanted`` */
static inline int tok_cpu_has(unsigned wanted) {
    return (tok_cpu_features() & wanted) == wanted;
}

#endif /* TOKCORE_CPU_H */
