/* Byte scans for the SSE relay. Each scan has a portable loop (over memchr, compiled
 * everywhere) and a vector one, SSE2 (every x86-64 CPU) or NEON (every aarch64 CPU,
 * _ssescan_neon.h), the family chosen at compile time by _cpu.h: 16 bytes a step with SSE2,
 * 32 with NEON. With SSE2 the relay's one-pass scan, tok_scan_events, reads 64 bytes a step
 * (four 16-byte blocks), and on a CPU with AVX2 takes its AVX2 loop (two 32-byte blocks a
 * step) instead: that choice is made at run time (tok_scan_init, when the module loads).
 * With NEON it runs the three scans one after the other. The tests compare every loop with
 * the portable one on the same machine (_relay_c._scan, _scan_agree). glibc's memmem is slow
 * for the short needles used here (it measured 75-130 ns on a 240-byte event, against 13 ns
 * for an SSE2 loop).
 *
 * tok_next_candidate: the first offset where a JSON spelling of the key "usage" may start
 *   ('"usage"' or '\u00', the prefix of every escaped letter of it), or, when with_cr is
 *   set, a CR; -1 when there is none.
 * tok_first_lflf / tok_last_lflf: the offset of the first / last "\n\n" pair, or -1.
 * tok_line_end: the offset of the first CR or LF in p[i:n], or -1 (the relay's data fields
 *   and the event decoder's lines).
 * tok_count_event_ends: how many events end in p[:n] when p starts a line and has no CR:
 *   the "\n\n" pairs whose first LF ends a line that is not empty (offset > 0, the byte
 *   before it not a LF). Empty lines on their own are no event.
 * tok_scan_events: the three above in one pass, for a read the relay forwards whole when it
 *   holds no usage key: the first candidate (as tok_next_candidate), and when there is
 *   none, *ends = tok_count_event_ends and *last = tok_last_lflf. One pass reads the bytes
 *   once, where the three scans read them up to three times.
 */
#ifndef TOKCORE_SSESCAN_H
#define TOKCORE_SSESCAN_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_cpu.h"
#include "_ssescan_candidate.h"

/* -DTOK_SCAN_PORTABLE=1 builds the portable loops only */
#if !defined(TOK_SCAN_PORTABLE) || !TOK_SCAN_PORTABLE
#  if TOK_CPU_SSE2
#    define TOK_SCAN_SSE2 1
#  elif TOK_CPU_NEON
#    define TOK_SCAN_NEON 1
#  endif
#endif
#ifndef TOK_SCAN_SSE2
#  define TOK_SCAN_SSE2 0
#endif
#ifndef TOK_SCAN_NEON
#  define TOK_SCAN_NEON 0
#endif
#define TOK_SCAN_SIMD (TOK_SCAN_SSE2 || TOK_SCAN_NEON)
#if TOK_SCAN_SSE2
#  include <emmintrin.h>
#  define TOK_SCAN_KIND "SSE2"
#elif TOK_SCAN_NEON
#  include <arm_neon.h>
#  define TOK_SCAN_KIND "NEON"
#else
#  define TOK_SCAN_KIND "portable"
#endif

static inline Py_ssize_t tok_line_end(const char *p, Py_ssize_t i, Py_ssize_t n) {
    const char *lf = (const char *)memchr(p + i, '\n', (size_t)(n - i));
    const char *cr = (const char *)memchr(p + i, '\r', (size_t)((lf ? lf - p : n) - i));
    return cr ? cr - p : lf ? lf - p : -1;
}

/* --- portable loops (compiled everywhere) ----------------------------------------------- */

static inline Py_ssize_t tok_next_candidate_portable(const char *p, Py_ssize_t n, int with_cr) {
    Py_ssize_t i;
    for (i = 0; i < n; i++)
        if (tok_is_candidate(p, n, i, with_cr)) return i;
    return -1;
}

static inline Py_ssize_t tok_first_lflf_portable(const char *p, Py_ssize_t n) {
    const char *q = p, *end = p + n;
    while (q < end && (q = (const char *)memchr(q, '\n', (size_t)(end - q))) != NULL) {
        if (q + 1 < end && q[1] == '\n') return q - p;
        q++;
    }
    return -1;
}

static inline Py_ssize_t tok_count_event_ends_portable(const char *p, Py_ssize_t n) {
    Py_ssize_t i, count = 0;
    for (i = 1; i + 1 < n; i++)
        count += p[i] == '\n' && p[i + 1] == '\n' && p[i - 1] != '\n';
    return count;
}

static inline Py_ssize_t tok_last_lflf_portable(const char *p, Py_ssize_t n) {
    Py_ssize_t i;
    for (i = n - 2; i >= 0; i--)
        if (p[i] == '\n' && p[i + 1] == '\n') return i;
    return -1;
}

static inline Py_ssize_t tok_scan_events_portable(const char *p, Py_ssize_t n, int with_cr,
                                                  Py_ssize_t *ends, Py_ssize_t *last) {
    Py_ssize_t hit = tok_next_candidate_portable(p, n, with_cr);
    if (hit < 0) {
        *ends = tok_count_event_ends_portable(p, n);
        *last = tok_last_lflf_portable(p, n);
    }
    return hit;
}

/* --- SSE2: 16 bytes a step -------------------------------------------------------------- */
#if TOK_SCAN_SSE2
static inline int tok_ctz(unsigned int bits) {
#  if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctz(bits);
#  else
    int k = 0;
    while (!(bits & 1u)) { bits >>= 1; k++; }
    return k;
#  endif
}

static inline int tok_highest_bit(unsigned int bits) {
#  if defined(__GNUC__) || defined(__clang__)
    return 31 - __builtin_clz(bits);
#  else
    int k = 31;
    while (!(bits & 0x80000000u)) { bits <<= 1; k--; }
    return k;
#  endif
}

#define TOK_LOAD(p) _mm_loadu_si128((const __m128i *)(const void *)(p))

static inline Py_ssize_t tok_next_candidate_sse2(const char *p, Py_ssize_t n, int with_cr) {
    const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\');
    const __m128i u = _mm_set1_epi8('u'), cr = _mm_set1_epi8('\r');
    const __m128i cr_on = with_cr ? _mm_set1_epi8(-1) : _mm_setzero_si128();
    Py_ssize_t i = 0;
    for (; i + 17 <= n; i += 16) {
        __m128i a = TOK_LOAD(p + i), b = TOK_LOAD(p + i + 1);
        __m128i m = _mm_and_si128(_mm_or_si128(_mm_cmpeq_epi8(a, quote), _mm_cmpeq_epi8(a, slash)),
                                  _mm_cmpeq_epi8(b, u));
        m = _mm_or_si128(m, _mm_and_si128(_mm_cmpeq_epi8(a, cr), cr_on));
        unsigned int bits = (unsigned int)_mm_movemask_epi8(m);
        while (bits) {
            Py_ssize_t k = i + tok_ctz(bits);
            if (tok_is_candidate(p, n, k, with_cr)) return k;
            bits &= bits - 1;
        }
    }
    for (; i < n; i++)
        if (tok_is_candidate(p, n, i, with_cr)) return i;
    return -1;
}

static inline Py_ssize_t tok_first_lflf_sse2(const char *p, Py_ssize_t n) {
    const __m128i lf = _mm_set1_epi8('\n');
    Py_ssize_t i = 0;
    for (; i + 17 <= n; i += 16) {
        __m128i m = _mm_and_si128(_mm_cmpeq_epi8(TOK_LOAD(p + i), lf),
                                  _mm_cmpeq_epi8(TOK_LOAD(p + i + 1), lf));
        unsigned int bits = (unsigned int)_mm_movemask_epi8(m);
        if (bits) return i + tok_ctz(bits);
    }
    for (; i + 1 < n; i++)
        if (p[i] == '\n' && p[i + 1] == '\n') return i;
    return -1;
}

static inline Py_ssize_t tok_count_event_ends_sse2(const char *p, Py_ssize_t n) {
    const __m128i lf = _mm_set1_epi8('\n');
    Py_ssize_t i = 1, count = 0;
    for (; i + 17 <= n; i += 16) {
        __m128i a = _mm_cmpeq_epi8(TOK_LOAD(p + i), lf);
        __m128i m = _mm_andnot_si128(_mm_cmpeq_epi8(TOK_LOAD(p + i - 1), lf),
                                     _mm_and_si128(a, _mm_cmpeq_epi8(TOK_LOAD(p + i + 1), lf)));
        unsigned int bits = (unsigned int)_mm_movemask_epi8(m);
        while (bits) { count++; bits &= bits - 1; }
    }
    for (; i + 1 < n; i++)
        count += p[i] == '\n' && p[i + 1] == '\n' && p[i - 1] != '\n';
    return count;
}

static inline Py_ssize_t tok_last_lflf_sse2(const char *p, Py_ssize_t n) {
    const __m128i lf = _mm_set1_epi8('\n');
    Py_ssize_t i = n - 1;  /* pairs start at 0 .. n-2; blocks cover starts [i-16, i) */
    for (; i >= 16; i -= 16) {
        __m128i m = _mm_and_si128(_mm_cmpeq_epi8(TOK_LOAD(p + i - 16), lf),
                                  _mm_cmpeq_epi8(TOK_LOAD(p + i - 15), lf));
        unsigned int bits = (unsigned int)_mm_movemask_epi8(m);
        if (bits) return i - 16 + tok_highest_bit(bits);
    }
    for (i = i - 1; i >= 0; i--)
        if (p[i] == '\n' && p[i + 1] == '\n') return i;
    return -1;
}


/* The candidates (as tok_next_candidate_sse2) and the LF pairs of the 16 starts p[0..16) */
#define TOK_SSE2_BLOCK(p, c, pr) do { \
        __m128i a_ = TOK_LOAD(p), b_ = TOK_LOAD((p) + 1); \
        (c) = _mm_or_si128(_mm_and_si128(_mm_or_si128(_mm_cmpeq_epi8(a_, quote), \
                                                      _mm_cmpeq_epi8(a_, slash)), \
                                         _mm_cmpeq_epi8(b_, u)), \
                           _mm_and_si128(_mm_cmpeq_epi8(a_, cr), cr_on)); \
        (pr) = _mm_and_si128(_mm_cmpeq_epi8(a_, lf), _mm_cmpeq_epi8(b_, lf)); \
    } while (0)

/* The rest of tok_scan_events from i (fewer than 65 bytes), 16 starts a block, the last
 * block overlapping the one before it (the starts already seen masked off) so that only
 * the last byte and inputs under 17 bytes go byte by byte: an event of a few hundred bytes
 * spends much of its scan here. count and at: what the 64-byte steps found before i. */
static inline Py_ssize_t tok_scan_events_tail(const char *p, Py_ssize_t n, Py_ssize_t i,
                                              int with_cr, Py_ssize_t count, Py_ssize_t at,
                                              Py_ssize_t *ends, Py_ssize_t *last) {
    const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\');
    const __m128i u = _mm_set1_epi8('u'), cr = _mm_set1_epi8('\r'), lf = _mm_set1_epi8('\n');
    const __m128i cr_on = with_cr ? _mm_set1_epi8(-1) : _mm_setzero_si128();
    while (i < n - 1 && n >= 17) {  /* a block covers starts s..s+15, reading s..s+16 */
        Py_ssize_t s = i + 17 <= n ? i : n - 17;
        unsigned int skip = (unsigned int)(i - s), bits, pairs;
        __m128i c, pr;
        TOK_SSE2_BLOCK(p + s, c, pr);
        bits = ((unsigned int)_mm_movemask_epi8(c) >> skip) << skip;
        while (bits) {
            Py_ssize_t k = s + tok_ctz(bits);
            if (tok_is_candidate(p, n, k, with_cr)) return k;
            bits &= bits - 1;
        }
        pairs = ((unsigned int)_mm_movemask_epi8(pr) >> skip) << skip;
        if (pairs) {
            /* a pair is an event's end unless a LF comes before it (or it is at 0) */
            unsigned int after_lf =
                ((unsigned int)_mm_movemask_epi8(_mm_cmpeq_epi8(TOK_LOAD(p + s), lf)) << 1)
                | (unsigned int)(s == 0 || p[s - 1] == '\n');
            unsigned int real = pairs & ~after_lf;
            at = s + tok_highest_bit(pairs);
            while (real) { count++; real &= real - 1; }
        }
        i = s + 16;
    }
    for (; i < n; i++) {
        if (tok_is_candidate(p, n, i, with_cr)) return i;
        if (p[i] == '\n' && i + 1 < n && p[i + 1] == '\n') {
            at = i;
            count += i > 0 && p[i - 1] != '\n';
        }
    }
    *ends = count;
    *last = at;
    return -1;
}

/* 64 bytes a step: the candidate and LF-pair compares of its four blocks or'ed together, so
 * that a step with neither costs two tests; the exact work (each candidate checked, a pair
 * after a LF left out of the count) only in a step that has one, where the blocks are
 * compared again (at about 260 bytes an event, one step in four has a pair). Nothing of a
 * block is kept across the step: with the constants it would not fit in 16 registers. */
static inline Py_ssize_t tok_scan_events_sse2(const char *p, Py_ssize_t n, int with_cr,
                                              Py_ssize_t *ends, Py_ssize_t *last) {
    const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\');
    const __m128i u = _mm_set1_epi8('u'), cr = _mm_set1_epi8('\r'), lf = _mm_set1_epi8('\n');
    const __m128i cr_on = with_cr ? _mm_set1_epi8(-1) : _mm_setzero_si128();
    Py_ssize_t i = 0, count = 0, at = -1;
    for (; i + 65 <= n; i += 64) {
        __m128i c, pr, any_c, any_p;
        TOK_SSE2_BLOCK(p + i, any_c, any_p);
        for (int j = 1; j < 4; j++) {
            TOK_SSE2_BLOCK(p + i + 16 * j, c, pr);
            any_c = _mm_or_si128(any_c, c);
            any_p = _mm_or_si128(any_p, pr);
        }
        if (_mm_movemask_epi8(any_c)) {
            for (int j = 0; j < 4; j++) {
                TOK_SSE2_BLOCK(p + i + 16 * j, c, pr);
                unsigned int bits = (unsigned int)_mm_movemask_epi8(c);
                while (bits) {
                    Py_ssize_t k = i + 16 * j + tok_ctz(bits);
                    if (tok_is_candidate(p, n, k, with_cr)) return k;
                    bits &= bits - 1;
                }
            }
        }
        if (!_mm_movemask_epi8(any_p))
            continue;
        for (int j = 0; j < 4; j++) {
            const char *q = p + i + 16 * j;
            TOK_SSE2_BLOCK(q, c, pr);
            unsigned int pairs = (unsigned int)_mm_movemask_epi8(pr);
            if (pairs) {
                /* a pair is an event's end unless a LF comes before it (or it is at 0) */
                unsigned int after_lf =
                    ((unsigned int)_mm_movemask_epi8(_mm_cmpeq_epi8(TOK_LOAD(q), lf)) << 1)
                    | (unsigned int)(q == p || q[-1] == '\n');
                unsigned int real = pairs & ~after_lf;
                at = q - p + tok_highest_bit(pairs);
                while (real) { count++; real &= real - 1; }
            }
        }
    }
    return tok_scan_events_tail(p, n, i, with_cr, count, at, ends, last);
}
#undef TOK_SSE2_BLOCK

/* The same with AVX2, 32 bytes a block, where the CPU has it (picked at run time: the module
 * loads on any x86-64 CPU). */
#  if TOK_CPU_X86
#    define TOK_SCAN_AVX2 1
#    include <immintrin.h>
#    define TOK_LOAD256(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#    define TOK_AVX2_BLOCK(p, c, pr) do { \
        __m256i a_ = TOK_LOAD256(p), b_ = TOK_LOAD256((p) + 1); \
        (c) = _mm256_or_si256(_mm256_and_si256(_mm256_or_si256(_mm256_cmpeq_epi8(a_, quote), \
                                                               _mm256_cmpeq_epi8(a_, slash)), \
                                               _mm256_cmpeq_epi8(b_, u)), \
                              _mm256_and_si256(_mm256_cmpeq_epi8(a_, cr), cr_on)); \
        (pr) = _mm256_and_si256(_mm256_cmpeq_epi8(a_, lf), _mm256_cmpeq_epi8(b_, lf)); \
    } while (0)

__attribute__((target("avx2")))
static Py_ssize_t tok_scan_events_avx2(const char *p, Py_ssize_t n, int with_cr,
                                       Py_ssize_t *ends, Py_ssize_t *last) {
    const __m256i quote = _mm256_set1_epi8('"'), slash = _mm256_set1_epi8('\\');
    const __m256i u = _mm256_set1_epi8('u'), cr = _mm256_set1_epi8('\r');
    const __m256i lf = _mm256_set1_epi8('\n');
    const __m256i cr_on = with_cr ? _mm256_set1_epi8(-1) : _mm256_setzero_si256();
    Py_ssize_t i = 0, count = 0, at = -1;
    for (; i + 65 <= n; i += 64) {
        __m256i c0, p0, c1, p1;
        TOK_AVX2_BLOCK(p + i, c0, p0);
        TOK_AVX2_BLOCK(p + i + 32, c1, p1);
        if (!_mm256_testz_si256(_mm256_or_si256(c0, c1), _mm256_or_si256(c0, c1))) {
            uint64_t bits = (uint32_t)_mm256_movemask_epi8(c0)
                | ((uint64_t)(uint32_t)_mm256_movemask_epi8(c1) << 32);
            while (bits) {
                Py_ssize_t k = i + __builtin_ctzll(bits);
                if (tok_is_candidate(p, n, k, with_cr)) return k;
                bits &= bits - 1;
            }
        }
        if (_mm256_testz_si256(_mm256_or_si256(p0, p1), _mm256_or_si256(p0, p1)))
            continue;
        {
            uint64_t pairs = (uint32_t)_mm256_movemask_epi8(p0)
                | ((uint64_t)(uint32_t)_mm256_movemask_epi8(p1) << 32);
            uint64_t lfs = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(TOK_LOAD256(p + i), lf))
                | ((uint64_t)(uint32_t)_mm256_movemask_epi8(
                       _mm256_cmpeq_epi8(TOK_LOAD256(p + i + 32), lf)) << 32);
            /* a pair is an event's end unless a LF comes before it (or it is at 0) */
            uint64_t real = pairs & ~((lfs << 1) | (uint64_t)(i == 0 || p[i - 1] == '\n'));
            at = i + 63 - __builtin_clzll(pairs);
            while (real) { count++; real &= real - 1; }
        }
    }
    return tok_scan_events_tail(p, n, i, with_cr, count, at, ends, last);
}
#    undef TOK_AVX2_BLOCK
#  endif

#endif /* TOK_SCAN_SSE2 */
#ifndef TOK_SCAN_AVX2
#  define TOK_SCAN_AVX2 0
#endif

/* whether tok_scan_events takes the AVX2 loop: the CPU has AVX2 (tok_scan_init, at import);
 * unused where no AVX2 loop is built (aarch64) but by _relay_c's BUILD_INFO */
static int tok_scan_use_avx2 __attribute__((unused)) = 0;

static inline void tok_scan_init(void) {
#if TOK_SCAN_AVX2
    tok_scan_use_avx2 = tok_cpu_has(TOK_CPU_AVX2);
#endif
}

#if TOK_SCAN_NEON
#  include "_ssescan_neon.h"
static inline Py_ssize_t tok_scan_events_neon(const char *p, Py_ssize_t n, int with_cr,
                                              Py_ssize_t *ends, Py_ssize_t *last) {
    Py_ssize_t hit = tok_next_candidate_neon(p, n, with_cr);
    if (hit < 0) {
        *ends = tok_count_event_ends_neon(p, n);
        *last = tok_last_lflf_neon(p, n);
    }
    return hit;
}
#endif

#if TOK_SCAN_SSE2
#  define TOK_SCAN_BEST(name) name##_sse2
#elif TOK_SCAN_NEON
#  define TOK_SCAN_BEST(name) name##_neon
#else
#  define TOK_SCAN_BEST(name) name##_portable
#endif

/* --- the large-event scan's skips (_bigevent_c) ------------------------------------------ */
/* tok_nested_stop: the first offset in p[i:n] of one of { } [ ] " (where a nested value's
 *   depth or string state can change), or n; tok_string_stop: the same for " or \ (where a
 *   string can end). A 300k-token prompt_token_ids array is 1.8 MB between two stops. */

static inline int tok_is_nested_stop(char c) {
    return c == '"' || c == '[' || c == ']' || c == '{' || c == '}';
}

static inline Py_ssize_t tok_nested_stop_portable(const char *p, Py_ssize_t i, Py_ssize_t n) {
    for (; i < n; i++)
        if (tok_is_nested_stop(p[i])) return i;
    return n;
}

static inline Py_ssize_t tok_string_stop_portable(const char *p, Py_ssize_t i, Py_ssize_t n) {
    for (; i < n; i++)
        if (p[i] == '"' || p[i] == '\\') return i;
    return n;
}

static inline Py_ssize_t tok_nested_stop(const char *p, Py_ssize_t i, Py_ssize_t n) {
#if TOK_SCAN_SSE2
    /* '[' ']' and '{' '}' differ in bit 0x20 only: one compare each after clearing it */
    const __m128i fold = _mm_set1_epi8((char)0xDF), open = _mm_set1_epi8('['),
                  close = _mm_set1_epi8(']'), quote = _mm_set1_epi8('"');
    for (; i + 16 <= n; i += 16) {
        __m128i v = TOK_LOAD(p + i), f = _mm_and_si128(v, fold);
        __m128i m = _mm_or_si128(_mm_cmpeq_epi8(v, quote),
                                 _mm_or_si128(_mm_cmpeq_epi8(f, open), _mm_cmpeq_epi8(f, close)));
        unsigned int bits = (unsigned int)_mm_movemask_epi8(m);
        if (bits) return i + tok_ctz(bits);
    }
#endif
    return tok_nested_stop_portable(p, i, n);
}

static inline Py_ssize_t tok_string_stop(const char *p, Py_ssize_t i, Py_ssize_t n) {
#if TOK_SCAN_SSE2
    const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\');
    for (; i + 16 <= n; i += 16) {
        __m128i v = TOK_LOAD(p + i);
        unsigned int bits = (unsigned int)_mm_movemask_epi8(
            _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, slash)));
        if (bits) return i + tok_ctz(bits);
    }
#endif
    return tok_string_stop_portable(p, i, n);
}

/* --- what the relay calls: the vector loops where there are some ------------------------ */

static inline Py_ssize_t tok_next_candidate(const char *p, Py_ssize_t n, int with_cr) {
    return TOK_SCAN_BEST(tok_next_candidate)(p, n, with_cr);
}

static inline Py_ssize_t tok_first_lflf(const char *p, Py_ssize_t n) {
    return TOK_SCAN_BEST(tok_first_lflf)(p, n);
}

static inline Py_ssize_t tok_count_event_ends(const char *p, Py_ssize_t n) {
    return TOK_SCAN_BEST(tok_count_event_ends)(p, n);
}

static inline Py_ssize_t tok_last_lflf(const char *p, Py_ssize_t n) {
    return TOK_SCAN_BEST(tok_last_lflf)(p, n);
}

static inline Py_ssize_t tok_scan_events(const char *p, Py_ssize_t n, int with_cr,
                                         Py_ssize_t *ends, Py_ssize_t *last) {
#if TOK_SCAN_AVX2
    if (tok_scan_use_avx2) return tok_scan_events_avx2(p, n, with_cr, ends, last);
#endif
    return TOK_SCAN_BEST(tok_scan_events)(p, n, with_cr, ends, last);
}

/* tok_scan_events as one number, for the tests: the candidate, else
 * -1 - (ends << 32 | (last + 1)) */
static inline Py_ssize_t tok_scan_events_number(Py_ssize_t hit, Py_ssize_t ends,
                                                Py_ssize_t last) {
    return hit >= 0 ? hit : -1 - (Py_ssize_t)(((uint64_t)ends << 32) | (uint64_t)(last + 1));
}

/* One scan by number, on the vector loops (simd set, where the build has them) or on the
 * portable ones: the tests' way to compare both. 0 next_candidate, 1 the same with CR,
 * 2 first_lflf, 3 last_lflf, 4 count_event_ends, 5 scan_events, 6 the same with CR (as
 * tok_scan_events_number), 7 nested_stop, 8 string_stop (from 0); -2 for another number. simd 1 is what the relay runs (AVX2 where
 * the CPU has it), 2 the 16-byte loops alone. */
static inline Py_ssize_t tok_scan_by_number(int which, int simd, const char *p, Py_ssize_t n) {
    Py_ssize_t ends = 0, last = 0, hit;
    if (which == 7 || which == 8) {  /* from 0; n when there is none */
        if (simd)
            return which == 7 ? tok_nested_stop(p, 0, n) : tok_string_stop(p, 0, n);
        return which == 7 ? tok_nested_stop_portable(p, 0, n) : tok_string_stop_portable(p, 0, n);
    }
    if (which == 5 || which == 6) {
#if TOK_SCAN_SIMD
        hit = simd == 1 ? tok_scan_events(p, n, which == 6, &ends, &last)
            : simd ? TOK_SCAN_BEST(tok_scan_events)(p, n, which == 6, &ends, &last)
                   : tok_scan_events_portable(p, n, which == 6, &ends, &last);
#else
        (void)simd;
        hit = tok_scan_events_portable(p, n, which == 6, &ends, &last);
#endif
        return tok_scan_events_number(hit, ends, last);
    }
#if TOK_SCAN_SIMD
    if (simd) {
        switch (which) {
        case 0: return TOK_SCAN_BEST(tok_next_candidate)(p, n, 0);
        case 1: return TOK_SCAN_BEST(tok_next_candidate)(p, n, 1);
        case 2: return TOK_SCAN_BEST(tok_first_lflf)(p, n);
        case 3: return TOK_SCAN_BEST(tok_last_lflf)(p, n);
        case 4: return TOK_SCAN_BEST(tok_count_event_ends)(p, n);
        default: return -2;
        }
    }
#else
    (void)simd;
#endif
    switch (which) {
    case 0: return tok_next_candidate_portable(p, n, 0);
    case 1: return tok_next_candidate_portable(p, n, 1);
    case 2: return tok_first_lflf_portable(p, n);
    case 3: return tok_last_lflf_portable(p, n);
    case 4: return tok_count_event_ends_portable(p, n);
    default: return -2;
    }
}


#define TOK_SCAN_COUNT 9  /* the scans tok_scan_by_number knows */

/* Every input that is buf[0:n] with its window buf[at:at + length] made of the k bytes of
 * `alphabet` (k ** length of them), each scan on the vector loops and on the portable ones:
 * 0 when they agree on all, else 1 with buf holding the first input where they do not and
 * *which the scan's number. The tests' exhaustive check, in C because under emulation a
 * Python loop over a million inputs takes minutes. */
static inline int tok_scan_agree(const char *alphabet, int k, char *buf, Py_ssize_t n,
                                 Py_ssize_t at, int length, int *which) {
    int digits[64];
    char *window = buf + at;
    if (length > 64 || k < 1 || at < 0 || at + length > n) return 0;
    for (int j = 0; j < length; j++) { digits[j] = 0; window[j] = alphabet[0]; }
    for (;;) {
        for (int w = 0; w < TOK_SCAN_COUNT; w++) {
            Py_ssize_t portable = tok_scan_by_number(w, 0, buf, n);
            if (tok_scan_by_number(w, 1, buf, n) != portable
                    || tok_scan_by_number(w, 2, buf, n) != portable) {
                *which = w;
                return 1;
            }
        }
        int j = 0;  /* the next input: an odometer over the window */
        while (j < length && ++digits[j] == k) { digits[j] = 0; window[j] = alphabet[0]; j++; }
        if (j == length) return 0;
        window[j] = alphabet[digits[j]];
    }
}

#endif
