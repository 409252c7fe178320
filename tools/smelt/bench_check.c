/* Parity of a mode's outputs against eager, and the token count of an inference. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "runtime/compare.h"
#include "runtime/tensor_file.h"

/* Cosine similarity of two float tensors of the same size (1 when both are
 * zero, NaN when one of them is zero or holds a NaN). */
static double cosine(const tensor *a, const tensor *e) {
  int64_t n = tensor_numel(a);
  if (!dtype_is_float(a->dtype) || !dtype_is_float(e->dtype) || n != tensor_numel(e)) return NAN;
  double ab = 0, aa = 0, ee = 0;
  for (int64_t i = 0; i < n; i++) {
    double x = tensor_get_f64(a, i), y = tensor_get_f64(e, i);
    ab += x * y, aa += x * x, ee += y * y;
  }
  if (aa == 0 && ee == 0) return 1;
  return ab / sqrt(aa * ee);
}

/* Compares one saved output with the reference; false (and r->parity_error) if
 * the files cannot be read or compared. */
static bool compare_file(const bench_result *ref, bench_result *r, const char *prefix, int k) {
  char pa[1024], pe[1024];
  tensor a = {0}, e = {0};
  bool ok = cli_path(pa, sizeof pa, "%s/%s_%d.npy", r->out_dir, prefix, k) &&
            cli_path(pe, sizeof pe, "%s/first_%d.npy", ref->out_dir, k);
  if (ok && (tensor_file_load(pa, &a) || tensor_file_load(pe, &e))) ok = false;
  compare_result c;
  if (ok && tensor_compare(&a, &e, BENCH_RTOL, BENCH_ATOL, &c)) ok = false;
  if (!ok) {
    snprintf(r->parity_error, sizeof r->parity_error, "output %d (%s run): %.400s", k, prefix,
             *smelt_last_error() ? smelt_last_error() : "path too long");
  } else {
    /* a shape or dtype mismatch leaves the maxima at 0: that must not read as a match */
    if (!c.ok && c.mismatches == 0) {
      snprintf(r->parity_error, sizeof r->parity_error, "output %d (%s run): %.400s", k, prefix, c.message);
      ok = false;
    }
    if (c.max_abs > r->max_abs || isnan(c.max_abs)) r->max_abs = c.max_abs;
    if (c.max_rel > r->max_rel || isnan(c.max_rel)) r->max_rel = c.max_rel;
    r->parity_within_tol &= c.ok;
    if (!strcmp(prefix, "first") && k < BENCH_MAX_ACC) {
      r->acc[k].max_abs = c.max_abs, r->acc[k].max_rel = c.max_rel;
      r->acc[k].cosine = a.kind == TENSOR_KIND_TENSOR && e.kind == TENSOR_KIND_TENSOR ? cosine(&a, &e) : NAN;
      if (k >= r->n_acc) r->n_acc = k + 1;
    }
  }
  tensor_release(&a);
  tensor_release(&e);
  return ok;
}

void bench_parity(const ir_graph *g, const bench_result *ref, bench_result *r) {
  r->has_parity = false;
  r->max_abs = r->max_rel = 0;
  r->parity_within_tol = true;
  r->parity_error[0] = 0;
  r->n_acc = 0;
  if (!r->ok || !ref || !ref->ok || r->n_outputs_saved != g->n_outputs || ref->n_outputs_saved != g->n_outputs) {
    snprintf(r->parity_error, sizeof r->parity_error, "%s",
             !ref || !ref->ok ? "no eager reference outputs" : "this mode produced no outputs");
    r->parity_within_tol = false;
    return;
  }
  for (int k = 0; k < g->n_outputs; k++)
    if (!compare_file(ref, r, "first", k) || !compare_file(ref, r, "last", k)) {
      r->parity_within_tol = false;
      return;
    }
  r->has_parity = true;
}

int64_t bench_tokens(const ir_graph *g, const tensor *inputs) {
  for (int k = 0; k < g->n_inputs; k++) {
    int v = g->inputs[k];
    if (!dtype_is_int(g->values[v].dtype)) continue;
    for (int i = 0; i < g->n_nodes; i++) {
      const ir_node *nd = &g->nodes[i];
      if (strcmp(nd->op_type, "Gather") || nd->n_inputs < 2 || nd->inputs[1] != v || nd->inputs[0] < 0)
        continue;
      const ir_value *table = &g->values[nd->inputs[0]];
      if (table->constant && table->rank == 2 && dtype_is_float(table->dtype)) {
        int64_t n = tensor_numel(&inputs[k]);
        return n > 0 ? n : 0;
      }
    }
  }
  return 0;
}
