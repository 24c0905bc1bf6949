/* The relay's byte scans with NEON (every aarch64 CPU), included by _ssescan.h, which says
 * what each scan returns; the results are the portable loops', byte for byte (the candidate
 * test is _ssescan_candidate.h's, the one both headers include).
 *
 * NEON has no movemask: a compare's 0xFF/0x00 bytes are narrowed to a 64-bit integer with a
 * nibble a byte (shrn by 4 of the 16-bit lanes), byte k in bits 4k..4k+3, so a count of
 * trailing zeros / 4 is the first byte set. The find-first scans test 32 bytes a step (two
 * compares or'ed, one narrowing); the last bytes, fewer than a block, are one more block
 * that ends at the end of the input and overlaps bytes already scanned, instead of a byte
 * loop. The event count sums matches in byte lanes.
 */
#ifndef TOKCORE_SSESCAN_NEON_H
#define TOKCORE_SSESCAN_NEON_H

#include <arm_neon.h>

#include "_ssescan_candidate.h"

#define TOK_NEON_INLINE static inline __attribute__((always_inline))

TOK_NEON_INLINE uint64_t tok_neon_nibbles(uint8x16_t m) {
    return vget_lane_u64(vreinterpret_u64_u8(vshrn_n_u16(vreinterpretq_u16_u8(m), 4)), 0);
}

TOK_NEON_INLINE uint8x16_t tok_neon_load(const char *p) {
    return vld1q_u8((const uint8_t *)p);
}

/* which of the 16 starts p[0..16) are a LF followed by a LF (reads p[0..17)) */
TOK_NEON_INLINE uint8x16_t tok_neon_lflf(const char *p) {
    const uint8x16_t lf = vdupq_n_u8('\n');
    return vandq_u8(vceqq_u8(tok_neon_load(p), lf), vceqq_u8(tok_neon_load(p + 1), lf));
}

/* which of the 16 starts may be a candidate: '"' or '\' before a 'u', or a CR when with_cr
 * (a constant in each caller, so the CR compare is left out when it is 0) */
TOK_NEON_INLINE uint8x16_t tok_neon_maybe(const char *p, int with_cr) {
    uint8x16_t a = tok_neon_load(p), b = tok_neon_load(p + 1);
    uint8x16_t m = vandq_u8(vorrq_u8(vceqq_u8(a, vdupq_n_u8('"')), vceqq_u8(a, vdupq_n_u8('\\'))),
                            vceqq_u8(b, vdupq_n_u8('u')));
    return with_cr ? vorrq_u8(m, vceqq_u8(a, vdupq_n_u8('\r'))) : m;
}

/* the first start in [s, s + 16) flagged in the nibble mask bits that is a candidate */
TOK_NEON_INLINE Py_ssize_t tok_neon_first_true(const char *p, Py_ssize_t n, Py_ssize_t s,
                                               uint64_t bits, int with_cr) {
    bits &= 0x1111111111111111ull;  /* one bit a byte, so bits &= bits - 1 drops one */
    while (bits) {
        Py_ssize_t k = s + (__builtin_ctzll(bits) >> 2);
        if (tok_is_candidate(p, n, k, with_cr)) return k;
        bits &= bits - 1;
    }
    return -1;
}

TOK_NEON_INLINE Py_ssize_t tok_next_candidate_neon_with(const char *p, Py_ssize_t n,
                                                        int with_cr) {
    Py_ssize_t i = 0, k;
    for (; i + 33 <= n; i += 32) {
        uint8x16_t m0 = tok_neon_maybe(p + i, with_cr), m1 = tok_neon_maybe(p + i + 16, with_cr);
        if (!tok_neon_nibbles(vorrq_u8(m0, m1))) continue;
        if ((k = tok_neon_first_true(p, n, i, tok_neon_nibbles(m0), with_cr)) >= 0) return k;
        if ((k = tok_neon_first_true(p, n, i + 16, tok_neon_nibbles(m1), with_cr)) >= 0)
            return k;
    }
    if (i + 17 <= n) {
        k = tok_neon_first_true(p, n, i, tok_neon_nibbles(tok_neon_maybe(p + i, with_cr)),
                                with_cr);
        if (k >= 0) return k;
        i += 16;
    }
    if (n >= 17 && i < n - 1) {
        /* starts [i, n - 1) are left, 1 to 15 of them: the block of starts [n - 17, n - 1),
         * without those before i (already checked) */
        Py_ssize_t s = n - 17;
        uint64_t bits = tok_neon_nibbles(tok_neon_maybe(p + s, with_cr)) & (~0ull << ((i - s) * 4));
        if ((k = tok_neon_first_true(p, n, s, bits, with_cr)) >= 0) return k;
        i = n - 1;
    }
    for (; i < n; i++)  /* short inputs, and the last byte (a CR there is a candidate) */
        if (tok_is_candidate(p, n, i, with_cr)) return i;
    return -1;
}

static inline Py_ssize_t tok_next_candidate_neon(const char *p, Py_ssize_t n, int with_cr) {
    return with_cr ? tok_next_candidate_neon_with(p, n, 1) : tok_next_candidate_neon_with(p, n, 0);
}

/* the first / last start in the nibble mask (not 0) */
TOK_NEON_INLINE Py_ssize_t tok_neon_first(uint64_t bits) { return __builtin_ctzll(bits) >> 2; }
TOK_NEON_INLINE Py_ssize_t tok_neon_last(uint64_t bits) { return (63 - __builtin_clzll(bits)) >> 2; }

/* The pair scans look for a LF first, 32 bytes a step, and for the LF after it only in a
 * step that has one: one compare a byte where there is no LF. */

static inline Py_ssize_t tok_first_lflf_neon(const char *p, Py_ssize_t n) {
    const uint8x16_t lf = vdupq_n_u8('\n');
    Py_ssize_t i = 0;
    uint64_t bits;
    for (; i + 33 <= n; i += 32) {
        uint8x16_t e0 = vceqq_u8(tok_neon_load(p + i), lf);
        uint8x16_t e1 = vceqq_u8(tok_neon_load(p + i + 16), lf);
        if (!tok_neon_nibbles(vorrq_u8(e0, e1))) continue;
        if ((bits = tok_neon_nibbles(vandq_u8(e0, vceqq_u8(tok_neon_load(p + i + 1), lf)))))
            return i + tok_neon_first(bits);
        if ((bits = tok_neon_nibbles(vandq_u8(e1, vceqq_u8(tok_neon_load(p + i + 17), lf)))))
            return i + 16 + tok_neon_first(bits);
    }
    if (i + 17 <= n) {
        if ((bits = tok_neon_nibbles(tok_neon_lflf(p + i)))) return i + tok_neon_first(bits);
        i += 16;
    }
    if (n >= 17) {
        /* the block of the last 16 starts; those before i hold no pair (already checked) */
        Py_ssize_t s = n - 17;
        bits = tok_neon_nibbles(tok_neon_lflf(p + s));
        return bits ? s + tok_neon_first(bits) : -1;
    }
    for (; i + 1 < n; i++)
        if (p[i] == '\n' && p[i + 1] == '\n') return i;
    return -1;
}

static inline Py_ssize_t tok_last_lflf_neon(const char *p, Py_ssize_t n) {
    const uint8x16_t lf = vdupq_n_u8('\n');
    Py_ssize_t i = n - 1;  /* pairs start at 0 .. n-2; starts from i on are checked */
    uint64_t bits;
    for (; i >= 32; i -= 32) {  /* the starts [i - 32, i) */
        uint8x16_t e0 = vceqq_u8(tok_neon_load(p + i - 32), lf);
        uint8x16_t e1 = vceqq_u8(tok_neon_load(p + i - 16), lf);
        if (!tok_neon_nibbles(vorrq_u8(e0, e1))) continue;
        if ((bits = tok_neon_nibbles(vandq_u8(e1, vceqq_u8(tok_neon_load(p + i - 15), lf)))))
            return i - 16 + tok_neon_last(bits);
        if ((bits = tok_neon_nibbles(vandq_u8(e0, vceqq_u8(tok_neon_load(p + i - 31), lf)))))
            return i - 32 + tok_neon_last(bits);
    }
    if (i >= 16) {
        if ((bits = tok_neon_nibbles(tok_neon_lflf(p + i - 16)))) return i - 16 + tok_neon_last(bits);
        i -= 16;
    }
    if (n >= 17) {
        /* the block of the first 16 starts; those from i on hold no pair (already checked) */
        bits = tok_neon_nibbles(tok_neon_lflf(p));
        return bits ? tok_neon_last(bits) : -1;
    }
    for (i = i - 1; i >= 0; i--)
        if (p[i] == '\n' && p[i + 1] == '\n') return i;
    return -1;
}

/* which of the 16 starts p[0..16) end an event: a LF after a byte that is not one and before
 * another LF (reads p[-1..17)); as 0xFF bytes */
TOK_NEON_INLINE uint8x16_t tok_neon_event_ends(const char *p) {
    const uint8x16_t lf = vdupq_n_u8('\n');
    uint8x16_t here = vceqq_u8(tok_neon_load(p), lf);
    return vbicq_u8(vandq_u8(here, vceqq_u8(tok_neon_load(p + 1), lf)),
                    vceqq_u8(tok_neon_load(p - 1), lf));
}

/* the event ends among 16 starts, from the LF flags of the byte before each start (e0) and
 * of the 16 bytes after those (e1) */
TOK_NEON_INLINE uint8x16_t tok_neon_ends_of(uint8x16_t e0, uint8x16_t e1) {
    return vbicq_u8(vandq_u8(vextq_u8(e0, e1, 1), vextq_u8(e0, e1, 2)), e0);
}

static inline Py_ssize_t tok_count_event_ends_neon(const char *p, Py_ssize_t n) {
    const uint8x16_t lf = vdupq_n_u8('\n');
    Py_ssize_t i = 1, count = 0;
    if (n >= 48) {
        /* 32 starts a step; each byte is loaded and compared once, the shifted views come
         * from ext. A match is 0xFF, -1 as a byte: subtracting it adds one to its lane, and
         * the lanes are summed before any can wrap (127 steps of at most 2 a lane). */
        Py_ssize_t steps = (n - 48) / 32 + 1;  /* those with i + 47 <= n */
        uint8x16_t e0 = vceqq_u8(tok_neon_load(p + i - 1), lf);
        while (steps > 0) {
            Py_ssize_t chunk = steps < 127 ? steps : 127;
            uint8x16_t lanes = vdupq_n_u8(0);
            steps -= chunk;
            for (; chunk > 0; chunk--, i += 32) {
                uint8x16_t e1 = vceqq_u8(tok_neon_load(p + i + 15), lf);
                uint8x16_t e2 = vceqq_u8(tok_neon_load(p + i + 31), lf);
                lanes = vsubq_u8(lanes, vaddq_u8(tok_neon_ends_of(e0, e1), tok_neon_ends_of(e1, e2)));
                e0 = e2;
            }
            count += vaddlvq_u8(lanes);
        }
    }
    for (; i + 17 <= n; i += 16)
        count += vaddlvq_u8(vshrq_n_u8(tok_neon_event_ends(p + i), 7));
    if (n >= 18 && i < n - 1) {
        /* starts [i, n - 1) are left, 1 to 15 of them: the block of starts [n - 17, n - 1),
         * its lanes before i left out */
        static const uint8_t lane_index[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13,
                                               14, 15};
        Py_ssize_t s = n - 17;
        uint8x16_t keep = vcgeq_u8(vld1q_u8(lane_index), vdupq_n_u8((uint8_t)(i - s)));
        count += vaddlvq_u8(vshrq_n_u8(vandq_u8(tok_neon_event_ends(p + s), keep), 7));
        i = n - 1;
    }
    for (; i + 1 < n; i++)
        count += p[i] == '\n' && p[i + 1] == '\n' && p[i - 1] != '\n';
    return count;
}

#endif
