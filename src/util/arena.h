/* A bump allocator: many small allocations freed together (IR strings and
 * arrays belong to their graph's arena). */
#ifndef SMELT_UTIL_ARENA_H
#define SMELT_UTIL_ARENA_H

#include <stddef.h>

typedef struct arena_block arena_block;
typedef struct arena {
  arena_block *head;
  size_t total;
} arena;

void arena_init(arena *a);
void arena_free(arena *a);
/* Zeroed, 16-byte aligned.  NULL on allocation failure. */
void *arena_alloc(arena *a, size_t n);
/* Copies n bytes and appends a NUL.  NULL on failure. */
char *arena_strndup(arena *a, const char *s, size_t n);
char *arena_strdup(arena *a, const char *s);

#endif
