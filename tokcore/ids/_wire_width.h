/* Runs of token ids between the two widths on the wire, little-endian int32 and int64: the
 * int64 paths of _wire_c read with the int32 readers and write with the int32 writers, and
 * these move a run of ids from one width to the other. GIL-free: only the memory given is
 * touched.
 */
#ifndef TOKCORE_IDWIDTH_H
#define TOKCORE_IDWIDTH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_byteorder.h"
#include "_cpu.h"

#if TOK_CPU_SSE2 && (defined(__x86_64__) || defined(_M_X64))
#  include <emmintrin.h>
#  define TOK_W_SSE2 1
#else
#  define TOK_W_SSE2 0
#endif

/* n int32 ids at in -> n int64 ids at out (sign-extended) */
static inline void tok_widen_ids(const unsigned char *in, size_t n, unsigned char *out) {
    for (size_t i = 0; i < n; i++) tok_store_le64(out + 8 * i, tok_load_le32(in + 4 * i));
}

/* n int64 ids at in -> int32 ids at out while they fit; returns how many did (n: all).
 * Eight at a time: v fits int32 when v + 2**31 has no bit above the low 32, so the eight
 * sums ORed together say it for all (SSE2: four adds, three ORs and a compare; elsewhere
 * the same in a loop with no branch), then their low halves are stored; one by one from
 * the eight that hold the first id that does not fit. */
static inline size_t tok_narrow_ids(const unsigned char *in, size_t n, unsigned char *out) {
    size_t i = 0;
#if TOK_W_SSE2
    const __m128i bias = _mm_set1_epi64x(0x80000000LL), zero = _mm_setzero_si128();
    for (; i + 8 <= n; i += 8) {
        const __m128i *p = (const __m128i *)(in + 8 * i);
        __m128i a = _mm_loadu_si128(p), b = _mm_loadu_si128(p + 1);
        __m128i c = _mm_loadu_si128(p + 2), d = _mm_loadu_si128(p + 3);
        __m128i t = _mm_or_si128(_mm_or_si128(_mm_add_epi64(a, bias), _mm_add_epi64(b, bias)),
                                 _mm_or_si128(_mm_add_epi64(c, bias), _mm_add_epi64(d, bias)));
        if (_mm_movemask_epi8(_mm_cmpeq_epi32(_mm_srli_epi64(t, 32), zero)) != 0xFFFF) break;
        /* the low 32 bits of each: lanes 0 and 2 of two vectors */
        __m128i ab = _mm_castps_si128(_mm_shuffle_ps(_mm_castsi128_ps(a), _mm_castsi128_ps(b),
                                                     0x88));
        __m128i cd = _mm_castps_si128(_mm_shuffle_ps(_mm_castsi128_ps(c), _mm_castsi128_ps(d),
                                                     0x88));
        _mm_storeu_si128((__m128i *)(out + 4 * i), ab);
        _mm_storeu_si128((__m128i *)(out + 4 * i + 16), cd);
    }
#else
    for (; i + 8 <= n; i += 8) {
        int64_t v[8];
        uint32_t w[8];
        uint64_t wide = 0;
        for (int j = 0; j < 8; j++) {
            v[j] = tok_load_le64(in + 8 * (i + (size_t)j));
            wide |= ((uint64_t)v[j] + 0x80000000u) >> 32;
        }
        if (wide) break;
        for (int j = 0; j < 8; j++) w[j] = TOK_LE32((uint32_t)(int32_t)v[j]);
        memcpy(out + 4 * i, w, sizeof w);
    }
#endif
    for (; i < n; i++) {
        int64_t v = tok_load_le64(in + 8 * i);
        if (v != (int64_t)(int32_t)v) break;
        tok_store_le32(out + 4 * i, (int32_t)v);
    }
    return i;
}

#endif
