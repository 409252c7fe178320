/* Greedy-by-size, best-fit placement of buffers in one arena (see memplan.h). */
#include "plan/memplan.h"

#include <stdlib.h>

#include "util/err.h"

static size_t align_up(size_t n) { return (n + MEMPLAN_ALIGN - 1) / MEMPLAN_ALIGN * MEMPLAN_ALIGN; }

static int cmp_size_desc(const void *a, const void *b, void *ctx) {
  const mp_buffer *buf = ctx;
  int x = *(const int *)a, y = *(const int *)b;
  if (buf[x].size != buf[y].size) return buf[x].size > buf[y].size ? -1 : 1;
  if (buf[x].first != buf[y].first) return buf[x].first - buf[y].first;
  return x - y;
}

typedef struct span {
  size_t lo, hi;
} span;

static int cmp_span(const void *a, const void *b) {
  const span *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int overlaps(const mp_buffer *a, const mp_buffer *b) {
  return a->first <= b->last && b->first <= a->last;
}

/* Best gap for a buffer of `need` bytes among the occupied spans. */
static size_t best_fit(span *occ, int n_occ, size_t need) {
  qsort(occ, (size_t)n_occ, sizeof *occ, cmp_span);
  size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
  for (int i = 0; i < n_occ; i++) {
    if (occ[i].lo > cursor) {
      size_t gap = occ[i].lo - cursor;
      if (gap >= need && gap < best_gap) {
        best_gap = gap;
        best = cursor;
      }
    }
    if (occ[i].hi > cursor) cursor = occ[i].hi;
  }
  return best != SIZE_MAX ? best : cursor;
}

smelt_status memplan_solve(mp_buffer *b, int n, size_t *total) {
  *total = 0;
  if (n <= 0) return SMELT_OK;
  int *order = malloc(sizeof(int) * (size_t)n);
  int *placed = malloc(sizeof(int) * (size_t)n);
  span *occ = malloc(sizeof(span) * (size_t)n);
  if (!order || !placed || !occ) {
    free(order);
    free(placed);
    free(occ);
    return err_nomem("memory plan", sizeof(int) * (size_t)n * 4);
  }
  for (int i = 0; i < n; i++) order[i] = i;
  qsort_r(order, (size_t)n, sizeof *order, cmp_size_desc, b);
  int n_placed = 0;
  smelt_status st = SMELT_OK;
  for (int oi = 0; oi < n && !st; oi++) {
    mp_buffer *cur = &b[order[oi]];
    cur->offset = 0;
    if (!cur->size) continue;
    if (cur->size > SIZE_MAX / 2) {
      st = err_set(SMELT_ERR_NOMEM, "memory plan: a buffer of %zu bytes is too large", cur->size);
      break;
    }
    size_t need = align_up(cur->size);
    int n_occ = 0;
    for (int j = 0; j < n_placed; j++) {
      const mp_buffer *o = &b[placed[j]];
      if (overlaps(cur, o)) occ[n_occ++] = (span){o->offset, o->offset + align_up(o->size)};
    }
    cur->offset = best_fit(occ, n_occ, need);
    if (cur->offset > SIZE_MAX / 2 - need) {
      st = err_set(SMELT_ERR_NOMEM, "memory plan: the arena would exceed the address space");
      break;
    }
    if (cur->offset + need > *total) *total = cur->offset + need;
    placed[n_placed++] = order[oi];
  }
  free(order);
  free(placed);
  free(occ);
  return st;
}

int memplan_check(const mp_buffer *b, int n, size_t total) {
  for (int i = 0; i < n; i++) {
    if (!b[i].size) continue;
    if (b[i].offset % MEMPLAN_ALIGN || b[i].offset + b[i].size > total) return 0;
    for (int j = i + 1; j < n; j++) {
      if (!b[j].size || !overlaps(&b[i], &b[j])) continue;
      if (b[i].offset < b[j].offset + b[j].size && b[j].offset < b[i].offset + b[i].size) return 0;
    }
  }
  return 1;
}
