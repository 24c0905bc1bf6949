/* Callgrind's client requests for bench/guard.py, called from Python through ctypes: zero
 * the counters before a stretch of work and dump them, labelled, after it, so that one
 * process under callgrind counts every case (Python's start-up, about 0.3 G instructions
 * with tokcore imported, is paid once instead of twice per case). Outside valgrind the
 * requests do nothing. */
#include <valgrind/callgrind.h>

void tok_marks_zero(void) { CALLGRIND_ZERO_STATS; }

void tok_marks_dump(const char *label) { CALLGRIND_DUMP_STATS_AT(label); }
