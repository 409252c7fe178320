/* Greedy-by-size, best-fit placement of buffers in one arena (see memplan.h).
 *
 * Complexity: O(n log n) to sort and compress lifetimes, plus per buffer
 * O(log n + overlapping placed buffers + the compressed steps it lives),
 * and the best fit's sort of the overlapping spans: near-linear while few
 * buffers are live at once (was: every placed buffer scanned per buffer). */
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

static int overlaps(const mp_buffer *a, const mp_buffer *b) { /* for memplan_check */
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

/* The placed buffers, found by lifetime.  Steps are compressed to the
 * distinct first/last values.  A buffer overlapping [f, l] either is live at
 * f (a stabbing query on a segment tree where each placed buffer sits in the
 * O(log T) nodes that tile its lifetime) or starts in (f, l] (lists of
 * placed buffers by first step). */
typedef struct placed_index {
  int P;            /* leaves of the segment tree (a power of two) */
  int *head;        /* per tree node: first entry, -1 none */
  int *e_buf, *e_next, n_e, cap_e; /* entries: buffer, next in the node */
  int *s_head, *s_next; /* per compressed step: placed buffers starting there */
} placed_index;

static smelt_status pi_add(placed_index *x, int node, int buf) {
  if (x->n_e == x->cap_e) {
    int nc = x->cap_e ? x->cap_e * 2 : 1024;
    int *nb = realloc(x->e_buf, sizeof(int) * (size_t)nc);
    if (nb) x->e_buf = nb;
    int *nn = realloc(x->e_next, sizeof(int) * (size_t)nc);
    if (nn) x->e_next = nn;
    if (!nb || !nn) return err_nomem("memory plan", sizeof(int) * (size_t)nc * 2);
    x->cap_e = nc;
  }
  x->e_buf[x->n_e] = buf;
  x->e_next[x->n_e] = x->head[node];
  x->head[node] = x->n_e++;
  return SMELT_OK;
}

static smelt_status pi_insert(placed_index *x, int buf, int f, int l) {
  x->s_next[buf] = x->s_head[f];
  x->s_head[f] = buf;
  smelt_status st = SMELT_OK;
  for (int lo = f + x->P, hi = l + x->P + 1; lo < hi && !st; lo >>= 1, hi >>= 1) {
    if (lo & 1) st = pi_add(x, lo++, buf);
    if (hi & 1 && !st) st = pi_add(x, --hi, buf);
  }
  return st;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

static int coord(const int *c, int n, int v) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (c[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static span occupied(const mp_buffer *o) { return (span){o->offset, o->offset + align_up(o->size)}; }

/* O(n log n) plus, per buffer, the buffers it overlaps and the (compressed)
 * steps it lives: near-linear while few buffers are live at once. */
smelt_status memplan_solve(mp_buffer *b, int n, size_t *total) {
  *total = 0;
  if (n <= 0) return SMELT_OK;
  int *order = malloc(sizeof(int) * (size_t)n), *cs = malloc(sizeof(int) * (size_t)n * 2);
  int *cf = malloc(sizeof(int) * (size_t)n), *cl = malloc(sizeof(int) * (size_t)n);
  span *occ = malloc(sizeof(span) * (size_t)n);
  placed_index x = {0};
  int T = 0;
  smelt_status st = SMELT_OK;
  if (order && cs && cf && cl && occ) {
    for (int i = 0; i < n; i++) { /* an interval given backwards is taken as [last, first] */
      cs[T++] = b[i].first < b[i].last ? b[i].first : b[i].last;
      cs[T++] = b[i].first < b[i].last ? b[i].last : b[i].first;
    }
    qsort(cs, (size_t)T, sizeof(int), cmp_int);
    int u = 0;
    for (int i = 0; i < T; i++)
      if (!u || cs[i] != cs[u - 1]) cs[u++] = cs[i];
    T = u;
    for (int i = 0; i < n; i++) {
      cf[i] = coord(cs, T, b[i].first < b[i].last ? b[i].first : b[i].last);
      cl[i] = coord(cs, T, b[i].first < b[i].last ? b[i].last : b[i].first);
    }
    for (x.P = 1; x.P < T; x.P *= 2) {}
    x.head = malloc(sizeof(int) * (size_t)x.P * 2);
    x.s_head = malloc(sizeof(int) * (size_t)T);
    x.s_next = malloc(sizeof(int) * (size_t)n);
  }
  if (!order || !cs || !cf || !cl || !occ || !x.head || !x.s_head || !x.s_next) {
    st = err_nomem("memory plan", sizeof(int) * (size_t)n * 8);
  } else {
    for (int i = 0; i < 2 * x.P; i++) x.head[i] = -1;
    for (int i = 0; i < T; i++) x.s_head[i] = -1;
    for (int i = 0; i < n; i++) order[i] = i;
    qsort_r(order, (size_t)n, sizeof *order, cmp_size_desc, b);
  }
  for (int oi = 0; oi < n && !st; oi++) {
    int ci = order[oi];
    mp_buffer *cur = &b[ci];
    cur->offset = 0;
    if (!cur->size) continue;
    if (cur->size > SIZE_MAX / 2) {
      st = err_set(SMELT_ERR_NOMEM, "memory plan: a buffer of %zu bytes is too large", cur->size);
      break;
    }
    size_t need = align_up(cur->size);
    int n_occ = 0;
    for (int node = cf[ci] + x.P; node >= 1; node >>= 1) /* live at its first step */
      for (int e = x.head[node]; e >= 0; e = x.e_next[e]) occ[n_occ++] = occupied(&b[x.e_buf[e]]);
    for (int t = cf[ci] + 1; t <= cl[ci]; t++) /* starting later in its lifetime */
      for (int j = x.s_head[t]; j >= 0; j = x.s_next[j]) occ[n_occ++] = occupied(&b[j]);
    cur->offset = best_fit(occ, n_occ, need);
    if (cur->offset > SIZE_MAX / 2 - need) {
      st = err_set(SMELT_ERR_NOMEM, "memory plan: the arena would exceed the address space");
      break;
    }
    if (cur->offset + need > *total) *total = cur->offset + need;
    st = pi_insert(&x, ci, cf[ci], cl[ci]);
  }
  free(order);
  free(cs);
  free(cf);
  free(cl);
  free(occ);
  free(x.head);
  free(x.e_buf);
  free(x.e_next);
  free(x.s_head);
  free(x.s_next);
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
