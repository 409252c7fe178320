/* max-autotune: every step's variants are timed on the real input shapes
 * (whole plan runs, each step timed on its own, the fastest of several runs
 * kept per variant) and the fastest variant is kept.  Generated kernels vary
 * vector width, accumulators/unrolling and task grain (kernels.c); window
 * kernels also compete with their node's library op; GEMMs try the GEMM
 * library's algorithms (small-M, direct, packed) with the pool or on one
 * thread; other library kernels run with the pool or on one thread.  The choices are stored in the
 * cache next to the kernel library, so a warm start skips the timing. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune/autotune.h"

#include "cache/keys.h"
#include "runtime/gemm_step.h"
#include "runtime/plan_run.h"
#include "util/err.h"

#define TUNE_RUNS 5

/* Kernel steps: their emitted variants, and for a window kernel its node's
 * library op as one more (another algorithm: im2col GEMM / reference pool). */
static int n_variants(const pstep *st) {
  if (st->kind == PS_KERNEL) return st->n_fn_vars + st->lib_alt;
  return st->gemm ? GEMM_STEP_VARIANTS : LV_COUNT;
}

static void set_variant(pstep *st, int v) {
  if (v >= n_variants(st)) v = 0;
  if (st->kind == PS_KERNEL) {
    st->use_lib = v == st->n_fn_vars;
    st->fn = st->fn_vars[st->use_lib ? 0 : v];
  } else {
    st->variant = v;
  }
}

static cache_key tune_key(const compiled_plan *p) {
  key_hasher h;
  key_init(&h);
  key_add_str(&h, "smelt-tune-1");
  key_add_str(&h, p->key);
  key_add_graph(&h, p->g, true);
  key_add_machine(&h);
  key_add_i64(&h, pool_threads(p->pool));
  key_add_i64(&h, p->n_steps);
  return key_final(&h);
}

static bool load_choices(compiled_plan *p, const char *text, size_t len, int *chosen) {
  (void)len;
  const char *s = text;
  int ver, n;
  if (sscanf(s, "smelt-tune %d steps %d\n", &ver, &n) != 2 || ver != 1 || n != p->n_steps) return false;
  s = strchr(s, '\n');
  for (int i = 0; i < n; i++) {
    int idx, v;
    if (!s || sscanf(s + 1, "%d %d", &idx, &v) != 2 || idx != i || v < 0 || v >= n_variants(&p->steps[i]))
      return false;
    chosen[i] = v;
    s = strchr(s + 1, '\n');
  }
  return true;
}

static void save_choices(const compiled_plan *p, const smelt_cache *cache, const cache_key *k, const int *chosen) {
  strbuf b = {0};
  sb_printf(&b, "smelt-tune 1 steps %d\n", p->n_steps);
  for (int i = 0; i < p->n_steps; i++) sb_printf(&b, "%d %d\n", i, chosen[i]);
  if (!b.oom) cache_put(cache, k, "tune", b.s, b.len);
  sb_free(&b);
}

/* Times every variant index v (steps with fewer variants run their first). */
static smelt_status measure(compiled_plan *p, tensor *const *inputs, const smelt_logger *log, int max_v,
                            double *best_t) {
  double *acc = malloc(sizeof(double) * ((size_t)p->n_steps + 1));
  if (!acc) return err_nomem("tuning times", sizeof(double) * (size_t)p->n_steps);
  smelt_status s = SMELT_OK;
  for (int v = 0; !s && v < max_v; v++) {
    log_msg(log, SMELT_LOG_INFO, "max-autotune: timing variant %d of %d on %d steps", v + 1, max_v, p->n_steps);
    for (int i = 0; i < p->n_steps; i++) set_variant(&p->steps[i], v);
    s = plan_run_timed(p, inputs, NULL, NULL); /* warm-up */
    for (int i = 0; i < p->n_steps; i++) best_t[i * 8 + v] = 1e30;
    for (int r = 0; !s && r < TUNE_RUNS; r++) {
      memset(acc, 0, sizeof(double) * (size_t)p->n_steps);
      s = plan_run_timed(p, inputs, NULL, acc);
      for (int i = 0; !s && i < p->n_steps; i++)
        if (v < n_variants(&p->steps[i]) && acc[i] < best_t[i * 8 + v]) best_t[i * 8 + v] = acc[i];
    }
  }
  free(acc);
  return s;
}

smelt_status autotune_plan(compiled_plan *p, tensor *const *inputs, const smelt_cache *cache, strbuf *explain,
                           bool *cache_hit, const smelt_logger *log) {
  if (!p->n_steps) return SMELT_OK;
  int *chosen = calloc((size_t)p->n_steps + 1, sizeof(int));
  double *t = malloc(sizeof(double) * 8 * ((size_t)p->n_steps + 1));
  if (!chosen || !t) {
    free(chosen);
    free(t);
    return err_nomem("tuning", sizeof(double) * 8 * (size_t)p->n_steps);
  }
  cache_key k = tune_key(p);
  uint8_t *data = NULL;
  size_t len = 0;
  bool hit = false;
  char why[256];
  cache_get(cache, &k, "tune", &data, &len, &hit, why, sizeof why);
  smelt_status s = SMELT_OK;
  if (hit && load_choices(p, (const char *)data, len, chosen)) {
    *cache_hit = true;
  } else {
    int max_v = 1;
    for (int i = 0; i < p->n_steps; i++)
      if (n_variants(&p->steps[i]) > max_v) max_v = n_variants(&p->steps[i]);
    if (max_v > 8) max_v = 8;
    s = measure(p, inputs, log, max_v, t);
    for (int i = 0; !s && i < p->n_steps; i++) {
      int best = 0;
      for (int v = 1; v < n_variants(&p->steps[i]) && v < max_v; v++)
        if (t[i * 8 + v] < t[i * 8 + best] * 0.97) best = v; /* a clear win only: timings are noisy */
      chosen[i] = best;
      p->steps[i].seconds = t[i * 8 + best];
    }
    if (!s) save_choices(p, cache, &k, chosen);
  }
  int changed = 0;
  for (int i = 0; i < p->n_steps; i++) {
    set_variant(&p->steps[i], chosen[i]);
    changed += chosen[i] != 0;
  }
  if (!s)
    sb_printf(explain, "max-autotune: %d of %d steps use a non-default variant%s\n", changed, p->n_steps,
              *cache_hit ? " (choices from the cache)" : "");
  free(data);
  free(chosen);
  free(t);
  return s;
}
