/* The object-text check's block masks with NEON (every aarch64 CPU), included by
 * _json_object.h, which says what each mask holds and how the members are checked on them;
 * the masks are the AVX2 kernel's, bit for bit, but for the line ends' (nonzero when the
 * block has one: the step only ORs it).
 *
 * A 64-byte block is four 16-byte vectors, classed by the same nibble lookup (two table
 * lookups). NEON has no movemask, so each class's 64-bit mask is made from its four compares
 * (0xFF or 0 a byte): each byte kept as its bit within its group of 8 (1, 2, 4, ... 128), then
 * neighbouring bytes summed three times (pairwise adds halve the bytes each time, and no two
 * summed bytes share a bit); the last sum takes two classes at once, one a 64-bit lane each.
 * The backslash mask is made only for a block that has one, and line ends are only seen
 * (the step needs no more).
 * The strings' and separators' parities are prefix xors by shifts: aarch64's carry-less
 * multiply is an optional extension.
 */
#ifndef TOKCORE_JSON_OBJECT_NEON_H
#define TOKCORE_JSON_OBJECT_NEON_H

#include <arm_neon.h>

static const uint8_t tok_object_neon_hi[16] = {TOK_OB_HI};
static const uint8_t tok_object_neon_lo[16] = {TOK_OB_LO};
static const uint8_t tok_object_neon_weight[16] = {1, 2, 4, 8, 16, 32, 64, 128,
                                                   1, 2, 4, 8, 16, 32, 64, 128};

/* four compares (0xFF or 0 a byte) -> 16 bytes: byte 4j + q holds the bits of vector j's
 * bytes 4q..4q+3; one more pairwise add (tok_object_neon_lanes) makes bytes 2j and 2j + 1
 * of the mask, vector j's 16 bits */
static inline uint8x16_t tok_object_neon_sum(uint8x16_t m0, uint8x16_t m1, uint8x16_t m2,
                                             uint8x16_t m3) {
    const uint8x16_t weight = vld1q_u8(tok_object_neon_weight);
    return vpaddq_u8(vpaddq_u8(vandq_u8(m0, weight), vandq_u8(m1, weight)),
                     vpaddq_u8(vandq_u8(m2, weight), vandq_u8(m3, weight)));
}

/* the last pairwise add of two classes' sums: their 64-bit masks, in lanes 0 and 1 */
static inline void tok_object_neon_lanes(uint8x16_t x, uint8x16_t y, uint64_t *mx,
                                         uint64_t *my) {
    uint64x2_t both = vreinterpretq_u64_u8(vpaddq_u8(x, y));
    *mx = vgetq_lane_u64(both, 0);
    *my = vgetq_lane_u64(both, 1);
}

#define TOK_OB_NEON_TEST(bit) \
    tok_object_neon_sum(vtstq_u8(cls[0], vdupq_n_u8(bit)), vtstq_u8(cls[1], vdupq_n_u8(bit)), \
                        vtstq_u8(cls[2], vdupq_n_u8(bit)), vtstq_u8(cls[3], vdupq_n_u8(bit)))

static inline void tok_object_classify_neon(const unsigned char *p, tok_object_masks *m) {
    const uint8x16_t hi_table = vld1q_u8(tok_object_neon_hi);
    const uint8x16_t lo_table = vld1q_u8(tok_object_neon_lo);
    const uint8x16_t nibble = vdupq_n_u8(0x0F);
    const uint64_t bytes = 0x0101010101010101ull;  /* a class bit in every byte of a word */
    uint8x16_t cls[4], plain;
    uint64x2_t any;
    uint64_t seen, unused;
    for (int j = 0; j < 4; j++) {
        uint8x16_t v = vld1q_u8(p + 16 * j);
        cls[j] = vandq_u8(vqtbl1q_u8(hi_table, vshrq_n_u8(v, 4)),
                          vqtbl1q_u8(lo_table, vandq_u8(v, nibble)));
    }
    /* the classes anywhere in the block: a backslash or a line end is rare, and the step
     * only needs to know whether the block has a line end, so neither mask is made when the
     * block has none (the line "mask" is that: nonzero when it has one) */
    any = vreinterpretq_u64_u8(vorrq_u8(vorrq_u8(cls[0], cls[1]), vorrq_u8(cls[2], cls[3])));
    seen = vgetq_lane_u64(any, 0) | vgetq_lane_u64(any, 1);
    m->line = seen & bytes * TOK_OB_LINE;
    plain = tok_object_neon_sum(vceqzq_u8(cls[0]), vceqzq_u8(cls[1]), vceqzq_u8(cls[2]),
                                vceqzq_u8(cls[3]));
    tok_object_neon_lanes(TOK_OB_NEON_TEST(TOK_OB_QUOTE), TOK_OB_NEON_TEST(TOK_OB_BRACKET),
                          &m->quote, &m->bracket);
    tok_object_neon_lanes(TOK_OB_NEON_TEST(TOK_OB_COLON), TOK_OB_NEON_TEST(TOK_OB_COMMA),
                          &m->colon, &m->comma);
    if (seen & bytes * TOK_OB_SLASH) {
        tok_object_neon_lanes(plain, TOK_OB_NEON_TEST(TOK_OB_SLASH), &m->plain, &m->slash);
    } else {
        tok_object_neon_lanes(plain, plain, &m->plain, &unused);
        m->slash = 0;
    }
}
#undef TOK_OB_NEON_TEST

/* bit k: the parity of the bits of x at or below k */
static inline uint64_t tok_object_prefix_xor(uint64_t x) {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    return x;
}

#endif
