/* The list of a MessagePack array's ids, made as the array is read (msgpack_to_ids).
 *
 * Reading an item waits for the one before it (its tag is where that one ends: a chain of a
 * few cycles an item), and making a list item of the shared int cache (_intfast.h) waits on
 * memory (the table's slot, the int's refcount: random places for random ids). Done one
 * after the other, a block read then its ints made, the two waits add up; here the reader's
 * fast steps make the int of the item read TOK_LIST_LAG items before, so that the processor
 * runs both at once: each item's slot is prefetched when it is read, its int half way, as
 * tok_fill_ids does. Needs the GIL (it makes ints).
 */
#ifndef TOKCORE_IDLIST_H
#define TOKCORE_IDLIST_H

#include "_intfast.h"
#include "_wire_msgpack.h"

#define TOK_LIST_LAG 32

typedef struct {
    PyObject **table;  /* the shared ints */
    PyObject **items;  /* the list's items for the block's ids */
    size_t made;       /* items made so far */
    int failed;        /* an int could not be made (its exception is set) */
} tok_list_fill;

/* the items of the block's ids below `upto` */
static inline void tok_list_make(tok_list_fill *f, const unsigned char *block, size_t upto) {
    for (; f->made < upto && !f->failed; f->made++) {
        PyObject *obj = tok_id_object(f->table, tok_load_le32(block + 4 * f->made));
        if (obj == NULL) {
            f->failed = 1;
            return;
        }
        f->items[f->made] = obj;
    }
}

/* after id k was stored: its slot asked for; once LAG ids are stored past the items made
 * (the ones before a stop were all made by done()), the int of id k - LAG / 2 asked for and
 * the item of id k - LAG made (after a failure, none: `made` stays) */
static TOK_MP_INLINE void tok_list_each(void *ctx, const unsigned char *block, size_t k) {
    tok_list_fill *f = (tok_list_fill *)ctx;
    uint32_t v = (uint32_t)tok_load_le32(block + 4 * k);
    if (TOK_ID_CACHE_ENABLED && v < (uint32_t)TOK_ID_CACHE_LIMIT) TOK_PREFETCH_READ(f->table + v);
    if (f->made + TOK_LIST_LAG == k) {
        if (TOK_ID_CACHE_ENABLED) {
            uint32_t w = (uint32_t)tok_load_le32(block + 4 * (k - TOK_LIST_LAG / 2));
            PyObject *next = w < (uint32_t)TOK_ID_CACHE_LIMIT ? TOK_ID_SLOT(&f->table[w]) : NULL;
            if (next != NULL) TOK_PREFETCH_WRITE(next);
        }
        PyObject *obj = tok_id_object(f->table, tok_load_le32(block + 4 * f->made));
        if (obj == NULL) {
            f->failed = 1;
            return;
        }
        f->items[f->made++] = obj;
    }
}

/* the reader's fast steps stopped, or it read an item exactly: every item below k made */
static TOK_MP_INLINE void tok_list_done(void *ctx, const unsigned char *block, size_t k) {
    tok_list_make((tok_list_fill *)ctx, block, k);
}

/* Up to cap ids of r read into block (4 KiB of int32, say) and made items[0:got] of the
 * shared ints; 0, or -1 with the exception set when an int could not be made. */
static int tok_mp_read_list(tok_mp_reader *r, const unsigned char *s, size_t n,
                            unsigned char *block, size_t cap, PyObject **table,
                            PyObject **items, size_t *got) {
    tok_list_fill f = {table, items, 0, 0};
    *got = tok_mp_read_with(r, s, n, block, cap, tok_list_each, tok_list_done, &f);
    return f.failed ? -1 : 0;
}

#endif
