#include "util/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct arena_block {
  arena_block *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
};

void arena_init(arena *a) { a->head = NULL; a->total = 0; }

void arena_free(arena *a) {
  arena_block *b = a->head;
  while (b) {
    arena_block *n = b->next;
    free(b);
    b = n;
  }
  a->head = NULL;
  a->total = 0;
}

void *arena_alloc(arena *a, size_t n) {
  if (n > SIZE_MAX / 2) return NULL;
  n = (n + 15) & ~(size_t)15;
  if (!a->head || a->head->cap - a->head->used < n) {
    size_t cap = n > 65536 ? n : 65536;
    arena_block *b = malloc(sizeof *b + cap);
    if (!b) return NULL;
    b->next = a->head;
    b->used = 0;
    b->cap = cap;
    a->head = b;
  }
  void *p = a->head->data + a->head->used;
  a->head->used += n;
  a->total += n;
  memset(p, 0, n);
  return p;
}

char *arena_strndup(arena *a, const char *s, size_t n) {
  char *p = arena_alloc(a, n + 1);
  if (!p) return NULL;
  if (n) memcpy(p, s, n);
  p[n] = 0;
  return p;
}

char *arena_strdup(arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }
