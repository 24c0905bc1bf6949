/* The types of the object-text kernels (_json_object.h) that a caller keeps: the state carried
 * from block to block, and the memo a relay keeps of its last object. Apart so that a module
 * holding a memo (_relay_c) includes no kernel. */
#ifndef TOK_JSON_OBJECT_MEMO_H
#define TOK_JSON_OBJECT_MEMO_H

#include <Python.h>
#include <stdint.h>

/* What is carried from block to block */
typedef struct {
    uint64_t in_string;  /* all ones: the block starts inside a string */
    uint64_t seps, tokens;  /* all ones: an odd number of them so far */
    uint64_t plain_before;  /* 1: the byte before the block is plain */
    uint64_t seen;  /* any token or separator so far */
    uint64_t line;  /* any LF or CR so far */
    Py_ssize_t depth;  /* of the nested value the block starts in (0: the top level) */
    int odd_slashes;  /* the block starts after an odd run of backslashes */
} tok_object_state;

/* The chunks of one stream are alike: a chat completion's id, object, created, model and
 * "choices" begin every chunk, the same bytes, and its text is the one string that changes
 * between them. The memo keeps the last text that was an object: its bytes (up to
 * TOK_OBJECT_MEMO_TEXT, else its first blocks'), the state after each of its first
 * TOK_OBJECT_MEMO_BLOCKS blocks of members, and which of its members' bytes lie in a string.
 * A text that differs from it only inside one of its strings is an object too, with no
 * block read (tok_object_memo_answers); one that begins with the same bytes goes on from
 * the state after its last block of them. 1,160 bytes a relay (x86-64), no heap. */
#define TOK_OBJECT_MEMO_BLOCKS 8
#define TOK_OBJECT_MEMO_LEAD 16  /* the most bytes before the members kept (BOM, spaces, "{") */
#define TOK_OBJECT_MEMO_TEXT (TOK_OBJECT_MEMO_LEAD + 64 * TOK_OBJECT_MEMO_BLOCKS + 16)
#define TOK_OBJECT_MEMO_WHOLE (-1)  /* taken: the answer came from the kept text, no block read */
typedef struct {
    Py_ssize_t start;  /* the members' first byte (the text's bytes before it: kept too) */
    Py_ssize_t members;  /* how many bytes of members the text has */
    Py_ssize_t stored;  /* the text's bytes kept (0: the memo is empty) */
    int whole;  /* stored is the whole text (else the lead and the blocks kept) */
    int line;  /* the text has a LF or CR */
    int blocks;  /* of the members whose state is kept */
    int taken;  /* how the last text used the memo (for the tests): the blocks it went on from,
                 * or TOK_OBJECT_MEMO_WHOLE */
    uint64_t strings[TOK_OBJECT_MEMO_BLOCKS];  /* bit k of word k / 64: after the members' byte
                                                * k the text is inside a string */
    tok_object_state after[TOK_OBJECT_MEMO_BLOCKS];  /* after each block kept */
    unsigned char text[TOK_OBJECT_MEMO_TEXT];
} tok_object_memo;

static inline void tok_object_memo_clear(tok_object_memo *memo) {
    memo->stored = 0;
    memo->whole = 0;
    memo->blocks = 0;
    memo->taken = 0;
}

#endif
