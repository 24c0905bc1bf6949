/* Whether a text is one JSON object as the member scan reads it (_members_c's
 * tok_is_object_text: the check that lets the relay forward an event whose last member is
 * "usage":null without reading its members), 64 bytes a step with AVX-512BW or AVX2 where
 * the CPU has it, and whether it has a LF or CR (the relay wants a data field on one line).
 *
 * The scalar check walks the members byte by byte: about 1,000 instructions and many
 * branches for a 250-byte chat chunk, which is most of what the relay spends on it. Here each
 * 64-byte block becomes bit masks (bit k for byte k: from AVX2 or AVX-512BW on x86-64, from
 * NEON on aarch64, _json_object_neon.h), and the members' grammar is checked on
 * the masks, without a loop over the bytes:
 *   - a nibble lookup (two byte shuffles) classes every byte: quote, backslash, bracket,
 *     colon, comma, whitespace, or a byte of a literal ("plain": anything else);
 *   - the strings are a prefix xor (a carry-less multiply) of the quotes that close, carried
 *     from block to block; a quote closes when an even run of backslashes precedes it;
 *   - the nested values are found by the brackets outside strings (a depth counter over
 *     their bits: a chat chunk has about six), with the scan's lenient rule: any closing
 *     bracket closes any open one;
 *   - between the braces, at the top level, the tokens (a string, a literal's first byte, a
 *     nested value's opening bracket) and the separators (':' and ',') must alternate,
 *     token first and last, the separators ':' ',' ':' ... ':', and every other token from
 *     the first (the keys) a string. Three prefix xors (their running parities) check that.
 * The answer is the scalar check's on every input (the tests compare them on every input of
 * a few bytes, in every lane), with one exception it hands back: a backslash outside the
 * strings (never in JSON) could make the quote rule here differ from the scan's, which
 * reads no escape outside a string, so then the result is -1 and the scalar check decides.
 * A caller may keep a memo (_json_object_memo.h) of its last object: a text that differs
 * from it only inside one of its strings (a chat chunk from the one before: its text) is
 * answered by comparing the two, 32 bytes a step, with no block read; one that begins with
 * the same bytes goes on from the state after the blocks they fill. -DTOK_SCAN_PORTABLE=1
 * (the relay scans' switch) builds no kernel.
 */
#ifndef TOK_JSON_OBJECT_H
#define TOK_JSON_OBJECT_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_cpu.h"
#include "_json_object_memo.h"

#if TOK_CPU_X86 && defined(__x86_64__) && (!defined(TOK_SCAN_PORTABLE) || !TOK_SCAN_PORTABLE)
#  define TOK_OBJECT_X86 1
#  include <immintrin.h>
#else
#  define TOK_OBJECT_X86 0
#endif
#if TOK_CPU_NEON && (!defined(TOK_SCAN_PORTABLE) || !TOK_SCAN_PORTABLE)
#  define TOK_OBJECT_NEON 1
#  include <arm_neon.h>
#else
#  define TOK_OBJECT_NEON 0
#endif
#define TOK_OBJECT_VECTOR (TOK_OBJECT_X86 || TOK_OBJECT_NEON)

/* the kernel tok_object_text runs (tok_object_init, at import): TOK_OBJECT_NONE (the scalar
 * check), TOK_OBJECT_WITH_AVX2 (the CPU has AVX2 and PCLMUL, as every AVX2 CPU does),
 * TOK_OBJECT_WITH_AVX512 (AVX-512BW too: a block's masks come out of 64-byte tests whole) or
 * TOK_OBJECT_WITH_NEON (every aarch64 CPU) */
enum { TOK_OBJECT_NONE = 0, TOK_OBJECT_WITH_AVX2 = 1, TOK_OBJECT_WITH_AVX512 = 2,
       TOK_OBJECT_WITH_NEON = 3 };
static int tok_object_kernel = TOK_OBJECT_NONE;

static inline void tok_object_init(void) {
#if TOK_OBJECT_X86
    if (tok_cpu_has(TOK_CPU_AVX2 | TOK_CPU_PCLMUL))
        tok_object_kernel = tok_cpu_has(TOK_CPU_AVX512BW) ? TOK_OBJECT_WITH_AVX512
                                                          : TOK_OBJECT_WITH_AVX2;
#elif TOK_OBJECT_NEON
    tok_object_kernel = TOK_OBJECT_WITH_NEON;
#endif
}

static inline int tok_object_ws(unsigned char c) {
    return c == 32 || c == 9 || c == 10 || c == 13;
}

#if TOK_OBJECT_VECTOR
/* the class bits of the nibble lookup: a byte's class is HI[its high nibble] & LO[its low];
 * the pairs of nibbles are unique to each class (':' 3A, ',' 2C, "[]{}" 5B 5D 7B 7D, '"' 22,
 * '\\' 5C, ' ' 20, tab LF CR 09 0A 0D), and a byte in none has class 0 (plain) */
#  define TOK_OB_COLON 0x01
#  define TOK_OB_COMMA 0x02
#  define TOK_OB_BRACKET 0x04
#  define TOK_OB_QUOTE 0x08
#  define TOK_OB_SLASH 0x10
#  define TOK_OB_SPACE 0x20
#  define TOK_OB_CONTROL_WS 0x40
#  define TOK_OB_LINE 0x80  /* LF and CR (0A 0D): the relay asks for a text on one line */
#  define TOK_OB_HI TOK_OB_CONTROL_WS | TOK_OB_LINE, 0, \
    TOK_OB_COMMA | TOK_OB_QUOTE | TOK_OB_SPACE, TOK_OB_COLON, 0, TOK_OB_BRACKET | TOK_OB_SLASH, 0, \
    TOK_OB_BRACKET, 0, 0, 0, 0, 0, 0, 0, 0
#  define TOK_OB_LO TOK_OB_SPACE, 0, TOK_OB_QUOTE, 0, 0, 0, 0, 0, 0, TOK_OB_CONTROL_WS, \
    TOK_OB_COLON | TOK_OB_CONTROL_WS | TOK_OB_LINE, TOK_OB_BRACKET, TOK_OB_COMMA | TOK_OB_SLASH, \
    TOK_OB_BRACKET | TOK_OB_CONTROL_WS | TOK_OB_LINE, 0, 0

/* The masks of one 64-byte block */
typedef struct {
    uint64_t quote, slash, bracket, colon, comma, plain, line;
} tok_object_masks;

#  if TOK_OBJECT_X86

/* bit k of the class byte of each of 32 bytes, as a 32-bit mask: the bit moved to bit 7 of
 * its byte (a 16-bit shift by at most 7 moves no bit across the byte) */
#  define TOK_OB_BIT(cls, k) \
    ((uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_slli_epi16((cls), 7 - (k))))

__attribute__((target("avx2,pclmul")))
static inline void tok_object_classify_avx2(const unsigned char *p, tok_object_masks *m) {
    const __m256i hi_table = _mm256_setr_epi8(TOK_OB_HI, TOK_OB_HI);
    const __m256i lo_table = _mm256_setr_epi8(TOK_OB_LO, TOK_OB_LO);
    const __m256i nibble = _mm256_set1_epi8(0x0F), zero = _mm256_setzero_si256();
    uint64_t bits[7][2];
    for (int half = 0; half < 2; half++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(p + 32 * half));
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
        __m256i cls = _mm256_and_si256(_mm256_shuffle_epi8(hi_table, hi),
                                       _mm256_shuffle_epi8(lo_table, _mm256_and_si256(v, nibble)));
        bits[0][half] = TOK_OB_BIT(cls, 3);  /* quote */
        bits[1][half] = TOK_OB_BIT(cls, 4);  /* backslash */
        bits[2][half] = TOK_OB_BIT(cls, 2);  /* bracket */
        bits[3][half] = TOK_OB_BIT(cls, 0);  /* colon */
        bits[4][half] = TOK_OB_BIT(cls, 1);  /* comma */
        bits[5][half] = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(cls, zero));
        bits[6][half] = TOK_OB_BIT(cls, 7);  /* LF, CR */
    }
    m->quote = bits[0][0] | bits[0][1] << 32;
    m->slash = bits[1][0] | bits[1][1] << 32;
    m->bracket = bits[2][0] | bits[2][1] << 32;
    m->colon = bits[3][0] | bits[3][1] << 32;
    m->comma = bits[4][0] | bits[4][1] << 32;
    m->plain = bits[5][0] | bits[5][1] << 32;
    m->line = bits[6][0] | bits[6][1] << 32;
}
#  undef TOK_OB_BIT

/* The same with AVX-512BW: one 64-byte lookup, each class a test into a mask register.
 * The last block of a text is a masked load with spaces past its end (they change
 * nothing), which reads no byte past it. */
#  define TOK_OB_512 "avx512f,avx512bw,avx2,pclmul"
__attribute__((target(TOK_OB_512)))
static inline void tok_object_classify_avx512(const unsigned char *p, Py_ssize_t left,
                                              tok_object_masks *m) {
    const __m512i hi_table = _mm512_broadcast_i32x4(_mm_setr_epi8(TOK_OB_HI));
    const __m512i lo_table = _mm512_broadcast_i32x4(_mm_setr_epi8(TOK_OB_LO));
    const __m512i nibble = _mm512_set1_epi8(0x0F);
    __m512i v, cls;
    if (left >= 64)
        v = _mm512_loadu_si512((const void *)p);
    else
        v = _mm512_mask_loadu_epi8(_mm512_set1_epi8(' '), ((uint64_t)1 << left) - 1,
                                   (const void *)p);
    cls = _mm512_and_si512(_mm512_shuffle_epi8(hi_table,
                                               _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble)),
                           _mm512_shuffle_epi8(lo_table, _mm512_and_si512(v, nibble)));
    m->quote = _mm512_test_epi8_mask(cls, _mm512_set1_epi8(TOK_OB_QUOTE));
    m->slash = _mm512_test_epi8_mask(cls, _mm512_set1_epi8(TOK_OB_SLASH));
    m->bracket = _mm512_test_epi8_mask(cls, _mm512_set1_epi8(TOK_OB_BRACKET));
    m->colon = _mm512_test_epi8_mask(cls, _mm512_set1_epi8(TOK_OB_COLON));
    m->comma = _mm512_test_epi8_mask(cls, _mm512_set1_epi8(TOK_OB_COMMA));
    m->plain = _mm512_testn_epi8_mask(cls, cls);
    m->line = _mm512_movepi8_mask(cls);  /* bit 7 */
}

/* bit k: the parity of the bits of x at or below k (a carry-less multiply by all ones) */
__attribute__((target("pclmul")))
static inline uint64_t tok_object_prefix_xor(uint64_t x) {
    __m128i r = _mm_clmulepi64_si128(_mm_cvtsi64_si128((long long)x), _mm_set1_epi8(-1), 0);
    return (uint64_t)_mm_cvtsi128_si64(r);
}
#    define TOK_OB_STEP_TARGET __attribute__((target("pclmul")))
/* the kernel of whole 64-byte blocks (the last one copied out): AVX2 */
#    define TOK_OB_WHOLE_TARGET __attribute__((target("avx2,pclmul")))
#    define tok_object_classify_whole tok_object_classify_avx2
#  else
#    include "_json_object_neon.h"
#    define TOK_OB_STEP_TARGET
#    define TOK_OB_WHOLE_TARGET
#    define tok_object_classify_whole tok_object_classify_neon
#  endif

/* The bytes of the block that follow an odd run of backslashes (bit k: byte k is escaped);
 * *odd: the parity of the run that reaches the block's end (in: the one that reached the
 * end of the block before). A chunk has few backslashes: a loop over their runs. */
static inline uint64_t tok_object_escaped(uint64_t slash, int *odd) {
    uint64_t escaped = 0, b = slash;
    int carried = *odd;
    *odd = 0;
    if (carried && !(b & 1)) {  /* the run before ended with that block */
        escaped = 1;
        carried = 0;
    }
    while (b) {
        int start = __builtin_ctzll(b);
        uint64_t run = b >> start;
        int length = run == ~(uint64_t)0 ? 64 : __builtin_ctzll(~run);
        int parity = (length & 1) ^ (start == 0 ? carried : 0);
        int end = start + length;
        carried = 0;
        if (end >= 64) {
            *odd = parity;
            break;
        }
        if (parity)
            escaped |= (uint64_t)1 << end;
        b &= ~(uint64_t)0 << end;
    }
    return escaped;
}

/* One block of the members from its masks (p: its bytes, read at its brackets); 1 to go on,
 * 0 when they are not members, -1 when a backslash is outside the strings; *strings: bit k
 * set when byte k is in a string or opens one (the memo keeps them) */
TOK_OB_STEP_TARGET
static inline int tok_object_step(const unsigned char *p, const tok_object_masks *m,
                                  tok_object_state *s, uint64_t *strings) {
    uint64_t quotes = m->quote, in_string, open_quotes, nested = 0, nested_opens = 0, plain,
             tokens, seps, colons, commas, ps, pt, pa, bad;
    if (m->slash | (uint64_t)s->odd_slashes)
        quotes &= ~tok_object_escaped(m->slash, &s->odd_slashes);
    /* bit k: inside a string (its opening quote in, its closing quote out) */
    in_string = tok_object_prefix_xor(quotes) ^ s->in_string;
    s->in_string = (uint64_t)((int64_t)in_string >> 63);
    *strings = in_string;
    if (m->slash & ~in_string)
        return -1;
    open_quotes = quotes & in_string;
    /* the nested values: their bytes after the opening bracket, to the closing one (each
     * bracket where the depth leaves or comes back to the top level flips the bits above
     * it: a prefix xor built in the loop, off the path a multiply would add to) */
    if (s->depth > 0 || (m->bracket & ~in_string)) {
        uint64_t brackets = m->bracket & ~in_string;
        nested = s->depth > 0 ? ~(uint64_t)0 : 0;
        while (brackets) {
            int k = __builtin_ctzll(brackets);
            if (p[k] & 2) {  /* '[' 5B, '{' 7B; ']' 5D, '}' 7D */
                if (s->depth++ == 0) {
                    nested_opens |= (uint64_t)1 << k;
                    nested ^= ~(uint64_t)1 << k;  /* the bits above k */
                }
            } else {
                if (s->depth == 0)
                    return 0;  /* closes the object before its last brace */
                if (--s->depth == 0)
                    nested ^= ~(uint64_t)1 << k;
            }
            brackets &= brackets - 1;
        }
    }
    plain = m->plain & ~in_string;
    tokens = (open_quotes | nested_opens | (plain & ~(plain << 1 | s->plain_before))) & ~nested;
    s->plain_before = plain >> 63;
    colons = m->colon & ~in_string & ~nested;
    commas = m->comma & ~in_string & ~nested;
    seps = colons | commas;
    /* the running parities: of the separators, of the tokens, and of both */
    ps = tok_object_prefix_xor(seps) ^ s->seps;
    pt = tok_object_prefix_xor(tokens) ^ s->tokens;
    pa = ps ^ pt;
    bad = (tokens & ~pa) | (seps & pa)  /* token, separator, token, ... */
        | (colons & ~ps) | (commas & ps)  /* ':' ',' ':' ... */
        | (tokens & pt & ~open_quotes);  /* the keys are strings */
    s->seps = (uint64_t)((int64_t)ps >> 63);
    s->tokens = (uint64_t)((int64_t)pt >> 63);
    s->seen |= tokens | seps;
    s->line |= m->line;
    return bad == 0;
}

static inline int tok_object_line_end(unsigned char c) {
    return c == 10 || c == 13;
}

/* The members' bytes, between the braces of d[:n] (BOM and whitespace around them), into
 * *p and *length, and whether that whitespace has a LF or CR (before: into s->line, after:
 * into *trailing_line): 0 when the text has no such braces */
static inline int tok_object_frame(const unsigned char *d, Py_ssize_t n,
                                   const unsigned char **p, Py_ssize_t *length,
                                   tok_object_state *s, int *trailing_line) {
    Py_ssize_t o = 0, e = n;
    if (n >= 3 && d[0] == 0xEF && d[1] == 0xBB && d[2] == 0xBF)
        o = 3;
    while (o < n && tok_object_ws(d[o]))
        s->line |= (uint64_t)tok_object_line_end(d[o++]);
    while (e > o && tok_object_ws(d[e - 1]))
        *trailing_line |= tok_object_line_end(d[--e]);
    if (e - o < 2 || d[o] != '{' || d[e - 1] != '}')
        return 0;
    *p = d + o + 1;
    *length = e - o - 2;
    return 1;
}

/* the answer once every block is read: nothing open, and {} or token : token (, token :
 * token)* */
static inline int tok_object_end(const tok_object_state *s) {
    if (s->in_string || s->depth)
        return 0;
    return !s->seen || (s->seps && !s->tokens);
}

/* The blocks of the members p[:length] from offset i (a multiple of 64) on, from state *s:
 * 1 when all were read, else 0 or -1 (as tok_object_step); after[b], for each block b under
 * TOK_OBJECT_MEMO_BLOCKS read whole, the state after it, and strings[b] (whole or not) its
 * string bits. AVX2 or NEON: 64 bytes are read at a time, so the last bytes are copied into
 * a block of spaces. */
TOK_OB_WHOLE_TARGET
static int tok_object_blocks_whole(const unsigned char *p, Py_ssize_t length, Py_ssize_t i,
                                   tok_object_state *s, tok_object_state *after,
                                   uint64_t *strings) {
    tok_object_masks m;
    unsigned char last[64];
    uint64_t bits;
    int r;
    for (; i + 64 <= length; i += 64) {
        tok_object_classify_whole(p + i, &m);
        r = tok_object_step(p + i, &m, s, &bits);
        if (r <= 0)
            return r;
        if (i < 64 * TOK_OBJECT_MEMO_BLOCKS) {
            after[i / 64] = *s;
            strings[i / 64] = bits;
        }
    }
    if (i < length) {  /* the last bytes, and spaces: they change nothing */
        memset(last, ' ', sizeof(last));
        memcpy(last, p + i, (size_t)(length - i));
        tok_object_classify_whole(last, &m);
        r = tok_object_step(last, &m, s, &bits);
        if (i < 64 * TOK_OBJECT_MEMO_BLOCKS)
            strings[i / 64] = bits;
        return r;
    }
    return 1;
}

#  if TOK_OBJECT_X86
__attribute__((target(TOK_OB_512)))
static int tok_object_blocks_avx512(const unsigned char *p, Py_ssize_t length, Py_ssize_t i,
                                    tok_object_state *s, tok_object_state *after,
                                    uint64_t *strings) {
    tok_object_masks m;
    uint64_t bits;
    int r;
    for (; i < length; i += 64) {  /* bytes past the end: never read at a bracket */
        tok_object_classify_avx512(p + i, length - i, &m);
        r = tok_object_step(p + i, &m, s, &bits);
        if (r <= 0)
            return r;
        if (i < 64 * TOK_OBJECT_MEMO_BLOCKS) {
            strings[i / 64] = bits;
            after[i / 64] = *s;  /* a last block not whole: never taken (blocks counts it out) */
        }
    }
    return 1;
}

/* Bit k: a[k] and b[k] differ, for k < 32 */
__attribute__((target("avx2")))
static inline uint32_t tok_object_differ32(const unsigned char *a, const unsigned char *b) {
    return ~(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(
        _mm256_loadu_si256((const __m256i *)(const void *)a),
        _mm256_loadu_si256((const __m256i *)(const void *)b)));
}

/* How many bytes a[:n] and b[:n] have in common from the start, 32 a step */
__attribute__((target("avx2")))
static inline Py_ssize_t tok_object_same_start(const unsigned char *a, const unsigned char *b,
                                               Py_ssize_t n) {
    Py_ssize_t i = 0;
    uint32_t differ;
    for (; i + 32 <= n; i += 32)
        if ((differ = tok_object_differ32(a + i, b + i)) != 0)
            return i + __builtin_ctz(differ);
    if (i < n && n >= 32) {  /* the last 32 bytes: those before i are the same */
        differ = tok_object_differ32(a + n - 32, b + n - 32);
        return differ ? n - 32 + __builtin_ctz(differ) : n;
    }
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

/* How many bytes the texts ending just before a and b have in common at their ends, at
 * most n, 32 a step */
__attribute__((target("avx2")))
static inline Py_ssize_t tok_object_same_end(const unsigned char *a, const unsigned char *b,
                                             Py_ssize_t n) {
    Py_ssize_t k = 0;
    uint32_t differ;
    for (; k + 32 <= n; k += 32)
        if ((differ = tok_object_differ32(a - k - 32, b - k - 32)) != 0)
            return k + __builtin_clz(differ);
    if (k < n && n >= 32) {  /* the first 32 of the n bytes: those after them are the same */
        differ = tok_object_differ32(a - n, b - n);
        return differ ? n - 32 + __builtin_clz(differ) : n;
    }
    while (k < n && a[-k - 1] == b[-k - 1])
        k++;
    return k;
}
#  else
/* The same, 8 bytes a step (aarch64: little-endian, the first byte the lowest) */
static inline Py_ssize_t tok_object_same_start(const unsigned char *a, const unsigned char *b,
                                               Py_ssize_t n) {
    Py_ssize_t i = 0;
    uint64_t x, y;
    for (; i + 8 <= n; i += 8) {
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        if (x != y)
            return i + (__builtin_ctzll(x ^ y) >> 3);
    }
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

static inline Py_ssize_t tok_object_same_end(const unsigned char *a, const unsigned char *b,
                                             Py_ssize_t n) {
    Py_ssize_t k = 0;
    uint64_t x, y;
    for (; k + 8 <= n; k += 8) {
        memcpy(&x, a - k - 8, 8);
        memcpy(&y, b - k - 8, 8);
        if (x != y)
            return k + (__builtin_clzll(x ^ y) >> 3);
    }
    while (k < n && a[-k - 1] == b[-k - 1])
        k++;
    return k;
}
#  endif

/* Whether p[:n] may lie inside a string and leave the members as they are: no quote (which
 * would end it), no LF or CR (which the one-line answer counts) */
static inline int tok_object_in_string_bytes(const unsigned char *p, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (p[i] == '"' || p[i] == '\n' || p[i] == '\r')
            return 0;
    return 1;
}

/* Whether the memo's whole text T answers for d[:n], whose first `same` bytes are T's: d is
 * T with the bytes of one string changed. From the first byte where they differ to the last,
 * T's and d's bytes (X in d, Y in T) hold no quote, LF or CR, and T is inside a string just
 * before them (so Y lies in that one string, and X in its place); the byte before the rest
 * is no backslash in either (so a quote there is a quote in both). A backslash in X or Y
 * escapes no quote of its own text, and nothing after them reads how they began: d's
 * members are T's with the string's bytes changed, an object whose lead, closing brace and
 * line ends are T's. Then *line is T's; 0 when this does not show d's answer. */
static inline int tok_object_memo_answers(const tok_object_memo *memo, const unsigned char *d,
                                          Py_ssize_t n, Py_ssize_t same, int *line) {
    const unsigned char *t = memo->text;
    Py_ssize_t m = memo->stored, k = same - 1 - memo->start, rest;
    if (same == n && same == m) {
        *line = memo->line;
        return 1;
    }
    if (k < 0 || k >= memo->members || !((memo->strings[k >> 6] >> (k & 63)) & 1))
        return 0;
    rest = tok_object_same_end(t + m, d + n, (m < n ? m : n) - same);
    if (t[m - rest - 1] == '\\' || d[n - rest - 1] == '\\'
            || !tok_object_in_string_bytes(d + same, n - rest - same)
            || !tok_object_in_string_bytes(t + same, m - rest - same))
        return 0;
    *line = memo->line;
    return 1;
}

/* The kernel's answer, with the memo (or NULL): the kept text's when the text differs from
 * it only inside a string; else its blocks skipped as far as the text begins with their
 * bytes, and the memo refilled from a text that is an object. */
static inline int tok_object_text_kernel(int kernel, const unsigned char *d, Py_ssize_t n,
                                         int *line, tok_object_memo *memo) {
    tok_object_state s = {0, 0, 0, 0, 0, 0, 0, 0}, after[TOK_OBJECT_MEMO_BLOCKS];
    uint64_t strings[TOK_OBJECT_MEMO_BLOCKS];
    const unsigned char *p;
    Py_ssize_t length, i = 0, start, same = 0, keep;
    int r, trailing = 0, kept = 0, whole, fits;
    if (memo != NULL) {
        memo->taken = 0;
        if (memo->stored) {
            same = tok_object_same_start(memo->text, d, memo->stored < n ? memo->stored : n);
            if (memo->whole && tok_object_memo_answers(memo, d, n, same, line)) {
                memo->taken = TOK_OBJECT_MEMO_WHOLE;
                return 1;
            }
        }
    }
    if (!tok_object_frame(d, n, &p, &length, &s, &trailing))
        return 0;
    start = p - d;
    whole = length / 64 < TOK_OBJECT_MEMO_BLOCKS ? (int)(length / 64) : TOK_OBJECT_MEMO_BLOCKS;
    if (memo != NULL && memo->stored && memo->start == start && same > start) {
        /* the blocks kept that this text begins with (its lead too: the same state before) */
        kept = (int)((same - start) / 64);
        if (kept > memo->blocks)
            kept = memo->blocks;
        if (kept > whole)
            kept = whole;
        if (kept) {
            s = memo->after[kept - 1];
            i = 64 * kept;
            memo->taken = kept;  /* the string bits of those blocks are the memo's too */
        }
    }
#  if TOK_OBJECT_X86
    r = kernel == TOK_OBJECT_WITH_AVX512
        ? tok_object_blocks_avx512(p, length, i, &s, after, strings)
        : tok_object_blocks_whole(p, length, i, &s, after, strings);
#  else
    (void)kernel;
    r = tok_object_blocks_whole(p, length, i, &s, after, strings);
#  endif
    if (r <= 0)
        return r;
    *line = s.line != 0 || trailing;
    r = tok_object_end(&s);
    if (r && memo != NULL && start <= TOK_OBJECT_MEMO_LEAD) {
        /* this text is kept: whole when it fits, else its lead and whole blocks */
        fits = n <= TOK_OBJECT_MEMO_TEXT && length <= 64 * TOK_OBJECT_MEMO_BLOCKS;
        keep = fits ? n : start + 64 * whole;
        for (int b = kept; b < whole; b++)
            memo->after[b] = after[b];
        for (int b = kept; b < TOK_OBJECT_MEMO_BLOCKS && 64 * b < length; b++)
            memo->strings[b] = strings[b];
        memcpy(memo->text + same, d + same, (size_t)(keep > same ? keep - same : 0));
        memo->start = start;
        memo->members = length;
        memo->stored = keep;
        memo->whole = fits;
        memo->line = *line;
        memo->blocks = whole;
    }
    return r;
}
#  undef TOK_OB_512
#endif /* TOK_OBJECT_VECTOR */

/* 1 or 0 from the kernel, or -1: the scalar check decides (no kernel here, or a backslash
 * outside the strings); when 1, *line says whether the text has a LF or CR. memo: a
 * tok_object_memo of the caller's (the relay's), or NULL. kernel: TOK_OBJECT_WITH_AVX2,
 * _AVX512 or _NEON where the CPU has it (the tests run each; AVX-512 asked of a CPU with
 * AVX2 only runs AVX2), else none. */
static inline int tok_object_text_with(int kernel, const unsigned char *d, Py_ssize_t n,
                                       int *line, tok_object_memo *memo) {
#if TOK_OBJECT_X86
    if (kernel == TOK_OBJECT_WITH_AVX512 && tok_object_kernel == TOK_OBJECT_WITH_AVX512)
        return tok_object_text_kernel(TOK_OBJECT_WITH_AVX512, d, n, line, memo);
    if ((kernel == TOK_OBJECT_WITH_AVX2 || kernel == TOK_OBJECT_WITH_AVX512)
        && tok_object_kernel >= TOK_OBJECT_WITH_AVX2)
        return tok_object_text_kernel(TOK_OBJECT_WITH_AVX2, d, n, line, memo);
#elif TOK_OBJECT_NEON
    if (kernel == TOK_OBJECT_WITH_NEON && tok_object_kernel == TOK_OBJECT_WITH_NEON)
        return tok_object_text_kernel(TOK_OBJECT_WITH_NEON, d, n, line, memo);
#endif
    (void)kernel;
    (void)d;
    (void)n;
    (void)line;
    (void)memo;
    return -1;
}

/* the kernel tok_object_init picked */
static inline int tok_object_text(const unsigned char *d, Py_ssize_t n, int *line,
                                  tok_object_memo *memo) {
    return tok_object_text_with(tok_object_kernel, d, n, line, memo);
}

#endif
