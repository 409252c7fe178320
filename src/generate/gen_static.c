/* The generator's static KV cache (see gen_static.h).
 *
 * The copy of the graph: the past inputs become the caches' valid prefixes,
 * time-major [len, batch, heads, head_dim] (the prefix of any length is one
 * contiguous tensor, so a cache grows by realloc and attention reads it in
 * place); each past -> Concat -> present becomes smelt.KVAppend, which
 * writes the step's rows at position len in place (passes/static_kv.c).
 * The pipeline then fuses attention (kernels read K and V with a row stride
 * of batch * heads * head_dim).  The plan is an eager plan over that graph,
 * built once: a step neither re-plans nor recompiles as the length grows,
 * and its prepared weights stay bound to it. */
#include "generate/gen_static.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/infer.h"
#include "passes/last_logits.h"
#include "passes/static_kv.h"
#include "util/bufcache.h"
#include "util/err.h"
#include "util/log.h"

#define GEN_STATIC_FIRST_CAP 64

void gen_static_free(gen_static *st) {
  if (!st) return;
  if (st->plan.graph) eager_plan_free(&st->plan);
  ir_graph_free(st->graph);
  for (int j = 0; st->cache && j < st->n_kv; j++) free(st->cache[j]);
  free(st->cache);
  free(st->row);
  free(st);
}

/* Readers of present output j left in the optimized graph other than fused
 * attention and Shape: each is a copy of the cache per step. */
static int cache_copies(const ir_graph *g, const gen_signature *sig) {
  int n = 0;
  for (int j = 0; j < sig->n_kv; j++) {
    int v = g->outputs[sig->kv[j].present_output];
    for (int i = 0; i < g->n_nodes; i++) {
      const ir_node *nd = &g->nodes[i];
      bool reads = false;
      for (int k = 0; k < nd->n_inputs; k++) reads |= nd->inputs[k] == v;
      if (reads && strcmp(nd->op_type, "Attention") && strcmp(nd->op_type, "Shape")) {
        n++;
        break;
      }
    }
  }
  return n;
}

static smelt_status rewrite(smelt_session *s, const gen_signature *sig, ir_graph *g, bool *done,
                            bool *last_logits, char *why, size_t why_n) {
  int n = sig->n_kv, *past = malloc(sizeof(int) * (size_t)(2 * n + 1));
  if (!past) return err_nomem("static KV cache", sizeof(int) * (size_t)(2 * n));
  int *present = past + n;
  for (int j = 0; j < n; j++) {
    past[j] = g->inputs[sig->kv[j].past_input];
    present[j] = g->outputs[sig->kv[j].present_output];
  }
  int64_t total = DIM_UNKNOWN; /* the mask's [batch, past + seq] names past + seq */
  if (sig->attention_mask >= 0) {
    const ir_value *m = &g->values[g->inputs[sig->attention_mask]];
    if (m->rank == 2 && m->dims[1] <= DIM_SYM_BASE) total = m->dims[1];
  }
  if (total == DIM_UNKNOWN) {
    smelt_status e = ir_graph_sym(g, "smelt_kv_total", &total);
    if (e) {
      free(past);
      return e;
    }
  }
  pass_report pr;
  memset(&pr, 0, sizeof pr);
  /* a reduced precision: the same autocast as the session's own graph (runtime/precision.c) */
  pass_options po = {.mode = SMELT_MODE_DEFAULT, .static_kv = true, .precision = s->opts.precision};
  smelt_status st = pass_static_kv(g, &po, &pr, past, present, n, total, done, why, why_n);
  free(past);
  if (!st && *done) { /* the generator keeps the last position's logits only */
    char no[160] = "";
    st = pass_last_logits(g, &po, &pr, g->outputs[sig->logits], last_logits, no, sizeof no);
    if (!st && !*last_logits) log_msg(&s->log, SMELT_LOG_DEBUG, "generate: logits of every position: %s", no);
  }
  if (!st && *done) st = ir_graph_infer(g);
  if (!st && *done) st = passes_run(g, &po, &pr);
  for (int i = 0; i < pr.n_log; i++) log_msg(&s->log, SMELT_LOG_DEBUG, "generate: pass: %s", pr.log[i]);
  pass_report_free(&pr);
  return st;
}

smelt_status gen_static_create(smelt_session *s, const gen_signature *sig, int batch, int64_t max_length,
                               gen_static **out, char *why, size_t why_n) {
  *out = NULL;
  if (strcmp(s->opts.device ? s->opts.device : "cpu", "cpu")) {
    snprintf(why, why_n, "device %s", s->opts.device);
    return SMELT_OK;
  }
  gen_static *st = calloc(1, sizeof *st);
  if (!st) return err_nomem("static KV cache", sizeof *st);
  st->n_kv = sig->n_kv;
  smelt_status e = ir_graph_clone(s->model->onnx->graph, &st->graph);
  bool done = false;
  if (!e) e = rewrite(s, sig, st->graph, &done, &st->last_logits, why, why_n);
  if (!e && done) e = eager_plan_build(st->graph, &st->plan);
  if (!e && done) {
    st->plan.device = s->plan.device;
    st->copies = cache_copies(st->graph, sig);
    st->cache = calloc((size_t)st->n_kv + 1, sizeof *st->cache);
    st->row = calloc((size_t)st->n_kv + 1, sizeof *st->row);
    if (!st->cache || !st->row) e = err_nomem("static KV cache", sizeof *st->cache * (size_t)st->n_kv);
    for (int j = 0; !e && j < st->n_kv; j++) st->row[j] = (int64_t)batch * sig->kv[j].heads * sig->kv[j].head_dim;
    st->fixed_cap = max_length > 0;
    if (!e) e = gen_static_reserve(st, max_length > 0 ? max_length : GEN_STATIC_FIRST_CAP);
  }
  if (e || !done) {
    gen_static_free(st);
    return e;
  }
  *out = st;
  return SMELT_OK;
}

smelt_status gen_static_reserve(gen_static *st, int64_t total) {
  if (total <= st->cap) return SMELT_OK;
  if (st->fixed_cap && st->cap > 0)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "generate: %lld tokens would pass max_length %lld",
                   (long long)total, (long long)st->cap);
  int64_t cap = st->cap ? st->cap : total;
  while (cap < total) cap *= 2;
  for (int j = 0; j < st->n_kv; j++) {
    size_t bytes = sizeof(float) * (size_t)(cap * st->row[j]);
    float *p = realloc(st->cache[j], bytes ? bytes : 1); /* the prefix stays where it was: time-major */
    if (!p) return err_nomem("static KV cache", bytes);
    /* touched now, not page by page as positions fill: the resident set stays flat while decoding */
    memset(p + st->cap * st->row[j], 0, bytes - sizeof(float) * (size_t)(st->cap * st->row[j]));
    st->cache[j] = p;
  }
  st->cap = cap;
  return SMELT_OK;
}

void gen_static_load(gen_static *st, int j, const float *present, int64_t batch, int64_t heads, int64_t len,
                     int64_t head_dim) {
  float *c = st->cache[j];
  for (int64_t b = 0; b < batch; b++)
    for (int64_t h = 0; h < heads; h++)
      for (int64_t i = 0; i < len; i++)
        memcpy(c + i * st->row[j] + (b * heads + h) * head_dim, present + ((b * heads + h) * len + i) * head_dim,
               sizeof(float) * (size_t)head_dim);
}

smelt_status gen_static_run(gen_static *st, smelt_session *s, const gen_signature *sig, tensor **inputs,
                            int64_t len, tensor *outputs, eager_stats *stats) {
  tensor *past = calloc((size_t)st->n_kv + 1, sizeof *past);
  if (!past) return err_nomem("static KV cache", sizeof *past * (size_t)st->n_kv);
  for (int j = 0; j < st->n_kv; j++) {
    tensor *t = &past[j];
    t->dtype = SMELT_F32;
    t->rank = 4;
    t->dims[0] = len;
    t->dims[1] = st->row[j] / (sig->kv[j].heads * sig->kv[j].head_dim);
    t->dims[2] = sig->kv[j].heads;
    t->dims[3] = sig->kv[j].head_dim;
    t->data = st->cache[j];
    t->nbytes = sizeof(float) * (size_t)(st->cap * st->row[j]); /* KVAppend writes up to here */
    inputs[sig->kv[j].past_input] = t;
  }
  bufcache *prev = bufcache_enter(s->bufs);
  memset(&st->last, 0, sizeof st->last);
  st->last.hook = stats && stats->hook ? stats->hook : st->hook;
  smelt_status e = eager_run(&st->plan, s->pool, NULL, inputs, outputs, &st->last);
  if (stats) *stats = st->last;
  bufcache_enter(prev);
  for (int j = 0; j < st->n_kv; j++) inputs[sig->kv[j].past_input] = NULL;
  free(past);
  return e;
}
