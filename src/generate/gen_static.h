/* The static KV cache of a generator (gen_static.c): a rewritten copy of the
 * decoder's graph that appends each step's keys and values in place into
 * caches allocated once, run by its own eager plan with buffers bound once. */
#ifndef SMELT_GENERATE_GEN_STATIC_H
#define SMELT_GENERATE_GEN_STATIC_H

#include "generate/gen_signature.h"
#include "runtime/eager.h"
#include "session/session.h"

typedef struct gen_static {
  ir_graph *graph;   /* the rewritten copy of the model's graph */
  eager_plan plan;   /* its plan: made once, replayed by every step */
  int n_kv;
  float **cache;     /* per cache: time-major [cap, batch, heads, head_dim] */
  int64_t *row;      /* per cache: batch * heads * head_dim floats per position */
  int64_t cap;       /* positions each cache holds */
  bool fixed_cap;    /* cap is max_length: never grows */
  int copies;        /* caches the rewritten graph still copies each step (e.g. a repeat_kv Expand) */
  bool last_logits;  /* its logits output holds the last position only ([batch, 1, vocab]: passes/last_logits.h) */
  eager_stats last;  /* the last run: bytes of intermediates it allocated, nodes run */
  const run_hook *hook; /* told of every node of every run (profiling); NULL: none */
} gen_static;

/* The generator's static cache, NULL when it runs the model as written (tests). */
const gen_static *gen_generator_static(const smelt_generator *g);
/* Runs through the static cache's plan report each node to hook (NULL: none;
 * `smelt generate --profile`).  No effect without the static cache. */
void gen_generator_set_hook(smelt_generator *g, const run_hook *hook);

/* Rewrites a copy of s's graph (passes/static_kv.h, then the pass pipeline
 * for the fused attention that reads the cache in place) and allocates the
 * caches: max_length positions, or 64 growing by doubling when max_length
 * is 0.  *out NULL (and SMELT_OK) when the model does not match: why says
 * why, for the log line. */
smelt_status gen_static_create(smelt_session *s, const gen_signature *sig, int batch, int64_t max_length,
                               gen_static **out, char *why, size_t why_n);
void gen_static_free(gen_static *st);
/* Room for `total` positions (grows the caches unless fixed: then an error). */
smelt_status gen_static_reserve(gen_static *st, int64_t total);
/* Cache j's first len positions from a [batch, heads, len, head_dim] tensor
 * (what a prefill through the session returned). */
void gen_static_load(gen_static *st, int j, const float *present, int64_t batch, int64_t heads, int64_t len,
                     int64_t head_dim);
/* One run of the rewritten graph: inputs as for the session (one per graph
 * input, the past inputs' tensors ignored: the caches at length len are fed),
 * outputs zeroed, receive what the graph returns (the present outputs are
 * views of the caches).  stats may be NULL. */
smelt_status gen_static_run(gen_static *st, smelt_session *s, const gen_signature *sig, tensor **inputs,
                            int64_t len, tensor *outputs, eager_stats *stats);

#endif
