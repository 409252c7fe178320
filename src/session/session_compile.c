/* Specializations of a session (see session_compile.h). */
#include "session/session_compile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/prep_store.h"
#include "session/bucket.h"
#include "ops/op_cache.h"
#include "runtime/plan_run.h"
#include "runtime/weight_store.h"
#include "parallel/run_ctl.h"
#include "session/session.h"
#include "util/env.h"
#include "util/err.h"

#define DYNAMIC_MAX_PLANS 64

smelt_status session_compiler_create(smelt_session *s, session_compiler **out) {
  session_compiler *sc = calloc(1, sizeof *sc);
  if (!sc) return err_nomem("session compiler", sizeof *sc);
  pthread_mutex_init(&sc->lock, NULL);
  pthread_mutex_init(&sc->compile_lock, NULL);
  kernel_memo_init(&sc->memo);
  sc->op_cache = calloc(1, sizeof *sc->op_cache);
  if (!sc->op_cache) {
    session_compiler_free(sc);
    return err_nomem("op cache", sizeof *sc->op_cache);
  }
  smelt_status st = bucket_parse(s->model->onnx->graph, s->opts.buckets, &sc->buckets, &sc->n_buckets);
  if (st) {
    session_compiler_free(sc);
    return st;
  }
  bool warn = false;
  cache_open(&sc->cache, s->opts.cache_dir, &warn);
  if (warn) log_msg(&s->log, SMELT_LOG_WARNING, "compile cache off: %s", sc->cache.why_off);
  if (sc->cache.enabled && env_flag_on("SMELT_CACHE_WEIGHTS")) {
    st = prep_store_create(&sc->cache, &s->log, &sc->prep);
    if (st) {
      session_compiler_free(sc);
      return st;
    }
    prep_store_set_hash_memo(sc->prep, s->model->weight_hashes);
    sc->prep_if = weight_store_over(sc->prep);
    sc->op_cache->store = &sc->prep_if;
  }
  const char *dbg = getenv("SMELT_DEBUG");
  if (dbg && *dbg) snprintf(sc->debug_root, sizeof sc->debug_root, "%s", dbg);
  *out = sc;
  return SMELT_OK;
}

void session_compiler_free(session_compiler *sc) {
  if (!sc) return;
  for (int i = 0; i < sc->n_specs; i++) {
    compiled_plan_free(sc->specs[i].plan);
    free(sc->specs[i].sig);
  }
  free(sc->specs);
  for (int i = 0; i < sc->n_truth; i++) {
    free(sc->truth[i].in_sig);
    free(sc->truth[i].out_sig);
  }
  free(sc->truth);
  bucket_free(sc->buckets, sc->n_buckets);
  kernel_memo_free(&sc->memo);
  if (sc->op_cache) op_cache_free_all(sc->op_cache, 1);
  free(sc->op_cache);
  prep_store_free(sc->prep); /* after the op cache: its weights may view the mappings */
  pthread_mutex_destroy(&sc->lock);
  pthread_mutex_destroy(&sc->compile_lock);
  free(sc);
}

static bool sig_match(const tensor *sig, int n, tensor *const *inputs) {
  for (int k = 0; k < n; k++) {
    const tensor *a = &sig[k], *b = inputs[k];
    if (a->dtype != b->dtype || a->rank != b->rank) return false;
    if (a->rank > 0 && memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank)) return false;
  }
  return true;
}

static compiled_plan *find_plan(session_compiler *sc, int n, tensor *const *inputs) {
  compiled_plan *p = NULL;
  pthread_mutex_lock(&sc->lock);
  for (int i = 0; i < sc->n_specs && !p; i++)
    if (sig_match(sc->specs[i].sig, n, inputs)) p = sc->specs[i].plan;
  pthread_mutex_unlock(&sc->lock);
  return p;
}

static const char *shapes_text(tensor *const *inputs, int n, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = 0;
  for (int k = 0; k < n && o < len; k++) {
    char sh[200];
    o += (size_t)snprintf(buf + o, len - o, "%s%s", k ? " " : "",
                          shape_str(sh, sizeof sh, inputs[k]->rank, inputs[k]->dims, NULL));
  }
  return buf;
}

/* The compiler is looked for once per session. */
static void probe_compiler(session_compiler *sc) {
  if (sc->tc_probed) return;
  sc->tc_probed = true;
  if (cc_probe(&sc->tc)) snprintf(sc->tc_error, sizeof sc->tc_error, "%s", smelt_last_error());
}

static void debug_dir_for(session_compiler *sc, smelt_mode mode, char *out, size_t n) {
  out[0] = 0;
  if (!sc->debug_root[0]) return;
  snprintf(out, n, "%s/compile-%ld-%d-%s", sc->debug_root, (long)getpid(), ++sc->debug_seq, smelt_mode_name(mode));
  char parent[1100];
  snprintf(parent, sizeof parent, "%s", sc->debug_root);
  mkdir(parent, 0700);
  if (mkdir(out, 0700) && errno != EEXIST) out[0] = 0;
}

static smelt_status add_plan(session_compiler *sc, int n, tensor *const *inputs, compiled_plan *p) {
  tensor *sig = calloc((size_t)n + 1, sizeof *sig);
  if (!sig) return err_nomem("specialization", sizeof *sig * (size_t)n);
  for (int k = 0; k < n; k++) {
    sig[k].dtype = inputs[k]->dtype;
    sig[k].rank = inputs[k]->rank;
    memcpy(sig[k].dims, inputs[k]->dims, sizeof sig[k].dims);
  }
  pthread_mutex_lock(&sc->lock);
  smelt_status st = SMELT_OK;
  if (sc->n_specs == sc->cap_specs) {
    int nc = sc->cap_specs ? sc->cap_specs * 2 : 4;
    spec_entry *ne = realloc(sc->specs, sizeof *ne * (size_t)nc);
    if (ne) {
      sc->specs = ne;
      sc->cap_specs = nc;
    } else {
      st = err_nomem("specializations", sizeof *ne * (size_t)nc);
    }
  }
  if (!st) sc->specs[sc->n_specs++] = (spec_entry){sig, p};
  pthread_mutex_unlock(&sc->lock);
  if (st) free(sig);
  return st;
}

static void record_stats(smelt_session *s, const compile_report *r, const compiled_plan *p) {
  pthread_mutex_lock(&s->stats_lock);
  s->stats.compiles++;
  s->stats.cache_hits += r->cache_hit;
  s->stats.graph_breaks = r->graph_breaks;
  s->stats.kernels_generated = r->kernels;
  s->stats.compile_seconds += r->seconds;
  s->stats.arena_bytes = p->arena_bytes;
  pthread_mutex_unlock(&s->stats_lock);
}

/* Compiles a plan for these shapes (under the compile lock; the caller has
 * checked the limit). */
static smelt_status compile_for(smelt_session *s, tensor *const *inputs, compiled_plan **out,
                                compile_report *rep) {
  session_compiler *sc = s->sc;
  const ir_graph *mg = s->model->onnx->graph;
  probe_compiler(sc);
  char dbg[1200];
  debug_dir_for(sc, s->opts.mode, dbg, sizeof dbg);
  compile_options o = {.mode = s->opts.mode, .precision = s->opts.precision, .fullgraph = s->opts.fullgraph != 0, .dynamic = s->opts.dynamic != 0,
                       .pool = s->pool, .cache = &sc->cache, .debug_dir = dbg[0] ? dbg : NULL,
                       .jobs = pool_machine_cores() < 8 ? pool_machine_cores() : 8,
                       .tc = sc->tc_error[0] ? NULL : &sc->tc, .tc_error = sc->tc_error, .memo = &sc->memo,
                       .op_cache = sc->op_cache, .log = &s->log,
                       /* packing weights overlaps the C compile; max-autotune's choices come later */
                       .prepare_while_cc = s->opts.mode != SMELT_MODE_MAX_AUTOTUNE};
  compile_report local;
  memset(&local, 0, sizeof local);
  compile_report *r = rep ? rep : &local;
  smelt_status st = compile_model(mg, inputs, &o, out, r);
  if (!st) {
    st = plan_prepare(*out);
    if (st) {
      compiled_plan_free(*out);
      *out = NULL;
    }
  }
  if (!st && r->warning[0]) {
    bool nocc = r->no_codegen;
    if (!nocc || !sc->warned_nocc) log_msg(&s->log, SMELT_LOG_WARNING, "%s", r->warning);
    if (nocc) sc->warned_nocc = true;
  }
  if (!st) record_stats(s, r, *out);
  if (!rep) compile_report_free(&local);
  return st;
}

/* The plan for these shapes: found, compiled now, or NULL past the limit. */
static smelt_status get_plan(smelt_session *s, tensor *const *inputs, compiled_plan **out) {
  session_compiler *sc = s->sc;
  int n = s->model->onnx->graph->n_inputs;
  *out = find_plan(sc, n, inputs);
  if (*out) return SMELT_OK;
  pthread_mutex_lock(&sc->compile_lock);
  smelt_status st = SMELT_OK;
  *out = find_plan(sc, n, inputs); /* another thread may have made it meanwhile */
  int limit = s->opts.recompile_limit > 0 ? s->opts.recompile_limit : 8;
  bool dyn = s->opts.dynamic != 0;
  if (!*out && (sc->counted >= limit || (dyn && sc->n_specs >= DYNAMIC_MAX_PLANS))) {
    if (!sc->fell_back) {
      char sh[512];
      log_msg(&s->log, SMELT_LOG_WARNING,
              "recompile limit reached (%d compiles); inputs %s and any other new shapes "
              "run eagerly from now on (raise recompile_limit, or use dynamic or buckets)",
              sc->counted, shapes_text(inputs, n, sh, sizeof sh));
      sc->fell_back = true;
      pthread_mutex_lock(&s->stats_lock);
      s->stats.eager_fallback = 1;
      pthread_mutex_unlock(&s->stats_lock);
    }
  } else if (!*out) {
    compile_report rep;
    memset(&rep, 0, sizeof rep);
    /* the plan outlives this run (tuning, prepared weights, the cache): not interrupted */
    run_ctl *saved = run_ctl_enter(NULL);
    st = compile_for(s, inputs, out, &rep);
    run_ctl_enter(saved);
    /* dynamic: a new shape that reuses loaded kernels costs no C compile */
    if (!st && (!dyn || !rep.cache_hit)) sc->counted++;
    compile_report_free(&rep);
    if (!st) st = add_plan(sc, n, inputs, *out);
    if (st && *out) {
      compiled_plan_free(*out);
      *out = NULL;
    }
  }
  pthread_mutex_unlock(&sc->compile_lock);
  return st;
}

smelt_status session_compile(smelt_session *s, tensor *const *given, compile_report *rep) {
  session_compiler *sc = s->sc;
  int n = s->model->onnx->graph->n_inputs;
  tensor *padded = NULL, **pp = NULL;
  tensor *const *inputs = given;
  if (sc->n_buckets) { /* the shapes runs will be padded to */
    smelt_status ps = bucket_pad(sc->buckets, sc->n_buckets, s->model->onnx->graph, given, &padded, &pp);
    if (ps) {
      bucket_pad_free(padded, pp, n);
      return ps;
    }
    if (pp) inputs = pp;
  }
  pthread_mutex_lock(&sc->compile_lock);
  compiled_plan *p = find_plan(sc, n, inputs);
  smelt_status st = SMELT_OK;
  if (!p) {
    st = compile_for(s, inputs, &p, rep);
    if (!st) {
      sc->counted++;
      st = add_plan(sc, n, inputs, p);
      if (st) compiled_plan_free(p);
    }
  }
  pthread_mutex_unlock(&sc->compile_lock);
  bucket_pad_free(padded, pp, n);
  return st;
}

smelt_status session_compiled_run(smelt_session *s, tensor *const *inputs, tensor *outputs,
                                  const run_hook *hook) {
  session_compiler *sc = s->sc;
  const ir_graph *g = s->model->onnx->graph;
  tensor *padded = NULL, **pp = NULL;
  tensor *const *use = inputs;
  smelt_status st = SMELT_OK;
  if (sc->n_buckets) {
    st = bucket_pad(sc->buckets, sc->n_buckets, g, inputs, &padded, &pp);
    if (!st && pp) use = pp;
  }
  compiled_plan *p = NULL;
  if (!st) st = get_plan(s, use, &p);
  if (!st) {
    if (p) {
      st = plan_run_hooked(p, use, outputs, hook);
    } else {
      eager_stats es = {.hook = hook};
      st = eager_run(&s->plan, s->pool, NULL, use, outputs, &es);
    }
  }
  if (!st && use != inputs) st = bucket_trim(s, inputs, outputs);
  bucket_pad_free(padded, pp, g->n_inputs);
  return st;
}
