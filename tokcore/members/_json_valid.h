/* One JSON value, strictly (RFC 8259, UTF-8): the C twin of _members_py.value_error.
 *
 * tok_json_value_error(d, start, end): -1 when d[start:end] is one JSON value (whitespace
 * may surround it), else the offset where it stops being the start of one (the first byte no
 * valid text could have there; end for a text cut short), -2 when memory ran out (a nesting
 * deeper than the stack bits on the C stack). The same answers as the Python twin, offset for
 * offset. Strings, the long part of most values, are skipped 16 bytes a step with SSE2 (8 with
 * a portable word test elsewhere) while their bytes are printable ASCII.
 */
#ifndef TOK_JSON_VALID_H
#define TOK_JSON_VALID_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_cpu.h"

#if TOK_CPU_SSE2
#include <emmintrin.h>
#define TOK_VALID_SSE2 1
#else
#define TOK_VALID_SSE2 0
#endif

#define TOK_VALID_STACK_BYTES 512 /* 4096 levels of nesting before the heap */

/* The first '"' in d[i:end], or NULL: memchr's answer. The member scan skips many short
 * strings (keys, ids), where a call to memchr costs more than the search; the first 64
 * bytes are searched inline (SSE2), the rest by memchr. */
static inline const unsigned char *tok_find_quote(const unsigned char *d, Py_ssize_t i,
                                                  Py_ssize_t end) {
#if TOK_VALID_SSE2
    const __m128i quote = _mm_set1_epi8(0x22);
    Py_ssize_t stop = end - i > 64 ? i + 64 : end;
    while (stop - i >= 16) {
        int mask = _mm_movemask_epi8(
            _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(d + i)), quote));
        if (mask)
            return d + i + __builtin_ctz((unsigned)mask);
        i += 16;
    }
    if (stop == end) {
        while (i < end) {
            if (d[i] == 0x22)
                return d + i;
            i++;
        }
        return NULL;
    }
#endif
    return (const unsigned char *)memchr(d + i, 0x22, (size_t)(end - i));
}

static inline int tok_valid_ws(unsigned char c) {
    return c == 32 || c == 9 || c == 10 || c == 13;
}

static inline Py_ssize_t tok_valid_skip_ws(const unsigned char *d, Py_ssize_t i, Py_ssize_t end) {
    while (i < end && tok_valid_ws(d[i]))
        i++;
    return i;
}

static inline int tok_valid_hex(unsigned char c) {
    return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}

/* The offset of the first of { } [ ] " in d[i:end], or end: the bytes the member scan's
 * skip of a nested value stops at (16 a step with SSE2; a long array of numbers or a long
 * run of anything else between them goes by at that pace). */
static inline Py_ssize_t tok_find_nested_stop(const unsigned char *d, Py_ssize_t i,
                                              Py_ssize_t end) {
#if TOK_VALID_SSE2
    const __m128i fold = _mm_set1_epi8((char)0xDF), open = _mm_set1_epi8(0x5B),
                  close = _mm_set1_epi8(0x5D), quote = _mm_set1_epi8(0x22);
    while (end - i >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(d + i));
        __m128i folded = _mm_and_si128(v, fold); /* { -> [ and } -> ] (only those) */
        int mask = _mm_movemask_epi8(_mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(folded, open), _mm_cmpeq_epi8(folded, close)),
            _mm_cmpeq_epi8(v, quote)));
        if (mask)
            return i + __builtin_ctz((unsigned)mask);
        i += 16;
    }
#endif
    while (i < end) {
        unsigned char c = d[i];
        if (c == 0x22 || (c & 0xDF) == 0x5B || (c & 0xDF) == 0x5D)
            return i;
        i++;
    }
    return end;
}

/* A string whose body goes on at d[from] (just past its quote, or further on, where no
 * backslash run reaches from before): just past its closing quote (the first '"' after an
 * even run of backslashes), or -1 when it does not close. */
static inline Py_ssize_t tok_skip_string_body(const unsigned char *d, Py_ssize_t from,
                                              Py_ssize_t end) {
    for (;;) {
        const unsigned char *q = tok_find_quote(d, from, end);
        Py_ssize_t at, back;
        if (q == NULL)
            return -1;
        at = q - d;
        back = at;
        while (back > from && d[back - 1] == 0x5C)
            back--;
        if (((at - back) & 1) == 0)
            return at + 1;
        from = at + 1;
    }
}

/* Just past the object or array whose '{' or '[' is at d[i], or -1 when it does not close:
 * the member scan's lenient skip (any closing bracket closes any, strings skipped to their
 * closing quote). With SSE2, 16 bytes a step while a block has no backslash: its quotes
 * toggle a string mask (a prefix xor, carried from block to block) and only the brackets
 * outside it are counted; from a block with a backslash on, one stop at a time. */
static inline Py_ssize_t tok_skip_nested(const unsigned char *d, Py_ssize_t i, Py_ssize_t end) {
    Py_ssize_t depth = 0;
    unsigned char c;
#if TOK_VALID_SSE2
    const __m128i fold = _mm_set1_epi8((char)0xDF), open = _mm_set1_epi8(0x5B),
                  close = _mm_set1_epi8(0x5D), quote = _mm_set1_epi8(0x22),
                  slash = _mm_set1_epi8(0x5C);
    unsigned carry = 0; /* 0xFFFF: the block starts inside a string */
    while (end - i >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(d + i)), folded;
        unsigned q, opens, closes, inside, brackets;
        if (_mm_movemask_epi8(_mm_cmpeq_epi8(v, slash)))
            break;
        q = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, quote));
        folded = _mm_and_si128(v, fold);
        opens = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(folded, open));
        closes = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(folded, close));
        inside = q;  /* bit k: an odd number of quotes at or before k (in a string) */
        inside ^= inside << 1;
        inside ^= inside << 2;
        inside ^= inside << 4;
        inside ^= inside << 8;
        inside = (inside ^ carry) & 0xFFFF;
        opens &= ~inside;
        closes &= ~inside;
        brackets = opens | closes;
        while (brackets) {
            int k = __builtin_ctz(brackets);
            if ((opens >> k) & 1)
                depth++;
            else if (--depth == 0)
                return i + k + 1;
            brackets &= brackets - 1;
        }
        carry = (inside >> 15) & 1 ? 0xFFFF : 0;
        i += 16;
    }
    if (carry) { /* the block that stopped the vector loop starts inside a string */
        i = tok_skip_string_body(d, i, end);
        if (i < 0)
            return -1;
    }
#endif
    for (;;) {
        i = tok_find_nested_stop(d, i, end);
        if (i >= end)
            return -1;
        c = d[i];
        if (c == 0x22) {
            i = tok_skip_string_body(d, i + 1, end);
            if (i < 0)
                return -1;
            continue;
        }
        i++;
        if ((c & 0xDF) == 0x5B)
            depth++;
        else if (--depth == 0)
            return i;
    }
}

/* Whether the 8 bytes of w are all printable ASCII other than '"' and '\\'. */
static inline int tok_valid_plain8(uint64_t w) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t q = w ^ (ones * 0x22), b = w ^ (ones * 0x5C);
    uint64_t bad = ((w - ones * 0x20) & ~w) | ((q - ones) & ~q) | ((b - ones) & ~b) | w;
    return (bad & highs) == 0;
}

/* Past the printable-ASCII run of a string's body from i (no quote, backslash, control or
 * non-ASCII byte): the offset of the first byte that is not one, or end. */
static inline Py_ssize_t tok_valid_plain_run(const unsigned char *d, Py_ssize_t i,
                                             Py_ssize_t end, int simd) {
#if TOK_VALID_SSE2
    if (simd) {
        const __m128i space = _mm_set1_epi8(0x20), quote = _mm_set1_epi8(0x22),
                      slash = _mm_set1_epi8(0x5C);
        while (end - i >= 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(d + i));
            /* signed: bytes >= 0x80 are negative, so below 0x20 too */
            __m128i bad = _mm_or_si128(_mm_cmplt_epi8(v, space),
                                       _mm_or_si128(_mm_cmpeq_epi8(v, quote),
                                                    _mm_cmpeq_epi8(v, slash)));
            int mask = _mm_movemask_epi8(bad);
            if (mask)
                return i + __builtin_ctz((unsigned)mask);
            i += 16;
        }
    }
#endif
    (void)simd;
    while (end - i >= 8) {
        uint64_t w;
        memcpy(&w, d + i, 8);
        if (!tok_valid_plain8(w))
            break;
        i += 8;
    }
    while (i < end) {
        unsigned char c = d[i];
        if (c < 0x20 || c == 0x22 || c == 0x5C || c >= 0x80)
            return i;
        i++;
    }
    return end;
}

/* A UTF-8 sequence whose lead byte is at i: just past it, or -(offset + 1) of the byte that
 * breaks it (-(end + 1) when it is cut short). RFC 3629: no overlong form, no surrogate. */
static inline Py_ssize_t tok_valid_utf8(const unsigned char *d, Py_ssize_t i, Py_ssize_t end) {
    unsigned char c = d[i], low = 0x80, high = 0xBF;
    int tails;
    Py_ssize_t k;
    if (c >= 0xC2 && c <= 0xDF)
        tails = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        tails = 2;
        if (c == 0xE0)
            low = 0xA0;
        else if (c == 0xED)
            high = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        tails = 3;
        if (c == 0xF0)
            low = 0x90;
        else if (c == 0xF4)
            high = 0x8F;
    } else
        return -(i + 1);
    for (k = i + 1; k <= i + tails; k++) {
        if (k >= end)
            return -(end + 1);
        if (d[k] < low || d[k] > high)
            return -(k + 1);
        low = 0x80;
        high = 0xBF;
    }
    return k;
}

/* Just past the string whose opening quote is at i, or -(offset + 1) where it stops. */
static inline Py_ssize_t tok_valid_string(const unsigned char *d, Py_ssize_t i, Py_ssize_t end,
                                          int simd) {
    Py_ssize_t k;
    i++;
    for (;;) {
        i = tok_valid_plain_run(d, i, end, simd);
        if (i >= end)
            return -(end + 1);
        unsigned char c = d[i];
        if (c == 0x22)
            return i + 1;
        if (c == 0x5C) {
            if (i + 1 >= end)
                return -(end + 1);
            c = d[i + 1];
            if (c == 'u') {
                for (k = i + 2; k < i + 6; k++) {
                    if (k >= end)
                        return -(end + 1);
                    if (!tok_valid_hex(d[k]))
                        return -(k + 1);
                }
                i += 6;
            } else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' ||
                       c == 'r' || c == 't') {
                i += 2;
            } else
                return -(i + 2);
            continue;
        }
        if (c < 0x80)
            return -(i + 1); /* a control character */
        i = tok_valid_utf8(d, i, end);
        if (i < 0)
            return i;
    }
}

static inline int tok_valid_digit(const unsigned char *d, Py_ssize_t i, Py_ssize_t end) {
    return i < end && d[i] >= '0' && d[i] <= '9';
}

/* Just past the number that starts at i, or -(offset + 1) where it stops (the grammar of
 * _members_py._NUMBER; cut short or broken: the end of its longest start). */
static inline Py_ssize_t tok_valid_number(const unsigned char *d, Py_ssize_t i, Py_ssize_t end) {
    if (i < end && d[i] == '-')
        i++;
    if (!tok_valid_digit(d, i, end))
        return -(i + 1);
    if (d[i] == '0')
        i++;
    else
        while (tok_valid_digit(d, i, end))
            i++;
    if (i < end && d[i] == '.') {
        i++;
        if (!tok_valid_digit(d, i, end))
            return -(i + 1);
        while (tok_valid_digit(d, i, end))
            i++;
    }
    if (i < end && (d[i] == 'e' || d[i] == 'E')) {
        i++;
        if (i < end && (d[i] == '+' || d[i] == '-'))
            i++;
        if (!tok_valid_digit(d, i, end))
            return -(i + 1);
        while (tok_valid_digit(d, i, end))
            i++;
    }
    return i;
}

static Py_ssize_t tok_json_value_error_simd(const unsigned char *d, Py_ssize_t start,
                                            Py_ssize_t end, int simd) {
    unsigned char small[TOK_VALID_STACK_BYTES];
    unsigned char *bits = small; /* bit k: level k is an object (1) or an array (0) */
    Py_ssize_t cap = TOK_VALID_STACK_BYTES * 8, depth = 0, i, result = -1;
    int key = 0;
    unsigned char c;
    const char *word;
    Py_ssize_t k, length;
    i = tok_valid_skip_ws(d, start, end);
    for (;;) {
        if (key) { /* "key" ws ":" ws, then the value */
            if (i >= end) { result = end; goto done; }
            if (d[i] != 0x22) { result = i; goto done; }
            i = tok_valid_string(d, i, end, simd);
            if (i < 0) { result = -i - 1; goto done; }
            i = tok_valid_skip_ws(d, i, end);
            if (i >= end) { result = end; goto done; }
            if (d[i] != ':') { result = i; goto done; }
            i = tok_valid_skip_ws(d, i + 1, end);
            key = 0;
        }
        if (i >= end) { result = end; goto done; }
        c = d[i];
        if (c == '{' || c == '[') {
            i = tok_valid_skip_ws(d, i + 1, end);
            if (i < end && d[i] == c + 2) { /* "}" or "]": empty */
                i++;
            } else {
                if (depth == cap) { /* deeper than the bits: grow them on the heap */
                    unsigned char *grown = (unsigned char *)malloc((size_t)(cap / 4));
                    if (grown == NULL) { result = -2; goto done; }
                    memcpy(grown, bits, (size_t)(cap / 8));
                    if (bits != small)
                        free(bits);
                    bits = grown;
                    cap *= 2;
                }
                if (c == '{')
                    bits[depth >> 3] |= (unsigned char)(1u << (depth & 7));
                else
                    bits[depth >> 3] &= (unsigned char)~(1u << (depth & 7));
                depth++;
                key = c == '{';
                continue;
            }
        } else if (c == 0x22) {
            i = tok_valid_string(d, i, end, simd);
            if (i < 0) { result = -i - 1; goto done; }
        } else if (c == 't' || c == 'f' || c == 'n') {
            word = c == 't' ? "true" : c == 'f' ? "false" : "null";
            length = c == 'f' ? 5 : 4;
            for (k = 1; k < length; k++) {
                if (i + k >= end) { result = end; goto done; }
                if (d[i + k] != (unsigned char)word[k]) { result = i + k; goto done; }
            }
            i += length;
        } else {
            i = tok_valid_number(d, i, end);
            if (i < 0) { result = -i - 1; goto done; }
        }
        /* after a value: close what it ends, up to the next "," (or the end of the text) */
        for (;;) {
            i = tok_valid_skip_ws(d, i, end);
            if (depth == 0) { result = i == end ? -1 : i; goto done; }
            if (i >= end) { result = end; goto done; }
            int object = (bits[(depth - 1) >> 3] >> ((depth - 1) & 7)) & 1;
            c = d[i];
            if (c == ',') {
                i = tok_valid_skip_ws(d, i + 1, end);
                key = object;
                break;
            }
            if (c != (object ? '}' : ']')) { result = i; goto done; }
            depth--;
            i++;
        }
    }
done:
    if (bits != small)
        free(bits);
    return result;
}

static inline Py_ssize_t tok_json_value_error(const unsigned char *d, Py_ssize_t start,
                                              Py_ssize_t end) {
    return tok_json_value_error_simd(d, start, end, 1);
}

#endif
