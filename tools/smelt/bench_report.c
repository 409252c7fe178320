/* smelt bench reports: per-mode blocks, the comparison table, JSON. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "util/file.h"

static const char *mode_name(int m) { return smelt_mode_name((smelt_mode)m); }

static const bench_result *eager_result(const bench_report *rep) {
  for (int i = 0; i < rep->n_results; i++)
    if (rep->results[i].mode == SMELT_MODE_EAGER && rep->results[i].ok) return &rep->results[i];
  return NULL;
}

static double ci_rel_width(const stats_summary *s) {
  return s->median > 0 ? (s->ci_hi - s->ci_lo) / s->median : 0;
}

void bench_print_result(const bench_report *rep, const bench_result *r) {
  printf("\nmode %s\n", mode_name(r->mode));
  if (!r->ok) {
    printf("  error: %s\n", r->error);
    return;
  }
  const stats_summary *s = &r->lat;
  printf("  session create  cold %.3f ms, warm (cache filled) %.3f ms\n", r->create_cold_s * 1e3,
         r->create_warm_s * 1e3);
  if (r->mode != SMELT_MODE_EAGER)
    printf("  compiling       cold: %d compile(s), %.3f s; warm: %d compile(s), %d from the cache, %.3f s;\n"
           "                  %d generated kernels, %d graph breaks%s\n", r->cold.compiles,
           r->cold.compile_seconds, r->warm.compiles, r->warm.cache_hits, r->warm.compile_seconds,
           r->warm.kernels_generated, r->warm.graph_breaks, r->warm.eager_fallback ? ", FELL BACK to eager" : "");
  if (r->cold.prepared_saved || r->warm.prepared_loaded)
    printf("  prepared weights cold: %d saved to the cache; warm: %d mapped from it\n", r->cold.prepared_saved,
           r->warm.prepared_loaded);
  printf("  first run       %.3f ms (warm session: %.3f ms)\n", r->first_run_ms, r->first_run_warm_ms);
  printf("  latency         median %.4f ms, 95%% CI [%.4f, %.4f] (x(%zu)..x(%zu), coverage %.1f%%)\n",
         s->median, s->ci_lo, s->ci_hi, s->ci_lo_rank, s->ci_hi_rank, s->ci_coverage * 100);
  printf("                  mean %.4f  std %.4f  min %.4f  max %.4f  p90 %.4f  p99 %.4f\n", s->mean, s->std,
         s->min, s->max, s->p90, s->p99);
  printf("                  %zu timed runs in %.2f s after %d warm-up\n", s->n, r->timed_s, r->warmup);
  double per_s = s->median > 0 ? 1e3 / s->median : 0;
  printf("  throughput      %.2f inferences/s", per_s);
  if (rep->tokens > 0) printf(", %.0f tokens/s (%lld tokens per inference)", per_s * (double)rep->tokens,
                              (long long)rep->tokens);
  printf("\n  memory          peak RSS %.1f MB (the process held %.1f MB at its start); arena %.2f MB",
         r->peak_rss_mb, r->rss_start_mb, r->arena_mb);
  if (r->mode == SMELT_MODE_EAGER) printf("; eager intermediates peak %.2f MB", r->eager_peak_mb);
  printf("\n");
  if (r->has_parity)
    printf("  parity vs eager max abs %.3g, max rel %.3g (%s rtol %g atol %g)\n", r->max_abs, r->max_rel,
           r->parity_within_tol ? "within" : "OUTSIDE", BENCH_RTOL, BENCH_ATOL);
  else printf("  parity vs eager not checked: %s\n", r->parity_error);
  const ir_graph *g = rep->graph;
  if (rep->cfg->precision != SMELT_PRECISION_FP32)
    for (int k = 0; r->has_parity && k < r->n_acc && k < g->n_outputs; k++)
      printf("  accuracy %s vs eager fp32, output %s: max abs %.3g, max rel %.3g, cosine %.6f\n",
             smelt_precision_name(rep->cfg->precision), g->values[g->outputs[k]].name, r->acc[k].max_abs,
             r->acc[k].max_rel, r->acc[k].cosine);
}

static const char *model_label(const char *path, char *buf, size_t n) {
  /* "…/resnet18/model.onnx" reads best as "resnet18" */
  const char *slash = strrchr(path, '/');
  if (slash && !strcmp(slash + 1, "model.onnx")) {
    const char *start = slash;
    while (start > path && start[-1] != '/') start--;
    snprintf(buf, n, "%.*s", (int)(slash - start), start);
    if (*buf) return buf;
  }
  snprintf(buf, n, "%s", slash ? slash + 1 : path);
  return buf;
}

void bench_print_compare(const bench_report *rep) {
  const bench_result *e = eager_result(rep);
  char label[256];
  model_label(rep->model, label, sizeof label);
  printf("\n| model | mode | median ms [95%% CI] | speedup vs eager | first-run change | memory change |\n"
         "| --- | --- | --- | --- | --- | --- |\n");
  for (int i = 0; i < rep->n_results; i++) {
    const bench_result *r = &rep->results[i];
    if (!r->ok) {
      printf("| %s | %s | error: %s | | | |\n", label, mode_name(r->mode), r->error);
      continue;
    }
    printf("| %s | %s | %.3f [%.3f, %.3f] |", label, mode_name(r->mode), r->lat.median, r->lat.ci_lo, r->lat.ci_hi);
    if (!e) {
      printf(" (no eager) | | |\n");
      continue;
    }
    printf(" %.2fx |", r->speedup);
    if (r == e) {
      printf(" (%.1f ms) | (%.1f MB peak RSS) |\n", e->first_run_ms, e->peak_rss_mb);
      continue;
    }
    double d_first = r->first_run_ms - e->first_run_ms, d_mem = r->peak_rss_mb - e->peak_rss_mb;
    printf(" %+.1f ms (%.2fx) | %+.1f MB (%+.1f%%) |\n", d_first,
           e->first_run_ms > 0 ? r->first_run_ms / e->first_run_ms : 0, d_mem,
           e->peak_rss_mb > 0 ? 100 * d_mem / e->peak_rss_mb : 0);
  }
}

void bench_print_warnings(const bench_report *rep) {
  for (int i = 0; i < rep->n_results; i++) {
    const bench_result *r = &rep->results[i];
    if (!r->ok) continue;
    double w = ci_rel_width(&r->lat);
    if (w > BENCH_CI_WARN)
      printf("warning: %s: the 95%% CI of the median is %.1f%% of the median (over %.0f%%): the timings are "
             "noisy; use more runs (--runs, --seconds) or a quieter machine\n",
             mode_name(r->mode), 100 * w, 100 * BENCH_CI_WARN);
    if (r->lat.ci_coverage < BENCH_CI_LEVEL)
      printf("warning: %s: %zu runs are too few for a 95%% CI of the median (need 6); [min, max] covers "
             "only %.1f%%\n", mode_name(r->mode), r->lat.n, 100 * r->lat.ci_coverage);
  }
}

static void json_latency(json_writer *w, const stats_summary *s) {
  json_object_begin(w);
  json_kv_number(w, "median", s->median);
  json_kv_number(w, "mean", s->mean);
  json_kv_number(w, "std", s->std);
  json_kv_number(w, "min", s->min);
  json_kv_number(w, "max", s->max);
  json_kv_number(w, "p50", s->p50);
  json_kv_number(w, "p90", s->p90);
  json_kv_number(w, "p99", s->p99);
  json_key(w, "ci95");
  json_array_begin(w);
  json_number(w, s->ci_lo);
  json_number(w, s->ci_hi);
  json_array_end(w);
  json_kv_number(w, "ci_coverage", s->ci_coverage);
  json_kv_int(w, "n", (int64_t)s->n);
  json_object_end(w);
}

static void json_session_stats(json_writer *w, const bench_session_stats *b) {
  json_object_begin(w);
  json_kv_int(w, "compiles", b->compiles);
  json_kv_int(w, "cache_hits", b->cache_hits);
  json_kv_int(w, "eager_fallback", b->eager_fallback);
  json_kv_int(w, "graph_breaks", b->graph_breaks);
  json_kv_int(w, "kernels_generated", b->kernels_generated);
  json_kv_number(w, "compile_seconds", b->compile_seconds);
  json_kv_int(w, "prepared_loaded", b->prepared_loaded);
  json_kv_int(w, "prepared_saved", b->prepared_saved);
  json_object_end(w);
}

static void json_result(json_writer *w, const bench_report *rep, const bench_result *r) {
  json_object_begin(w);
  json_kv_string(w, "mode", mode_name(r->mode));
  if (!r->ok) {
    json_kv_string(w, "error", r->error);
    json_object_end(w);
    return;
  }
  json_kv_int(w, "threads", r->threads);
  json_kv_number(w, "compile_cold_s", r->create_cold_s);
  json_kv_number(w, "compile_warm_s", r->create_warm_s);
  json_kv_number(w, "first_run_ms", r->first_run_ms);
  json_kv_number(w, "first_run_warm_ms", r->first_run_warm_ms);
  json_kv_int(w, "warmup", r->warmup);
  json_kv_int(w, "runs", (int64_t)r->lat.n);
  json_kv_number(w, "timed_s", r->timed_s);
  json_key(w, "latency_ms");
  json_latency(w, &r->lat);
  double per_s = r->lat.median > 0 ? 1e3 / r->lat.median : 0;
  json_kv_number(w, "throughput_per_s", per_s);
  if (rep->tokens > 0) json_kv_number(w, "tokens_per_s", per_s * (double)rep->tokens);
  json_kv_number(w, "peak_rss_mb", r->peak_rss_mb);
  json_kv_number(w, "rss_start_mb", r->rss_start_mb);
  json_kv_number(w, "arena_mb", r->arena_mb);
  json_kv_number(w, "eager_peak_mb", r->eager_peak_mb);
  json_key(w, "session_cold");
  json_session_stats(w, &r->cold);
  json_key(w, "session");
  json_session_stats(w, &r->warm);
  json_key(w, "parity");
  json_object_begin(w);
  json_kv_string(w, "reference", "eager");
  if (r->has_parity) {
    json_kv_number(w, "max_abs", r->max_abs);
    json_kv_number(w, "max_rel", r->max_rel);
    json_kv_bool(w, "within_tolerance", r->parity_within_tol);
    json_kv_number(w, "rtol", BENCH_RTOL);
    json_kv_number(w, "atol", BENCH_ATOL);
  } else {
    json_kv_string(w, "error", r->parity_error);
  }
  json_object_end(w);
  json_kv_string(w, "precision", smelt_precision_name(rep->cfg->precision));
  json_key(w, "accuracy"); /* every output against eager fp32 (the parity reference) */
  json_object_begin(w);
  json_kv_string(w, "reference", "eager fp32");
  json_key(w, "outputs");
  json_array_begin(w);
  for (int k = 0; r->has_parity && k < r->n_acc && k < rep->graph->n_outputs; k++) {
    json_object_begin(w);
    json_kv_string(w, "name", rep->graph->values[rep->graph->outputs[k]].name);
    json_kv_number(w, "max_abs", r->acc[k].max_abs);
    json_kv_number(w, "max_rel", r->acc[k].max_rel);
    json_kv_number(w, "cosine", r->acc[k].cosine);
    json_object_end(w);
  }
  json_array_end(w);
  json_object_end(w);
  json_key(w, "speedup_vs_eager");
  if (r->has_speedup) json_number(w, r->speedup);
  else json_null(w);
  json_object_end(w);
}

static void json_inputs(json_writer *w, const bench_report *rep) {
  const ir_graph *g = rep->graph;
  json_object_begin(w);
  for (int k = 0; k < g->n_inputs; k++) {
    const tensor *t = &rep->inputs[k];
    json_key(w, g->values[g->inputs[k]].name);
    json_object_begin(w);
    json_kv_string(w, "dtype", dtype_name(t->dtype));
    json_key(w, "shape");
    json_array_begin(w);
    for (int d = 0; d < t->rank; d++) json_int(w, t->dims[d]);
    json_array_end(w);
    if (rep->input_files[k]) {
      json_kv_string(w, "source", "file");
      json_kv_string(w, "file", rep->input_files[k]);
    } else {
      json_kv_string(w, "source", "generated");
      json_kv_int(w, "seed", (int64_t)rep->seed);
    }
    json_object_end(w);
  }
  json_object_end(w);
}

static void json_config(json_writer *w, const bench_report *rep) {
  json_key(w, "dims");
  json_object_begin(w);
  for (int i = 0; i < rep->n_dims; i++) json_kv_string(w, rep->dims[i].key, rep->dims[i].val);
  json_object_end(w);
  json_key(w, "method");
  json_object_begin(w);
  json_kv_int(w, "warmup", rep->cfg->warmup);
  if (rep->cfg->runs > 0) json_kv_int(w, "runs", rep->cfg->runs);
  else json_kv_number(w, "min_seconds", rep->cfg->seconds > 0 ? rep->cfg->seconds : BENCH_DEFAULT_MIN_SECONDS);
  json_kv_string(w, "ci", "distribution-free 95% CI of the median from binomial order statistics");
  json_kv_string(w, "peak_rss", "VmHWM of a forked child process per mode");
  json_kv_string(w, "timer", "CLOCK_MONOTONIC around each run");
  json_object_end(w);
  if (rep->tokens > 0) json_kv_int(w, "tokens_per_inference", rep->tokens);
}

int bench_write_json(const bench_report *rep, const char *path) {
  json_writer w;
  json_init(&w, true);
  json_object_begin(&w);
  json_kv_string(&w, "model", rep->model);
  int threads = rep->cfg->threads;
  for (int i = 0; i < rep->n_results; i++)
    if (rep->results[i].ok) threads = rep->results[i].threads;
  json_kv_int(&w, "threads", threads);
  json_kv_string(&w, "precision", smelt_precision_name(rep->cfg->precision));
  json_kv_string(&w, "device", rep->cfg->device && *rep->cfg->device ? rep->cfg->device : "cpu");
  json_key(&w, "inputs");
  json_inputs(&w, rep);
  json_config(&w, rep);
  json_key(&w, "environment");
  bench_env_json(rep->env, &w);
  json_key(&w, "results");
  json_array_begin(&w);
  for (int i = 0; i < rep->n_results; i++) json_result(&w, rep, &rep->results[i]);
  json_array_end(&w);
  const bench_agree *a = rep->agree;
  if (a && (a->done || a->why[0])) { /* top-1 / top-5 against eager fp32 (bench.h: bench_agreement) */
    json_key(&w, "agreement");
    json_object_begin(&w);
    json_kv_string(&w, "reference", "eager fp32");
    json_kv_string(&w, "mode", smelt_mode_name((smelt_mode)a->mode));
    if (a->done) {
      json_kv_int(&w, "inputs", a->inputs);
      json_kv_int(&w, "rows", a->rows);
      json_kv_number(&w, "top1", (double)a->top1 / a->rows);
      json_kv_number(&w, "top5_overlap", a->top5);
    } else {
      json_kv_string(&w, "error", a->why);
    }
    json_object_end(&w);
  }
  json_object_end(&w);
  const char *text;
  size_t len;
  smelt_status st = json_finish(&w, &text, &len);
  if (!st) st = file_write_atomic(path, text, len);
  json_free(&w);
  if (st) return cli_fail("writing the JSON report");
  return 0;
}
