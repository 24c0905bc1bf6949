/* Base64 kernels for _b64_c: table-driven scalar code everywhere, AVX2 where the CPU has it
 * (x86) and AVX-512 VBMI where it has that (_b64_avx512.h), NEON on aarch64 (_b64_neon.h).
 *
 * Encoding: 3 bytes -> 4 characters of the standard alphabet, '=' padding at the end.
 * Decoding has two paths. The fast one takes well-formed text (only alphabet characters,
 * a length that is a multiple of 4, at most two '=' at the very end) and reports any other
 * input to the caller, which then takes the exact path: a character-by-character state
 * machine with the semantics of CPython's binascii.a2b_base64 in both its modes (strict:
 * any anomaly is an error; non-strict: characters outside the alphabet are skipped and
 * the first complete pad sequence ends the data).
 *
 * The AVX2 kernels follow the published vector technique (W. Mula and D. Lemire, "Faster
 * Base64 Encoding and Decoding Using AVX2 Instructions", 2018): a byte shuffle plus two
 * 16-bit multiplies to split 24-bit groups into 6-bit indices, nibble lookups with pshufb
 * to validate and translate characters, and multiply-adds to join 6-bit values again.
 * They are compiled with a function-level target attribute and picked at run time, so the
 * module still loads on CPUs without AVX2 and builds on any architecture. NEON is in every
 * aarch64 CPU, so its kernels are picked at compile time. Either way the scalar kernels stay
 * compiled and tests switch to them (tok_b64_set_simd), comparing both on one machine.
 * Every function here is GIL-free: it touches only the memory it is given.
 */
#ifndef TOKCORE_B64_CORE_H
#define TOKCORE_B64_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_cpu.h"

static const char tok_b64_alphabet[65] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* 12 input bits -> their two output characters, in memory order */
static uint16_t tok_b64_pairs[4096];
/* character -> its 6 bits already shifted into place in a 24-bit group (table k for the
 * k-th character of a quad), or TOK_B64_BAD when it is not in the alphabet */
static uint32_t tok_b64_dec[4][256];
#define TOK_B64_BAD 0x01000000u

/* -DTOK_B64_HAVE_AVX2=0 / -DTOK_B64_HAVE_NEON=0 build the portable kernels only (what other
 * hosts get) */
#ifndef TOK_B64_HAVE_AVX2
#  define TOK_B64_HAVE_AVX2 TOK_CPU_X86
#endif
#ifndef TOK_B64_HAVE_NEON
#  define TOK_B64_HAVE_NEON TOK_CPU_NEON
#endif
#if TOK_B64_HAVE_AVX2
#  include <immintrin.h>
#  include "_b64_avx512.h"
#endif
#if TOK_B64_HAVE_NEON
#  include "_b64_neon.h"
#endif

/* kernel levels: each one falls back on the ones below it for what it leaves */
enum { TOK_B64_SCALAR = 0, TOK_B64_SIMD = 1 /* AVX2 or NEON */, TOK_B64_WITH_VBMI = 2 };
static int tok_b64_cpu_simd = 0;  /* the best level the CPU offers (x86: checked at run time) */
static int tok_b64_use_simd = 0;  /* the level the kernels use (tests can lower it) */
/* read by every call and written by the switch, from any thread (free-threaded builds):
 * relaxed atomics, a plain load or store on x86-64 and aarch64 */
#if defined(__GNUC__) || defined(__clang__)
#  define TOK_B64_USE_SIMD() __atomic_load_n(&tok_b64_use_simd, __ATOMIC_RELAXED)
#  define TOK_B64_SWAP_SIMD(v) __atomic_exchange_n(&tok_b64_use_simd, (v), __ATOMIC_RELAXED)
#else
#  define TOK_B64_USE_SIMD() (*(volatile int *)&tok_b64_use_simd)
static int tok_b64_swap_plain(int v) { int old = tok_b64_use_simd; tok_b64_use_simd = v; return old; }
#  define TOK_B64_SWAP_SIMD(v) tok_b64_swap_plain(v)
#endif

static void tok_b64_init(void) {
    for (int i = 0; i < 4096; i++) {
        char pair[2] = {tok_b64_alphabet[i >> 6], tok_b64_alphabet[i & 63]};
        memcpy(&tok_b64_pairs[i], pair, 2);
    }
    for (int k = 0; k < 4; k++)
        for (int c = 0; c < 256; c++) tok_b64_dec[k][c] = TOK_B64_BAD;
    for (uint32_t v = 0; v < 64; v++) {
        unsigned char c = (unsigned char)tok_b64_alphabet[v];
        tok_b64_dec[0][c] = v << 18;
        tok_b64_dec[1][c] = v << 12;
        tok_b64_dec[2][c] = v << 6;
        tok_b64_dec[3][c] = v;
    }
#if TOK_B64_HAVE_AVX2
    tok_b64_avx512_init(tok_b64_alphabet);
    tok_b64_cpu_simd = !tok_cpu_has(TOK_CPU_AVX2) ? TOK_B64_SCALAR
                       : tok_cpu_has(TOK_B64_VBMI_FEATURES) ? TOK_B64_WITH_VBMI : TOK_B64_SIMD;
#elif TOK_B64_HAVE_NEON
    tok_b64_neon_init(tok_b64_alphabet);
    tok_b64_cpu_simd = 1;
#endif
    tok_b64_use_simd = tok_b64_cpu_simd;
}

/* The kernels of a level up to the CPU's best (a negative level: the best); returns the old
 * level. */
static int tok_b64_set_simd(int level) {
    if (level < 0 || level > tok_b64_cpu_simd) level = tok_b64_cpu_simd;
    return TOK_B64_SWAP_SIMD(level);
}

static int tok_b64_cpu_level(void) { return tok_b64_cpu_simd; }

static const char *tok_b64_level_name(int level) {
    if (level == TOK_B64_SCALAR) return "scalar";
    if (level == TOK_B64_WITH_VBMI) return "avx512";  /* VBMI and BW: TOK_B64_VBMI_FEATURES */
    return TOK_B64_HAVE_NEON ? "neon" : "avx2";
}

static const char *tok_b64_simd_name(void) { return tok_b64_level_name(TOK_B64_USE_SIMD()); }

#if TOK_B64_HAVE_AVX2

/* 24 input bytes, spread so that each 32-bit word holds one group as b1 b0 b2 b1 -> 32
 * characters: two masked 16-bit multiplies move the four 6-bit indices into their own bytes
 * (the high multiply shifts right, the low one left), and each index is turned into ASCII
 * by adding the offset of its range, the range found with a saturating subtract and one
 * compare (0: A-Z, 1: a-z, 2-11: 0-9, 12: '+', 13: '/') and the offset by a shuffle. */
__attribute__((target("avx2")))
static inline __m256i tok_b64_enc_step(__m256i in) {
    const __m256i offsets = _mm256_setr_epi8(65, 71, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4,
                                             -19, -16, 0, 0, 65, 71, -4, -4, -4, -4, -4, -4,
                                             -4, -4, -4, -4, -19, -16, 0, 0);
    __m256i ac = _mm256_mulhi_epu16(_mm256_and_si256(in, _mm256_set1_epi32(0x0fc0fc00)),
                                    _mm256_set1_epi32(0x04000040));
    __m256i bd = _mm256_mullo_epi16(_mm256_and_si256(in, _mm256_set1_epi32(0x003f03f0)),
                                    _mm256_set1_epi32(0x01000010));
    __m256i idx = _mm256_or_si256(ac, bd);
    __m256i cls = _mm256_subs_epu8(idx, _mm256_set1_epi8(51));
    cls = _mm256_sub_epi8(cls, _mm256_cmpgt_epi8(idx, _mm256_set1_epi8(25)));
    return _mm256_add_epi8(idx, _mm256_shuffle_epi8(offsets, cls));
}

/* Encodes 24 bytes -> 32 characters per step while 28 bytes can be read; returns the number
 * of bytes consumed. The first step loads its two 12-byte halves separately; every later
 * one loads 32 bytes from 4 bytes before its input, so each 128-bit lane holds its half
 * (at bytes 4-15 of the low lane, 0-11 of the high one) in one load. */
__attribute__((target("avx2")))
static size_t tok_b64_encode_avx2(const unsigned char *src, size_t n, unsigned char *out) {
    const __m256i spread = _mm256_setr_epi8(1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10,
                                            1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10);
    const __m256i spread4 = _mm256_setr_epi8(5, 4, 6, 5, 8, 7, 9, 8, 11, 10, 12, 11, 14, 13,
                                             15, 14, 1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10,
                                             9, 11, 10);
    size_t done = 0;
    if (n < 28) return 0;
    __m128i lo = _mm_loadu_si128((const __m128i *)src);
    __m128i hi = _mm_loadu_si128((const __m128i *)(src + 12));
    __m256i first = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
    _mm256_storeu_si256((__m256i *)out, tok_b64_enc_step(_mm256_shuffle_epi8(first, spread)));
    done = 24;
    out += 32;
    /* two steps per turn while 52 bytes can be read from here: fewer loop branches */
    for (; n - done >= 52; done += 48, out += 64) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(src + done - 4));
        __m256i b = _mm256_loadu_si256((const __m256i *)(src + done + 20));
        a = tok_b64_enc_step(_mm256_shuffle_epi8(a, spread4));
        b = tok_b64_enc_step(_mm256_shuffle_epi8(b, spread4));
        _mm256_storeu_si256((__m256i *)out, a);
        _mm256_storeu_si256((__m256i *)(out + 32), b);
    }
    for (; n - done >= 28; done += 24, out += 32) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(src + done - 4));
        _mm256_storeu_si256((__m256i *)out, tok_b64_enc_step(_mm256_shuffle_epi8(a, spread4)));
    }
    return done;
}

/* 32 characters -> their 6-bit values, or the step reports a character outside the
 * alphabet: a character is invalid when bad_lo[low nibble] & bad_hi[high nibble] != 0; each
 * bit stands for one high-nibble row: 0x01 no valid char, 0x02 row 2 (only + and /), 0x04
 * row 3 (0-9), 0x08 rows 4 and 6 (no @ or `), 0x10 rows 5 and 7 (up to Z / z). The value is
 * the character plus the offset of its high nibble (minus one for '/'). */
__attribute__((target("avx2")))
static inline __m256i tok_b64_dec_values(__m256i in, __m256i *bad_l, __m256i *bad_h) {
    const __m256i bad_lo = _mm256_setr_epi8(
        0x0B, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x07, 0x15, 0x17, 0x17,
        0x17, 0x15, 0x0B, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x07, 0x15,
        0x17, 0x17, 0x17, 0x15);
    const __m256i bad_hi = _mm256_setr_epi8(
        0x01, 0x01, 0x02, 0x04, 0x08, 0x10, 0x08, 0x10, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01,
        0x01, 0x01, 0x01, 0x01, 0x02, 0x04, 0x08, 0x10, 0x08, 0x10, 0x01, 0x01, 0x01, 0x01,
        0x01, 0x01, 0x01, 0x01);
    const __m256i shift = _mm256_setr_epi8(
        0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m256i nibble = _mm256_set1_epi8(0x0f);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi32(in, 4), nibble);
    __m256i lo = _mm256_and_si256(in, nibble);
    *bad_l = _mm256_shuffle_epi8(bad_lo, lo);  /* the caller tests bad_l & bad_h == 0 */
    *bad_h = _mm256_shuffle_epi8(bad_hi, hi);
    __m256i slash = _mm256_cmpeq_epi8(in, _mm256_set1_epi8('/'));
    return _mm256_add_epi8(in, _mm256_shuffle_epi8(shift, _mm256_add_epi8(hi, slash)));
}

/* 32 6-bit values -> 24 bytes, in the low 24 bytes of the result: 4 x 6 bits -> 2 x 12 bits
 * -> one 24-bit group per 32-bit word, the three bytes of each gathered, the lanes joined */
__attribute__((target("avx2")))
static inline __m256i tok_b64_dec_join(__m256i vals) {
    const __m256i gather = _mm256_setr_epi8(2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1,
                                            -1, -1, 2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12,
                                            -1, -1, -1, -1);
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7);
    __m256i pairs = _mm256_maddubs_epi16(vals, _mm256_set1_epi32(0x01400140));
    __m256i groups = _mm256_madd_epi16(pairs, _mm256_set1_epi32(0x00011000));
    return _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(groups, gather), lanes);
}

/* Decodes 32 characters -> 24 bytes per step, stopping before the first 32-character block
 * that holds a character outside the alphabet; returns the number of quads consumed. While
 * 8 more bytes of output follow a step's 24 its result is stored whole (32 bytes, the last 8
 * overwritten by the next step), two steps a turn; the last steps store 16 + 8 bytes. */
__attribute__((target("avx2")))
static size_t tok_b64_decode_avx2(const unsigned char *src, size_t nquads, unsigned char *out) {
    size_t q = 0;
    __m256i al, ah, bl, bh;
    /* 16 quads read; the second step's 32-byte store ends 8 bytes past its 24: 19 quads */
    while (nquads - q >= 19) {
        __m256i a = tok_b64_dec_values(_mm256_loadu_si256((const __m256i *)(src + q * 4)),
                                       &al, &ah);
        __m256i b = tok_b64_dec_values(
            _mm256_loadu_si256((const __m256i *)(src + q * 4 + 32)), &bl, &bh);
        if (!(_mm256_testz_si256(al, ah) & _mm256_testz_si256(bl, bh))) break;
        _mm256_storeu_si256((__m256i *)(out + q * 3), tok_b64_dec_join(a));
        _mm256_storeu_si256((__m256i *)(out + q * 3 + 24), tok_b64_dec_join(b));
        q += 16;
    }
    while (nquads - q >= 8) {
        __m256i a = tok_b64_dec_values(_mm256_loadu_si256((const __m256i *)(src + q * 4)),
                                       &al, &ah);
        if (!_mm256_testz_si256(al, ah)) break;
        __m256i bytes = tok_b64_dec_join(a);
        unsigned char *dst = out + q * 3;
        _mm_storeu_si128((__m128i *)dst, _mm256_castsi256_si128(bytes));
        _mm_storel_epi64((__m128i *)(dst + 16), _mm256_extracti128_si256(bytes, 1));
        q += 8;
    }
    return q;
}

#endif /* TOK_B64_HAVE_AVX2 */

/* Scalar: groups of 3 bytes -> 4 characters, two table lookups each. */
static void tok_b64_encode_groups(const unsigned char *src, size_t ngroups, unsigned char *out) {
    for (size_t g = 0; g < ngroups; g++, src += 3, out += 4) {
        uint32_t group = ((uint32_t)src[0] << 16) | ((uint32_t)src[1] << 8) | src[2];
        memcpy(out, &tok_b64_pairs[group >> 12], 2);
        memcpy(out + 2, &tok_b64_pairs[group & 0xfff], 2);
    }
}

/* Encodes n bytes into 4 * ceil(n / 3) characters, padded with '='. */
static void tok_b64_encode(const unsigned char *src, size_t n, unsigned char *out) {
    size_t done = 0;
#if TOK_B64_HAVE_AVX2
    int level = TOK_B64_USE_SIMD();
    if (level) {
        /* a long input: scalar groups first until the output is aligned to the vector stores
         * (at most 7 or 15 groups, when it is 4-byte aligned), so that none splits a cache
         * line */
        size_t head = 0, width = level == TOK_B64_WITH_VBMI ? 64 : 32;
        if (n >= 1024 && ((uintptr_t)out & 3) == 0)
            head = ((width - ((uintptr_t)out & (width - 1))) & (width - 1)) / 4;
        tok_b64_encode_groups(src, head, out);
        done = head * 3;
        if (level == TOK_B64_WITH_VBMI)
            done += tok_b64_encode_vbmi(src + done, n - done, out + done / 3 * 4);
        done += tok_b64_encode_avx2(src + done, n - done, out + done / 3 * 4);
    }
#elif TOK_B64_HAVE_NEON
    if (TOK_B64_USE_SIMD()) done = tok_b64_encode_neon(src, n, out);
#endif
    out += done / 3 * 4;
    tok_b64_encode_groups(src + done, (n - done) / 3, out);
    out += (n - done) / 3 * 4;
    done += (n - done) / 3 * 3;
    if (n - done == 1) {
        unsigned b0 = src[done];
        out[0] = (unsigned char)tok_b64_alphabet[b0 >> 2];
        out[1] = (unsigned char)tok_b64_alphabet[(b0 & 3) << 4];
        out[2] = out[3] = '=';
    } else if (n - done == 2) {
        unsigned b0 = src[done], b1 = src[done + 1];
        out[0] = (unsigned char)tok_b64_alphabet[b0 >> 2];
        out[1] = (unsigned char)tok_b64_alphabet[((b0 & 3) << 4) | (b1 >> 4)];
        out[2] = (unsigned char)tok_b64_alphabet[(b1 & 15) << 2];
        out[3] = '=';
    }
}

/* Decodes nquads quads of alphabet characters (no padding) into 3 bytes each; returns how
 * many were decoded: fewer than nquads when the next one holds another character. */
static size_t tok_b64_decode_quads(const unsigned char *src, size_t nquads, unsigned char *out) {
    size_t q = 0;
#if TOK_B64_HAVE_AVX2
    int level = TOK_B64_USE_SIMD();
    if (level == TOK_B64_WITH_VBMI) q = tok_b64_decode_vbmi(src, nquads, out);
    if (level) q += tok_b64_decode_avx2(src + q * 4, nquads - q, out + q * 3);
#elif TOK_B64_HAVE_NEON
    if (TOK_B64_USE_SIMD()) q = tok_b64_decode_neon(src, nquads, out);
#endif
    for (; q < nquads; q++) {
        const unsigned char *s = src + q * 4;
        uint32_t group = tok_b64_dec[0][s[0]] | tok_b64_dec[1][s[1]] | tok_b64_dec[2][s[2]]
                         | tok_b64_dec[3][s[3]];
        if (group & TOK_B64_BAD) break;
        unsigned char *d = out + q * 3;
        d[0] = (unsigned char)(group >> 16);
        d[1] = (unsigned char)(group >> 8);
        d[2] = (unsigned char)group;
    }
    return q;
}

/* The number of '=' that end well-formed text of length n (a multiple of 4): 0, 1 or 2. */
static int tok_b64_pads(const unsigned char *src, size_t n) {
    if (n == 0 || src[n - 1] != '=') return 0;
    return src[n - 2] == '=' ? 2 : 1;
}

/* Decodes the last quad, whose final `pads` (1 or 2) characters are '=', into 3 - pads
 * bytes; returns 0, or -1 when the rest of it is not alphabet characters. */
static int tok_b64_decode_padded(const unsigned char *s, int pads, unsigned char *out) {
    uint32_t group = tok_b64_dec[0][s[0]] | tok_b64_dec[1][s[1]];
    if (pads == 1) group |= tok_b64_dec[2][s[2]];
    if (group & TOK_B64_BAD) return -1;
    out[0] = (unsigned char)(group >> 16);
    if (pads == 1) out[1] = (unsigned char)(group >> 8);
    return 0;
}

/* The fast path: decodes well-formed text into exactly n / 4 * 3 - pads bytes and returns
 * that length, or returns -1 (output undefined) for anything else. */
static ptrdiff_t tok_b64_decode_fast(const unsigned char *src, size_t n, unsigned char *out) {
    if (n % 4) return -1;
    int pads = tok_b64_pads(src, n);
    size_t plain = n / 4 - (pads ? 1 : 0);
    if (tok_b64_decode_quads(src, plain, out) != plain) return -1;
    if (pads && tok_b64_decode_padded(src + plain * 4, pads, out + plain * 3) < 0) return -1;
    return (ptrdiff_t)(plain * 3 + (pads ? 3 - pads : 0));
}

enum {
    TOK_B64_OK = 0,
    TOK_B64_LEADING_PAD,    /* strict: text starts with '=' */
    TOK_B64_EXCESS,         /* strict: anything after the pad sequence */
    TOK_B64_NOT_ALPHABET,   /* strict: a character outside the alphabet */
    TOK_B64_DISCONTINUOUS,  /* strict: a data character after a '=' */
    TOK_B64_ONE_EXTRA,      /* a lone data character after the last full quad */
    TOK_B64_BAD_PADDING,    /* two or three data characters and no pad sequence after them */
    TOK_B64_EXCESS_PAD,     /* strict, Python 3.13+: a '=' right after a complete quad */
};

/* Mode bits: the caller probes the running binascii once and says which rules it has.
 * NO_PAD_AFTER_QUAD (strict only, older rules): a '=' right after a complete quad is an error
 * (3.13 on). GH145264: the rules of CPython's fix for gh-145264 (3.13.13, 3.14.4, and
 * backported by distributions, e.g. Debian trixie's 3.13.5), in both modes. */
enum {
    TOK_B64_NONSTRICT = 0,
    TOK_B64_STRICT = 1,
    TOK_B64_NO_PAD_AFTER_QUAD = 2,
    TOK_B64_GH145264 = 4,
};

/* The exact paths' step: a data character's 6 bits `v` into the quad at *quad_pos (0 to
 * 3), the bits not yet written kept in *left; a byte out after its second, third and fourth
 * character. Returns where the next byte goes. */
static inline unsigned char *tok_b64_put(unsigned char *out, uint32_t v, int *quad_pos,
                                         unsigned *left) {
    switch (*quad_pos) {
    case 0: *left = v; *quad_pos = 1; break;
    case 1: *out++ = (unsigned char)((*left << 2) | (v >> 4)); *left = v & 0x0f; *quad_pos = 2;
            break;
    case 2: *out++ = (unsigned char)((*left << 4) | (v >> 2)); *left = v & 0x03; *quad_pos = 3;
            break;
    default: *out++ = (unsigned char)((*left << 6) | v); *left = 0; *quad_pos = 0; break;
    }
    return out;
}

/* The exact path under the rules before gh-145264: the first pad sequence that completes a
 * quad ends the text (the rest is ignored, or in strict mode an error). */
static int tok_b64_decode_exact_stop(const unsigned char *src, size_t n, int mode,
                                     unsigned char *out, size_t *outlen) {
    const int strict = mode & TOK_B64_STRICT;
    const int no_pad_after_quad = strict && (mode & TOK_B64_NO_PAD_AFTER_QUAD);
    unsigned char *start = out;
    int quad_pos = 0, pads = 0, padding_started = 0;
    unsigned left = 0;
    *outlen = 0;
    if (strict && n > 0 && src[0] == '=') return TOK_B64_LEADING_PAD;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = src[i];
        if (c == '=') {
            if (no_pad_after_quad && quad_pos == 0) return TOK_B64_EXCESS_PAD;
            padding_started = 1;
            /* '=' counts only after two data characters of a quad; enough of them end it */
            if (quad_pos >= 2 && quad_pos + ++pads >= 4) {
                if (strict && i + 1 < n) return TOK_B64_EXCESS;
                *outlen = (size_t)(out - start);
                return TOK_B64_OK;
            }
            continue;
        }
        uint32_t v = tok_b64_dec[3][c];
        if (v & TOK_B64_BAD) {
            if (strict) return TOK_B64_NOT_ALPHABET;
            continue;  /* skipped, and it does not break a pad sequence */
        }
        if (strict && padding_started) return TOK_B64_DISCONTINUOUS;
        pads = 0;
        out = tok_b64_put(out, v, &quad_pos, &left);
    }
    if (quad_pos == 1) {
        *outlen = (size_t)(out - start) / 3 * 4 + 1;
        return TOK_B64_ONE_EXTRA;
    }
    if (quad_pos != 0) return TOK_B64_BAD_PADDING;
    *outlen = (size_t)(out - start);
    return TOK_B64_OK;
}

/* The exact path under gh-145264's rules: nothing ends the text early. A '=' counts as
 * padding while it fits the quad (two or three data characters, at most four in all);
 * another '=' is skipped, or in strict mode an error (after one data character: too few
 * characters; else excess padding). A data character after pads goes on with the same quad
 * in the default mode (the pads were inside the text) and is an error in strict mode. At the
 * end, the last quad's own pads must complete it. */
static int tok_b64_decode_exact_gh145264(const unsigned char *src, size_t n, int strict,
                                         unsigned char *out, size_t *outlen) {
    unsigned char *start = out;
    int quad_pos = 0, pads = 0, padding_started = 0;
    unsigned left = 0;
    *outlen = 0;
    if (strict && n > 0 && src[0] == '=') return TOK_B64_LEADING_PAD;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = src[i];
        if (c == '=') {
            padding_started = 1;
            if (quad_pos >= 2 && quad_pos + pads < 4) {
                pads++;
                continue;
            }
            if (strict) {
                if (quad_pos == 1) {
                    *outlen = (size_t)(out - start) / 3 * 4 + 1;
                    return TOK_B64_ONE_EXTRA;
                }
                return TOK_B64_EXCESS_PAD;
            }
            continue;
        }
        uint32_t v = tok_b64_dec[3][c];
        if (v & TOK_B64_BAD) {
            if (strict) return TOK_B64_NOT_ALPHABET;
            continue;
        }
        if (strict && padding_started)
            return quad_pos >= 2 && quad_pos + pads >= 4 ? TOK_B64_EXCESS : TOK_B64_DISCONTINUOUS;
        pads = 0;
        out = tok_b64_put(out, v, &quad_pos, &left);
    }
    if (quad_pos == 1) {
        *outlen = (size_t)(out - start) / 3 * 4 + 1;
        return TOK_B64_ONE_EXTRA;
    }
    if (quad_pos != 0 && quad_pos + pads < 4) return TOK_B64_BAD_PADDING;
    *outlen = (size_t)(out - start);
    return TOK_B64_OK;
}

/* The exact path, binascii.a2b_base64's rules; mode holds TOK_B64_* mode bits. out holds
 * (n + 3) / 4 * 3 bytes. Returns a TOK_B64_* status; *outlen is the decoded length (for
 * TOK_B64_ONE_EXTRA: the number of data characters, which the error message quotes). */
static int tok_b64_decode_exact(const unsigned char *src, size_t n, int mode,
                                unsigned char *out, size_t *outlen) {
    if (mode & TOK_B64_GH145264)
        return tok_b64_decode_exact_gh145264(src, n, mode & TOK_B64_STRICT, out, outlen);
    return tok_b64_decode_exact_stop(src, n, mode, out, outlen);
}

#endif
