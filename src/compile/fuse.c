/* Greedy fusion by memory traffic (see fuse.h).
 *
 * Complexity: O(e log e) to sort the edges; per edge O(FUSE_MAX_NODES) to
 * lower the candidate union, plus a cycle search that visits only steps
 * ranked between the two groups (Pearce-Kelly: O(1) along chains, bounded by
 * the steps between a producer and a far consumer otherwise) and, on a merge
 * that has such steps, a backward search and a re-ranking of them. */
#include "compile/fuse.h"
#include "compile/lower.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/quote.h"

typedef struct edge {
  int p, c;     /* producer and consumer nodes */
  size_t bytes; /* size of the value between them */
} edge;

typedef struct fstate {
  const cgraph *cg;
  fusion *f;
  int *gid;     /* per node: working group id (a node id: the group's first member) */
  int **mem;    /* per working group id: members (in execution order) */
  int *n_mem;
  bool *red;    /* per working group id: contains a reduction */
  int *seen_gen, gen;   /* per step: visited in search number gen */
  int *rank;            /* per step: topological rank (see makes_cycle) */
  int *self;            /* self[n] = n: the member list of a node in no group */
  int *fwd, *bwd, *pool; /* search results and the ranks they share */
  int n_fwd, n_bwd;
  bool *in_group; /* scratch */
} fstate;

void fusion_log(fusion *f, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (f->n_log == f->cap_log) {
    int nc = f->cap_log ? f->cap_log * 2 : 32;
    char **nl = realloc(f->log, sizeof(char *) * (size_t)nc);
    if (!nl) return; /* the log is best effort */
    f->log = nl;
    f->cap_log = nc;
  }
  char clean[1024];
  char *s = strdup(str_escape_controls(clean, sizeof clean, buf, false));
  if (s) f->log[f->n_log++] = s;
}

static size_t value_bytes(const ir_value *v) {
  int64_t n = shape_numel(v->rank, v->dims);
  size_t nb; /* packed sub-byte types: ceil(n * bits / 8) */
  return n > 0 && dtype_nbytes(v->dtype, n, &nb) ? nb : 0;
}

static bool fusable(const cgraph *cg, int n) {
  cn_kind k = cg->info[n].kind;
  return k == CN_PW || k == CN_RED;
}

static int cmp_edge(const void *a, const void *b) {
  const edge *x = a, *y = b;
  if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
  if (x->p != y->p) return x->p - y->p;
  return x->c - y->c;
}

/* The iteration space of a working group: a reduction's, else its shape. */
static void group_domain(const fstate *s, int g, int *r, int *k, int64_t *I) {
  const cgraph *cg = s->cg;
  int pick = s->mem[g][0];
  for (int i = 0; i < s->n_mem[g]; i++)
    if (cg->info[s->mem[g][i]].kind == CN_RED) pick = s->mem[g][i];
  const cn_info *in = &cg->info[pick];
  *r = in->rank;
  *k = in->kind == CN_RED ? in->k : in->rank;
  memcpy(I, in->dims, sizeof(int64_t) * SMELT_MAX_RANK);
}

static bool same_dims(int r, const int64_t *a, const int64_t *b) {
  return !r || !memcmp(a, b, sizeof(int64_t) * (size_t)r);
}

/* The cycle check works on the graph of steps: a working group, or a node
 * that is in no group (it runs as a step of its own).  rank[] holds a
 * topological order of the steps (initially the nodes' execution positions)
 * and is kept valid across merges, so a path from a to b through other
 * steps can only visit steps ranked between them: both searches below are
 * bounded by that window (Pearce & Kelly's dynamic topological order, as
 * XLA's fusion uses it). */
static int step_of(const fstate *s, int n) {
  return s->gid[n] >= 0 ? s->gid[n] : n;
}

static const int *step_members(const fstate *s, int st, int *n) {
  if (s->gid[st] < 0) {
    *n = 1;
    return &s->self[st];
  }
  *n = s->n_mem[st];
  return s->mem[st];
}

/* Steps reachable from `from` (not through b) ranked below b, into s->fwd;
 * true if one of them feeds b (merging a and b would make a cycle). */
static bool search_forward(fstate *s, int a, int b) {
  const cgraph *cg = s->cg;
  const ir_graph *g = cg->g;
  int lim = s->rank[b], head = 0;
  s->gen++;
  s->n_fwd = 0;
  s->seen_gen[a] = s->seen_gen[b] = s->gen;
  for (int from = a;; from = s->fwd[head++]) {
    int nm;
    const int *m = step_members(s, from, &nm);
    for (int i = 0; i < nm; i++) {
      const ir_node *nd = &g->nodes[m[i]];
      for (int o = 0; o < nd->n_outputs; o++) {
        int v = nd->outputs[o];
        for (int u = v < 0 ? 0 : cg->use_start[v]; v >= 0 && u < cg->use_start[v + 1]; u++) {
          int c = step_of(s, cg->use_node[u]);
          if (c == b && from != a) return true;
          if (s->seen_gen[c] == s->gen || s->rank[c] >= lim) continue;
          s->seen_gen[c] = s->gen;
          s->fwd[s->n_fwd++] = c;
        }
      }
    }
    if (head == s->n_fwd) return false;
  }
}

/* Steps that feed b (not through a) ranked above a, into s->bwd. */
static void search_backward(fstate *s, int a, int b) {
  const ir_graph *g = s->cg->g;
  int lim = s->rank[a], head = 0;
  s->gen++;
  s->n_bwd = 0;
  s->seen_gen[a] = s->seen_gen[b] = s->gen;
  for (int to = b;; to = s->bwd[head++]) {
    int nm;
    const int *m = step_members(s, to, &nm);
    for (int i = 0; i < nm; i++) {
      const ir_node *nd = &g->nodes[m[i]];
      for (int k = 0; k < nd->n_inputs; k++) {
        int v = nd->inputs[k];
        if (v < 0 || g->values[v].producer < 0) continue;
        int p = step_of(s, g->values[v].producer);
        if (s->seen_gen[p] == s->gen || s->rank[p] <= lim) continue;
        s->seen_gen[p] = s->gen;
        s->bwd[s->n_bwd++] = p;
      }
    }
    if (head == s->n_bwd) return;
  }
}

/* Would merging groups a and b (a feeds b) make a cycle through some other
 * step?  Only if a reaches b through a step ranked between them. */
static bool makes_cycle(fstate *s, int a, int b) {
  if (s->rank[a] >= s->rank[b]) return true; /* cannot happen while ranks are topological */
  return search_forward(s, a, b);
}

static const int *g_rank; /* qsort has no context argument */
static int cmp_rank(const void *x, const void *y) {
  int p = g_rank[*(const int *)x], q = g_rank[*(const int *)y];
  return (p > q) - (p < q);
}
static int cmp_int(const void *x, const void *y) {
  int p = *(const int *)x, q = *(const int *)y;
  return (p > q) - (p < q);
}

/* After a (merged, keeping id a) absorbed b: the steps that feed b ranked
 * above a go first, then a, then the steps a reaches ranked below b, in the
 * ranks they held together (each keeps its relative order; the feeders only
 * move earlier and the reached only later, so every other edge stays
 * ordered).  s->fwd must still hold search_forward(a, b). */
static void rerank(fstate *s, int a, int b) {
  int nf = s->n_fwd;
  if (!nf) { /* nothing a reaches lies between a and b: a can take b's place */
    s->rank[a] = s->rank[b];
    return;
  }
  search_backward(s, a, b);
  int nb = s->n_bwd, *pool = s->pool, n = 0;
  g_rank = s->rank;
  qsort(s->fwd, (size_t)nf, sizeof(int), cmp_rank);
  qsort(s->bwd, (size_t)nb, sizeof(int), cmp_rank);
  for (int i = 0; i < nb; i++) pool[n++] = s->rank[s->bwd[i]];
  for (int i = 0; i < nf; i++) pool[n++] = s->rank[s->fwd[i]];
  pool[n++] = s->rank[a];
  pool[n++] = s->rank[b];
  qsort(pool, (size_t)n, sizeof(int), cmp_int);
  for (int i = 0; i < nb; i++) s->rank[s->bwd[i]] = pool[i];
  s->rank[a] = pool[nb];
  for (int i = 0; i < nf; i++) s->rank[s->fwd[i]] = pool[n - nf + i];
}

/* Merged member list of a and b, in execution order. */
static int merge_members(const fstate *s, int a, int b, int *out) {
  int i = 0, j = 0, n = 0;
  const int *pos = s->cg->pos;
  while (i < s->n_mem[a] || j < s->n_mem[b]) {
    if (j >= s->n_mem[b] || (i < s->n_mem[a] && pos[s->mem[a][i]] < pos[s->mem[b][j]]))
      out[n++] = s->mem[a][i++];
    else
      out[n++] = s->mem[b][j++];
  }
  return n;
}

/* Tries to lower the union; on success kg holds its kernel IR. */
static bool try_lower(fstate *s, const int *nodes, int n, int r, int k, const int64_t *I, kir_group *kg) {
  for (int i = 0; i < n; i++) s->in_group[nodes[i]] = true;
  kir_loops lp;
  bool ok = lower_group(s->cg, nodes, n, s->in_group, r, k, I, kg) && kir_collapse(kg, &lp);
  for (int i = 0; i < n; i++) s->in_group[nodes[i]] = false;
  return ok;
}

static bool try_merge(fstate *s, int a, int b, kir_group *kg, int *tmp) {
  if (s->n_mem[a] + s->n_mem[b] > FUSE_MAX_NODES) return false;
  int ra, ka, rb, kb, r, k;
  int64_t Ia[SMELT_MAX_RANK], Ib[SMELT_MAX_RANK], I[SMELT_MAX_RANK];
  group_domain(s, a, &ra, &ka, Ia);
  group_domain(s, b, &rb, &kb, Ib);
  if (s->red[a] && s->red[b]) {
    if (ra != rb || ka != kb || !same_dims(ra, Ia, Ib)) return false;
  } else if (!s->red[a] && !s->red[b]) {
    if (ra != rb || !same_dims(ra, Ia, Ib)) return false;
  }
  const int64_t *src = s->red[b] ? Ib : Ia;
  r = s->red[b] ? rb : ra;
  k = s->red[b] ? kb : ka;
  memcpy(I, src, sizeof I);
  if (makes_cycle(s, a, b)) return false;
  int n = merge_members(s, a, b, tmp);
  return try_lower(s, tmp, n, r, k, I, kg);
}

static smelt_status commit_merge(fstate *s, int a, int b, const int *tmp, int n) {
  int *m = realloc(s->mem[a], sizeof(int) * (size_t)n);
  if (!m) return err_nomem("fusion group", sizeof(int) * (size_t)n);
  memcpy(m, tmp, sizeof(int) * (size_t)n);
  s->mem[a] = m;
  s->n_mem[a] = n;
  rerank(s, a, b);
  for (int i = 0; i < s->n_mem[b]; i++) s->gid[s->mem[b][i]] = a;
  free(s->mem[b]);
  s->mem[b] = NULL;
  s->n_mem[b] = 0;
  s->red[a] = s->red[a] || s->red[b];
  return SMELT_OK;
}

static const char *nname(const ir_graph *g, int n) {
  return *g->nodes[n].name ? g->nodes[n].name : g->nodes[n].op_type;
}

static smelt_status collect_edges(const cgraph *cg, edge **out, int *n_out) {
  const ir_graph *g = cg->g;
  int cap = 16, n = 0;
  edge *e = malloc(sizeof *e * (size_t)cap);
  if (!e) return err_nomem("fusion edges", sizeof *e * (size_t)cap);
  for (int p = 0; p < g->n_nodes; p++) {
    if (!fusable(cg, p)) continue;
    const ir_node *nd = &g->nodes[p];
    for (int o = 0; o < nd->n_outputs; o++) {
      int v = nd->outputs[o];
      if (v < 0) continue;
      for (int u = cg->use_start[v]; u < cg->use_start[v + 1]; u++) {
        int c = cg->use_node[u];
        if (!fusable(cg, c) || c == p) continue;
        if (n == cap) {
          edge *ne = realloc(e, sizeof *e * (size_t)(cap *= 2));
          if (!ne) {
            free(e);
            return err_nomem("fusion edges", sizeof *e * (size_t)cap);
          }
          e = ne;
        }
        e[n++] = (edge){p, c, value_bytes(&g->values[v])};
      }
    }
  }
  qsort(e, (size_t)n, sizeof *e, cmp_edge);
  *out = e;
  *n_out = n;
  return SMELT_OK;
}

static void fstate_free(fstate *s) {
  for (int i = 0; s->mem && i < s->cg->g->n_nodes; i++) free(s->mem[i]);
  free(s->mem);
  free(s->n_mem);
  free(s->gid);
  free(s->red);
  free(s->rank);
  free(s->self);
  free(s->fwd);
  free(s->bwd);
  free(s->pool);
  free(s->seen_gen);
  free(s->in_group);
}

static smelt_status fstate_init(fstate *s, const cgraph *cg, fusion *f) {
  memset(s, 0, sizeof *s);
  s->cg = cg;
  s->f = f;
  size_t nn = (size_t)cg->g->n_nodes + 1;
  s->gid = malloc(sizeof(int) * nn);
  s->mem = calloc(nn, sizeof(int *));
  s->n_mem = calloc(nn, sizeof(int));
  s->red = calloc(nn, sizeof(bool));
  s->rank = malloc(sizeof(int) * nn);
  s->self = malloc(sizeof(int) * nn);
  s->fwd = malloc(sizeof(int) * nn);
  s->bwd = malloc(sizeof(int) * nn);
  s->pool = malloc(sizeof(int) * (nn + 2));
  s->seen_gen = calloc(nn, sizeof(int));
  s->in_group = calloc(nn, sizeof(bool));
  if (!s->gid || !s->mem || !s->n_mem || !s->red || !s->seen_gen || !s->in_group || !s->rank ||
      !s->self || !s->fwd || !s->bwd || !s->pool)
    return err_nomem("fusion state", sizeof(int) * nn * 8);
  for (int i = 0; i < cg->g->n_nodes; i++) {
    s->gid[i] = -1;
    s->self[i] = i;
    s->rank[i] = cg->pos[i];
    if (!fusable(cg, i)) continue;
    s->gid[i] = i;
    s->mem[i] = malloc(sizeof(int));
    if (!s->mem[i]) return err_nomem("fusion group", sizeof(int));
    s->mem[i][0] = i;
    s->n_mem[i] = 1;
    s->red[i] = cg->info[i].kind == CN_RED;
  }
  return SMELT_OK;
}

static smelt_status greedy(fstate *s, kir_group *kg, int *tmp) {
  const cgraph *cg = s->cg;
  edge *e = NULL;
  int n_e = 0;
  TRY(collect_edges(cg, &e, &n_e));
  smelt_status st = SMELT_OK;
  for (int i = 0; !st && i < n_e; i++) {
    int a = s->gid[e[i].p], b = s->gid[e[i].c];
    if (a == b) continue;
    if (!try_merge(s, a, b, kg, tmp)) continue;
    int n = s->n_mem[a] + s->n_mem[b];
    fusion_log(s->f, "fused %s (%s) -> %s (%s): %zu bytes stay in registers", q(nname(cg->g, e[i].p)),
               q_ident(cg->g->nodes[e[i].p].op_type), q(nname(cg->g, e[i].c)),
               q_ident(cg->g->nodes[e[i].c].op_type), e[i].bytes);
    st = commit_merge(s, a, b, tmp, n);
  }
  free(e);
  return st;
}

/* A window node is a kernel of its own; its kernel IR only lists the
 * operands (x, w, bias, residual; y) for scheduling. */
static smelt_status add_window(const cgraph *cg, fusion *f, int node) {
  const ir_node *nd = &cg->g->nodes[node];
  const win_geom *w = &cg->info[node].win;
  fgroup *fg = &f->groups[f->n_groups];
  memset(fg, 0, sizeof *fg);
  fg->kir = calloc(1, sizeof *fg->kir);
  fg->nodes = malloc(sizeof(int));
  fg->win = malloc(sizeof *fg->win);
  if (!fg->kir || !fg->nodes || !fg->win) {
    free(fg->kir);
    free(fg->nodes);
    free(fg->win);
    return err_nomem("window kernel", sizeof *fg->kir);
  }
  *fg->win = *w;
  fg->nodes[0] = node;
  fg->n = 1;
  const ir_value *y = &cg->g->values[nd->outputs[0]];
  kir_init(fg->kir, y->rank, y->rank, y->dims);
  fg->r = fg->k = y->rank;
  memcpy(fg->I, y->dims, sizeof fg->I);
  int n_in = w->kind == WK_DWCONV ? 4 : 1;
  for (int i = 0; i < n_in; i++) {
    if (i == 2 && !w->has_bias) continue;
    if (i == 3 && !w->has_res) continue;
    int v = nd->inputs[i];
    fg->kir->in[fg->kir->n_in++] = (kir_operand){.value = v, .dt = SMELT_F32};
  }
  fg->kir->out[fg->kir->n_out++] = (kir_operand){.value = nd->outputs[0], .dt = SMELT_F32};
  f->group_of[node] = f->n_groups++;
  return SMELT_OK;
}

/* Turns the working groups into the result, in execution order of their first node. */
static smelt_status finalize(fstate *s, kir_group *kg) {
  const cgraph *cg = s->cg;
  fusion *f = s->f;
  int n_nodes = cg->g->n_nodes;
  for (int i = 0; i < n_nodes; i++) f->group_of[i] = -1;
  for (int step = 0; step < n_nodes; step++) {
    int g = cg->order[step];
    if (cg->info[g].kind == CN_WIN) {
      TRY(add_window(cg, f, g));
      continue;
    }
    if (s->gid[g] != g || !s->n_mem[g]) continue;
    int r, k;
    int64_t I[SMELT_MAX_RANK];
    group_domain(s, g, &r, &k, I);
    if (!try_lower(s, s->mem[g], s->n_mem[g], r, k, I, kg)) {
      /* a singleton that does not lower (an unusual form): run it as a library kernel */
      for (int i = 0; i < s->n_mem[g]; i++) {
        cn_info *in = (cn_info *)&cg->info[s->mem[g][i]];
        in->kind = CN_LIB;
        in->why = "the code generator does not handle this form";
      }
      continue;
    }
    fgroup *fg = &f->groups[f->n_groups];
    memset(fg, 0, sizeof *fg);
    fg->kir = malloc(sizeof *fg->kir);
    fg->nodes = malloc(sizeof(int) * (size_t)s->n_mem[g]);
    if (!fg->kir || !fg->nodes) {
      free(fg->kir);
      free(fg->nodes);
      return err_nomem("fusion group", sizeof *fg->kir);
    }
    *fg->kir = *kg;
    memcpy(fg->nodes, s->mem[g], sizeof(int) * (size_t)s->n_mem[g]);
    fg->n = s->n_mem[g];
    fg->r = r;
    fg->k = k;
    memcpy(fg->I, I, sizeof I);
    for (int i = 0; i < fg->n; i++) {
      f->group_of[fg->nodes[i]] = f->n_groups;
      const ir_node *nd = &cg->g->nodes[fg->nodes[i]];
      for (int o = 0; o < nd->n_outputs; o++) {
        int v = nd->outputs[o];
        bool stored = false;
        for (int q = 0; q < kg->n_out; q++) stored |= kg->out[q].value == v;
        if (v >= 0 && !stored) fg->bytes_saved += 2 * value_bytes(&cg->g->values[v]);
      }
    }
    f->n_groups++;
  }
  return SMELT_OK;
}

smelt_status fuse_graph(const cgraph *cg, bool enable, fusion *f) {
  memset(f, 0, sizeof *f);
  int n = cg->g->n_nodes;
  f->group_of = malloc(sizeof(int) * ((size_t)n + 1));
  f->groups = calloc((size_t)n + 1, sizeof(fgroup));
  kir_group *kg = malloc(sizeof *kg);
  int *tmp = malloc(sizeof(int) * (FUSE_MAX_NODES + 1));
  fstate s;
  memset(&s, 0, sizeof s);
  smelt_status st = (!f->group_of || !f->groups || !kg || !tmp) ? err_nomem("fusion", sizeof *kg)
                                                                : fstate_init(&s, cg, f);
  if (!st && enable) st = greedy(&s, kg, tmp);
  if (!st) st = finalize(&s, kg);
  fstate_free(&s);
  free(kg);
  free(tmp);
  if (st) fusion_free(f);
  return st;
}

void fusion_free(fusion *f) {
  for (int i = 0; i < f->n_groups; i++) {
    free(f->groups[i].nodes);
    free(f->groups[i].kir);
    free(f->groups[i].win);
  }
  free(f->groups);
  free(f->group_of);
  for (int i = 0; i < f->n_log; i++) free(f->log[i]);
  free(f->log);
  memset(f, 0, sizeof *f);
}
