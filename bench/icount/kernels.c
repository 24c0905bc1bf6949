/* The kernels of tokcore/stream/_ssescan.h, tokcore/ids/_b64_core.h and tokcore/members/_json_object.h, one at
 * a time, for instruction counts (bench/instructions.py runs it under callgrind or QEMU and
 * takes the difference of two repeat counts, so start-up and the set-up of the input cancel
 * out).
 *
 *   kernels WORK KIND BYTES REPEATS
 *
 * WORK is one of the inputs below, KIND is simd (SSE2/AVX2, NEON) or portable, BYTES the
 * size of the input. It prints the kernel's result summed over the repeats, which the
 * caller checks against the other kind's. The object check has no portable kind here (its
 * scalar code is Cython's, in _members_c.pyx).
 */
#include "stream/_ssescan.h"
#include "ids/_b64_core.h"
#include "members/_json_object.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* nothing is hoisted out of the repeat loop: every call reads the buffer again */
#define BARRIER() __asm__ __volatile__("" ::: "memory")

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t next_random(void) { /* xorshift64: fixed inputs on every machine */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* A chat-completions stream as vLLM or OpenAI send it: small events, each a JSON chunk
 * with a token of text, no usage key in them (so the usage scan reads everything). */
static size_t fill_stream(char *p, size_t n) {
    static const char *words[] = {"Hello", " world", ",", " the", " quick", "\\n", " 42",
                                  " token", " fox", "."};
    size_t len = 0;
    for (;;) {
        char event[256];
        int m = snprintf(event, sizeof event,
                         "data: {\"id\":\"chatcmpl-9f2c\",\"object\":\"chat.completion.chunk\","
                         "\"created\":1718000000,\"model\":\"llama-3-70b\",\"choices\":[{"
                         "\"index\":0,\"delta\":{\"content\":\"%s\"},\"finish_reason\":null}]}"
                         "\n\n", words[next_random() % 10]);
        if (len + (size_t)m > n) break;
        memcpy(p + len, event, (size_t)m);
        len += (size_t)m;
    }
    memset(p + len, ' ', n - len); /* pad to the size asked, in the last line */
    return len;
}

/* A chat chunk ending in "usage":null (every chunk of an include_usage stream) of exactly n
 * bytes, its content padded with words: the text the relay's object check reads. */
static void fill_chunk(char *p, size_t n) {
    static const char head[] = "{\"id\":\"chatcmpl-9f2c\",\"object\":\"chat.completion.chunk\","
                               "\"created\":1718000000,\"model\":\"llama-3-70b\",\"choices\":[{"
                               "\"index\":0,\"delta\":{\"content\":\"";
    static const char tail[] = "\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}";
    size_t h = sizeof head - 1, t = sizeof tail - 1, i;
    memcpy(p, head, h);
    for (i = h; i < n - t; i++) p[i] = " the quick fox"[(i - h) % 14];
    memcpy(p + n - t, tail, t);
}

static void usage(void) {
    fprintf(stderr, "usage: kernels candidates|events|count|last|encode|decode|object "
                    "simd|portable BYTES REPEATS\n");
    exit(2);
}

int main(int argc, char **argv) {
    if (argc != 5) usage();
    const char *work = argv[1];
    int simd = strcmp(argv[2], "simd") == 0;
    if (!simd && strcmp(argv[2], "portable") != 0) usage();
    size_t n = (size_t)strtoull(argv[3], NULL, 10);
    long repeats = strtol(argv[4], NULL, 10);
    char *buf = malloc(n + 64);
    unsigned char *out = malloc(n / 3 * 4 + 64);
    if (!buf || !out || n < 256) return 2;
    long long total = 0;

    tok_b64_init();
    tok_b64_set_simd(simd);
    int is_b64 = strcmp(work, "encode") == 0 || strcmp(work, "decode") == 0;
    if (is_b64 && simd && strcmp(tok_b64_simd_name(), "scalar") == 0) {
        fprintf(stderr, "kernels: this build or CPU has no SIMD base64 kernel\n");
        return 3;
    }
    if (!is_b64 && simd && !TOK_SCAN_SIMD) {
        fprintf(stderr, "kernels: this build has no vector byte scans\n");
        return 3;
    }

    if (strcmp(work, "object") == 0) {
        int line;
        tok_object_init();
        if (!simd || tok_object_kernel == TOK_OBJECT_NONE) {
            fprintf(stderr, "kernels: no object-check kernel of this kind here\n");
            return 3;
        }
        fill_chunk(buf, n);
        for (long r = 0; r < repeats; r++) {
            BARRIER();
            total += tok_object_text((const unsigned char *)buf, (Py_ssize_t)n, &line, NULL);
        }
    } else if (strcmp(work, "encode") == 0) {
        for (size_t i = 0; i < n; i++) buf[i] = (char)next_random();
        for (long r = 0; r < repeats; r++) {
            BARRIER();
            tok_b64_encode((const unsigned char *)buf, n, out);
            total += out[r % (long)(n / 3 * 4)];
        }
    } else if (strcmp(work, "decode") == 0) {
        size_t raw = n / 4 * 3;
        for (size_t i = 0; i < raw; i++) out[i] = (unsigned char)next_random();
        tok_b64_encode(out, raw, (unsigned char *)buf); /* n / 4 * 4 characters */
        for (long r = 0; r < repeats; r++) {
            BARRIER();
            total += tok_b64_decode_fast((const unsigned char *)buf, n / 4 * 4, out);
        }
    } else {
        fill_stream(buf, n);
        Py_ssize_t len = (Py_ssize_t)n;
        if (strcmp(work, "last") == 0) /* one event longer than the read: no blank line */
            for (size_t i = 0; i + 1 < n; i++)
                if (buf[i] == '\n' && buf[i + 1] == '\n') buf[i + 1] = ' ';
        for (long r = 0; r < repeats; r++) {
            BARRIER();
            if (strcmp(work, "candidates") == 0) {
                total += simd ? TOK_SCAN_BEST(tok_next_candidate)(buf, len, 0)
                              : tok_next_candidate_portable(buf, len, 0);
            } else if (strcmp(work, "events") == 0) { /* the relay: one event after another */
                Py_ssize_t pos = 0, k;
                while ((k = simd ? TOK_SCAN_BEST(tok_first_lflf)(buf + pos, len - pos)
                                 : tok_first_lflf_portable(buf + pos, len - pos)) >= 0) {
                    pos += k + 2;
                    total++;
                }
            } else if (strcmp(work, "count") == 0) {
                total += simd ? TOK_SCAN_BEST(tok_count_event_ends)(buf, len)
                              : tok_count_event_ends_portable(buf, len);
            } else if (strcmp(work, "last") == 0) {
                total += simd ? TOK_SCAN_BEST(tok_last_lflf)(buf, len)
                              : tok_last_lflf_portable(buf, len);
            } else {
                usage();
            }
        }
    }
    printf("%lld\n", total);
    free(buf);
    free(out);
    return 0;
}
