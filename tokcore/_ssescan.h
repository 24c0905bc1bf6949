/* Byte search for the SSE scanner: memmem where the C library has it, else memchr+memcmp.
 *
 * glibc, musl and the BSDs/macOS ship memmem (vectorised in glibc); MSVC does not.
 */
#ifndef TOKCORE_SSESCAN_H
#define TOKCORE_SSESCAN_H

#include <Python.h>  /* pyconfig.h defines _GNU_SOURCE, which declares memmem */
#include <string.h>

#if defined(_MSC_VER)
#  define TOK_MEMMEM_KIND "memchr+memcmp"
static inline const char *tok_memmem(const char *hay, Py_ssize_t n,
                                     const char *needle, Py_ssize_t m) {
    const char *end = hay + n;
    if (m == 0) return hay;
    while (hay + m <= end) {
        const char *p = (const char *)memchr(hay, needle[0], (size_t)(end - hay - m + 1));
        if (p == NULL) return NULL;
        if (memcmp(p, needle, (size_t)m) == 0) return p;
        hay = p + 1;
    }
    return NULL;
}
#else
#  define TOK_MEMMEM_KIND "memmem"
static inline const char *tok_memmem(const char *hay, Py_ssize_t n,
                                     const char *needle, Py_ssize_t m) {
    return (const char *)memmem(hay, (size_t)n, needle, (size_t)m);
}
#endif

#endif
