/* Base64 kernels for aarch64 (NEON is part of every aarch64 CPU, so they are chosen at
 * compile time), included by _b64_core.h, which keeps the scalar kernels for the rest.
 *
 * Both use NEON's structure loads and stores, which (de)interleave by element: vld3q takes
 * 48 bytes as the first, second and third byte of 16 groups in three registers, vst4q writes
 * four registers as 16 interleaved quads, and the other way round for decoding. The 6-bit
 * arithmetic is then plain per-byte shifts, and the alphabet is one 64-byte table lookup
 * (tbl with four registers) each way; decoding looks characters up in a 128-entry table in
 * two halves, the second with tbx, which leaves a lane alone when its index is past the
 * table.
 */
#ifndef TOKCORE_B64_NEON_H
#define TOKCORE_B64_NEON_H

#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The tables live in writable memory, filled once: a compiler that sees a constant table
 * turns it into vector constants it rebuilds inside the loop (gcc 12 did, doubling the
 * instructions of a step). */
/* 6-bit value -> its character */
static uint8_t tok_b64_neon_chars[64];
/* ASCII character -> its 6-bit value, 0xFF when it is not in the alphabet (characters from
 * 128 up are not looked up: the lookups leave their lanes at 0xFF) */
static uint8_t tok_b64_neon_values[128];

static void tok_b64_neon_init(const char *alphabet) {
    memcpy(tok_b64_neon_chars, alphabet, 64);
    memset(tok_b64_neon_values, 0xff, sizeof tok_b64_neon_values);
    for (int v = 0; v < 64; v++) tok_b64_neon_values[(unsigned char)alphabet[v]] = (uint8_t)v;
}

/* The kernels are not inlined: in their own function the 8 table registers and the 7 of a
 * step fit in the 32 vector registers; inlined into a larger caller they were spilled. */
#define TOK_B64_NEON_KERNEL __attribute__((noinline)) static

/* Encodes 48 bytes -> 64 characters per step while 48 bytes are left; returns the number of
 * bytes consumed. */
TOK_B64_NEON_KERNEL size_t tok_b64_encode_neon(const unsigned char *src, size_t n,
                                               unsigned char *out) {
    const uint8x16x4_t chars = vld1q_u8_x4(tok_b64_neon_chars);
    const uint8x16_t six = vdupq_n_u8(63);
    size_t done = 0;
    while (n - done >= 48) {
        uint8x16x3_t in = vld3q_u8(src + done);  /* bytes a, b, c of each group */
        uint8x16x4_t idx;
        idx.val[0] = vshrq_n_u8(in.val[0], 2);
        /* (a << 4) with b's top 4 bits shifted in below, then the low 6 bits of that */
        idx.val[1] = vandq_u8(vsriq_n_u8(vshlq_n_u8(in.val[0], 4), in.val[1], 4), six);
        idx.val[2] = vandq_u8(vsriq_n_u8(vshlq_n_u8(in.val[1], 2), in.val[2], 6), six);
        idx.val[3] = vandq_u8(in.val[2], six);
        uint8x16x4_t text;
        text.val[0] = vqtbl4q_u8(chars, idx.val[0]);
        text.val[1] = vqtbl4q_u8(chars, idx.val[1]);
        text.val[2] = vqtbl4q_u8(chars, idx.val[2]);
        text.val[3] = vqtbl4q_u8(chars, idx.val[3]);
        vst4q_u8(out, text);
        out += 64;
        done += 48;
    }
    return done;
}

/* Character -> value for 16 characters: 0xFF for those outside the alphabet. */
static inline uint8x16_t tok_b64_neon_lookup(uint8x16_t c, uint8x16x4_t low, uint8x16x4_t high) {
    /* tbx leaves a lane as it is when its index is 64 or more: characters 0-63 take their
     * value from the first half, 64-127 (index c - 64) from the second, the rest stay 0xFF */
    uint8x16_t v = vqtbx4q_u8(vdupq_n_u8(0xff), low, c);
    return vqtbx4q_u8(v, high, vsubq_u8(c, vdupq_n_u8(64)));
}

/* Decodes 64 characters -> 48 bytes per step, stopping before the first 64-character block
 * that holds a character outside the alphabet; returns the number of quads consumed. */
TOK_B64_NEON_KERNEL size_t tok_b64_decode_neon(const unsigned char *src, size_t nquads,
                                               unsigned char *out) {
    const uint8x16x4_t low = vld1q_u8_x4(tok_b64_neon_values);
    const uint8x16x4_t high = vld1q_u8_x4(tok_b64_neon_values + 64);
    size_t q = 0;
    while (nquads - q >= 16) {
        uint8x16x4_t in = vld4q_u8(src);  /* characters 0-3 of each quad */
        uint8x16_t v0 = tok_b64_neon_lookup(in.val[0], low, high);
        uint8x16_t v1 = tok_b64_neon_lookup(in.val[1], low, high);
        uint8x16_t v2 = tok_b64_neon_lookup(in.val[2], low, high);
        uint8x16_t v3 = tok_b64_neon_lookup(in.val[3], low, high);
        /* a value is below 64; 0xFF marks a character outside the alphabet */
        uint8x16_t any = vorrq_u8(vorrq_u8(v0, v1), vorrq_u8(v2, v3));
        if (vmaxvq_u8(any) >= 64) break;
        uint8x16x3_t bytes;
        /* the bits do not overlap, so shift-right-and-add is an or */
        bytes.val[0] = vsraq_n_u8(vshlq_n_u8(v0, 2), v1, 4);
        bytes.val[1] = vsraq_n_u8(vshlq_n_u8(v1, 4), v2, 2);
        bytes.val[2] = vsliq_n_u8(v3, v2, 6);  /* v3 with v2's low 2 bits inserted on top */
        vst3q_u8(out, bytes);
        out += 48;
        src += 64;
        q += 16;
    }
    return q;
}

#endif
