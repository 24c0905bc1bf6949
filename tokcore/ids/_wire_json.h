/* JSON arrays of int32 token ids for _wire_c: the reader (text -> little-endian int32) and
 * the writer (int32 -> the compact text json.dumps(ids, separators=(",", ":")) writes).
 *
 * The grammar is RFC 8259's for one array of integers: JSON whitespace (space, tab, LF, CR)
 * around every token, `-0` is 0, no fraction, exponent, leading zero, `+`, nesting or
 * trailing data. The reader has three kernels with one answer:
 *  - scalar (tok_ij_scalar): byte by byte; the reference, and what names an error: the
 *    kind and the offset of the first byte no valid text could have there (the numbers are
 *    _wire_py's J_* kinds), or the index and the text of an integer outside int32;
 *  - SWAR (tok_ij_swar): an integer and its separator a step, its digits read 8 bytes at a
 *    time (a digit mask, '0' subtracted, three multiply-shifts join them). It takes only
 *    what it is sure of (up to 7 digits, then ',' or ']' with whitespace after a ',') and
 *    hands everything else to the scalar kernel one integer at a time, so errors and rare
 *    forms (8-10 digits, whitespace before a separator) have one implementation. It loads
 *    8 bytes from an integer's first digit only while 24 bytes of the input remain from the
 *    integer's start: the end of the text is always read by the scalar kernel, so no load
 *    reaches past the input;
 *  - vector (tok_ij_simd): 64-byte windows whose ids are all read at once (below), the
 *    SWAR kernel for what a window does not take.
 * Each reads at most `cap` ids from a tok_ij_reader (and may store garbage in the room of
 * the 32 ids after the last one while more than 32 are allowed: the windows' whole stores);
 * _wire_c reads a text whole into bytes sized for the most ids its length allows.
 *
 * The writer formats each id with a table of digit pairs into a fixed 16-byte window and
 * stores the window whole (the output keeps TOK_IJ_SLACK bytes past its bound for it).
 * Every function here is GIL-free: it touches only the memory it is given.
 */
#ifndef TOKCORE_IDJSON_H
#define TOKCORE_IDJSON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_byteorder.h"
#include "_cpu.h"
#include "_wire_width.h"

#if TOK_CPU_SSE2 && (defined(__x86_64__) || defined(_M_X64))
#  include <emmintrin.h>
#  define TOK_IJ_SSE2 1
#else
#  define TOK_IJ_SSE2 0
#endif
#if TOK_CPU_NEON
#  include <arm_neon.h>
#  define TOK_IJ_NEON 1
#else
#  define TOK_IJ_NEON 0
#endif

/* error kinds: _wire_py's J_* */
enum {
    TOK_IJ_OK = 0, TOK_IJ_OPEN, TOK_IJ_FIRST, TOK_IJ_INT, TOK_IJ_DIGIT, TOK_IJ_SEP,
    TOK_IJ_ZERO, TOK_IJ_FRACTION, TOK_IJ_TRAILING, TOK_IJ_OVERFLOW
};
/* where the reader is: before '[', at the first id (or ']'), at an id after ',', after ']'
 * (only whitespace may follow), done */
enum { TOK_IJ_START = 0, TOK_IJ_AT_FIRST, TOK_IJ_AT_NEXT, TOK_IJ_AFTER, TOK_IJ_DONE };
/* the kernels (tests run each one) */
enum { TOK_IJ_KERNEL_SCALAR = 0, TOK_IJ_KERNEL_SWAR = 1, TOK_IJ_KERNEL_SIMD = 2,
       TOK_IJ_KERNEL_AVX2 = 3 /* the windows' masks 32 bytes at a time, where the CPU has it */ };
#if TOK_IJ_SSE2
#  define TOK_IJ_SIMD_NAME "SSE2"
#elif TOK_IJ_NEON
#  define TOK_IJ_SIMD_NAME "NEON"
#else
#  define TOK_IJ_SIMD_NAME "portable"
#endif

typedef struct {
    size_t pos;      /* the next byte to read */
    size_t count;    /* ids read so far */
    int state;       /* TOK_IJ_START ... TOK_IJ_DONE */
    int error;       /* TOK_IJ_OK, or the error kind (the reader stops) */
    size_t offset;   /* the error's offset; for TOK_IJ_OVERFLOW, the integer's start */
    size_t end;      /* for TOK_IJ_OVERFLOW, the integer's end (its index is count) */
} tok_ij_reader;

static inline void tok_ij_init(tok_ij_reader *r) { memset(r, 0, sizeof(*r)); }

static inline int tok_ij_ws(unsigned char c) {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static inline int tok_ij_digit(unsigned char c) { return (unsigned char)(c - '0') < 10; }

static inline size_t tok_ij_skip_ws(const unsigned char *s, size_t n, size_t pos) {
    while (pos < n && tok_ij_ws(s[pos])) pos++;
    return pos;
}

/* After an id (r->error TOK_IJ_OK): its separator, past any whitespace: ',' (the next id;
 * the state TOK_IJ_AT_NEXT) or ']' (TOK_IJ_AFTER); returns the position after it, or where
 * it is not one with r->error TOK_IJ_SEP. */
static inline size_t tok_ij_separator(tok_ij_reader *r, const unsigned char *s, size_t n,
                                      size_t pos) {
    pos = tok_ij_skip_ws(s, n, pos);
    if (pos < n && s[pos] == ',') {
        r->state = TOK_IJ_AT_NEXT;
        return pos + 1;
    }
    if (pos < n && s[pos] == ']') {
        r->state = TOK_IJ_AFTER;
        return pos + 1;
    }
    r->error = TOK_IJ_SEP;
    return pos;
}

/* The scalar kernel: reads ids into out (4 little-endian bytes each) until `cap` of them,
 * the end of the text or an error; returns how many it read (0 once it has failed). */
static size_t tok_ij_scalar(tok_ij_reader *r, const unsigned char *s, size_t n,
                            unsigned char *out, size_t cap) {
    size_t k = 0, pos = r->pos;
    if (r->error != TOK_IJ_OK) return 0;  /* a reader that failed stays where it failed */
    for (;;) {
        switch (r->state) {
        case TOK_IJ_START:
            pos = tok_ij_skip_ws(s, n, pos);
            if (pos == n || s[pos] != '[') goto fail_open;
            pos++;
            r->state = TOK_IJ_AT_FIRST;
            break;
        case TOK_IJ_AT_FIRST:
        case TOK_IJ_AT_NEXT: {
            int first = r->state == TOK_IJ_AT_FIRST;
            pos = tok_ij_skip_ws(s, n, pos);
            if (first && pos < n && s[pos] == ']') {
                pos++;
                r->state = TOK_IJ_AFTER;
                break;
            }
            if (k == cap) goto stop;
            size_t start = pos, digits;
            int neg = pos < n && s[pos] == '-';
            pos += (size_t)neg;
            if (pos == n || !tok_ij_digit(s[pos])) {
                r->error = neg ? TOK_IJ_DIGIT : first ? TOK_IJ_FIRST : TOK_IJ_INT;
                goto fail;
            }
            digits = pos;
            if (s[pos] == '0') {
                pos++;
                if (pos < n && tok_ij_digit(s[pos])) { r->error = TOK_IJ_ZERO; goto fail; }
            } else {
                while (pos < n && tok_ij_digit(s[pos])) pos++;
            }
            if (pos < n && (s[pos] == '.' || s[pos] == 'e' || s[pos] == 'E')) {
                r->error = TOK_IJ_FRACTION;
                goto fail;
            }
            uint64_t value = 0;
            if (pos - digits <= 10)
                for (size_t i = digits; i < pos; i++) value = value * 10 + (s[i] - '0');
            if (pos - digits > 10 || value > (uint64_t)INT32_MAX + (uint64_t)neg) {
                r->error = TOK_IJ_OVERFLOW;
                r->offset = start;
                r->end = pos;
                r->count += k;
                r->pos = pos;
                return k;
            }
            tok_store_le32(out + 4 * k, (int32_t)(neg ? (uint32_t)0 - (uint32_t)value
                                                    : (uint32_t)value));
            k++;
            pos = tok_ij_separator(r, s, n, pos);
            if (r->error != TOK_IJ_OK) goto fail;
            break;
        }
        case TOK_IJ_AFTER:
            pos = tok_ij_skip_ws(s, n, pos);
            if (pos != n) { r->error = TOK_IJ_TRAILING; goto fail; }
            r->state = TOK_IJ_DONE;
            goto stop;
        default:
            goto stop;
        }
    }
fail_open:
    r->error = TOK_IJ_OPEN;
fail:
    r->offset = pos;
stop:
    r->pos = pos;
    r->count += k;
    return k;
}

/* up to 7 digit values (ASCII minus '0') at the low end of x (the first digit in its lowest byte) -> their
 * value: the bytes above the digits shifted out, pairs, quads and the eight joined by
 * multiplies (each step's products cannot reach into the next field) */
static inline uint32_t tok_ij_swar_value(uint64_t digits, unsigned len) {
    uint64_t v = digits << (64 - 8 * len);  /* len in 1..7: leading zero bytes, then the digits */
    v = (v * 10 + (v >> 8)) & 0x00FF00FF00FF00FFull;
    v = (v * 100 + (v >> 16)) & 0x0000FFFF0000FFFFull;
    v = (v * 10000 + (v >> 32)) & 0x00000000FFFFFFFFull;
    return (uint32_t)v;
}

/* The SWAR kernel: the scalar kernel's answers, integers of up to 7 digits followed by ','
 * or ']' (a step each), everything else through the scalar kernel one integer at a time. */
static size_t tok_ij_swar(tok_ij_reader *r, const unsigned char *s, size_t n,
                          unsigned char *out, size_t cap) {
    size_t k = 0;
    if (cap == 0) return tok_ij_scalar(r, s, n, out, 0);  /* the end's check, if it is due */
    while (k < cap && r->error == TOK_IJ_OK && r->state != TOK_IJ_DONE) {
        if (r->state == TOK_IJ_AT_FIRST || r->state == TOK_IJ_AT_NEXT) {
            size_t pos = r->pos, began = k;
            int state = r->state;
            /* a step loads 8 bytes from its first digit (at most 9 bytes from its start) and
             * finds its separator among them; 24 bytes left keep every load inside */
            while (k < cap && pos + 24 <= n) {
                const unsigned char *q = s + pos;
                unsigned neg = q[0] == '-';
                q += neg;
                uint64_t d = tok_load_u64le(q) - 0x3030303030303030ull;
                /* a byte's top bit: not a digit (below '0' wraps to 0x80 and up; above '9'
                 * reaches 0x80 with 0x76 added); borrows and carries run only towards later
                 * bytes, so the first flagged byte is the first that is not a digit */
                uint64_t stop = ((d + 0x7676767676767676ull) | d) & 0x8080808080808080ull;
                if (stop == 0) break;  /* 8 digits or more */
                unsigned len = (unsigned)__builtin_ctzll(stop) >> 3;
                if (len == 0 || (len > 1 && q[0] == '0')) break;
                unsigned char c = q[len];
                if (c != ',' && c != ']') break;  /* whitespace, '.', 'e', anything else */
                uint32_t value = tok_ij_swar_value(d, len);
                tok_store_le32(out + 4 * k, (int32_t)(neg ? 0u - value : value));
                k++;
                pos = (size_t)(q - s) + len + 1;
                if (c == ']') {
                    state = TOK_IJ_AFTER;
                    break;
                }
                state = TOK_IJ_AT_NEXT;
                while (pos + 24 <= n && tok_ij_ws(s[pos])) pos++;
            }
            r->pos = pos;
            r->state = state;
            r->count += k - began;
            if (k == cap) break;
        }
        /* the '[', one integer the step left, or the end: the reference reads it */
        k += tok_ij_scalar(r, s, n, out + 4 * k, 1);
    }
    return k;
}

/* --- the vector kernel: a 64-byte window at a time --------------------------------------- */

/* bit i of each mask: byte i of a 64-byte window is a digit, ',', '-', JSON whitespace, '0' */
typedef struct { uint64_t digit, comma, minus, space, zero; } tok_ij_masks;

#if TOK_IJ_SSE2
static inline void tok_ij_classify(const unsigned char *p, tok_ij_masks *m) {
    const __m128i below = _mm_set1_epi8('0' - 1), above = _mm_set1_epi8('9' + 1);
    uint64_t digit = 0, comma = 0, minus = 0, space = 0, zero = 0;
    for (int j = 0; j < 4; j++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(p + 16 * j));
        zero |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('0'))) << (16 * j);
        /* signed compares: bytes of 0x80 and up are below '0' */
        __m128i d = _mm_and_si128(_mm_cmpgt_epi8(v, below), _mm_cmplt_epi8(v, above));
        __m128i w = _mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(' ')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\n'))),
            _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\t')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\r'))));
        digit |= (uint64_t)(unsigned)_mm_movemask_epi8(d) << (16 * j);
        comma |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(','))) << (16 * j);
        minus |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('-'))) << (16 * j);
        space |= (uint64_t)(unsigned)_mm_movemask_epi8(w) << (16 * j);
    }
    m->digit = digit; m->comma = comma; m->minus = minus; m->space = space; m->zero = zero;
}
#elif TOK_IJ_NEON
/* four 16-byte compare results (0xff or 0) -> one bit a byte: each byte keeps its bit's
 * weight within its group of 8, and three pairwise adds gather the groups */
static inline uint64_t tok_ij_neon_bits(uint8x16_t a, uint8x16_t b, uint8x16_t c, uint8x16_t d) {
    const uint8x16_t weights = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint8x16_t ab = vpaddq_u8(vandq_u8(a, weights), vandq_u8(b, weights));
    uint8x16_t cd = vpaddq_u8(vandq_u8(c, weights), vandq_u8(d, weights));
    uint8x16_t all = vpaddq_u8(ab, cd);
    all = vpaddq_u8(all, all);
    return vgetq_lane_u64(vreinterpretq_u64_u8(all), 0);
}

static inline void tok_ij_classify(const unsigned char *p, tok_ij_masks *m) {
    uint8x16_t v[4], d[4], c[4], n[4], w[4], z[4];
    for (int j = 0; j < 4; j++) {
        v[j] = vld1q_u8(p + 16 * j);
        d[j] = vcltq_u8(vsubq_u8(v[j], vdupq_n_u8('0')), vdupq_n_u8(10));
        c[j] = vceqq_u8(v[j], vdupq_n_u8(','));
        n[j] = vceqq_u8(v[j], vdupq_n_u8('-'));
        z[j] = vceqq_u8(v[j], vdupq_n_u8('0'));
        w[j] = vorrq_u8(vorrq_u8(vceqq_u8(v[j], vdupq_n_u8(' ')), vceqq_u8(v[j], vdupq_n_u8('\n'))),
                        vorrq_u8(vceqq_u8(v[j], vdupq_n_u8('\t')), vceqq_u8(v[j], vdupq_n_u8('\r'))));
    }
    m->digit = tok_ij_neon_bits(d[0], d[1], d[2], d[3]);
    m->comma = tok_ij_neon_bits(c[0], c[1], c[2], c[3]);
    m->minus = tok_ij_neon_bits(n[0], n[1], n[2], n[3]);
    m->space = tok_ij_neon_bits(w[0], w[1], w[2], w[3]);
    m->zero = tok_ij_neon_bits(z[0], z[1], z[2], z[3]);
}
#else
static inline void tok_ij_classify(const unsigned char *p, tok_ij_masks *m) {
    uint64_t digit = 0, comma = 0, minus = 0, space = 0, zero = 0;
    for (int i = 0; i < 64; i++) {
        uint64_t bit = 1ull << i;
        digit |= tok_ij_digit(p[i]) ? bit : 0;
        comma |= p[i] == ',' ? bit : 0;
        minus |= p[i] == '-' ? bit : 0;
        space |= tok_ij_ws(p[i]) ? bit : 0;
        zero |= p[i] == '0' ? bit : 0;
    }
    m->digit = digit; m->comma = comma; m->minus = minus; m->space = space; m->zero = zero;
}
#endif

/* The ids of a 64-byte window p[0:64] that starts where an id (or the whitespace before it)
 * may, up to its last ',': each of its pieces between commas must be whitespace, an
 * optional '-' and 1-7 digits (no leading zero) right before the ','. The masks say where
 * every piece and id is, so each id is read from its own position (8 bytes loaded at its
 * first digit: p + 72 is read at most), not after the one before it. Returns the bytes
 * taken (up to and with the last ','), and the ids in *got; 0 when the window is anything
 * else (the caller reads on id by id). */
static inline size_t tok_ij_window_body(const unsigned char *p, tok_ij_masks m,
                                        unsigned char *out, size_t *got);

static inline size_t tok_ij_window(const unsigned char *p, unsigned char *out, size_t *got) {
    tok_ij_masks m;
    tok_ij_classify(p, &m);
    return tok_ij_window_body(p, m, out, got);
}

#if TOK_IJ_SSE2 && TOK_CPU_X86
#  define TOK_IJ_HAVE_AVX2 1
#  include <immintrin.h>
/* the masks of a 64-byte window, 32 bytes a compare */
__attribute__((target("avx2")))
static inline void tok_ij_classify_avx2(const unsigned char *p, tok_ij_masks *m) {
    const __m256i below = _mm256_set1_epi8('0' - 1), above = _mm256_set1_epi8('9' + 1);
    uint64_t digit = 0, comma = 0, minus = 0, space = 0, zero = 0;
    for (int j = 0; j < 2; j++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(p + 32 * j));
        __m256i d = _mm256_and_si256(_mm256_cmpgt_epi8(v, below), _mm256_cmpgt_epi8(above, v));
        __m256i w = _mm256_or_si256(
            _mm256_or_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(' ')),
                            _mm256_cmpeq_epi8(v, _mm256_set1_epi8('\n'))),
            _mm256_or_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('\t')),
                            _mm256_cmpeq_epi8(v, _mm256_set1_epi8('\r'))));
        unsigned shift = 32u * (unsigned)j;
        digit |= (uint64_t)(uint32_t)_mm256_movemask_epi8(d) << shift;
        comma |= (uint64_t)(uint32_t)_mm256_movemask_epi8(
            _mm256_cmpeq_epi8(v, _mm256_set1_epi8(','))) << shift;
        minus |= (uint64_t)(uint32_t)_mm256_movemask_epi8(
            _mm256_cmpeq_epi8(v, _mm256_set1_epi8('-'))) << shift;
        zero |= (uint64_t)(uint32_t)_mm256_movemask_epi8(
            _mm256_cmpeq_epi8(v, _mm256_set1_epi8('0'))) << shift;
        space |= (uint64_t)(uint32_t)_mm256_movemask_epi8(w) << shift;
    }
    m->digit = digit; m->comma = comma; m->minus = minus; m->space = space; m->zero = zero;
}

/* Four ids' 8-byte words (each the 8 bytes that end right before the id's ',', so its last
 * digit is the top byte) -> their values, pairs of 32-bit lanes joined: the digits minus
 * '0', every byte at or below the highest one that is not a digit cleared (the separator
 * before the id and what precedes it: smeared down the word by three shifts), then the
 * digit pairs (maddubs: d * 10 + next) and the pairs' pairs (madd: * 100) -> each word's
 * two 4-digit halves as 32-bit lanes. */
__attribute__((target("avx2")))
static inline __m256i tok_ij_halves_avx2(__m256i x) {
    __m256i t = _mm256_sub_epi8(x, _mm256_set1_epi8('0'));
    __m256i u = _mm256_subs_epu8(t, _mm256_set1_epi8(9));  /* not zero: not a digit */
    u = _mm256_or_si256(u, _mm256_srli_epi64(u, 8));
    u = _mm256_or_si256(u, _mm256_srli_epi64(u, 16));
    u = _mm256_or_si256(u, _mm256_srli_epi64(u, 32));
    t = _mm256_and_si256(t, _mm256_cmpeq_epi8(u, _mm256_setzero_si256()));
    __m256i pairs = _mm256_maddubs_epi16(t, _mm256_set1_epi16(0x010A));  /* bytes 10, 1 */
    return _mm256_madd_epi16(pairs, _mm256_set1_epi32(0x00010064));    /* words 100, 1 */
}

/* the 8 bytes that end at p + e and those that end at p + f (e, f: positions of ',') */
#define TOK_IJ_ENDING2(p, e, f) \
    _mm_insert_epi64(_mm_loadl_epi64((const __m128i *)((p) + (e) - 8)), \
                     (long long)tok_load_u64le((p) + (f) - 8), 1)

/* The AVX2 kernel's windows, from s + pos while a whole one fits (80 bytes left, 32 ids of
 * room at out + 4 * k) and the window reads as ids: returns the position reached (the ids
 * in *count). A window's masks are the digits, ',' and '0' first: when the text up to its
 * last ',' is only those (a compact array), or whitespace where it may be too, each id is
 * read from the 8 bytes that end at its ',' (p[e-8..e-1]: its digits, then whatever was
 * before them, cleared in the vector), 8 ids a step, no id waiting for the one before it.
 * A window with a '-' goes through the portable body (tok_ij_window_body), one with
 * anything else back to the caller. The first id's word starts up to 8 bytes before the
 * window: no window starts before s + 8. */
__attribute__((target("avx2,bmi,bmi2,popcnt")))
static size_t tok_ij_windows_avx2(const unsigned char *s, size_t n, size_t pos,
                                  unsigned char *out, size_t cap, size_t *count) {
    size_t k = *count;
    if (pos < 8) return pos;
    while (k + 32 <= cap && pos + 80 <= n) {
        const unsigned char *p = s + pos;
        __m256i lo = _mm256_loadu_si256((const __m256i *)p);
        __m256i hi = _mm256_loadu_si256((const __m256i *)(p + 32));
        /* a digit: v + 0x50 is -128..-119 (signed) exactly for '0'..'9' */
        const __m256i shift = _mm256_set1_epi8(0x50), ten = _mm256_set1_epi8(-118);
        const __m256i comma_c = _mm256_set1_epi8(','), zero_c = _mm256_set1_epi8('0');
        uint64_t digit = (uint32_t)_mm256_movemask_epi8(_mm256_cmpgt_epi8(ten, _mm256_add_epi8(lo, shift)))
                         | (uint64_t)(uint32_t)_mm256_movemask_epi8(
                             _mm256_cmpgt_epi8(ten, _mm256_add_epi8(hi, shift))) << 32;
        uint64_t comma = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, comma_c))
                         | (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, comma_c)) << 32;
        uint64_t zero = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, zero_c))
                        | (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, zero_c)) << 32;
        if (comma == 0) break;
        unsigned last = 63 - (unsigned)__builtin_clzll(comma);
        uint64_t region = _bzhi_u64(~0ull, last + 1);  /* bits 0..last (all for 63: bzhi takes 64) */
        uint64_t wrong = comma & ~(digit << 1);  /* a ',' right after something else */
        uint64_t other = ~(digit | comma) & region;
        if (other) {  /* whitespace (where it may be: at the start, after ',' or whitespace), or a '-' */
            tok_ij_masks m;
            tok_ij_classify_avx2(p, &m);
            if (m.minus & region) {  /* a sign to read: the portable body */
                size_t got = 0, took = tok_ij_window_body(p, m, out + 4 * k, &got);
                if (took == 0) break;
                pos += took;
                k += got;
                continue;
            }
            uint64_t opening = ((comma | m.space) << 1) | 1;
            wrong |= (other & ~m.space) | (m.space & ~opening);
        }
        /* 8 digits in a row, or a leading zero (a '0' after no digit, a digit after it) */
        uint64_t eight = digit & (digit >> 1);
        eight &= eight >> 2;
        eight &= eight >> 4;
        if ((wrong | eight | (zero & ~(digit << 1) & (digit >> 1))) & region) break;
        unsigned ids = (unsigned)_mm_popcnt_u64(comma);
        unsigned char *at = out + 4 * k;
        /* 8 ids a step while 5 or more are left, then 4: past the last ',' a position is 64
         * (a word inside the window), whose lanes' values are stored past the ids, inside
         * the room the loop asked for */
        int left = (int)ids;
        for (; left > 4; left -= 8) {
            /* the words in the order the packing of the lanes wants: 0, 1, 4, 5 and 2, 3, 6, 7 */
            size_t e0 = _tzcnt_u64(comma); comma = _blsr_u64(comma);
            size_t e1 = _tzcnt_u64(comma); comma = _blsr_u64(comma);
            size_t e2 = _tzcnt_u64(comma); comma = _blsr_u64(comma);
            size_t e3 = _tzcnt_u64(comma); comma = _blsr_u64(comma);
            size_t e4 = _tzcnt_u64(comma); comma = _blsr_u64(comma);
            size_t e5 = _tzcnt_u64(comma); comma = _blsr_u64(comma);
            size_t e6 = _tzcnt_u64(comma); comma = _blsr_u64(comma);
            size_t e7 = _tzcnt_u64(comma); comma = _blsr_u64(comma);
            __m256i a = tok_ij_halves_avx2(_mm256_inserti128_si256(_mm256_castsi128_si256(
                TOK_IJ_ENDING2(p, e0, e1)), TOK_IJ_ENDING2(p, e4, e5), 1));
            __m256i b = tok_ij_halves_avx2(_mm256_inserti128_si256(_mm256_castsi128_si256(
                TOK_IJ_ENDING2(p, e2, e3)), TOK_IJ_ENDING2(p, e6, e7), 1));
            /* the halves as 16-bit lanes, in the ids' order; high * 10**4 + low */
            __m256i v = _mm256_madd_epi16(_mm256_packs_epi32(a, b), _mm256_set1_epi32(0x00012710));
            _mm256_storeu_si256((__m256i *)at, v);
            at += 32;
        }
        if (left > 0) {
            size_t e0 = _tzcnt_u64(comma); comma = _blsr_u64(comma);
            size_t e1 = _tzcnt_u64(comma); comma = _blsr_u64(comma);
            size_t e2 = _tzcnt_u64(comma); comma = _blsr_u64(comma);
            size_t e3 = _tzcnt_u64(comma);
            __m256i a = tok_ij_halves_avx2(_mm256_inserti128_si256(_mm256_castsi128_si256(
                TOK_IJ_ENDING2(p, e0, e1)), TOK_IJ_ENDING2(p, e2, e3), 1));
            /* the halves of ids 0, 1 (low lane) and 2, 3 (high lane) as 16-bit lanes, joined,
             * the two 64-bit results brought together */
            __m256i v = _mm256_madd_epi16(_mm256_packs_epi32(a, a), _mm256_set1_epi32(0x00012710));
            v = _mm256_permute4x64_epi64(v, 0x08);  /* qwords 0, 2 */
            _mm_storeu_si128((__m128i *)at, _mm256_castsi256_si128(v));
        }
        pos += last + 1;
        k += ids;
    }
    *count = k;
    return pos;
}

static int tok_ij_cpu_avx2 = -1;  /* -1: not asked yet */
static inline int tok_ij_avx2(void) {
    if (tok_ij_cpu_avx2 < 0)  /* the windows use BMI1, BMI2 and POPCNT too: every AVX2 CPU
                               * has them, but a virtual machine may say otherwise */
        tok_ij_cpu_avx2 = tok_cpu_has(TOK_CPU_AVX2 | TOK_CPU_BMI1 | TOK_CPU_BMI2
                                      | TOK_CPU_POPCNT);
    return tok_ij_cpu_avx2;
}
#else
#  define TOK_IJ_HAVE_AVX2 0
static inline int tok_ij_avx2(void) { return 0; }
#endif

/* the window's ids from its masks */
static inline size_t tok_ij_window_body(const unsigned char *p, tok_ij_masks m,
                                        unsigned char *out, size_t *got) {
    uint64_t comma = m.comma;
    if (comma == 0) return 0;
    unsigned last = 63 - (unsigned)__builtin_clzll(comma);
    uint64_t region = last == 63 ? ~0ull : (2ull << last) - 1;
    uint64_t number = m.digit | m.minus;
    /* where whitespace and '-' may be: at the window's start, after ',' or whitespace */
    uint64_t opening = ((comma | m.space) << 1) | 1;
    uint64_t wrong = ~(number | comma | m.space)  /* another byte */
                     | (m.space & ~opening) | (m.minus & ~opening)
                     | ((m.minus << 1) & ~m.digit)  /* a '-' without a digit after it */
                     | (comma & ~(m.digit << 1));   /* a ',' right after something else */
    if (wrong & region) return 0;
    /* 8 digits in a row, or a leading zero (a '0' that starts an id, a digit after it):
     * the window is read id by id instead */
    uint64_t eight = m.digit & (m.digit >> 1);
    eight &= eight >> 2;
    eight &= eight >> 4;
    uint64_t starts = number & ~(number << 1) & region;
    uint64_t first = (starts & ~m.minus) | ((starts & m.minus) << 1);
    if ((eight | (first & m.zero & (m.digit >> 1))) & region) return 0;
    size_t k = 0;
    if (m.minus == 0) {  /* the usual window: no sign to read */
#if TOK_IJ_SSE2
        /* four ids a step: each one's digits loaded from its start and moved to the top of
         * its word (leading zero bytes below), then joined in 16-bit lanes (d * 10 + next),
         * 32-bit lanes (pair * 100 + next) and, packed, 32-bit lanes again (* 10**4) */
        const __m128i low_byte = _mm_set1_epi16(0x00FF), ten = _mm_set1_epi16(10);
        const __m128i hundred = _mm_set1_epi32(0x00010064), myriad = _mm_set1_epi32(0x00012710);
        /* while four commas are left (three cleared leave one): no popcount, which is a
         * libgcc call without -mpopcnt */
        while (comma & (comma - 1) & ((comma & (comma - 1)) - 1)
               & (((comma & (comma - 1)) & ((comma & (comma - 1)) - 1)) - 1)) {
            uint64_t w[4];
            for (int j = 0; j < 4; j++) {
                unsigned start = (unsigned)__builtin_ctzll(starts);
                unsigned len = (unsigned)__builtin_ctzll(comma) - start;
                starts &= starts - 1;
                comma &= comma - 1;
                w[j] = (tok_load_u64le(p + start) - 0x3030303030303030ull) << (64 - 8 * len);
            }
            __m128i a = _mm_set_epi64x((long long)w[1], (long long)w[0]);
            __m128i b = _mm_set_epi64x((long long)w[3], (long long)w[2]);
            a = _mm_add_epi16(_mm_mullo_epi16(_mm_and_si128(a, low_byte), ten), _mm_srli_epi16(a, 8));
            b = _mm_add_epi16(_mm_mullo_epi16(_mm_and_si128(b, low_byte), ten), _mm_srli_epi16(b, 8));
            a = _mm_madd_epi16(a, hundred);
            b = _mm_madd_epi16(b, hundred);
            _mm_storeu_si128((__m128i *)(out + 4 * k), _mm_madd_epi16(_mm_packs_epi32(a, b), myriad));
            k += 4;
        }
#endif
        while (comma) {
            unsigned start = (unsigned)__builtin_ctzll(starts);
            unsigned len = (unsigned)__builtin_ctzll(comma) - start;
            starts &= starts - 1;
            comma &= comma - 1;
            uint64_t d = tok_load_u64le(p + start) - 0x3030303030303030ull;
            tok_store_le32(out + 4 * k, (int32_t)tok_ij_swar_value(d, len));
            k++;
        }
    } else {
        while (comma) {
            unsigned start = (unsigned)__builtin_ctzll(starts);
            unsigned neg = (unsigned)(m.minus >> start) & 1;
            unsigned len = (unsigned)__builtin_ctzll(comma) - start - neg;
            starts &= starts - 1;
            comma &= comma - 1;
            uint64_t d = tok_load_u64le(p + start + neg) - 0x3030303030303030ull;
            uint32_t value = tok_ij_swar_value(d, len);
            tok_store_le32(out + 4 * k, (int32_t)(neg ? 0u - value : value));
            k++;
        }
    }
    *got = k;
    return last + 1;
}

/* The vector kernel: windows while 80 bytes remain (the portable body's last load ends 8
 * bytes past the window) and 32 ids are allowed, the SWAR kernel (then the scalar one) for
 * what a window does not take. */
static size_t tok_ij_simd(tok_ij_reader *r, const unsigned char *s, size_t n,
                          unsigned char *out, size_t cap, int avx2) {
    size_t k = 0;
    if (cap == 0) return tok_ij_scalar(r, s, n, out, 0);
    while (k < cap && r->error == TOK_IJ_OK && r->state != TOK_IJ_DONE) {
        if (r->state == TOK_IJ_AT_FIRST || r->state == TOK_IJ_AT_NEXT) {
            size_t pos = r->pos, began = k, got = 0, took;
#if TOK_IJ_HAVE_AVX2
            if (avx2) {
                pos = tok_ij_windows_avx2(s, n, pos, out, cap, &k);
            } else
#endif
            while (k + 32 <= cap && pos + 80 <= n
                   && (took = tok_ij_window(s + pos, out + 4 * k, &got)) != 0) {
                pos += took;
                k += got;
            }
            if (k != began) {
                r->pos = pos;
                r->state = TOK_IJ_AT_NEXT;
                r->count += k - began;
                if (k == cap) break;
            }
        }
        /* what no window took: a few ids by the SWAR kernel */
        k += tok_ij_swar(r, s, n, out + 4 * k, cap - k < 8 ? cap - k : 8);
    }
    return k;
}

/* Reads up to cap ids with the kernel asked for; returns how many. */
static size_t tok_ij_read(tok_ij_reader *r, const unsigned char *s, size_t n,
                          unsigned char *out, size_t cap, int kernel) {
    if (kernel == TOK_IJ_KERNEL_SCALAR) return tok_ij_scalar(r, s, n, out, cap);
    if (kernel == TOK_IJ_KERNEL_SWAR) return tok_ij_swar(r, s, n, out, cap);
    return tok_ij_simd(r, s, n, out, cap, kernel == TOK_IJ_KERNEL_AVX2 && tok_ij_avx2());
}

/* The int64 reading (_wire_c's width=64) is the int32 reader's: it stops at an integer
 * outside int32 with TOK_IJ_OVERFLOW (its text at r->offset..r->end, its index r->count),
 * and this reads that integer as an int64 into *value and moves the reader past it and its
 * separator, as tok_ij_scalar goes on after an id (a separator that is not one is its
 * TOK_IJ_SEP, the id counted first). 0, or -1 for an integer outside int64 too (the reader
 * keeps its TOK_IJ_OVERFLOW). */
static int tok_ij_resume64(tok_ij_reader *r, const unsigned char *s, size_t n,
                           int64_t *value) {
    size_t pos = r->offset;
    int neg = s[pos] == '-';
    pos += (size_t)neg;
    if (r->end - pos > 19) return -1;  /* 10**19 > 2**63: more digits never fit */
    uint64_t v = 0;
    for (; pos < r->end; pos++) v = v * 10 + (uint64_t)(s[pos] - '0');  /* < 10**19 < 2**64 */
    if (v > (uint64_t)INT64_MAX + (uint64_t)neg) return -1;
    *value = (int64_t)(neg ? (uint64_t)0 - v : v);
    r->count++;
    r->error = TOK_IJ_OK;
    pos = tok_ij_separator(r, s, n, r->end);
    if (r->error != TOK_IJ_OK) r->offset = pos;
    r->pos = pos;
    return 0;
}

/* --- the writer --------------------------------------------------------------------------- */

/* bytes an id takes at most (",-2147483648") and the slack past the bound a store needs */
#define TOK_IJ_MAX_ID 12
#define TOK_IJ_SLACK 16

/* v < 10**8 as its 8 decimal digits, the first (most significant, maybe 0) in the lowest
 * byte: two 4-digit halves, each split into two pairs, each pair into two digits, by
 * multiply-shifts on all the lanes at once (x * 10486 >> 20 is x / 100 below 10**4,
 * x * 103 >> 10 is x / 10 below 100) */
static inline uint64_t tok_ij_eight_digits(uint32_t v) {
    uint64_t high = v / 10000u;
    uint64_t t = high | ((uint64_t)(v - (uint32_t)high * 10000u) << 32);
    uint64_t h = ((t * 10486u) >> 20) & 0x0000007F0000007Full;
    t = h | ((t - h * 100u) << 16);
    uint64_t tens = ((t * 103u) >> 10) & 0x000F000F000F000Full;
    return tens | ((t - tens * 10u) << 8);
}

/* v's digits into out; returns the end. May write 16 bytes at out (the slack). */
static inline unsigned char *tok_ij_put_uint(unsigned char *out, uint32_t v) {
    if (v < 100000000u) {
        uint64_t digits = tok_ij_eight_digits(v);
        /* the leading zeros are the low zero bytes (at least one digit stays) */
        unsigned zeros = (unsigned)__builtin_ctzll(digits | (1ull << 56)) >> 3;
        uint64_t text = TOK_LE64((digits + 0x3030303030303030ull) >> (8 * zeros));
        memcpy(out, &text, 8);
        return out + 8 - zeros;
    }
    /* 9 or 10 digits: the first one or two, then eight */
    uint32_t high = v / 100000000u;
    uint64_t text = TOK_LE64(tok_ij_eight_digits(v - high * 100000000u)
                                + 0x3030303030303030ull);
    if (high >= 10) {
        out[0] = (unsigned char)('0' + high / 10);
        out[1] = (unsigned char)('0' + high % 10);
        out += 2;
    } else {
        *out++ = (unsigned char)('0' + high);
    }
    memcpy(out, &text, 8);
    return out + 8;
}

/* one id as ",v" (no ',' when first); returns the end */
static inline unsigned char *tok_ij_put_id(unsigned char *out, uint32_t u, int first) {
    *out = ',';
    out += !first;
    *out = '-';
    out += u >> 31;
    return tok_ij_put_uint(out, (u >> 31) ? 0u - u : u);
}

#if TOK_IJ_SSE2
/* Four ids of magnitude below 10**8 -> their 8-digit texts (ASCII, leading zeros kept), at
 * once: v / 10**4 by a 32x32 -> 64-bit multiply, then the 16-bit lanes hold the eight
 * 4-digit halves, split into pairs (x * 5243 >> 19 is x / 100 below 43699) and digits
 * (y * 6554 >> 16 is y / 10 below 100), the tens and units interleaved by shifts. */
static inline void tok_ij_digits4(__m128i x, __m128i *ab, __m128i *cd) {
    const __m128i magic = _mm_set1_epi32((int)0xD1B71759u);  /* 2**45 / 10**4, rounded up */
    __m128i even = _mm_srli_epi64(_mm_mul_epu32(x, magic), 45);
    __m128i odd = _mm_srli_epi64(_mm_mul_epu32(_mm_srli_epi64(x, 32), magic), 45);
    __m128i high = _mm_or_si128(even, _mm_slli_epi64(odd, 32));
    __m128i low = _mm_sub_epi32(x, _mm_madd_epi16(high, _mm_set1_epi32(10000)));
    __m128i halves = _mm_or_si128(high, _mm_slli_epi32(low, 16));
    __m128i q = _mm_srli_epi16(_mm_mulhi_epu16(halves, _mm_set1_epi16(5243)), 3);
    __m128i r = _mm_sub_epi16(halves, _mm_mullo_epi16(q, _mm_set1_epi16(100)));
    __m128i pairs = _mm_or_si128(q, _mm_slli_epi16(r, 8));
    __m128i zero = _mm_setzero_si128(), ten = _mm_set1_epi16(10), tenth = _mm_set1_epi16(6554);
    __m128i a = _mm_unpacklo_epi8(pairs, zero), b = _mm_unpackhi_epi8(pairs, zero);
    __m128i ta = _mm_mulhi_epu16(a, tenth), tb = _mm_mulhi_epu16(b, tenth);
    a = _mm_or_si128(ta, _mm_slli_epi16(_mm_sub_epi16(a, _mm_mullo_epi16(ta, ten)), 8));
    b = _mm_or_si128(tb, _mm_slli_epi16(_mm_sub_epi16(b, _mm_mullo_epi16(tb, ten)), 8));
    *ab = _mm_add_epi8(a, _mm_set1_epi8('0'));
    *cd = _mm_add_epi8(b, _mm_set1_epi8('0'));
}

/* an 8-digit text (first digit lowest) without its leading zeros (one digit stays) */
static inline unsigned char *tok_ij_put_text(unsigned char *out, uint64_t text) {
    unsigned zeros = (unsigned)__builtin_ctzll((text ^ 0x3030303030303030ull) | (1ull << 56)) >> 3;
    uint64_t word = text >> (8 * zeros);
    memcpy(out, &word, 8);
    return out + 8 - zeros;
}
#endif

/* the writer's kernels: 4 ids a step with TOK_IJ_KERNEL_SIMD or _AVX2, else SWAR per id */

#if defined(__GNUC__) || defined(__clang__)
#  define TOK_IJ_NOINLINE __attribute__((noinline))
#else
#  define TOK_IJ_NOINLINE
#endif

/* ids (little-endian int32) as ",v,v..." (no ',' before the first when first is set);
 * returns the end. out holds TOK_IJ_MAX_ID * n + TOK_IJ_SLACK bytes. Never inlined: the
 * code the compiler gives its loop on its own is the one the budgets were counted on (one
 * inlined into a caller of _wire_c's format table counted 0.5 % more an id). */
TOK_IJ_NOINLINE static unsigned char *tok_ij_write(const unsigned char *ids, size_t n,
                                                   unsigned char *out, int first, int kernel) {
    size_t i = 0;
#if TOK_IJ_SSE2
    if (kernel >= TOK_IJ_KERNEL_SIMD) {
        const __m128i limit = _mm_set1_epi32(99999999);
        for (; i + 4 <= n; i += 4) {
            __m128i v = _mm_loadu_si128((const __m128i *)(ids + 4 * i));
            __m128i sign = _mm_srai_epi32(v, 31);
            __m128i mag = _mm_sub_epi32(_mm_xor_si128(v, sign), sign);  /* INT32_MIN stays < 0 */
            __m128i wide = _mm_or_si128(_mm_cmpgt_epi32(mag, limit),
                                        _mm_cmplt_epi32(mag, _mm_setzero_si128()));
            if (_mm_movemask_epi8(wide)) {  /* 9 or 10 digits: these four one by one */
                for (size_t j = i; j < i + 4; j++)
                    out = tok_ij_put_id(out, tok_load_u32le(ids + 4 * j), first && j == 0);
                continue;
            }
            __m128i ab, cd;
            tok_ij_digits4(mag, &ab, &cd);
            unsigned negs = (unsigned)_mm_movemask_ps(_mm_castsi128_ps(v));
            uint64_t t0 = (uint64_t)_mm_cvtsi128_si64(ab);
            uint64_t t1 = (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(ab, ab));
            uint64_t t2 = (uint64_t)_mm_cvtsi128_si64(cd);
            uint64_t t3 = (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(cd, cd));
            *out = ','; out += !(first && i == 0);
            *out = '-'; out += negs & 1;
            out = tok_ij_put_text(out, t0);
            *out = ','; out++;
            *out = '-'; out += (negs >> 1) & 1;
            out = tok_ij_put_text(out, t1);
            *out = ','; out++;
            *out = '-'; out += (negs >> 2) & 1;
            out = tok_ij_put_text(out, t2);
            *out = ','; out++;
            *out = '-'; out += negs >> 3;
            out = tok_ij_put_text(out, t3);
        }
    }
#else
    (void)kernel;
#endif
    for (; i < n; i++) out = tok_ij_put_id(out, tok_load_u32le(ids + 4 * i), first && i == 0);
    return out;
}

/* --- the int64 writer -------------------------------------------------------------------- */

/* bytes an int64 id takes at most (",-9223372036854775808") */
#define TOK_IJ_MAX_ID64 21

/* one int64 id as ",v" (no ',' when first), digit by digit (ids outside int32 are rare);
 * returns the end */
static inline unsigned char *tok_ij_put_id64(unsigned char *out, int64_t v, int first) {
    unsigned char digits[20];
    unsigned len = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        digits[sizeof digits - 1 - len++] = (unsigned char)('0' + u % 10);
        u /= 10;
    } while (u);
    *out = ',';
    out += !first;
    *out = '-';
    out += v < 0;
    memcpy(out, digits + sizeof digits - len, len);
    return out + len;
}

/* ids (little-endian int64) as ",v,v..." (no ',' before the first when first is set): each
 * run of ids within int32 narrowed into a block and written by tok_ij_write (its kernels),
 * the others one by one; returns the end. out holds TOK_IJ_MAX_ID64 * n + TOK_IJ_SLACK
 * bytes. */
#define TOK_IJ_RUN 256
static unsigned char *tok_ij_write64(const unsigned char *ids, size_t n, unsigned char *out,
                                     int first, int kernel) {
    unsigned char run[4 * TOK_IJ_RUN];
    size_t i = 0;
    while (i < n) {
        size_t m = tok_narrow_ids(ids + 8 * i, n - i < TOK_IJ_RUN ? n - i : TOK_IJ_RUN, run);
        if (m) {
            out = tok_ij_write(run, m, out, first && i == 0, kernel);
            i += m;
        } else {  /* the id at i is outside int32 */
            out = tok_ij_put_id64(out, tok_load_le64(ids + 8 * i), first && i == 0);
            i++;
        }
    }
    return out;
}

#endif
