/* The one test the relay's byte scans share, portable and vector loops alike: whether a JSON
 * spelling of the key "usage" may start at p[k] ('"usage"', or '\u00', the prefix of every
 * escaped letter of it), or a CR when with_cr is set. Its own header so that _ssescan.h and
 * _ssescan_neon.h both include it and neither needs the other's definitions.
 */
#ifndef TOKCORE_SSESCAN_CANDIDATE_H
#define TOKCORE_SSESCAN_CANDIDATE_H

#include <Python.h>
#include <string.h>

static inline int tok_is_candidate(const char *p, Py_ssize_t n, Py_ssize_t k, int with_cr) {
    char c = p[k];
    if (c == '"') return k + 7 <= n && memcmp(p + k, "\"usage\"", 7) == 0;
    if (c == '\\') return k + 4 <= n && memcmp(p + k, "\\u00", 4) == 0;
    return c == '\r' && with_cr;
}

#endif
