/* smelt_generator_*: prefill and decode steps over a session of a decoder
 * exported with its KV cache (gen_signature.c finds the inputs), with the
 * cache each run returns fed back as the next run's past. */
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "generate/gen_sample.h"
#include "generate/gen_signature.h"
#include "generate/gen_static.h"
#include "session/session.h"
#include "util/api_struct.h"
#include "util/bufcache.h"
#include "util/err.h"
#include "util/log.h"

struct smelt_generator {
  smelt_session *session;
  smelt_generator_options o;
  gen_signature sig;
  smelt_tensor *past;     /* sig.n_kv caches (data from the last run's present outputs) */
  smelt_tensor *in, *out; /* per run: one descriptor per graph input / output */
  int64_t len;            /* tokens in the cache per sequence */
  float *logits;          /* batch rows of vocab */
  int64_t vocab;
  bool have_logits, have_pending;
  int64_t *pending;  /* tokens the last smelt_generator_next returned, not yet fed */
  bool *finished;    /* per sequence: produced eos_token_id */
  int64_t *ids, *mask, *pos; /* input buffers */
  size_t ids_cap, mask_cap;
  gen_sampler sampler;
  gen_static *st;    /* the static KV cache; NULL: each present fed back as the next past */
};

static float no_data[1]; /* the data pointer of an empty cache */

smelt_generator_options smelt_generator_options_default(void) {
  smelt_generator_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.batch = 1;
  o.top_p = 1.0f;
  o.eos_token_id = -1;
  o.static_cache = 1;
  return o;
}

static void drop_cache(smelt_generator *g) {
  for (int j = 0; g->st && j < g->sig.n_kv; j++) memset(&g->past[j], 0, sizeof g->past[j]);
  for (int j = 0; j < g->sig.n_kv; j++) {
    smelt_tensor *t = &g->past[j];
    if (t->data && t->data != no_data) smelt_tensor_release(t);
    memset(t, 0, sizeof *t);
    t->dtype = SMELT_F32;
    t->rank = 4;
    t->dims[0] = g->o.batch;
    t->dims[1] = g->sig.kv[j].heads;
    t->dims[2] = 0;
    t->dims[3] = g->sig.kv[j].head_dim;
    t->data = no_data;
  }
  g->len = 0;
  g->have_logits = g->have_pending = false;
  g->sampler.state = g->o.seed; /* each generation draws from the seed again */
  for (int b = 0; b < g->o.batch; b++) g->finished[b] = false;
}

smelt_status smelt_generator_create(smelt_session *s, const smelt_generator_options *opts,
                                    smelt_generator **out) {
  if (!s || !out) return err_set(SMELT_ERR_INVALID_ARGUMENT, "smelt_generator_create: session or out is NULL");
  *out = NULL;
  smelt_generator_options o = smelt_generator_options_default();
  if (opts) /* the first layout ended before static_cache */
    TRY(api_struct_read(opts, offsetof(smelt_generator_options, static_cache), sizeof o, &o,
                        "smelt_generator_create: options",
                        "start from smelt_generator_options_default()"));
  if (o.batch < 1 || o.batch > 65536)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "generate: batch %d is outside 1..65536", o.batch);
  if (o.max_length < 0) return err_set(SMELT_ERR_INVALID_ARGUMENT, "generate: max_length %lld is negative",
                                       (long long)o.max_length);
  if (!(o.temperature >= 0) || o.top_k < 0 || !(o.top_p > 0 && o.top_p <= 1))
    return err_set(SMELT_ERR_INVALID_ARGUMENT,
                   "generate: temperature %g must be >= 0, top_k %d >= 0 and top_p %g in (0, 1]",
                   (double)o.temperature, o.top_k, (double)o.top_p);
  smelt_generator *g = calloc(1, sizeof *g);
  if (!g) return err_nomem("generator", sizeof *g);
  g->session = s;
  g->o = o;
  smelt_status st = gen_signature_detect(s->model, &g->sig);
  if (st == SMELT_OK && g->sig.fixed_batch > 0 && g->sig.fixed_batch != o.batch)
    st = err_set(SMELT_ERR_INVALID_ARGUMENT, "generate: the model's batch is fixed at %lld; batch %d asked",
                 (long long)g->sig.fixed_batch, o.batch);
  if (st == SMELT_OK) {
    g->past = calloc((size_t)g->sig.n_kv + 1, sizeof *g->past);
    g->in = calloc((size_t)g->sig.n_inputs, sizeof *g->in);
    g->out = calloc((size_t)g->sig.n_outputs, sizeof *g->out);
    g->pending = calloc((size_t)o.batch, sizeof *g->pending);
    g->finished = calloc((size_t)o.batch, sizeof *g->finished);
    if (!g->past || !g->in || !g->out || !g->pending || !g->finished) st = err_nomem("generator state", 0);
  }
  if (st == SMELT_OK && o.static_cache) {
    char why[256] = "";
    st = gen_static_create(s, &g->sig, o.batch, o.max_length, &g->st, why, sizeof why);
    if (st == SMELT_OK && g->st)
      log_msg(&s->log, SMELT_LOG_INFO, "generate: static KV cache, %d caches of %lld positions (%s)%s", g->sig.n_kv,
              (long long)g->st->cap, g->st->fixed_cap ? "max_length" : "growing by doubling",
              g->st->copies ? "; some caches are still copied each step (read by more than attention)" : "");
    else if (st == SMELT_OK)
      log_msg(&s->log, SMELT_LOG_INFO, "generate: no static KV cache (%s): each present is fed back as the next past", why);
  }
  if (st != SMELT_OK) {
    smelt_generator_free(g);
    return st;
  }
  gen_sampler_init(&g->sampler, o.temperature, o.top_k, o.top_p, o.seed);
  drop_cache(g);
  *out = g;
  return SMELT_OK;
}

void smelt_generator_reset(smelt_generator *g) {
  if (g) drop_cache(g);
}

void smelt_generator_free(smelt_generator *g) {
  if (!g) return;
  if (g->past && g->finished) drop_cache(g);
  free(g->past);
  free(g->in);
  free(g->out);
  free(g->pending);
  free(g->finished);
  free(g->logits);
  free(g->ids);
  free(g->mask);
  free(g->pos);
  gen_static_free(g->st);
  gen_sampler_free(&g->sampler);
  free(g);
}

static smelt_status grow(int64_t **buf, size_t *cap, size_t n) {
  if (n <= *cap) return SMELT_OK;
  int64_t *p = realloc(*buf, n * sizeof *p);
  if (!p) return err_nomem("generator input", n * sizeof *p);
  *buf = p;
  *cap = n;
  return SMELT_OK;
}

static void set_i64(smelt_tensor *t, int64_t *data, int64_t rows, int64_t cols) {
  memset(t, 0, sizeof *t);
  t->dtype = SMELT_I64;
  t->rank = 2;
  t->dims[0] = rows;
  t->dims[1] = cols;
  t->data = data;
  t->nbytes = (size_t)(rows * cols) * sizeof(int64_t);
}

/* A run through the static plan: g->in as internal views, the results back
 * in g->out (the present outputs are views of the caches: marked as the
 * caller's, never released). */
static smelt_status run_static(smelt_generator *g) {
  const gen_signature *sig = &g->sig;
  tensor *views = calloc((size_t)sig->n_inputs + 1, sizeof *views);
  tensor **ptrs = calloc((size_t)sig->n_inputs + 1, sizeof *ptrs);
  tensor *outs = calloc((size_t)sig->n_outputs + 1, sizeof *outs);
  smelt_status st = !views || !ptrs || !outs ? err_nomem("generator run", sizeof *views * (size_t)sig->n_inputs) : SMELT_OK;
  for (int k = 0; st == SMELT_OK && k < sig->n_inputs; k++) {
    const smelt_tensor *t = &g->in[k];
    views[k].dtype = t->dtype;
    views[k].rank = t->rank;
    memcpy(views[k].dims, t->dims, sizeof t->dims);
    views[k].data = t->data;
    views[k].nbytes = t->nbytes;
    ptrs[k] = &views[k];
  }
  if (st == SMELT_OK) st = gen_static_run(g->st, g->session, sig, ptrs, g->len, outs, NULL);
  for (int o = 0; st == SMELT_OK && o < sig->n_outputs; o++) {
    smelt_tensor *d = &g->out[o];
    d->dtype = outs[o].dtype;
    d->rank = outs[o].rank;
    memcpy(d->dims, outs[o].dims, sizeof d->dims);
    d->data = outs[o].data;
    d->nbytes = outs[o].nbytes;
    d->owner = outs[o].owns_data ? SMELT_OWNER_SMELT : SMELT_OWNER_CALLER;
    if (outs[o].owns_data) bufcache_disown(g->session->bufs, outs[o].data);
    outs[o].owns_data = false;
  }
  for (int o = 0; outs && o < sig->n_outputs; o++) { /* what a failed run left: no longer the session's */
    if (outs[o].owns_data) bufcache_disown(g->session->bufs, outs[o].data);
    tensor_release(&outs[o]);
  }
  free(views);
  free(ptrs);
  free(outs);
  return st;
}

/* One run of n tokens per sequence (ids: batch rows of n) on top of the cache. */
static smelt_status run_tokens(smelt_generator *g, const int64_t *ids, int64_t n) {
  const gen_signature *sig = &g->sig;
  int64_t B = g->o.batch, total = g->len + n;
  if (g->o.max_length > 0 && total > g->o.max_length)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "generate: %lld tokens would pass max_length %lld",
                   (long long)total, (long long)g->o.max_length);
  size_t pos_cap = g->ids_cap;
  TRY(grow(&g->ids, &g->ids_cap, (size_t)(B * n)));
  if (g->ids_cap != pos_cap || !g->pos) {
    free(g->pos);
    g->pos = malloc(g->ids_cap * sizeof *g->pos);
    if (!g->pos) return err_nomem("generator input", g->ids_cap * sizeof *g->pos);
  }
  TRY(grow(&g->mask, &g->mask_cap, (size_t)(B * total)));
  memcpy(g->ids, ids, (size_t)(B * n) * sizeof *ids);
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < n; i++) g->pos[b * n + i] = g->len + i;
  for (int64_t i = 0; i < B * total; i++) g->mask[i] = 1;
  set_i64(&g->in[sig->input_ids], g->ids, B, n);
  if (sig->attention_mask >= 0) set_i64(&g->in[sig->attention_mask], g->mask, B, total);
  if (sig->position_ids >= 0) set_i64(&g->in[sig->position_ids], g->pos, B, n);
  for (int j = 0; j < sig->n_kv; j++) {
    smelt_tensor *t = &g->in[sig->kv[j].past_input];
    *t = g->past[j];
    t->name = NULL;
  }
  memset(g->out, 0, (size_t)sig->n_outputs * sizeof *g->out);
  /* eager sessions run the prompt through the static plan too, and so do
   * compiled ones when that plan computes the last position's logits only
   * (less work than any plan of the whole model); else compiled ones run it
   * through their own plan, whose presents fill the caches */
  bool via_static = g->st && (g->len > 0 || g->session->opts.mode == SMELT_MODE_EAGER || g->st->last_logits);
  int64_t rows = via_static && g->st->last_logits ? 1 : n; /* logits rows per sequence */
  smelt_status st = g->st ? gen_static_reserve(g->st, total) : SMELT_OK;
  if (st == SMELT_OK)
    st = via_static ? run_static(g)
                    : smelt_session_run(g->session, g->in, (size_t)sig->n_inputs, g->out, (size_t)sig->n_outputs);
  if (st != SMELT_OK) return err_prefix(st, "generate (%s at length %lld): ", n > 1 ? "prefill" : "decode step",
                                        (long long)g->len);
  /* the cache: each present replaces its past */
  const smelt_tensor *lg = &g->out[sig->logits];
  if (lg->rank != 3 || lg->dims[0] != B || lg->dims[1] != rows || lg->dtype != SMELT_F32)
    st = err_set(SMELT_ERR_INVALID_MODEL, "generate: logits came back with rank %d, not [%lld, %lld, vocab] float32",
                 lg->rank, (long long)B, (long long)rows);
  for (int j = 0; j < sig->n_kv && st == SMELT_OK; j++) {
    const smelt_tensor *p = &g->out[sig->kv[j].present_output];
    if (via_static) continue; /* a view of the cache, time-major */
    if (p->rank != 4 || p->dims[0] != B || p->dims[1] != sig->kv[j].heads || p->dims[2] != total ||
        p->dims[3] != sig->kv[j].head_dim || p->dtype != SMELT_F32)
      st = err_set(SMELT_ERR_INVALID_MODEL,
                   "generate: cache output %d came back as rank %d [%lld, %lld, %lld, ...], not [%lld, %lld, %lld, %lld]",
                   sig->kv[j].present_output, p->rank, (long long)p->dims[0], (long long)p->dims[1],
                   (long long)p->dims[2], (long long)B, (long long)sig->kv[j].heads, (long long)total,
                   (long long)sig->kv[j].head_dim);
  }
  if (st == SMELT_OK && lg->dims[2] != g->vocab) {
    free(g->logits);
    g->vocab = lg->dims[2];
    g->logits = malloc((size_t)(B * g->vocab) * sizeof(float));
    if (!g->logits) {
      g->vocab = 0;
      st = err_nomem("generator logits", (size_t)(B * lg->dims[2]) * sizeof(float));
    }
  }
  if (st == SMELT_OK) {
    const float *src = lg->data;
    for (int64_t b = 0; b < B; b++)
      memcpy(g->logits + b * g->vocab, src + (b * rows + rows - 1) * g->vocab, (size_t)g->vocab * sizeof(float));
    for (int j = 0; j < sig->n_kv && g->st && !via_static; j++)
      gen_static_load(g->st, j, g->out[sig->kv[j].present_output].data, B, sig->kv[j].heads, total,
                      sig->kv[j].head_dim);
    for (int j = 0; j < sig->n_kv && !g->st; j++) {
      smelt_tensor *p = &g->out[sig->kv[j].present_output];
      if (g->past[j].data && g->past[j].data != no_data) smelt_tensor_release(&g->past[j]);
      g->past[j] = *p;
      memset(p, 0, sizeof *p); /* moved */
    }
    g->len = total;
    g->have_logits = true;
  }
  for (int o = 0; o < sig->n_outputs; o++)
    if (g->out[o].data) smelt_tensor_release(&g->out[o]); /* the caches' views are the caller's: kept */
  return st;
}

smelt_status smelt_generator_prefill(smelt_generator *g, const int64_t *ids, size_t n) {
  if (!g || !ids || n == 0)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "smelt_generator_prefill: %s", !g ? "generator is NULL"
                   : !ids ? "ids is NULL" : "the prompt is empty");
  drop_cache(g);
  smelt_status st = run_tokens(g, ids, (int64_t)n);
  if (st != SMELT_OK) drop_cache(g);
  return st;
}

smelt_status smelt_generator_step(smelt_generator *g, const int64_t *tokens) {
  if (!g || !tokens) return err_set(SMELT_ERR_INVALID_ARGUMENT, "smelt_generator_step: generator or tokens is NULL");
  if (g->len == 0)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "smelt_generator_step: no prompt yet (call smelt_generator_prefill)");
  g->have_pending = false;
  return run_tokens(g, tokens, 1);
}

smelt_status smelt_generator_sample(smelt_generator *g, int64_t *tokens) {
  if (!g || !tokens) return err_set(SMELT_ERR_INVALID_ARGUMENT, "smelt_generator_sample: generator or tokens is NULL");
  if (!g->have_logits)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "smelt_generator_sample: no logits yet (call smelt_generator_prefill)");
  for (int b = 0; b < g->o.batch; b++) {
    if (g->finished[b]) {
      tokens[b] = g->o.eos_token_id;
      continue;
    }
    int64_t t = gen_sample(&g->sampler, g->logits + (int64_t)b * g->vocab, g->vocab);
    if (t < 0) return err_nomem("sampling scratch", (size_t)g->vocab * 16);
    tokens[b] = t;
    if (g->o.eos_token_id >= 0 && t == g->o.eos_token_id) g->finished[b] = true;
  }
  return SMELT_OK;
}

smelt_status smelt_generator_next(smelt_generator *g, int64_t *tokens) {
  if (!g || !tokens) return err_set(SMELT_ERR_INVALID_ARGUMENT, "smelt_generator_next: generator or tokens is NULL");
  if (g->have_pending) TRY(smelt_generator_step(g, g->pending));
  TRY(smelt_generator_sample(g, tokens));
  memcpy(g->pending, tokens, (size_t)g->o.batch * sizeof *tokens);
  g->have_pending = true;
  return SMELT_OK;
}

int smelt_generator_done(const smelt_generator *g) {
  if (!g) return 1;
  if (g->o.max_length > 0 && g->len + (g->have_pending ? 1 : 0) >= g->o.max_length) return 1;
  if (g->o.eos_token_id < 0 || !g->have_logits) return 0;
  for (int b = 0; b < g->o.batch; b++)
    if (!g->finished[b]) return 0;
  return 1;
}

const float *smelt_generator_logits(const smelt_generator *g, int64_t *vocab) {
  if (vocab) *vocab = g && g->have_logits ? g->vocab : 0;
  return g && g->have_logits ? g->logits : NULL;
}

int64_t smelt_generator_length(const smelt_generator *g) { return g ? g->len : 0; }

size_t smelt_generator_kv_bytes(const smelt_generator *g) {
  size_t n = 0;
  if (g && g->st) { /* the valid positions of the static caches */
    for (int j = 0; j < g->st->n_kv; j++) n += sizeof(float) * (size_t)(g->len * g->st->row[j]);
    return n;
  }
  for (int j = 0; g && j < g->sig.n_kv; j++) n += g->past[j].data == no_data ? 0 : g->past[j].nbytes;
  return n;
}

int smelt_generator_static_cache(const smelt_generator *g) { return g && g->st ? 1 : 0; }

const gen_static *gen_generator_static(const smelt_generator *g) { return g ? g->st : NULL; }

void gen_generator_set_hook(smelt_generator *g, const run_hook *hook) {
  if (g && g->st) g->st->hook = hook;
}
