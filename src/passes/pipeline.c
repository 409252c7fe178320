/* The pass manager: runs the passes of passes.def, times and counts them,
 * iterates the cleanup group to a fixed point, checks the graph after every
 * pass that changed it, and with o->debug_dir writes the IR before and after
 * each such pass (NN-before-<pass>.txt / NN-after-<pass>.txt; a pass run that
 * changes nothing leaves no files).
 *
 * r may be NULL; otherwise it must start zeroed (or hold an earlier report to
 * add to) and is freed with pass_report_free.  On failure g is in an
 * unspecified state: discard it (it is a private clone).
 *
 * Complexity: per pass run its own (O(n + v) each), at most
 * PIPELINE_MAX_ROUNDS rounds of the cleanup group, an O(n + v + e) validation
 * after each run that changed the graph and one final inference. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/infer.h"
#include "passes/passes_list.h"
#include "util/err.h"
#include "util/quote.h"

#define PIPELINE_MAX_ROUNDS 8

enum pass_kind { CLEANUP, FUSION };

typedef struct pass_entry {
  pass_def def;
  enum pass_kind kind;
} pass_entry;

static const pass_entry pipeline[] = {
#define PASS(name, kind) {{#name, pass_##name}, kind},
#include "passes/passes.def"
#undef PASS
};
#define N_PASSES ((int)(sizeof pipeline / sizeof *pipeline))

typedef struct run_state {
  ir_graph *g;
  const pass_options *o;
  pass_report *r;
  int dump_seq;
} run_state;

void pass_log(pass_report *r, const char *fmt, ...) {
  if (!r) return;
  if (r->n_log == r->cap_log) {
    int ncap = r->cap_log ? r->cap_log * 2 : 32;
    char **p = realloc(r->log, sizeof(char *) * (size_t)ncap);
    if (!p) return; /* the log is diagnostics: losing a line must not fail compilation */
    r->log = p;
    r->cap_log = ncap;
  }
  va_list ap;
  va_start(ap, fmt);
  char *raw = NULL;
  int n = vasprintf(&raw, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  /* one line, whatever a model name slipped into it holds */
  size_t cap = 4 * (size_t)n + 1;
  char *line = malloc(cap);
  if (line) r->log[r->n_log++] = str_escape_controls(line, cap, raw, false);
  free(raw);
}

void pass_report_free(pass_report *r) {
  if (!r) return;
  for (int i = 0; i < r->n_log; i++) free(r->log[i]);
  free(r->log);
  memset(r, 0, sizeof *r);
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static pass_stat *stat_for(pass_report *r, const char *name) {
  if (!r) return NULL;
  for (int i = 0; i < r->n_stats; i++)
    if (!strcmp(r->stats[i].name, name)) return &r->stats[i];
  if (r->n_stats == (int)(sizeof r->stats / sizeof *r->stats)) return NULL;
  pass_stat *s = &r->stats[r->n_stats++];
  memset(s, 0, sizeof *s);
  s->name = name;
  return s;
}

static smelt_status dump_text(const char *dir, int seq, const char *when, const char *pass,
                              const char *text, size_t len) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s/%02d-%s-%s.txt", dir, seq, when, pass) >= (int)sizeof path)
    return err_set(SMELT_ERR_IO, "debug directory path %s is too long", q_path(dir));
  FILE *f = fopen(path, "w");
  if (!f) return err_set(SMELT_ERR_IO, "cannot write IR dump %s", q_path(path));
  size_t w = fwrite(text, 1, len, f);
  if (fclose(f) || w != len) return err_set(SMELT_ERR_IO, "writing IR dump %s failed", q_path(path));
  return SMELT_OK;
}

/* The listing of g in a malloc'd string (*text, *len); NULL when it cannot be made. */
static void print_to_string(const ir_graph *g, char **text, size_t *len) {
  *text = NULL;
  *len = 0;
  FILE *f = open_memstream(text, len);
  if (!f) return;
  ir_graph_print(f, g);
  fclose(f);
}

static smelt_status run_pass(run_state *st, const pass_entry *p, int *changes) {
  char *before = NULL, *after = NULL;
  size_t nb = 0, na = 0;
  if (st->o->debug_dir) print_to_string(st->g, &before, &nb);
  int c = 0;
  double t0 = now_seconds();
  smelt_status s = p->def.run(st->g, st->o, st->r, &c);
  double dt = now_seconds() - t0;
  pass_stat *ps = stat_for(st->r, p->def.name);
  if (ps) {
    ps->runs++;
    ps->changes += c;
    ps->seconds += dt;
  }
  if (s) s = err_prefix(s, "pass %s: ", q(p->def.name));
  if (!s && c > 0) {
    s = ir_graph_validate(st->g);
    if (s) s = err_prefix(s, "pass %s left an invalid graph: ", q(p->def.name));
  }
  if (st->o->debug_dir && c > 0 && before) {
    int seq = ++st->dump_seq;
    print_to_string(st->g, &after, &na);
    smelt_status ds = dump_text(st->o->debug_dir, seq, "before", p->def.name, before, nb);
    if (!ds && after) ds = dump_text(st->o->debug_dir, seq, "after", p->def.name, after, na);
    if (!s) s = ds;
  }
  free(before);
  free(after);
  *changes = c;
  return s;
}

static smelt_status run_cleanups(run_state *st) {
  for (int round = 0; round < PIPELINE_MAX_ROUNDS; round++) {
    int total = 0;
    for (int i = 0; i < N_PASSES; i++) {
      if (pipeline[i].kind != CLEANUP) continue;
      int c = 0;
      TRY(run_pass(st, &pipeline[i], &c));
      total += c;
    }
    if (!total) return SMELT_OK;
  }
  pass_log(st->r, "cleanup passes still changing the graph after %d rounds; stopped",
           PIPELINE_MAX_ROUNDS);
  return SMELT_OK;
}

smelt_status passes_run(ir_graph *g, const pass_options *o, pass_report *r) {
  pass_options dflt = {0};
  run_state st = {g, o ? o : &dflt, r, 0};
  TRY(run_cleanups(&st));
  for (int i = 0; i < N_PASSES; i++) {
    if (pipeline[i].kind != FUSION) continue;
    int c = 0;
    TRY(run_pass(&st, &pipeline[i], &c));
    if (!c) continue;
    /* what the fusion made (smelt.Attention's output, a GEMM's) gets its
     * shapes again before the cleanups read them: dims it alone knows (a
     * symbolic batch through attention) let their rewrites apply */
    TRY(ir_graph_infer_dims(g));
    TRY(run_cleanups(&st));
  }
  /* the rewritten graph must still infer: it is what the back half plans on */
  smelt_status s = ir_graph_infer(g);
  if (s) return err_prefix(s, "after the passes, shape inference failed: ");
  return SMELT_OK;
}
