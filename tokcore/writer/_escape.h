/* The stream writer's JSON text: strings escaped as each serializer escapes them, floats and
 * ints written as each writes them (_writer_rules.STYLES says which rules are whose).
 *
 * tok_esc_write(out, kind, data, n, ascii): the JSON string (its quotes included) of a str's
 *   n characters of PyUnicode kind `kind` (1, 2 or 4 bytes each): `"` and `\` escaped,
 *   \b \t \n \f \r by their letters, the other control characters as \u00XX (lowercase hex);
 *   with `ascii` (json.dumps' ensure_ascii) DEL and every character above it as \uXXXX too
 *   (a surrogate pair above U+FFFF, a lone surrogate as its own escape), else those as
 *   UTF-8. Returns the bytes written, at most tok_esc_bound(kind, n, ascii); -1 - i when
 *   the character at index i is a lone surrogate that UTF-8 cannot hold (the caller names
 *   the error as the style's serializer does).
 * The common text is long runs of plain characters (printable ASCII that needs no escape),
 * copied (a str of kind 1) or narrowed to bytes (kinds 2 and 4) 16 characters a step with
 * SSE2 or NEON, 32 bytes a step with AVX2 (run time, x86): a text without an escape is a copy.
 * tok_esc_scan(p, n, del): the offset of the first byte of p[:n] that is not plain (a
 *   control character, `"`, `\`, a byte >= 0x80, DEL when `del`), n when there is none.
 * tok_fmt_i64 / tok_fmt_double: an int64, a float (repr, or the decimal/exponent forms of
 *   pydantic-core and orjson, or msgspec's), their lengths returned.
 */
#ifndef TOKCORE_ESCAPE_H
#define TOKCORE_ESCAPE_H

#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "_cpu.h"

#if TOK_CPU_SSE2
#  include <emmintrin.h>
#  define TOK_ESC_VECTOR "sse2"
#elif TOK_CPU_NEON
#  include <arm_neon.h>
#  define TOK_ESC_VECTOR "neon"
#else
#  define TOK_ESC_VECTOR "scalar"
#endif
#if TOK_CPU_X86
#  include <immintrin.h>
#endif

/* the kernels, plainest first: byte by byte, the build's 16-byte vectors, AVX2 */
enum { TOK_ESC_SCALAR = 0, TOK_ESC_VEC = 1, TOK_ESC_AVX2 = 2 };
/* the one in use (module state: set at import, switched by the tests and benchmarks) */
static int tok_esc_kernel = TOK_ESC_SCALAR;

static inline int tok_esc_ctz32(uint32_t bits) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctz(bits);
#else
    int k = 0;
    while (!(bits & 1u)) { bits >>= 1; k++; }
    return k;
#endif
}

static inline int tok_esc_ctz64(uint64_t bits) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(bits);
#else
    int k = 0;
    while (!(bits & 1u)) { bits >>= 1; k++; }
    return k;
#endif
}

/* 1 for the ASCII bytes a JSON string escapes (DEL aside: only json.dumps' ASCII does) */
static const unsigned char tok_esc_special[128] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* '"' */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, /* '\\' */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};
static const char tok_esc_hex[16] = "0123456789abcdef";

/* --- copies ---------------------------------------------------------------------------------- */

/* n bytes, most of them a few dozen (a template's constants): up to 16 by two overlapping
 * 8-byte moves, up to 32 by four; longer by memcpy (a call) */
static inline void tok_copy(char *dst, const char *src, Py_ssize_t n) {
    uint64_t a, b, c, d;
    if (n >= 8 && n <= 16) {
        memcpy(&a, src, 8); memcpy(&b, src + n - 8, 8);
        memcpy(dst, &a, 8); memcpy(dst + n - 8, &b, 8);
    } else if (n > 16 && n <= 32) {
        memcpy(&a, src, 8); memcpy(&b, src + 8, 8);
        memcpy(&c, src + n - 16, 8); memcpy(&d, src + n - 8, 8);
        memcpy(dst, &a, 8); memcpy(dst + 8, &b, 8);
        memcpy(dst + n - 16, &c, 8); memcpy(dst + n - 8, &d, 8);
    } else if (n > 32) {
        memcpy(dst, src, (size_t)n);
    } else {
        Py_ssize_t i;
        for (i = 0; i < n; i++) dst[i] = src[i];
    }
}

/* --- the scan for the first byte that is not plain ----------------------------------------- */

static inline Py_ssize_t tok_esc_scan_scalar(const unsigned char *p, Py_ssize_t n, int del) {
    Py_ssize_t i;
    for (i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (c >= 0x80 || tok_esc_special[c] || (del && c == 0x7f)) return i;
    }
    return n;
}

#if TOK_CPU_SSE2
/* the bits of the bytes of v that are not plain: a signed compare below 0x20 takes the
 * control characters and every byte >= 0x80 at once */
static inline uint32_t tok_esc_mask16(__m128i v, int del) {
    __m128i bad = _mm_or_si128(_mm_cmplt_epi8(v, _mm_set1_epi8(0x20)),
                               _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                            _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))));
    if (del) bad = _mm_or_si128(bad, _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f)));
    return (uint32_t)_mm_movemask_epi8(bad);
}
#elif TOK_CPU_NEON
static inline uint64_t tok_esc_mask16(uint8x16_t v, int del) {
    uint8x16_t bad = vorrq_u8(vorrq_u8(vcltq_u8(v, vdupq_n_u8(0x20)),
                                       vcgeq_u8(v, vdupq_n_u8(0x80))),
                              vorrq_u8(vceqq_u8(v, vdupq_n_u8('"')),
                                       vceqq_u8(v, vdupq_n_u8('\\'))));
    if (del) bad = vorrq_u8(bad, vceqq_u8(v, vdupq_n_u8(0x7f)));
    /* four bits a byte: the first bad byte is the lowest set nibble */
    return vget_lane_u64(vreinterpret_u64_u8(vshrn_n_u16(vreinterpretq_u16_u8(bad), 4)), 0);
}
#endif

static inline Py_ssize_t tok_esc_scan_vec(const unsigned char *p, Py_ssize_t n, int del) {
    Py_ssize_t i = 0;
#if TOK_CPU_SSE2
    for (; i + 16 <= n; i += 16) {
        uint32_t m = tok_esc_mask16(_mm_loadu_si128((const __m128i *)(p + i)), del);
        if (m) return i + tok_esc_ctz32(m);
    }
#elif TOK_CPU_NEON
    for (; i + 16 <= n; i += 16) {
        uint64_t m = tok_esc_mask16(vld1q_u8(p + i), del);
        if (m) return i + (tok_esc_ctz64(m) >> 2);
    }
#endif
    return i + tok_esc_scan_scalar(p + i, n - i, del);
}

#if TOK_CPU_X86
__attribute__((target("avx2")))
static Py_ssize_t tok_esc_scan_avx2(const unsigned char *p, Py_ssize_t n, int del) {
    Py_ssize_t i = 0;
    const __m256i space = _mm256_set1_epi8(0x20), quote = _mm256_set1_epi8('"');
    const __m256i slash = _mm256_set1_epi8('\\'), rub = _mm256_set1_epi8(del ? 0x7f : '"');
    for (; i + 64 <= n; i += 64) {  /* two vectors a step: the common text has no escape */
        __m256i a = _mm256_loadu_si256((const __m256i *)(p + i));
        __m256i b = _mm256_loadu_si256((const __m256i *)(p + i + 32));
        __m256i ba = _mm256_or_si256(
            _mm256_or_si256(_mm256_cmpgt_epi8(space, a), _mm256_cmpeq_epi8(a, quote)),
            _mm256_or_si256(_mm256_cmpeq_epi8(a, slash), _mm256_cmpeq_epi8(a, rub)));
        __m256i bb = _mm256_or_si256(
            _mm256_or_si256(_mm256_cmpgt_epi8(space, b), _mm256_cmpeq_epi8(b, quote)),
            _mm256_or_si256(_mm256_cmpeq_epi8(b, slash), _mm256_cmpeq_epi8(b, rub)));
        if (!_mm256_testz_si256(_mm256_or_si256(ba, bb), _mm256_or_si256(ba, bb))) {
            uint32_t ma = (uint32_t)_mm256_movemask_epi8(ba);
            if (ma) return i + tok_esc_ctz32(ma);
            return i + 32 + tok_esc_ctz32((uint32_t)_mm256_movemask_epi8(bb));
        }
    }
    for (; i + 32 <= n; i += 32) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(p + i));
        __m256i ba = _mm256_or_si256(
            _mm256_or_si256(_mm256_cmpgt_epi8(space, a), _mm256_cmpeq_epi8(a, quote)),
            _mm256_or_si256(_mm256_cmpeq_epi8(a, slash), _mm256_cmpeq_epi8(a, rub)));
        uint32_t ma = (uint32_t)_mm256_movemask_epi8(ba);
        if (ma) return i + tok_esc_ctz32(ma);
    }
    return i + tok_esc_scan_vec(p + i, n - i, del);
}
#endif

static inline Py_ssize_t tok_esc_scan(const unsigned char *p, Py_ssize_t n, int del) {
    if (n < 16) return tok_esc_scan_scalar(p, n, del);  /* a token: no vector to fill */
#if TOK_CPU_X86
    if (tok_esc_kernel == TOK_ESC_AVX2) return tok_esc_scan_avx2(p, n, del);
#endif
    if (tok_esc_kernel == TOK_ESC_VEC) return tok_esc_scan_vec(p, n, del);
    return tok_esc_scan_scalar(p, n, del);
}

/* --- one character that is not plain ------------------------------------------------------ */

static inline char *tok_esc_u(char *o, uint32_t c) {
    o[0] = '\\'; o[1] = 'u';
    o[2] = tok_esc_hex[(c >> 12) & 15]; o[3] = tok_esc_hex[(c >> 8) & 15];
    o[4] = tok_esc_hex[(c >> 4) & 15]; o[5] = tok_esc_hex[c & 15];
    return o + 6;
}

/* Write character c; NULL for a lone surrogate that UTF-8 cannot hold. */
static inline char *tok_esc_char(char *o, uint32_t c, int ascii) {
    if (c < 0x80) {
        if (!tok_esc_special[c] && !(ascii && c == 0x7f)) { *o++ = (char)c; return o; }
        switch (c) {
        case '"': o[0] = '\\'; o[1] = '"'; return o + 2;
        case '\\': o[0] = '\\'; o[1] = '\\'; return o + 2;
        case '\b': o[0] = '\\'; o[1] = 'b'; return o + 2;
        case '\t': o[0] = '\\'; o[1] = 't'; return o + 2;
        case '\n': o[0] = '\\'; o[1] = 'n'; return o + 2;
        case '\f': o[0] = '\\'; o[1] = 'f'; return o + 2;
        case '\r': o[0] = '\\'; o[1] = 'r'; return o + 2;
        default: return tok_esc_u(o, c);
        }
    }
    if (ascii) {
        if (c >= 0x10000) {
            uint32_t v = c - 0x10000;
            o = tok_esc_u(o, 0xd800 | (v >> 10));
            return tok_esc_u(o, 0xdc00 | (v & 0x3ff));
        }
        return tok_esc_u(o, c);
    }
    if (c < 0x800) {
        o[0] = (char)(0xc0 | (c >> 6)); o[1] = (char)(0x80 | (c & 0x3f));
        return o + 2;
    }
    if (c < 0x10000) {
        if (c >= 0xd800 && c <= 0xdfff) return NULL;
        o[0] = (char)(0xe0 | (c >> 12)); o[1] = (char)(0x80 | ((c >> 6) & 0x3f));
        o[2] = (char)(0x80 | (c & 0x3f));
        return o + 3;
    }
    o[0] = (char)(0xf0 | (c >> 18)); o[1] = (char)(0x80 | ((c >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3f)); o[3] = (char)(0x80 | (c & 0x3f));
    return o + 4;
}

/* the most bytes tok_esc_write writes for n characters of a kind (each as \uXXXX, or two
 * escapes for one above U+FFFF), quotes included */
static inline Py_ssize_t tok_esc_bound(int kind, Py_ssize_t n, int ascii) {
    return 2 + n * ((kind == 4 && ascii) ? 12 : 6);
}

/* --- whole strings --------------------------------------------------------------------------- */

/* the not-plain bits of 32 bytes (AVX2), for the block loop below */
#if TOK_CPU_X86
__attribute__((target("avx2")))
static Py_ssize_t tok_esc_write_1_avx2(char *o, const unsigned char *p, Py_ssize_t n,
                                       int ascii, Py_ssize_t *done) {
    /* 32 bytes a step: a block without escapes stored whole; one with escapes written run by
     * run from its mask, each escape where its bit says (no scan started again) */
    char *start = o;
    Py_ssize_t i = 0;
    const __m256i space = _mm256_set1_epi8(0x20), quote = _mm256_set1_epi8('"');
    const __m256i slash = _mm256_set1_epi8('\\'), rub = _mm256_set1_epi8(ascii ? 0x7f : '"');
    for (; i + 32 <= n; i += 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(p + i));
        __m256i bad = _mm256_or_si256(
            _mm256_or_si256(_mm256_cmpgt_epi8(space, v), _mm256_cmpeq_epi8(v, quote)),
            _mm256_or_si256(_mm256_cmpeq_epi8(v, slash), _mm256_cmpeq_epi8(v, rub)));
        uint32_t m = (uint32_t)_mm256_movemask_epi8(bad);
        _mm256_storeu_si256((__m256i *)o, v);
        if (!m) {
            o += 32;
            continue;
        }
        {
            int from = 0;
            while (m) {
                int k = tok_esc_ctz32(m);
                if (from) tok_copy(o, (const char *)p + i + from, k - from);
                o += k - from;
                o = tok_esc_char(o, p[i + k], ascii);
                from = k + 1;
                m &= m - 1;
            }
            tok_copy(o, (const char *)p + i + from, 32 - from);
            o += 32 - from;
        }
    }
    *done = i;
    return o - start;
}
#endif

static inline Py_ssize_t tok_esc_write_1(char *out, const unsigned char *p, Py_ssize_t n,
                                         int ascii) {
    char *o = out;
    Py_ssize_t i = 0;
    *o++ = '"';
#if TOK_CPU_X86
    if (tok_esc_kernel == TOK_ESC_AVX2 && n >= 32) o += tok_esc_write_1_avx2(o, p, n, ascii, &i);
#endif
    while (i < n) {
        Py_ssize_t k = tok_esc_scan(p + i, n - i, ascii);
        tok_copy(o, (const char *)p + i, k);
        o += k;
        i += k;
        if (i < n) o = tok_esc_char(o, p[i++], ascii);
    }
    *o++ = '"';
    return o - out;
}

/* kinds 2 and 4: 16 characters narrowed to bytes a step (a character above 0xFF becomes
 * 0xFF, one of 0x8000 and more, as a signed 16-bit lane, 0: either is not plain), stored
 * whole, and the output moved on by its plain prefix; the character there is written alone */
static inline Py_ssize_t tok_esc_write_wide(char *out, int kind, const void *data,
                                            Py_ssize_t n, int ascii) {
    char *o = out;
    Py_ssize_t i = 0;
    const uint16_t *p2 = (const uint16_t *)data;
    const uint32_t *p4 = (const uint32_t *)data;
    *o++ = '"';
    while (i < n) {
        if (tok_esc_kernel != TOK_ESC_SCALAR) {
#if TOK_CPU_SSE2
            while (i + 16 <= n) {
                __m128i v;
                uint32_t m;
                if (kind == 2) {
                    v = _mm_packus_epi16(_mm_loadu_si128((const __m128i *)(p2 + i)),
                                         _mm_loadu_si128((const __m128i *)(p2 + i + 8)));
                } else {
                    __m128i lo = _mm_packs_epi32(_mm_loadu_si128((const __m128i *)(p4 + i)),
                                                 _mm_loadu_si128((const __m128i *)(p4 + i + 4)));
                    __m128i hi = _mm_packs_epi32(_mm_loadu_si128((const __m128i *)(p4 + i + 8)),
                                                 _mm_loadu_si128((const __m128i *)(p4 + i + 12)));
                    v = _mm_packus_epi16(lo, hi);
                }
                _mm_storeu_si128((__m128i *)o, v);
                m = tok_esc_mask16(v, ascii);
                if (m) {
                    int k = tok_esc_ctz32(m);
                    o += k;
                    i += k;
                    break;
                }
                o += 16;
                i += 16;
            }
#elif TOK_CPU_NEON
            while (i + 16 <= n) {
                uint8x16_t v;
                uint64_t m;
                if (kind == 2) {
                    v = vcombine_u8(vqmovn_u16(vld1q_u16(p2 + i)), vqmovn_u16(vld1q_u16(p2 + i + 8)));
                } else {
                    uint16x8_t lo = vcombine_u16(vqmovn_u32(vld1q_u32(p4 + i)),
                                                 vqmovn_u32(vld1q_u32(p4 + i + 4)));
                    uint16x8_t hi = vcombine_u16(vqmovn_u32(vld1q_u32(p4 + i + 8)),
                                                 vqmovn_u32(vld1q_u32(p4 + i + 12)));
                    v = vcombine_u8(vqmovn_u16(lo), vqmovn_u16(hi));
                }
                vst1q_u8((uint8_t *)o, v);
                m = tok_esc_mask16(v, ascii);
                if (m) {
                    int k = tok_esc_ctz64(m) >> 2;
                    o += k;
                    i += k;
                    break;
                }
                o += 16;
                i += 16;
            }
#endif
        }
        /* the character the vectors stopped at, and the tail: one at a time; back to the
         * vectors after a run of 16 plain characters */
        {
            Py_ssize_t plain = 0;
            while (i < n && (plain < 16 || tok_esc_kernel == TOK_ESC_SCALAR || i + 16 > n)) {
                uint32_t c = kind == 2 ? p2[i] : p4[i];
                if (c < 0x80 && !tok_esc_special[c] && !(ascii && c == 0x7f)) {
                    *o++ = (char)c;
                    plain++;
                } else {
                    o = tok_esc_char(o, c, ascii);
                    if (o == NULL) return -1 - i;
                    plain = 0;
                }
                i++;
            }
        }
    }
    *o++ = '"';
    return o - out;
}

#if TOK_CPU_X86
/* AVX2, kinds 2 and 4 written as UTF-8 (not json.dumps' ASCII): 8 characters a step, each
 * one's UTF-8 built in its 32-bit lane (1 to 4 bytes, by compares), each 128-bit half's four
 * packed by one byte shuffle chosen by their four lengths (tok_utf8_shuffle, made at import):
 * no branch per character. A step with a character that needs an escape, or a surrogate,
 * goes one character at a time. */
static unsigned char tok_utf8_shuffle[256][16];
static unsigned char tok_utf8_length[256];
static unsigned char tok_spread4[16];  /* bit i of a nibble at bit 2i */

static void tok_utf8_tables(void) {
    int idx, lane, k;
    for (idx = 0; idx < 256; idx++) {
        int at = 0;
        for (k = 0; k < 16; k++) tok_utf8_shuffle[idx][k] = 0x80;
        for (lane = 0; lane < 4; lane++) {
            int len = ((idx >> (2 * lane)) & 3) + 1;
            for (k = 0; k < len; k++) tok_utf8_shuffle[idx][at++] = (unsigned char)(4 * lane + k);
        }
        tok_utf8_length[idx] = (unsigned char)at;
    }
    for (idx = 0; idx < 16; idx++) {
        tok_spread4[idx] = 0;
        for (k = 0; k < 4; k++)
            if (idx & (1 << k)) tok_spread4[idx] |= (unsigned char)(1 << (2 * k));
    }
}

__attribute__((target("avx2")))
static Py_ssize_t tok_esc_write_wide_avx2(char *out, int kind, const void *data,
                                          Py_ssize_t n) {
    char *o = out;
    Py_ssize_t i = 0;
    const uint16_t *p2 = (const uint16_t *)data;
    const uint32_t *p4 = (const uint32_t *)data;
    const __m256i space = _mm256_set1_epi32(0x20), quote = _mm256_set1_epi32('"');
    const __m256i slash = _mm256_set1_epi32('\\'), surr_mask = _mm256_set1_epi32(0xfffff800);
    const __m256i surr = _mm256_set1_epi32(0xd800), x7f = _mm256_set1_epi32(0x7f);
    const __m256i x7ff = _mm256_set1_epi32(0x7ff), xffff = _mm256_set1_epi32(0xffff);
    const __m256i m3f = _mm256_set1_epi32(0x3f), m80 = _mm256_set1_epi32(0x80);
    *o++ = '"';
    while (i < n) {
        while (i + 8 <= n) {
            __m256i c, bad, l2, l3, l4, b2, b3, b4, v, t0, t1, t2;
            unsigned m2, m3, m4, lo, hi;
            if (kind == 2) c = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p2 + i)));
            else c = _mm256_loadu_si256((const __m256i *)(p4 + i));
            bad = _mm256_or_si256(
                _mm256_or_si256(_mm256_cmpgt_epi32(space, c), _mm256_cmpeq_epi32(c, quote)),
                _mm256_or_si256(_mm256_cmpeq_epi32(c, slash),
                                _mm256_cmpeq_epi32(_mm256_and_si256(c, surr_mask), surr)));
            if (!_mm256_testz_si256(bad, bad)) break;
            l2 = _mm256_cmpgt_epi32(c, x7f);
            m2 = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(l2));
            if (!m2) {  /* eight ASCII characters: their low bytes */
                __m256i b = _mm256_packus_epi32(c, c);
                b = _mm256_packus_epi16(b, b);
                uint32_t w0 = (uint32_t)_mm256_extract_epi32(b, 0);
                uint32_t w1 = (uint32_t)_mm256_extract_epi32(b, 4);
                memcpy(o, &w0, 4); memcpy(o + 4, &w1, 4);
                o += 8; i += 8;
                continue;
            }
            l3 = _mm256_cmpgt_epi32(c, x7ff);
            l4 = _mm256_cmpgt_epi32(c, xffff);
            m3 = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(l3));
            m4 = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(l4));
            /* continuation bytes of the low 6, 12 and 18 bits */
            t0 = _mm256_or_si256(_mm256_and_si256(c, m3f), m80);
            t1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(c, 6), m3f), m80);
            t2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(c, 12), m3f), m80);
            b2 = _mm256_or_si256(_mm256_or_si256(_mm256_srli_epi32(c, 6), _mm256_set1_epi32(0xc0)),
                                 _mm256_slli_epi32(t0, 8));
            b3 = _mm256_or_si256(_mm256_or_si256(_mm256_srli_epi32(c, 12), _mm256_set1_epi32(0xe0)),
                                 _mm256_or_si256(_mm256_slli_epi32(t1, 8), _mm256_slli_epi32(t0, 16)));
            b4 = _mm256_or_si256(
                _mm256_or_si256(_mm256_srli_epi32(c, 18), _mm256_set1_epi32(0xf0)),
                _mm256_or_si256(_mm256_slli_epi32(t2, 8),
                                _mm256_or_si256(_mm256_slli_epi32(t1, 16), _mm256_slli_epi32(t0, 24))));
            v = _mm256_blendv_epi8(c, b2, l2);
            v = _mm256_blendv_epi8(v, b3, l3);
            v = _mm256_blendv_epi8(v, b4, l4);
            lo = (unsigned)(tok_spread4[m2 & 15] + tok_spread4[m3 & 15] + tok_spread4[m4 & 15]);
            hi = (unsigned)(tok_spread4[m2 >> 4] + tok_spread4[m3 >> 4] + tok_spread4[m4 >> 4]);
            _mm_storeu_si128((__m128i *)o, _mm_shuffle_epi8(
                _mm256_castsi256_si128(v), _mm_loadu_si128((const __m128i *)tok_utf8_shuffle[lo])));
            o += tok_utf8_length[lo];
            _mm_storeu_si128((__m128i *)o, _mm_shuffle_epi8(
                _mm256_extracti128_si256(v, 1), _mm_loadu_si128((const __m128i *)tok_utf8_shuffle[hi])));
            o += tok_utf8_length[hi];
            i += 8;
        }
        {   /* up to 8 characters one at a time: the step that had an escape, and the tail */
            Py_ssize_t stop = i + 8 < n ? i + 8 : n;
            for (; i < stop; i++) {
                uint32_t c = kind == 2 ? p2[i] : p4[i];
                o = tok_esc_char(o, c, 0);
                if (o == NULL) return -1 - i;
            }
        }
    }
    *o++ = '"';
    return o - out;
}
#else
static void tok_utf8_tables(void) {}
#endif

static inline Py_ssize_t tok_esc_write(char *out, int kind, const void *data, Py_ssize_t n,
                                       int ascii) {
    if (kind == 1) return tok_esc_write_1(out, (const unsigned char *)data, n, ascii);
#if TOK_CPU_X86
    if (tok_esc_kernel == TOK_ESC_AVX2 && !ascii) return tok_esc_write_wide_avx2(out, kind, data, n);
#endif
    return tok_esc_write_wide(out, kind, data, n, ascii);
}

/* --- numbers --------------------------------------------------------------------------------- */

static const char tok_two_digits[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* A list of byte values, "[32,116]" (sep between them): at most 2 + n * (3 + nsep) bytes */
static inline Py_ssize_t tok_fmt_byte_list(char *o, const unsigned char *p, Py_ssize_t n,
                                           const char *sep, Py_ssize_t nsep) {
    char *start = o;
    Py_ssize_t i;
    *o++ = '[';
    for (i = 0; i < n; i++) {
        unsigned v = p[i];
        if (i) {
            if (nsep == 1) *o++ = *sep;
            else { memcpy(o, sep, (size_t)nsep); o += nsep; }
        }
        if (v >= 100) {
            *o++ = (char)('0' + v / 100);
            v %= 100;
            o[0] = tok_two_digits[2 * v]; o[1] = tok_two_digits[2 * v + 1];
            o += 2;
        } else if (v >= 10) {
            o[0] = tok_two_digits[2 * v]; o[1] = tok_two_digits[2 * v + 1];
            o += 2;
        } else {
            *o++ = (char)('0' + v);
        }
    }
    *o++ = ']';
    return o - start;
}

/* v < 10^8, its digits (no leading zero) */
static inline int tok_fmt_small(char *o, uint32_t v) {
    char tmp[8];
    char *t = tmp + 8;
    int k;
    while (v >= 100) {
        uint32_t r = v % 100;
        v /= 100;
        t -= 2;
        t[0] = tok_two_digits[2 * r]; t[1] = tok_two_digits[2 * r + 1];
    }
    if (v >= 10) {
        t -= 2;
        t[0] = tok_two_digits[2 * v]; t[1] = tok_two_digits[2 * v + 1];
    } else {
        *--t = (char)('0' + v);
    }
    k = (int)(tmp + 8 - t);
    for (v = 0; v < (uint32_t)k; v++) o[v] = t[v];
    return k;
}

/* v < 10^8 as exactly 8 digits: four pairs, from two independent halves */
static inline void tok_fmt_8(char *o, uint32_t v) {
    uint32_t a = v / 10000, b = v % 10000;
    uint32_t a1 = a / 100, a2 = a % 100, b1 = b / 100, b2 = b % 100;
    o[0] = tok_two_digits[2 * a1]; o[1] = tok_two_digits[2 * a1 + 1];
    o[2] = tok_two_digits[2 * a2]; o[3] = tok_two_digits[2 * a2 + 1];
    o[4] = tok_two_digits[2 * b1]; o[5] = tok_two_digits[2 * b1 + 1];
    o[6] = tok_two_digits[2 * b2]; o[7] = tok_two_digits[2 * b2 + 1];
}

/* an unsigned 64-bit int's digits, in blocks of 8 (the divisions of each block do not wait
 * for one another) */
static inline int tok_fmt_u64(char *o, unsigned long long v) {
    int n;
    if (v < 100000000ULL) return tok_fmt_small(o, (uint32_t)v);
    if (v < 10000000000000000ULL) {
        n = tok_fmt_small(o, (uint32_t)(v / 100000000ULL));
        tok_fmt_8(o + n, (uint32_t)(v % 100000000ULL));
        return n + 8;
    }
    n = tok_fmt_small(o, (uint32_t)(v / 10000000000000000ULL));
    tok_fmt_8(o + n, (uint32_t)((v / 100000000ULL) % 100000000ULL));
    tok_fmt_8(o + n + 8, (uint32_t)(v % 100000000ULL));
    return n + 16;
}

static inline int tok_fmt_i64(char *o, long long v) {
    if (v < 0) {
        *o = '-';
        return 1 + tok_fmt_u64(o + 1, (unsigned long long)0 - (unsigned long long)v);
    }
    return tok_fmt_u64(o, (unsigned long long)v);
}

/* --- doubles: the shortest digits that read back as the same double ----------------------
 *
 * Giulietti's Schubfach: the decimal interval of a double's rounding neighbourhood is found
 * with one 64x128-bit multiplication per bound by an approximation of a power of ten
 * (tok_dbl_g: floor(10^-k * 2^-r) + 1, 126 bits, as two 63-bit halves, computed exactly by
 * the module at import), and the shortest decimal in it chosen (the closest, an even one on
 * a tie): the digits Python's repr writes. Where the compiler has no 64x64->128-bit product,
 * repr's own (PyOS_double_to_string) is used. */
#define TOK_DBL_K_MIN (-324)
#define TOK_DBL_K_MAX 292
static uint64_t tok_dbl_g[2 * (TOK_DBL_K_MAX - TOK_DBL_K_MIN + 1)];
static int tok_dbl_ready = 0;

#if defined(__SIZEOF_INT128__)
#  define TOK_DBL_FAST 1
static inline uint64_t tok_mulhi(uint64_t a, uint64_t b) {
    return (uint64_t)(((unsigned __int128)a * b) >> 64);
}
#elif defined(_MSC_VER) && defined(_M_X64)
#  include <intrin.h>
#  define TOK_DBL_FAST 1
static inline uint64_t tok_mulhi(uint64_t a, uint64_t b) { return __umulh(a, b); }
#else
#  define TOK_DBL_FAST 0
#endif

/* floor(e log10(2)), floor(e log10(3/4 2)), floor(e log2(10)), for the exponents of doubles */
static inline int tok_flog10pow2(int e) { return (int)(((int64_t)e * 661971961083LL) >> 41); }
static inline int tok_flog10three4pow2(int e) {
    return (int)(((int64_t)e * 661971961083LL - 274743187321LL) >> 41);
}
static inline int tok_flog2pow10(int e) { return (int)(((int64_t)e * 913124641741LL) >> 38); }

#if TOK_DBL_FAST
/* cp * g / 2^(126 - 64), rounded to odd */
static inline uint64_t tok_rop(uint64_t g1, uint64_t g0, uint64_t cp) {
    const uint64_t mask63 = 0x7fffffffffffffffULL;
    uint64_t x1 = tok_mulhi(g0, cp);
    uint64_t y0 = g1 * cp;
    uint64_t y1 = tok_mulhi(g1, cp);
    uint64_t z = (y0 >> 1) + x1;
    uint64_t vbp = y1 + (z >> 63);
    return vbp | (((z & mask63) + mask63) >> 63);
}

/* v = c 2^q: its decimal f 10^e (f < 10^17), the shortest that reads back as v */
static inline void tok_dbl_decimal(int q, uint64_t c, int dk, uint64_t *f, int *e) {
    const uint64_t c_min = 1ULL << 52;
    int out = (int)(c & 1), k, h;
    uint64_t cb = c << 2, cbr = cb + 2, cbl, g1, g0, vb, vbl, vbr, s, t;
    int64_t cmp;
    if (c != c_min || q == -1074) {
        cbl = cb - 2;
        k = tok_flog10pow2(q);
    } else {
        cbl = cb - 1;
        k = tok_flog10three4pow2(q);
    }
    h = q + tok_flog2pow10(-k) + 2;
    g1 = tok_dbl_g[2 * (k - TOK_DBL_K_MIN)];
    g0 = tok_dbl_g[2 * (k - TOK_DBL_K_MIN) + 1];
    vb = tok_rop(g1, g0, cb << h);
    vbl = tok_rop(g1, g0, cbl << h);
    vbr = tok_rop(g1, g0, cbr << h);
    s = vb >> 2;
    if (s >= 100) {
        uint64_t sp10 = 10 * (s / 10), tp10 = sp10 + 10;
        int upin = vbl + out <= sp10 << 2, wpin = (tp10 << 2) + out <= vbr;
        if (upin != wpin) {
            *f = upin ? sp10 : tp10;
            *e = k;
            return;
        }
    }
    t = s + 1;
    {
        int uin = vbl + out <= s << 2, win = (t << 2) + out <= vbr;
        if (uin != win) {
            *f = uin ? s : t;
            *e = k + dk;
            return;
        }
    }
    cmp = (int64_t)(vb - ((s + t) << 1));
    *f = (cmp < 0 || (cmp == 0 && (s & 1) == 0)) ? s : t;
    *e = k + dk;
}
#endif

/* A finite nonzero |v|'s shortest digits (no leading or trailing zero) and the place of the
 * point among them (value = 0.DIGITS * 10^point); the count returned, -1 with an exception
 * set when repr fails (no memory). */
static int tok_dbl_digits(double v, char *digits, int *point) {
    int nd = 0;
#if TOK_DBL_FAST
    /* (the subnormals below 100 2^-1074, whose digits the method gives at least two of
     * where repr may write one, take repr's path) */
    if (tok_dbl_ready && v >= 4.9406564584124654e-322) {
        uint64_t bits, t, c, f;
        int bq, e, k;
        char tmp[24];
        memcpy(&bits, &v, 8);
        t = bits & ((1ULL << 52) - 1);
        bq = (int)(bits >> 52) & 0x7ff;
        if (bq != 0) {
            int mq = 1075 - bq;
            c = (1ULL << 52) | t;
            if (0 < mq && mq < 53 && ((c >> mq) << mq) == c) {
                f = c >> mq;  /* an integer below 2^53 */
                e = 0;
            } else {
                tok_dbl_decimal(-mq, c, 0, &f, &e);
            }
        } else {
            tok_dbl_decimal(-1074, t, 0, &f, &e);
        }
        while (f % 100 == 0) { f /= 100; e += 2; }
        if (f % 10 == 0) { f /= 10; e++; }
        nd = tok_fmt_u64(digits, f);
        (void)k; (void)tmp;
        *point = nd + e;
        return nd;
    }
#endif
    {
        /* repr's digits: "d.ddde±x" or "ddd.ddd" */
        char *r = PyOS_double_to_string(v, 'r', 0, 0, NULL), *s;
        int seen_point = 0, lead = 1, exp10 = 0, pt = 0;
        if (r == NULL) return -1;
        s = r + (*r == '-');
        for (; *s && *s != 'e'; s++) {
            if (*s == '.') { seen_point = 1; continue; }
            if (lead && *s == '0') { if (seen_point) pt--; continue; }
            lead = 0;
            digits[nd++] = *s;
            if (!seen_point) pt++;
        }
        if (*s == 'e') exp10 = atoi(s + 1);
        PyMem_Free(r);
        while (nd > 0 && digits[nd - 1] == '0') nd--;
        *point = pt + exp10;
        return nd;
    }
}

/* A double, at most 32 bytes: floats 0 is Python's repr (decimal for exponents -4..15, else
 * one digit, a point and the rest, e and a sign and two digits at least); 1 pydantic-core's
 * and orjson's form, 2 msgspec's: decimal when the point falls within the 16 digits before
 * it or 5 after, else the exponent form, 'e' and the exponent ('+' before a positive one in
 * form 1). Non-finite: null, or Infinity/-Infinity/NaN (literal). -1 with an exception set
 * when repr fails (no memory). */
static int tok_fmt_double(char *o, double v, int floats, int literal) {
    char digits[24];
    int nd, point, k, n, x;
    char *start = o;
    if (!isfinite(v)) {
        const char *text = !literal ? "null" : v != v ? "NaN" : v > 0 ? "Infinity" : "-Infinity";
        size_t len = strlen(text);
        memcpy(o, text, len);
        return (int)len;
    }
    if (signbit(v)) { *o++ = '-'; v = -v; }
    if (v == 0.0) {
        memcpy(o, "0.0", 3);
        return (int)(o - start) + 3;
    }
    nd = tok_dbl_digits(v, digits, &point);
    if (nd < 0) return -1;
    /* (the digits are copied one by one: at most 17) */
    x = point - 1;
    if (floats == 0 ? (x >= -4 && x < 16) : (point > -5 && point <= 16)) {
        if (point <= 0) {
            *o++ = '0'; *o++ = '.';
            for (k = point; k < 0; k++) *o++ = '0';
            for (k = 0; k < nd; k++) *o++ = digits[k];
        } else {
            for (k = 0; k < nd && k < point; k++) *o++ = digits[k];
            for (k = nd; k < point; k++) *o++ = '0';
            *o++ = '.';
            if (nd <= point) *o++ = '0';
            for (k = point; k < nd; k++) *o++ = digits[k];
        }
        return (int)(o - start);
    }
    *o++ = digits[0];
    if (nd > 1) {
        *o++ = '.';
        for (k = 1; k < nd; k++) *o++ = digits[k];
    }
    *o++ = 'e';
    n = x;
    if (n < 0) { *o++ = '-'; n = -n; }
    else if (floats != 2) *o++ = '+';
    if (floats == 0 && n < 10) *o++ = '0';
    o += tok_fmt_u64(o, (unsigned long long)n);
    return (int)(o - start);
}

#endif /* TOKCORE_ESCAPE_H */
