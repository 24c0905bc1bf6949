/* JSON arrays of int32 token ids for _wire_c: the reader (text -> little-endian int32) and
 * the writer (int32 -> the compact text json.dumps(ids, separators=(",", ":")) writes).
 *
 * The grammar is RFC 8259's for one array of integers: JSON whitespace (space, tab, LF, CR)
 * around every token, `-0` is 0, no fraction, exponent, leading zero, `+`, nesting or
 * trailing data. The reader has two kernels with one answer:
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
 *    reaches past the input.
 * Both read in steps of at most `cap` ids from a tok_ij_reader, so a caller fills a small
 * block, turns it into ints or MessagePack, and reads on.
 *
 * The commas are counted first (tok_ij_commas: SSE2 on x86-64, NEON on aarch64, portable
 * elsewhere), which bounds the ids of any text and is their number in a non-empty valid one.
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

#if defined(__SSE2__) || defined(_M_X64)
#  include <emmintrin.h>
#  define TOK_IJ_SSE2 1
#else
#  define TOK_IJ_SSE2 0
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
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
enum { TOK_IJ_KERNEL_SCALAR = 0, TOK_IJ_KERNEL_SWAR = 1 };

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

static inline void tok_ij_store(unsigned char *out, int32_t v) {
    uint32_t u = (uint32_t)v;
    out[0] = (unsigned char)u; out[1] = (unsigned char)(u >> 8);
    out[2] = (unsigned char)(u >> 16); out[3] = (unsigned char)(u >> 24);
}

static inline size_t tok_ij_skip_ws(const unsigned char *s, size_t n, size_t pos) {
    while (pos < n && tok_ij_ws(s[pos])) pos++;
    return pos;
}

/* The scalar kernel: reads ids into out (4 little-endian bytes each) until `cap` of them,
 * the end of the text or an error; returns how many it read. */
static size_t tok_ij_scalar(tok_ij_reader *r, const unsigned char *s, size_t n,
                            unsigned char *out, size_t cap) {
    size_t k = 0, pos = r->pos;
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
            tok_ij_store(out + 4 * k, (int32_t)(neg ? (uint32_t)0 - (uint32_t)value
                                                    : (uint32_t)value));
            k++;
            pos = tok_ij_skip_ws(s, n, pos);
            if (pos < n && s[pos] == ',') {
                pos++;
                r->state = TOK_IJ_AT_NEXT;
            } else if (pos < n && s[pos] == ']') {
                pos++;
                r->state = TOK_IJ_AFTER;
            } else {
                r->error = TOK_IJ_SEP;
                goto fail;
            }
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

/* up to 7 ASCII digits at the low end of x (the first digit in its lowest byte) -> their
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
                uint64_t x;
                memcpy(&x, q, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
                x = __builtin_bswap64(x);
#endif
                uint64_t d = x - 0x3030303030303030ull;
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
                tok_ij_store(out + 4 * k, (int32_t)(neg ? 0u - value : value));
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

/* Reads up to cap ids with the kernel asked for; returns how many. */
static size_t tok_ij_read(tok_ij_reader *r, const unsigned char *s, size_t n,
                          unsigned char *out, size_t cap, int kernel) {
    if (kernel == TOK_IJ_KERNEL_SCALAR) return tok_ij_scalar(r, s, n, out, cap);
    return tok_ij_swar(r, s, n, out, cap);
}

/* The number of ',' bytes in s[0:n]. */
static size_t tok_ij_commas(const unsigned char *s, size_t n) {
    size_t count = 0, i = 0;
#if TOK_IJ_SSE2
    const __m128i comma = _mm_set1_epi8(',');
    while (i + 64 <= n) {
        __m128i a = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(s + i)), comma);
        __m128i b = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(s + i + 16)), comma);
        __m128i c = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(s + i + 32)), comma);
        __m128i d = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(s + i + 48)), comma);
        /* each 0xff byte is -1: the sums of absolute differences count them */
        __m128i sum = _mm_sub_epi8(_mm_sub_epi8(_mm_setzero_si128(), a), b);
        sum = _mm_sub_epi8(_mm_sub_epi8(sum, c), d);
        sum = _mm_sad_epu8(sum, _mm_setzero_si128());
        count += (size_t)_mm_cvtsi128_si32(sum) + (size_t)_mm_extract_epi16(sum, 4);
        i += 64;
    }
#elif TOK_IJ_NEON
    const uint8x16_t comma = vdupq_n_u8(',');
    while (i + 64 <= n) {
        uint8x16_t a = vceqq_u8(vld1q_u8(s + i), comma);
        uint8x16_t b = vceqq_u8(vld1q_u8(s + i + 16), comma);
        uint8x16_t c = vceqq_u8(vld1q_u8(s + i + 32), comma);
        uint8x16_t d = vceqq_u8(vld1q_u8(s + i + 48), comma);
        uint8x16_t sum = vsubq_u8(vsubq_u8(vsubq_u8(vsubq_u8(vdupq_n_u8(0), a), b), c), d);
        count += vaddlvq_u8(sum);
        i += 64;
    }
#endif
    for (; i < n; i++) count += s[i] == ',';
    return count;
}

/* --- the writer --------------------------------------------------------------------------- */

/* bytes an id takes at most (",-2147483648") and the slack past the bound a store needs */
#define TOK_IJ_MAX_ID 12
#define TOK_IJ_SLACK 16

static const char tok_ij_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* the number of decimal digits of v */
static inline unsigned tok_ij_digits(uint32_t v) {
    static const uint64_t powers[11] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000,
                                        100000000, 1000000000, 10000000000ull};
    unsigned bits = 31 - (unsigned)__builtin_clz(v | 1);
    unsigned guess = (bits * 1233) >> 12;  /* floor(bits * log10(2)), 1233 / 4096 ~ log10(2) */
    return guess + 1 + (v >= powers[guess + 1]);
}

/* v's digits into out; returns the end. Writes 16 bytes at out (the slack). */
static inline unsigned char *tok_ij_put_uint(unsigned char *out, uint32_t v) {
    unsigned char window[32] = {0};
    unsigned len = tok_ij_digits(v);
    uint32_t high = v / 100000000u, low = v % 100000000u;
    uint32_t a = low / 10000u, b = low % 10000u;
    memcpy(window + 4, tok_ij_pairs + 2 * high, 2);
    memcpy(window + 6, tok_ij_pairs + 2 * (a / 100u), 2);
    memcpy(window + 8, tok_ij_pairs + 2 * (a % 100u), 2);
    memcpy(window + 10, tok_ij_pairs + 2 * (b / 100u), 2);
    memcpy(window + 12, tok_ij_pairs + 2 * (b % 100u), 2);
    /* the 10 digits are window[4:14]; the last len of them go out in one 16-byte copy */
    memcpy(out, window + 14 - len, 16);
    return out + len;
}

/* ids (little-endian int32) as ",v,v..." (no ',' before the first when first is set);
 * returns the end. out holds TOK_IJ_MAX_ID * n + TOK_IJ_SLACK bytes. */
static unsigned char *tok_ij_write(const unsigned char *ids, size_t n, unsigned char *out,
                                   int first) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)ids[4 * i] | ((uint32_t)ids[4 * i + 1] << 8)
                     | ((uint32_t)ids[4 * i + 2] << 16) | ((uint32_t)ids[4 * i + 3] << 24);
        *out = ',';
        out += !(first && i == 0);
        *out = '-';
        out += u >> 31;
        out = tok_ij_put_uint(out, (u >> 31) ? 0u - u : u);
    }
    return out;
}

#endif
