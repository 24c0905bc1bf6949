/* The types of the object-text kernels (_json_object.h) that a caller keeps: the state carried
 * from block to block, and the memo a relay keeps of its last event's first blocks. Apart so
 * that a module holding a memo (_relay_c) includes no kernel. */
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

/* The chunks of one stream begin alike: a chat completion's id, object, created and model,
 * then "choices", are the same bytes in every chunk. The memo keeps the state after the
 * first blocks of the last text that was an object, with those bytes; a text that begins
 * with the same bytes goes on from there. 288 bytes a relay (x86-64). */
#define TOK_OBJECT_MEMO_BLOCKS 2
#define TOK_OBJECT_MEMO_LEAD 16  /* the most bytes before the members kept (BOM, spaces, "{") */
typedef struct {
    Py_ssize_t start;  /* the members' first byte (the text's bytes before it: kept too) */
    int blocks;  /* of the members kept (0: the memo is empty) */
    int taken;  /* how many of them the last text went on from (for the tests) */
    unsigned char text[TOK_OBJECT_MEMO_LEAD + 64 * TOK_OBJECT_MEMO_BLOCKS];
    tok_object_state after[TOK_OBJECT_MEMO_BLOCKS];  /* after each block kept */
} tok_object_memo;

static inline void tok_object_memo_clear(tok_object_memo *memo) {
    memo->blocks = 0;
    memo->taken = 0;
}

#endif
