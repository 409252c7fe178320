/* NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss against naive loops. */
#include "nn_test_util.h"

static void check_loss(bool sce, const char *red, int rank, const int64_t *xd, bool weights,
                       bool ignore, int64_t ignore_index) {
  int64_t N = xd[0], C = xd[1], D = 1, td[SMELT_MAX_RANK];
  for (int i = 2; i < rank; i++) D *= xd[i];
  td[0] = N;
  for (int i = 2; i < rank; i++) td[i - 1] = xd[i];
  tensor x = {0}, t = {0}, w = {0}, y = {0}, lp = {0};
  nt_rand(&x, SMELT_F32, rank, xd);
  tensor_alloc(&t, SMELT_I64, rank - 1, td);
  for (int64_t i = 0; i < N * D; i++) ((int64_t *)t.data)[i] = (i * 5 + 1) % C;
  if (ignore) ((int64_t *)t.data)[1] = ignore_index;
  if (weights) {
    nt_rand(&w, SMELT_F32, 1, &C);
    for (int64_t k = 0; k < C; k++) tensor_set_f64(&w, k, fabs(tensor_get_f64(&w, k)) + 0.5);
  }
  ir_attr a[] = {nt_str("reduction", red), nt_int("ignore_index", ignore_index)};
  tensor *in[] = {&x, &t, weights ? &w : NULL}, *out[] = {&y, &lp};
  CHECK_OK(nt_run(sce ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss", 13, a, ignore ? 2 : 1,
                  in, 3, out, sce ? 2 : 1));
  double *logp = malloc(sizeof(double) * (size_t)(N * C * D)), *loss = malloc(sizeof(double) * (size_t)(N * D));
  for (int64_t n = 0; n < N; n++)
    for (int64_t d = 0; d < D; d++) {
      double mx = -INFINITY, s = 0;
      for (int64_t k = 0; k < C; k++) mx = fmax(mx, tensor_get_f64(&x, (n * C + k) * D + d));
      for (int64_t k = 0; k < C; k++) s += exp(tensor_get_f64(&x, (n * C + k) * D + d) - mx);
      for (int64_t k = 0; k < C; k++) {
        double v = tensor_get_f64(&x, (n * C + k) * D + d);
        logp[(n * C + k) * D + d] = sce ? v - mx - log(s) : v;
      }
    }
  double sum = 0, wsum = 0;
  for (int64_t i = 0; i < N * D; i++) {
    int64_t k = ((int64_t *)t.data)[i], n = i / D, d = i % D;
    if (ignore && k == ignore_index) {
      loss[i] = 0;
      continue;
    }
    double wi = weights ? tensor_get_f64(&w, k) : 1;
    loss[i] = -logp[(n * C + k) * D + d] * wi;
    sum += loss[i];
    wsum += wi;
  }
  if (!strcmp(red, "none")) {
    CHECK(y.rank == rank - 1);
    CHECK(nt_close(&y, loss, N * D, 1e-6, 1e-5, "loss none"));
  } else {
    double v = !strcmp(red, "sum") ? sum : sum / wsum;
    CHECK(y.rank == 0);
    CHECK(nt_close(&y, &v, 1, 1e-6, 1e-5, red));
  }
  if (sce) CHECK(nt_close(&lp, logp, N * C * D, 1e-6, 1e-5, "log_prob"));
  free(logp);
  free(loss);
  tensor *all[] = {&x, &t, &w, &y, &lp};
  for (int i = 0; i < 5; i++) tensor_release(all[i]);
}

int main(void) {
  const char *reds[] = {"none", "sum", "mean"};
  for (int s = 0; s < 2; s++)
    for (int r = 0; r < 3; r++)
      for (int wgt = 0; wgt < 2; wgt++)
        for (int ig = 0; ig < 2; ig++) {
          check_loss(s, reds[r], 2, (int64_t[]){5, 4}, wgt, ig, -1);
          check_loss(s, reds[r], 3, (int64_t[]){3, 5, 2}, wgt, ig, 3);
          check_loss(s, reds[r], 5, (int64_t[]){2, 3, 2, 3, 2}, wgt, ig, -5);
        }
  /* a target outside [0, C) is a run-time error */
  tensor x = {0}, t = {0}, y = {0};
  nt_rand(&x, SMELT_F32, 2, (int64_t[]){2, 3});
  harness_i64(&t, 1, (int64_t[]){2}, (int64_t[]){1, 3});
  tensor *in[] = {&x, &t}, *out[] = {&y};
  CHECK(nt_run("NegativeLogLikelihoodLoss", 13, NULL, 0, in, 2, out, 1) != SMELT_OK);
  CHECK(nt_err_has("not a class index"));
  tensor_release(&y);
  tensor_release(&t);
  harness_i64(&t, 1, (int64_t[]){3}, (int64_t[]){1, 2, 0});
  CHECK(nt_run("NegativeLogLikelihoodLoss", 13, NULL, 0, in, 2, out, 1) != SMELT_OK);
  CHECK(nt_err_has("target dim 0 is 3"));
  tensor_release(&y);
  tensor_release(&t);
  tensor_release(&x);
  return test_report("test_ops_loss");
}
