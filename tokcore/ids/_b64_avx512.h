/* Base64 kernels for x86-64 CPUs with AVX-512 VBMI (Ice Lake and later Xeons, AMD Zen 4),
 * included by _b64_core.h, which picks them at run time over its AVX2 ones.
 *
 * VBMI's byte permutes make each step three register operations (after W. Mula's published
 * AVX-512 VBMI technique):
 * - encoding: one vpermb spreads 48 bytes so that each 32-bit word holds a group as
 *   b1 b0 b2 b1; one vpmultishiftqb copies the 8 bits at each of the four 6-bit indices'
 *   offsets (10, 4, 22, 16 in the word) into a byte of its own; one vpermb looks the low 6
 *   bits up in the 64-character alphabet;
 * - decoding: one vpermi2b looks each character up in a 128-entry table (0x80: not in the
 *   alphabet; a character from 128 up has the bit itself), two multiply-adds join four
 *   6-bit values into a 24-bit group per word, one vpermb packs the 48 bytes.
 * The kernels are compiled with a function-level target attribute, so the module loads and
 * builds everywhere; valgrind's CPU has no AVX-512, so the instruction counts of bench/guard
 * are of the AVX2 kernels.
 */
#ifndef TOKCORE_B64_AVX512_H
#define TOKCORE_B64_AVX512_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_cpu.h"

#define TOK_B64_VBMI_TARGET __attribute__((target("avx512f,avx512bw,avx512vbmi")))

/* Filled once by tok_b64_avx512_init: the vpermb indices of each step, the alphabet and the
 * decoding table (in writable memory, so the compiler loads them once before a loop). */
static uint8_t tok_b64_vbmi_spread[64];  /* word i of the step <- bytes 3i+1, 3i, 3i+2, 3i+1 */
static uint8_t tok_b64_vbmi_pack[64];    /* byte 3i+k <- byte 2-k of word i (48 of them) */
static uint8_t tok_b64_vbmi_chars[64];   /* 6-bit value -> its character */
static uint8_t tok_b64_vbmi_values[128]; /* ASCII character -> its 6-bit value, or 0x80 */

static void tok_b64_avx512_init(const char *alphabet) {
    static const uint8_t order[4] = {1, 0, 2, 1};
    for (int i = 0; i < 16; i++)
        for (int k = 0; k < 4; k++) tok_b64_vbmi_spread[4 * i + k] = (uint8_t)(3 * i + order[k]);
    memset(tok_b64_vbmi_pack, 0, sizeof tok_b64_vbmi_pack);
    for (int i = 0; i < 16; i++)
        for (int k = 0; k < 3; k++) tok_b64_vbmi_pack[3 * i + k] = (uint8_t)(4 * i + 2 - k);
    memcpy(tok_b64_vbmi_chars, alphabet, 64);
    memset(tok_b64_vbmi_values, 0x80, sizeof tok_b64_vbmi_values);
    for (int v = 0; v < 64; v++) tok_b64_vbmi_values[(unsigned char)alphabet[v]] = (uint8_t)v;
}

/* what the kernels need of the CPU (tok_cpu_has, _cpu.h) */
#define TOK_B64_VBMI_FEATURES (TOK_CPU_AVX512F | TOK_CPU_AVX512BW | TOK_CPU_AVX512VBMI)

TOK_B64_VBMI_TARGET
static inline __m512i tok_b64_vbmi_enc_step(__m512i in, __m512i spread, __m512i shifts,
                                            __m512i chars) {
    __m512i groups = _mm512_permutexvar_epi8(spread, in);
    return _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(shifts, groups), chars);
}

/* Encodes 48 bytes -> 64 characters per step while 64 bytes can be read (a step loads 64),
 * two steps a turn while 112 can; returns the number of bytes consumed. */
TOK_B64_VBMI_TARGET __attribute__((noinline))
static size_t tok_b64_encode_vbmi(const unsigned char *src, size_t n, unsigned char *out) {
    const __m512i spread = _mm512_loadu_si512(tok_b64_vbmi_spread);
    const __m512i chars = _mm512_loadu_si512(tok_b64_vbmi_chars);
    /* the offsets of the indices c0 c1 c2 c3 in each of a qword's two words */
    const __m512i shifts = _mm512_set1_epi64(0x3036242a1016040aLL);
    size_t done = 0;
    for (; n - done >= 112; done += 96, out += 128) {
        __m512i a = _mm512_loadu_si512(src + done);
        __m512i b = _mm512_loadu_si512(src + done + 48);
        _mm512_storeu_si512(out, tok_b64_vbmi_enc_step(a, spread, shifts, chars));
        _mm512_storeu_si512(out + 64, tok_b64_vbmi_enc_step(b, spread, shifts, chars));
    }
    for (; n - done >= 64; done += 48, out += 64) {
        __m512i a = _mm512_loadu_si512(src + done);
        _mm512_storeu_si512(out, tok_b64_vbmi_enc_step(a, spread, shifts, chars));
    }
    return done;
}

/* 64 characters -> 48 bytes (in the low 48 of the result); *bad gets a lane's high bit set
 * for each character outside the alphabet. */
TOK_B64_VBMI_TARGET
static inline __m512i tok_b64_vbmi_dec_step(__m512i in, __m512i lo, __m512i hi, __m512i pack,
                                            __m512i *bad) {
    __m512i vals = _mm512_permutex2var_epi8(lo, in, hi);
    *bad = _mm512_or_si512(in, vals);
    __m512i pairs = _mm512_maddubs_epi16(vals, _mm512_set1_epi32(0x01400140));
    __m512i groups = _mm512_madd_epi16(pairs, _mm512_set1_epi32(0x00011000));
    return _mm512_permutexvar_epi8(pack, groups);
}

/* Decodes 64 characters -> 48 bytes per step, stopping before the first 64-character block
 * that holds a character outside the alphabet; returns the number of quads consumed. While
 * 16 more bytes of output follow a step's 48 its result is stored whole (64 bytes, the last
 * 16 overwritten by the next step), two steps a turn; the last step stores 48 bytes under a
 * mask. */
TOK_B64_VBMI_TARGET __attribute__((noinline))
static size_t tok_b64_decode_vbmi(const unsigned char *src, size_t nquads, unsigned char *out) {
    const __m512i lo = _mm512_loadu_si512(tok_b64_vbmi_values);
    const __m512i hi = _mm512_loadu_si512(tok_b64_vbmi_values + 64);
    const __m512i pack = _mm512_loadu_si512(tok_b64_vbmi_pack);
    const __m512i high = _mm512_set1_epi8((char)0x80);
    size_t q = 0;
    __m512i bad_a, bad_b;
    /* 32 quads read; the second step's 64-byte store ends 16 bytes past its 48: 38 quads */
    while (nquads - q >= 38) {
        __m512i a = tok_b64_vbmi_dec_step(_mm512_loadu_si512(src + q * 4), lo, hi, pack,
                                          &bad_a);
        __m512i b = tok_b64_vbmi_dec_step(_mm512_loadu_si512(src + q * 4 + 64), lo, hi, pack,
                                          &bad_b);
        if (_mm512_test_epi8_mask(_mm512_or_si512(bad_a, bad_b), high)) break;
        _mm512_storeu_si512(out + q * 3, a);
        _mm512_storeu_si512(out + q * 3 + 48, b);
        q += 32;
    }
    while (nquads - q >= 16) {
        __m512i a = tok_b64_vbmi_dec_step(_mm512_loadu_si512(src + q * 4), lo, hi, pack,
                                          &bad_a);
        if (_mm512_test_epi8_mask(bad_a, high)) break;
        _mm512_mask_storeu_epi8(out + q * 3, 0xffffffffffffULL, a);
        q += 16;
    }
    return q;
}

#endif /* TOKCORE_B64_AVX512_H */
