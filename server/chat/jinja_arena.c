/* The bump allocator behind parsed templates and renders. */
#include <stdlib.h>
#include <string.h>

#include "server/chat/jinja_internal.h"

struct jj_arena_block {
    struct jj_arena_block *next;
    size_t used, size;
    _Alignas(16) unsigned char data[];
};

#define JJ_ARENA_MIN_BLOCK (64 * 1024)

void jj_arena_init(struct jj_arena *a, size_t limit)
{
    a->head = NULL;
    a->total = 0;
    a->limit = limit;
}

void jj_arena_free(struct jj_arena *a)
{
    struct jj_arena_block *b = a->head;
    while (b) {
        struct jj_arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
    a->total = 0;
}

void *jj_arena_alloc_raw(struct jj_arena *a, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    if (size == 0)
        size = 16;
    struct jj_arena_block *b = a->head;
    if (!b || b->size - b->used < size) {
        size_t bsize = size > JJ_ARENA_MIN_BLOCK ? size : JJ_ARENA_MIN_BLOCK;
        /* grow blocks with the arena so big renders take few mallocs */
        if (a->total / 4 > bsize)
            bsize = a->total / 4 > size ? a->total / 4 : size;
        if (a->limit && a->total + bsize + sizeof *b > a->limit) {
            bsize = size;
            if (a->total + bsize + sizeof *b > a->limit)
                return NULL;
        }
        b = malloc(sizeof *b + bsize);
        if (!b)
            return NULL;
        b->next = a->head;
        b->used = 0;
        b->size = bsize;
        a->head = b;
        a->total += bsize + sizeof *b;
    }
    void *p = b->data + b->used;
    b->used += size;
    return p;
}

void *jj_arena_alloc(struct jj_arena *a, size_t size)
{
    void *p = jj_arena_alloc_raw(a, size);
    if (p)
        memset(p, 0, size);
    return p;
}

char *jj_arena_strndup(struct jj_arena *a, const char *s, size_t n)
{
    char *p = jj_arena_alloc(a, n + 1);
    if (p && n)
        memcpy(p, s, n);
    return p;
}
