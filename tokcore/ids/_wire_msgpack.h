/* MessagePack arrays of int32 token ids for _wire_c, and bins of int32 bytes.
 *
 * The reader takes one array (fixarray, array16, array32) whose items are integers in any
 * encoding (fixints, uint8-64, int8-64, minimal or not) and writes them as little-endian
 * int32; an error names the kind (_wire_py's M_* numbers) and the offset of the first byte
 * no valid data could have there (the end, for data cut short), or the index and value of
 * an integer outside int32. The writer gives each id its smallest encoding, the bytes
 * msgpack.packb and msgspec write, without a branch on the value: the form is picked by
 * compares, and the tag with the big-endian payload stored as one 8-byte word (the output
 * keeps TOK_MP_SLACK bytes past its bound). GIL-free: only the memory given is touched.
 */
#ifndef TOKCORE_IDMSGPACK_H
#define TOKCORE_IDMSGPACK_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_byteorder.h"
#include "_cpu.h"
#include "_wire_width.h"

#if defined(__GNUC__) || defined(__clang__)
#  define TOK_MP_INLINE inline __attribute__((always_inline))
#else
#  define TOK_MP_INLINE inline
#endif

/* what a reader's caller does with the items as they are stored (see tok_mp_read_with) */
typedef void (*tok_mp_each)(void *ctx, const unsigned char *out, size_t k);

/* error kinds: _wire_py's M_* */
enum {
    TOK_MP_OK = 0, TOK_MP_ARRAY, TOK_MP_ARRAY_REST, TOK_MP_INT, TOK_MP_INT_REST,
    TOK_MP_TRAILING, TOK_MP_BIN, TOK_MP_BIN_REST, TOK_MP_BIN_TRAILING, TOK_MP_OVERFLOW
};

typedef struct {
    size_t pos;        /* the next byte to read */
    size_t count;      /* items read so far */
    size_t total;      /* items the header announces */
    int error;         /* TOK_MP_OK, or the error kind (the reader stops) */
    size_t offset;     /* the error's offset */
    int is_unsigned;   /* TOK_MP_OVERFLOW: the value is uvalue (a uint64), else value */
    int64_t value;
    uint64_t uvalue;
    size_t after;      /* TOK_MP_OVERFLOW: where the item ends */
} tok_mp_reader;

static inline uint64_t tok_mp_be(const unsigned char *p, unsigned size) {
    uint64_t v = 0;
    for (unsigned i = 0; i < size; i++) v = (v << 8) | p[i];
    return v;
}

/* Reads the array's header; returns TOK_MP_OK or the error (also in r). */
static int tok_mp_header(tok_mp_reader *r, const unsigned char *s, size_t n) {
    memset(r, 0, sizeof(*r));
    if (n == 0 || !((s[0] & 0xF0) == 0x90 || s[0] == 0xDC || s[0] == 0xDD)) {
        r->error = TOK_MP_ARRAY;
        return r->error;
    }
    if ((s[0] & 0xF0) == 0x90) {
        r->total = s[0] & 0x0F;
        r->pos = 1;
    } else {
        unsigned size = s[0] == 0xDC ? 2 : 4;
        if (n < 1 + size) {
            r->error = TOK_MP_ARRAY_REST;
            r->offset = n;
            return r->error;
        }
        r->total = (size_t)tok_mp_be(s + 1, size);
        r->pos = 1 + size;
    }
    return TOK_MP_OK;
}

/* the payload size of an integer's tag, or -1 for a tag that is not an integer's */
static inline int tok_mp_int_size(unsigned char tag) {
    if (tag <= 0x7F || tag >= 0xE0) return 0;
    switch (tag) {
    case 0xCC: case 0xD0: return 1;
    case 0xCD: case 0xD1: return 2;
    case 0xCE: case 0xD2: return 4;
    case 0xCF: case 0xD3: return 8;
    default: return -1;
    }
}

/* The fast steps' tables, by tag: 8 * the item's length and the mask of its value's bits,
 * for the items a non-negative int32 is written as (positive fixints, cc, cd, ce: what
 * msgspec and msgpack write for token ids); 0 for every other tag (the exact reader's) */
#define TOK_MP_R8(x) x, x, x, x, x, x, x, x
#define TOK_MP_R32(x) TOK_MP_R8(x), TOK_MP_R8(x), TOK_MP_R8(x), TOK_MP_R8(x)
static const unsigned char tok_mp_fast_bits[256] = {
    TOK_MP_R32(8), TOK_MP_R32(8), TOK_MP_R32(8), TOK_MP_R32(8),  /* 00..7f */
    TOK_MP_R32(0), TOK_MP_R32(0),                                /* 80..bf */
    TOK_MP_R8(0), 0, 0, 0, 0, 16, 24, 40, 0,                     /* c0..cf */
    TOK_MP_R8(0), TOK_MP_R8(0), TOK_MP_R32(0)                    /* d0..ff */
};
static const uint64_t tok_mp_fast_mask[256] = {
    TOK_MP_R32(0xFF), TOK_MP_R32(0xFF), TOK_MP_R32(0xFF), TOK_MP_R32(0xFF),
    TOK_MP_R32(0), TOK_MP_R32(0),
    TOK_MP_R8(0), 0, 0, 0, 0, 0xFF, 0xFFFF, 0xFFFFFFFF, 0,
    TOK_MP_R8(0), TOK_MP_R8(0), TOK_MP_R32(0)
};

/* The fast steps: the items of a non-negative int32 (a positive fixint, cc, cd, ce) while 8
 * bytes can be loaded at the item, without a branch on the encoding (random ids mix uint16
 * and uint32 about evenly, which a branch would mispredict half the time). The item's 8
 * bytes are one word, the tag its low byte: swapped, the tag and payload are its top bytes,
 * shifted down by 64 - 8 * the item's length and masked to the payload (the tag itself for
 * a fixint). One item's tag is where the one before it ends, so that wait is kept short:
 * the next tag is this word shifted by the item's length, not a load. Stops at any other
 * tag or a uint32 past int32 (the exact reader's), at `left` items and 8 bytes before the
 * end. Stores out[k:], calling each(ctx, out, k) after item k (when given); returns the
 * index it reached; *at is where it stopped. */
static TOK_MP_INLINE size_t tok_mp_read_fast(const unsigned char *s, size_t n, size_t *at,
                                             unsigned char *out, size_t k, size_t left,
                                             tok_mp_each each, void *ctx) {
    size_t pos = *at;
    if (k == left || n - pos < 8) return k;
    uint64_t word = tok_load_u64le(s + pos);
    unsigned tag = (unsigned)word & 0xFF;
    for (;;) {
        unsigned bits = tok_mp_fast_bits[tag];
        uint64_t value = (__builtin_bswap64(word) >> ((0u - bits) & 63u)) & tok_mp_fast_mask[tag];
        if (bits == 0 || value > (uint64_t)INT32_MAX) break;
        tok_store_le32(out + 4 * k, (int32_t)value);
        if (each) each(ctx, out, k);
        k++;
        pos += bits >> 3;
        if (k == left || n - pos < 8) break;
        tag = (unsigned)(word >> bits) & 0xFF;  /* the next item's tag, from this word */
        word = tok_load_u64le(s + pos);
    }
    *at = pos;
    return k;
}

/* Reads up to cap items into out (4 little-endian bytes each); after the last one checks
 * that the data ends there. Returns how many it read. With `each` and `done` given, calls
 * each(ctx, out, k) after item k of the fast steps and done(ctx, out, k) when they stop
 * and after an item read exactly (items below k all stored). */
static TOK_MP_INLINE size_t tok_mp_read_with(tok_mp_reader *r, const unsigned char *s, size_t n,
                                             unsigned char *out, size_t cap, tok_mp_each each,
                                             tok_mp_each done, void *ctx) {
    size_t k = 0, pos = r->pos;
    size_t left = r->total - r->count < cap ? r->total - r->count : cap;
    if (r->error != TOK_MP_OK) return 0;  /* a reader that failed stays where it failed */
    while (k < left) {
        /* the fast steps, then the item they stopped at exactly */
        k = tok_mp_read_fast(s, n, &pos, out, k, left, each, ctx);
        if (done) done(ctx, out, k);
        if (k == left) break;
        if (pos == n) { r->error = TOK_MP_INT; r->offset = pos; break; }
        unsigned char tag = s[pos];
        int32_t v;
        if (tag <= 0x7F || tag >= 0xE0) {
            v = tag <= 0x7F ? (int32_t)tag : (int32_t)(int8_t)tag;
            pos += 1;
        } else {
            int size = tok_mp_int_size(tag);
            if (size < 0) { r->error = TOK_MP_INT; r->offset = pos; break; }
            if ((size_t)size >= n - pos) { r->error = TOK_MP_INT_REST; r->offset = n; break; }
            uint64_t raw = tok_mp_be(s + pos + 1, (unsigned)size);
            int64_t value;
            if (tag <= 0xCF) {  /* unsigned */
                if (raw > (uint64_t)INT32_MAX) {
                    r->error = TOK_MP_OVERFLOW;
                    r->is_unsigned = 1;
                    r->uvalue = raw;
                    r->offset = pos;
                    r->after = pos + 1 + (size_t)size;
                    break;
                }
                value = (int64_t)raw;
            } else {  /* signed: sign-extend the payload */
                unsigned shift = 64 - 8 * (unsigned)size;
                value = (int64_t)(raw << shift) >> shift;
                if (value < INT32_MIN || value > INT32_MAX) {
                    r->error = TOK_MP_OVERFLOW;
                    r->value = value;
                    r->offset = pos;
                    r->after = pos + 1 + (size_t)size;
                    break;
                }
            }
            v = (int32_t)value;
            pos += 1 + (size_t)size;
        }
        tok_store_le32(out + 4 * k, v);
        k++;
        if (done) done(ctx, out, k);
    }
    r->count += k;
    r->pos = pos;
    if (r->error == TOK_MP_OK && r->count == r->total && pos != n) {
        r->error = TOK_MP_TRAILING;
        r->offset = pos;
    }
    return k;
}

static size_t tok_mp_read(tok_mp_reader *r, const unsigned char *s, size_t n,
                          unsigned char *out, size_t cap) {
    return tok_mp_read_with(r, s, n, out, cap, NULL, NULL, NULL);
}

/* The int64 reading (_wire_c's width=64) is the int32 reader's: it stops at an integer
 * outside int32 with TOK_MP_OVERFLOW (its index r->count), and this takes that integer as
 * an int64 into *value and moves the reader past it; the next read goes on from there (and
 * checks the end after the last item). 0, or -1 for a uint64 above INT64_MAX (the reader
 * keeps its TOK_MP_OVERFLOW). */
static int tok_mp_resume64(tok_mp_reader *r, int64_t *value) {
    if (r->is_unsigned && r->uvalue > (uint64_t)INT64_MAX) return -1;
    *value = r->is_unsigned ? (int64_t)r->uvalue : r->value;
    r->is_unsigned = 0;
    r->error = TOK_MP_OK;
    r->pos = r->after;
    r->count++;
    return 0;
}

/* One bin (bin8, bin16, bin32) that is the whole of s: its payload's start and length, or
 * the error kind (the offset in *start). */
static int tok_mp_bin(const unsigned char *s, size_t n, size_t *start, size_t *length) {
    if (n == 0 || s[0] < 0xC4 || s[0] > 0xC6) { *start = 0; return TOK_MP_BIN; }
    unsigned size = 1u << (s[0] - 0xC4);
    if (n < 1 + size) { *start = n; return TOK_MP_BIN_REST; }
    uint64_t len = tok_mp_be(s + 1, size);
    if (len > n - 1 - size) { *start = n; return TOK_MP_BIN_REST; }
    *start = 1 + size;
    *length = (size_t)len;
    if (1 + size + len != n) { *start = 1 + size + (size_t)len; return TOK_MP_BIN_TRAILING; }
    return TOK_MP_OK;
}

/* --- the writer --------------------------------------------------------------------------- */

#define TOK_MP_MAX_ID 5   /* 0xd2 and four bytes */
#define TOK_MP_MAX_HEADER 5
#define TOK_MP_SLACK 8
/* the most items an array holds and the most bytes a bin holds: array32's count and bin32's
 * length are four bytes (the writers' callers refuse more: _wire_c's table of formats) */
#define TOK_MP_MOST 0xFFFFFFFFu

/* the smallest array header for count items (count <= TOK_MP_MOST); returns the end */
static unsigned char *tok_mp_write_header(unsigned char *out, size_t count) {
    if (count <= 15) {
        *out++ = (unsigned char)(0x90 | count);
    } else if (count <= 0xFFFF) {
        *out++ = 0xDC;
        *out++ = (unsigned char)(count >> 8);
        *out++ = (unsigned char)count;
    } else {
        uint32_t c = (uint32_t)count;
        *out++ = 0xDD;
        *out++ = (unsigned char)(c >> 24); *out++ = (unsigned char)(c >> 16);
        *out++ = (unsigned char)(c >> 8); *out++ = (unsigned char)c;
    }
    return out;
}

/* the smallest bin header for length bytes (length <= TOK_MP_MOST); returns the end */
static unsigned char *tok_mp_write_bin_header(unsigned char *out, size_t length) {
    uint32_t len = (uint32_t)length;
    if (length <= 0xFF) {
        *out++ = 0xC4;
    } else if (length <= 0xFFFF) {
        *out++ = 0xC5;
        *out++ = (unsigned char)(len >> 8);
    } else {
        *out++ = 0xC6;
        *out++ = (unsigned char)(len >> 24); *out++ = (unsigned char)(len >> 16);
        *out++ = (unsigned char)(len >> 8);
    }
    *out++ = (unsigned char)len;
    return out;
}

/* One id in its smallest encoding, stored as an 8-byte word; returns its length. */
static inline unsigned tok_mp_put(unsigned char *out, int32_t v) {
    uint32_t u = (uint32_t)v;
    unsigned neg = v < 0;
    unsigned fix = v >= -32 && v <= 127;
    /* the payload's size: a uint for v >= 0 (cc, cd, ce), an int below (d0, d1, d2) */
    uint32_t mag = neg ? ~u : u;          /* -v - 1 below zero: int8 holds mag <= 127 */
    uint32_t one = neg ? 0x80u : 0x100u, two = neg ? 0x8000u : 0x10000u;
    unsigned size = mag < one ? 1u : mag < two ? 2u : 4u;
    unsigned tag = (neg ? 0xD0u : 0xCCu) + (size >> 1);
    /* the payload's bytes, most significant first: the low `size` bytes of u, swapped */
    uint64_t be = (uint64_t)__builtin_bswap32(u) >> (8 * (4 - size));
    uint64_t word = TOK_LE64(fix ? (uint64_t)(u & 0xFFu) : ((uint64_t)tag | (be << 8)));
    memcpy(out, &word, 8);
    return fix ? 1u : 1u + size;
}

#if TOK_CPU_X86
#  define TOK_MP_HAVE_AVX2 1
#  include <immintrin.h>
/* Four ids a step in 64-bit lanes: the same compares as tok_mp_put, the payload's bytes
 * swapped by a shuffle and shifted down by a per-lane shift, the form chosen by a blend;
 * the four words are then stored one after the other, each advanced by its length. Four
 * ids none of which is negative (token ids) take fewer steps: their tags are cc, cd, ce,
 * their lengths 5, 3 or 2 (1 for a fixint) by three compares. */
#define TOK_MP_STORE4(out, words, lens) do { \
        memcpy(out, &(words)[0], 8); out += (lens)[0]; \
        memcpy(out, &(words)[1], 8); out += (lens)[1]; \
        memcpy(out, &(words)[2], 8); out += (lens)[2]; \
        memcpy(out, &(words)[3], 8); out += (lens)[3]; \
    } while (0)

/* Eight ids a step from ids[i] while none of them is negative (token ids), in 32-bit lanes:
 * each id's word is its first four bytes (the tag, then the payload swapped, shifted down
 * to its size and up by a byte: a uint32's last byte is cut off) and the id itself, whose
 * low byte is that last byte (the bytes after it are written over by the next id). Returns
 * where it stopped: 8 ids before the end, or 8 ids with a negative one. */
__attribute__((target("avx2"), noinline))
static size_t tok_mp_write_unsigned_avx2(const unsigned char *ids, size_t i, size_t n,
                                         unsigned char **at) {
    const __m256i swap32 = _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12,
                                            3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);
    unsigned char *out = *at;
    for (; i + 8 <= n; i += 8) {
        __m256i v8 = _mm256_loadu_si256((const __m256i *)(ids + 4 * i));
        if (_mm256_movemask_ps(_mm256_castsi256_ps(v8)) != 0) break;
        __m256i wide0 = _mm256_cmpgt_epi32(v8, _mm256_set1_epi32(127));    /* not a fixint */
        __m256i wide1 = _mm256_cmpgt_epi32(v8, _mm256_set1_epi32(0xFF));   /* cd or ce */
        __m256i wide2 = _mm256_cmpgt_epi32(v8, _mm256_set1_epi32(0xFFFF)); /* ce */
        /* down by 24 (cc), 16 (cd) or 0 (ce) bits: the compares are 0 or -1 */
        __m256i down = _mm256_add_epi32(_mm256_set1_epi32(24),
                                        _mm256_add_epi32(_mm256_slli_epi32(wide1, 3),
                                                         _mm256_slli_epi32(wide2, 4)));
        __m256i tag = _mm256_sub_epi32(_mm256_sub_epi32(_mm256_set1_epi32(0xCC), wide1), wide2);
        __m256i first = _mm256_or_si256(
            tag, _mm256_slli_epi32(_mm256_srlv_epi32(_mm256_shuffle_epi8(v8, swap32), down), 8));
        first = _mm256_blendv_epi8(v8, first, wide0);
        /* 1 byte, or 5, 3, 2: 1 - wide0 - wide1 - 2 * wide2 */
        __m256i len8 = _mm256_sub_epi32(_mm256_set1_epi32(1),
                                        _mm256_add_epi32(_mm256_add_epi32(wide0, wide1),
                                                         _mm256_add_epi32(wide2, wide2)));
        /* the words of ids 0, 1, 4, 5 and 2, 3, 6, 7 */
        __m256i w01 = _mm256_unpacklo_epi32(first, v8), w23 = _mm256_unpackhi_epi32(first, v8);
        uint64_t a[4], b[4];
        uint32_t l[8];
        _mm256_storeu_si256((__m256i *)l, len8);
        _mm256_storeu_si256((__m256i *)a, w01);
        _mm256_storeu_si256((__m256i *)b, w23);
        memcpy(out, &a[0], 8); out += l[0];
        memcpy(out, &a[1], 8); out += l[1];
        memcpy(out, &b[0], 8); out += l[2];
        memcpy(out, &b[1], 8); out += l[3];
        memcpy(out, &a[2], 8); out += l[4];
        memcpy(out, &a[3], 8); out += l[5];
        memcpy(out, &b[2], 8); out += l[6];
        memcpy(out, &b[3], 8); out += l[7];
    }
    *at = out;
    return i;
}

__attribute__((target("avx2")))
static size_t tok_mp_write_avx2(const unsigned char *ids, size_t n, unsigned char **at) {
    const __m256i swap = _mm256_setr_epi8(3, 2, 1, 0, -1, -1, -1, -1, 11, 10, 9, 8, -1, -1, -1, -1,
                                          3, 2, 1, 0, -1, -1, -1, -1, 11, 10, 9, 8, -1, -1, -1, -1);
    const __m256i one = _mm256_set1_epi64x(1), low = _mm256_set1_epi64x(0xFF);
    unsigned char *out = *at;
    uint64_t words[4], lens[4];
    size_t i = 0;
    for (;;) {
        i = tok_mp_write_unsigned_avx2(ids, i, n, &out);  /* eight non-negative ids a step */
        if (i + 4 > n) break;
        __m128i raw = _mm_loadu_si128((const __m128i *)(ids + 4 * i));
        __m256i u = _mm256_cvtepu32_epi64(raw);   /* their 32 bits */
        __m256i word, len;
        __m256i v = _mm256_cvtepi32_epi64(raw);   /* the ids, sign-extended */
        __m256i neg = _mm256_cmpgt_epi64(_mm256_setzero_si256(), v);
        __m256i fix = _mm256_and_si256(_mm256_cmpgt_epi64(v, _mm256_set1_epi64x(-33)),
                                       _mm256_cmpgt_epi64(_mm256_set1_epi64x(128), v));
        /* -v - 1 below zero, doubled there: an int's bounds are half a uint's */
        __m256i mag = _mm256_sllv_epi64(_mm256_xor_si256(v, neg), _mm256_and_si256(neg, one));
        __m256i wide1 = _mm256_cmpgt_epi64(mag, low);
        __m256i wide2 = _mm256_cmpgt_epi64(mag, _mm256_set1_epi64x(0xFFFF));
        /* size 1, 2 or 4: 1 - wide1 - 2 * wide2 (the compares are 0 or -1) */
        __m256i size = _mm256_sub_epi64(_mm256_sub_epi64(one, wide1), _mm256_add_epi64(wide2, wide2));
        __m256i tag = _mm256_add_epi64(_mm256_set1_epi64x(0xCC),
                                       _mm256_add_epi64(_mm256_and_si256(neg, _mm256_set1_epi64x(4)),
                                                        _mm256_srli_epi64(size, 1)));
        __m256i be = _mm256_srlv_epi64(_mm256_shuffle_epi8(u, swap),
                                       _mm256_sub_epi64(_mm256_set1_epi64x(32), _mm256_slli_epi64(size, 3)));
        word = _mm256_blendv_epi8(_mm256_or_si256(tag, _mm256_slli_epi64(be, 8)),
                                  _mm256_and_si256(u, low), fix);
        len = _mm256_blendv_epi8(_mm256_add_epi64(size, one), one, fix);
        _mm256_storeu_si256((__m256i *)words, word);
        _mm256_storeu_si256((__m256i *)lens, len);
        TOK_MP_STORE4(out, words, lens);
        i += 4;
    }
    *at = out;
    return i;
}

static int tok_mp_cpu_avx2 = -1;  /* -1: not asked yet */
static inline int tok_mp_avx2(void) {
    if (tok_mp_cpu_avx2 < 0) tok_mp_cpu_avx2 = tok_cpu_has(TOK_CPU_AVX2);
    return tok_mp_cpu_avx2;
}
#else
#  define TOK_MP_HAVE_AVX2 0
static inline int tok_mp_avx2(void) { return 0; }
#endif

/* ids (little-endian int32) in their smallest encodings; returns the end. out holds
 * TOK_MP_MAX_ID * n + TOK_MP_SLACK bytes. `simd`: four ids a step on AVX2, where the CPU
 * has it. */
static unsigned char *tok_mp_write(const unsigned char *ids, size_t n, unsigned char *out,
                                   int simd) {
    size_t i = 0;
#if TOK_MP_HAVE_AVX2
    if (simd && tok_mp_avx2()) i = tok_mp_write_avx2(ids, n, &out);
#else
    (void)simd;
#endif
    for (; i < n; i++) out += tok_mp_put(out, (int32_t)tok_load_u32le(ids + 4 * i));
    return out;
}

/* --- the int64 writer -------------------------------------------------------------------- */

#define TOK_MP_MAX_ID64 9  /* 0xcf or 0xd3 and eight bytes */

/* one int64 id outside int32 in its smallest encoding (uint32, uint64 or int64); returns its
 * length */
static inline unsigned tok_mp_put64(unsigned char *out, int64_t v) {
    uint64_t u = (uint64_t)v;
    unsigned size = v >= 0 && u <= 0xFFFFFFFFu ? 4u : 8u;
    out[0] = v < 0 ? 0xD3 : size == 4 ? 0xCE : 0xCF;
    for (unsigned i = 0; i < size; i++) out[1 + i] = (unsigned char)(u >> (8 * (size - 1 - i)));
    return 1 + size;
}

/* ids (little-endian int64) in their smallest encodings: each run of ids within int32
 * narrowed into a block and written by tok_mp_write, the others one by one; returns the
 * end. out holds TOK_MP_MAX_ID64 * n + TOK_MP_SLACK bytes. */
#define TOK_MP_RUN 256
static unsigned char *tok_mp_write64(const unsigned char *ids, size_t n, unsigned char *out,
                                     int simd) {
    unsigned char run[4 * TOK_MP_RUN];
    size_t i = 0;
    while (i < n) {
        size_t m = tok_narrow_ids(ids + 8 * i, n - i < TOK_MP_RUN ? n - i : TOK_MP_RUN, run);
        if (m) {
            out = tok_mp_write(run, m, out, simd);
            i += m;
        } else {  /* the id at i is outside int32 */
            out += tok_mp_put64(out, tok_load_le64(ids + 8 * i));
            i++;
        }
    }
    return out;
}

#endif
