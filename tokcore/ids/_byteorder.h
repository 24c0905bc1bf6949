/* The byte order of the ids wing, in one place: token ids are little-endian int32 or int64
 * on the wire whatever the host, and MessagePack's and JSON's readers and writers take
 * words of their text in that order too. Every load and store is a memcpy (no alignment
 * assumed), one move on a little-endian host and a move and a swap on a big-endian one.
 * GIL-free: only the memory given is touched.
 */
#ifndef TOKCORE_BYTEORDER_H
#define TOKCORE_BYTEORDER_H

#include <stdint.h>
#include <string.h>

/* for the routines written once for both widths (a width argument): inlined wherever they
 * are called, so that the width is a constant there */
#if defined(__GNUC__) || defined(__clang__)
#  define TOK_WIDTH_INLINE static inline __attribute__((always_inline))
#else
#  define TOK_WIDTH_INLINE static inline
#endif

/* a host word <-> the little-endian word (the same operation both ways) */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#  define TOK_LE32(u) __builtin_bswap32(u)
#  define TOK_LE64(u) __builtin_bswap64(u)
#else
#  define TOK_LE32(u) (u)
#  define TOK_LE64(u) (u)
#endif

/* 4 or 8 bytes at p as a little-endian word: the first byte the lowest */
static inline uint32_t tok_load_u32le(const unsigned char *p) {
    uint32_t u;
    memcpy(&u, p, 4);
    return TOK_LE32(u);
}

static inline uint64_t tok_load_u64le(const unsigned char *p) {
    uint64_t u;
    memcpy(&u, p, 8);
    return TOK_LE64(u);
}

/* an int32 or int64 id loaded and stored (a loop of byte shifts is not folded into one move
 * at 8 bytes: it cost 70 instructions an id in unpack_ids(width=64)) */
static inline int32_t tok_load_le32(const unsigned char *p) {
    return (int32_t)tok_load_u32le(p);
}

static inline int64_t tok_load_le64(const unsigned char *p) {
    return (int64_t)tok_load_u64le(p);
}

static inline void tok_store_le32(unsigned char *p, int32_t v) {
    uint32_t u = TOK_LE32((uint32_t)v);
    memcpy(p, &u, 4);
}

static inline void tok_store_le64(unsigned char *p, int64_t v) {
    uint64_t u = TOK_LE64((uint64_t)v);
    memcpy(p, &u, 8);
}

/* An id of `width` bytes (4: int32, 8: int64): the routines written once for both widths
 * take it as an argument, always a constant where they are inlined, so the compiler keeps
 * one branch. */
TOK_WIDTH_INLINE int64_t tok_load_id(const unsigned char *p, int width) {
    return width == 8 ? tok_load_le64(p) : (int64_t)tok_load_le32(p);
}

TOK_WIDTH_INLINE void tok_store_id(unsigned char *p, int64_t v, int width) {
    if (width == 8)
        tok_store_le64(p, v);
    else
        tok_store_le32(p, (int32_t)v);
}

#endif
