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

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#  define TOK_W_LE32(u) __builtin_bswap32(u)
#  define TOK_W_LE64(u) __builtin_bswap64(u)
#else
#  define TOK_W_LE32(u) (u)
#  define TOK_W_LE64(u) (u)
#endif

static inline int64_t tok_w_load64(const unsigned char *p) {
    uint64_t u;
    memcpy(&u, p, 8);
    return (int64_t)TOK_W_LE64(u);
}

static inline void tok_w_store64(unsigned char *p, int64_t v) {
    uint64_t u = TOK_W_LE64((uint64_t)v);
    memcpy(p, &u, 8);
}

/* n int32 ids at in -> n int64 ids at out (sign-extended) */
static inline void tok_widen_ids(const unsigned char *in, size_t n, unsigned char *out) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, in + 4 * i, 4);
        tok_w_store64(out + 8 * i, (int64_t)(int32_t)TOK_W_LE32(u));
    }
}

/* n int64 ids at in -> int32 ids at out while they fit; returns how many did (n: all) */
static inline size_t tok_narrow_ids(const unsigned char *in, size_t n, unsigned char *out) {
    size_t i;
    for (i = 0; i < n; i++) {
        int64_t v = tok_w_load64(in + 8 * i);
        if (v != (int64_t)(int32_t)v) break;
        uint32_t u = TOK_W_LE32((uint32_t)(int32_t)v);
        memcpy(out + 4 * i, &u, 4);
    }
    return i;
}

#endif
