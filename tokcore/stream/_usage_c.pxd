# The usage rewrite of _usage_c, for the relay's Cython twin (cimport tokcore.stream._usage_c).

from tokcore.members._members_c cimport tok_object_memo

cdef enum:
    TOK_MAX_EDITS = 4  # a count or two replaced, cached set, one group of added members
    TOK_EDIT_TEXT = 256  # the longest edit: three added members with 20-digit counts

ctypedef struct tok_edit:
    Py_ssize_t start
    Py_ssize_t end
    Py_ssize_t size
    char text[TOK_EDIT_TEXT]

ctypedef struct tok_edits:
    int count
    tok_edit edit[TOK_MAX_EDITS]

# A dialect's keys as C strings, with the counts of one relay or call.
cdef class UsageRules:
    cdef object keep  # the bytes the pointers below point into
    cdef object str_keys  # the keys as str, by KEY_* index, for keys spelled with escapes
    cdef object dialect  # _dialects.Dialect
    cdef object py  # the same rules as _usage_py.Rules (made when first asked: tok_py_rules)
    cdef const char *keys[8]
    cdef Py_ssize_t key_lens[8]
    cdef const char *key_texts[8]  # each key as JSON text with its colon: "key":
    cdef Py_ssize_t key_text_lens[8]
    cdef int path_count
    cdef int path_steps[2]
    cdef int path_key[2][2]  # KEY_* index of each step
    cdef bint has_total, has_details, add_cached, has_zeroed, single_path, cached_excluded
    cdef long long prompt, total_base, cached

# The rules of (prompt_tokens, cached_tokens, api) when they are plain (exact ints in range,
# cached at most prompt, a dialect's name): a dialect's keys, built once, with the counts
# set; None for anything else (the caller then has _usage_py.make_rules check them: its
# errors, or its rules for an int subclass).
cdef UsageRules tok_rules(object prompt_tokens, object cached_tokens, object api)
# The rules of make_rules(prompt_tokens, cached_tokens, api), with its errors.
cdef UsageRules tok_checked_rules(object prompt_tokens, object cached_tokens, object api)
# r as _usage_py.Rules (the Python paths' rules: usage over several data fields, BigEvent)
cdef object tok_py_rules(UsageRules r)

# The outcome (_dialects: NONE, REWRITTEN, ...) for the JSON text d[:n]; when REWRITTEN,
# the edits (offsets in d) in order. The byte pre-filters are applied first (memo: the
# relay's memo of its last "usage":null object, or NULL).
cdef int tok_usage_edits(UsageRules r, const unsigned char *d, Py_ssize_t n,
                         tok_edits *e, tok_object_memo *memo) except -1
# d[:n] with the edits (offsets relative to d + base) made.
cdef bytes tok_apply_edits(const char *d, Py_ssize_t n, Py_ssize_t base, const tok_edits *e)
# Whether d[:n] may hold a spelling of the key "usage" (the byte pre-filter).
cdef bint tok_may_hold_usage(const char *d, Py_ssize_t n) noexcept nogil
# Whether d[:n] ends with "usage":null} as its last top-level member (_usage_py's rule).
cdef bint tok_ends_with_null_usage(const unsigned char *d, Py_ssize_t n) noexcept nogil
# The same, and d[:n] is a JSON object text (_usage_py.no_usage's second pre-filter).
cdef bint tok_null_usage_text(const unsigned char *d, Py_ssize_t n,
                              tok_object_memo *memo) noexcept nogil
# The same, on one line: no LF or CR in d[:n] (the relay's data field).
cdef bint tok_null_usage_line(const unsigned char *d, Py_ssize_t n,
                              tok_object_memo *memo) noexcept nogil
