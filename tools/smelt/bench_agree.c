/* Top-1 / top-5 agreement of a reduced precision with fp32 on a classifier
 * (smelt bench --precision P): the fp32 eager session and the measured
 * mode's session at P, run in this process on the same seeded generated
 * inputs, one after the other. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* The k largest values' indices of x[0..n), largest first (ties: lower index). */
static void top_k(const tensor *t, int64_t row, int64_t n, int k, int64_t *idx) {
  for (int j = 0; j < k; j++) idx[j] = -1;
  for (int64_t i = 0; i < n; i++) {
    double v = tensor_get_f64(t, row * n + i);
    if (v != v) continue; /* NaN ranks nowhere */
    int j = k;
    while (j > 0 && (idx[j - 1] < 0 || tensor_get_f64(t, row * n + idx[j - 1]) < v)) j--;
    if (j == k) continue;
    memmove(idx + j + 1, idx + j, sizeof *idx * (size_t)(k - 1 - j));
    idx[j] = i;
  }
}

/* Classifier-shaped: one float output [rows, classes], classes >= 5. */
static bool classifier_out(const tensor *t) {
  return t->kind == TENSOR_KIND_TENSOR && dtype_is_float(t->dtype) && t->rank == 2 && t->dims[1] >= 5 &&
         t->dims[0] >= 1;
}

static smelt_session *open_session(const smelt_model *m, const bench_config *c, int mode, smelt_precision p,
                                   bench_agree *a) {
  smelt_session_options o = cli_session_options();
  o.threads = c->threads, o.mode = (smelt_mode)mode, o.precision = p, o.max_memory = c->max_memory;
  o.device = c->device;
  smelt_session *s = NULL;
  if (smelt_session_create(m, &o, &s)) {
    snprintf(a->why, sizeof a->why, "session (%s, %s): %.200s", smelt_mode_name((smelt_mode)mode),
             smelt_precision_name(p), smelt_last_error());
    return NULL;
  }
  return s;
}

void bench_agreement(const smelt_model *m, const bench_config *c, int mode, const bench_inputs_spec *in,
                     bench_agree *a) {
  memset(a, 0, sizeof *a);
  a->mode = mode;
  const ir_graph *g = m->onnx->graph;
  if (c->precision == SMELT_PRECISION_FP32 || c->agreement <= 0 || g->n_outputs != 1) return;
  for (int k = 0; k < g->n_inputs; k++)
    for (int f = 0; f < in->n_files; f++)
      if (!strcmp(in->files[f].key, g->values[g->inputs[k]].name)) {
        snprintf(a->why, sizeof a->why, "input %s is given with -i (the agreement needs generated inputs)",
                 in->files[f].key);
        return;
      }
  tensor *x = calloc((size_t)g->n_inputs + 1, sizeof *x), **xp = calloc((size_t)g->n_inputs + 1, sizeof *xp);
  tensor y32 = {0}, y = {0};
  smelt_session *s32 = x && xp ? open_session(m, c, SMELT_MODE_EAGER, SMELT_PRECISION_FP32, a) : NULL;
  smelt_session *sp = s32 ? open_session(m, c, mode, c->precision, a) : NULL;
  for (int i = 0; sp && i < c->agreement; i++) {
    if (cli_make_inputs(g, NULL, 0, in->dims, in->n_dims, false, in->seed + 1 + (uint64_t)i, x)) {
      snprintf(a->why, sizeof a->why, "inputs: %.200s", smelt_last_error());
      break;
    }
    for (int k = 0; k < g->n_inputs; k++) xp[k] = &x[k];
    smelt_status st = cli_session_run(s32, xp, &y32, NULL, c->timeout_s);
    if (!st) st = cli_session_run(sp, xp, &y, NULL, c->timeout_s);
    for (int k = 0; k < g->n_inputs; k++) tensor_release(&x[k]);
    if (st) {
      snprintf(a->why, sizeof a->why, "run: %.200s", smelt_last_error());
      break;
    }
    if (!classifier_out(&y32) || y.rank != 2 || y.dims[0] != y32.dims[0] || y.dims[1] != y32.dims[1]) {
      a->why[0] = 0; /* not a classifier: nothing to say */
      tensor_release(&y32), tensor_release(&y);
      break;
    }
    int64_t n = y32.dims[1];
    for (int64_t r = 0; r < y32.dims[0]; r++) {
      int64_t t32[5], tp[5];
      top_k(&y32, r, n, 5, t32);
      top_k(&y, r, n, 5, tp);
      a->top1 += t32[0] >= 0 && t32[0] == tp[0];
      int both = 0;
      for (int u = 0; u < 5; u++)
        for (int v = 0; v < 5; v++) both += t32[u] >= 0 && t32[u] == tp[v];
      a->top5 += both / 5.0;
      a->rows++;
    }
    tensor_release(&y32), tensor_release(&y);
    a->inputs = i + 1;
  }
  if (a->rows && a->inputs == c->agreement) {
    a->done = true;
    a->top5 /= a->rows;
  }
  smelt_session_free(sp);
  smelt_session_free(s32);
  free(x), free(xp);
}

void bench_agreement_print(const bench_agree *a, smelt_precision p) {
  if (a->done)
    printf("\nagreement %s (%s) vs eager fp32 over %d seeded inputs (%d rows): top-1 %d/%d (%.1f%%), "
           "top-5 overlap %.1f%%\n",
           smelt_precision_name(p), smelt_mode_name((smelt_mode)a->mode), a->inputs, a->rows, a->top1, a->rows,
           100.0 * a->top1 / a->rows, 100.0 * a->top5);
  else if (a->why[0])
    printf("\nagreement %s vs eager fp32 not measured: %s\n", smelt_precision_name(p), a->why);
}
