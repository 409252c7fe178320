/* Static memory planning: buffers with lifetimes over a schedule of steps are
 * placed in one arena.  Greedy by size, best fit: the largest buffers are
 * placed first, each into the smallest gap left between the already placed
 * buffers whose lifetimes overlap its own (or after them).  Two buffers share
 * bytes only if their lifetimes are disjoint. */
#ifndef SMELT_PLAN_MEMPLAN_H
#define SMELT_PLAN_MEMPLAN_H

#include <stddef.h>
#include <stdint.h>

#include "smelt.h"

#define MEMPLAN_ALIGN 64

typedef struct mp_buffer {
  size_t size;     /* bytes (0: needs no space) */
  int first, last; /* steps that write it first and read it last (inclusive) */
  size_t offset;   /* result */
} mp_buffer;

/* Places every buffer; *total receives the arena size (a multiple of
 * MEMPLAN_ALIGN).  Fails only on allocation failure or size overflow. */
smelt_status memplan_solve(mp_buffer *b, int n, size_t *total);

/* True if no two buffers with overlapping lifetimes overlap in the arena (for tests). */
int memplan_check(const mp_buffer *b, int n, size_t total);

#endif
