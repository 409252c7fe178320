/* CausalConvWithState against a naive loop written here. */
#include "nn_test_util.h"

static void check(int64_t B, int64_t C, int64_t L, int64_t k, bool past, bool bias, const char *act) {
  tensor x = {0}, w = {0}, b = {0}, ps = {0}, y = {0}, st = {0};
  nt_rand(&x, SMELT_F32, 3, (int64_t[]){B, C, L});
  nt_rand(&w, SMELT_F32, 3, (int64_t[]){C, 1, k});
  if (bias) nt_rand(&b, SMELT_F32, 1, &C);
  if (past) nt_rand(&ps, SMELT_F32, 3, (int64_t[]){B, C, k - 1});
  ir_attr a[] = {nt_str("activation", act)};
  tensor *in[] = {&x, &w, bias ? &b : NULL, past ? &ps : NULL}, *out[] = {&y, &st};
  CHECK_OK(nt_run("CausalConvWithState", 27, a, 1, in, 4, out, 2));
  double *wy = malloc(sizeof(double) * (size_t)(B * C * L + 1));
  double *ws = malloc(sizeof(double) * (size_t)(B * C * (k - 1) + 1));
  for (int64_t q = 0; q < B * C; q++) {
    int64_t ch = q % C;
    for (int64_t t = 0; t < L + k - 1; t++) { /* xp[t] */
      double v = t < k - 1 ? (past ? tensor_get_f64(&ps, q * (k - 1) + t) : 0) : tensor_get_f64(&x, q * L + t - (k - 1));
      if (t >= L) ws[q * (k - 1) + t - L] = v;
    }
    for (int64_t t = 0; t < L; t++) {
      double acc = bias ? tensor_get_f64(&b, ch) : 0;
      for (int64_t j = 0; j < k; j++) {
        int64_t pos = t + j; /* in xp */
        double v = pos < k - 1 ? (past ? tensor_get_f64(&ps, q * (k - 1) + pos) : 0) : tensor_get_f64(&x, q * L + pos - (k - 1));
        acc += tensor_get_f64(&w, ch * k + j) * v;
      }
      wy[q * L + t] = strcmp(act, "none") ? acc / (1 + exp(-acc)) : acc;
    }
  }
  CHECK(nt_close(&y, wy, B * C * L, 1e-6, 1e-5, "CausalConvWithState output"));
  CHECK(st.rank == 3 && st.dims[2] == k - 1);
  CHECK(nt_close(&st, ws, B * C * (k - 1), 0, 0, "present_state"));
  free(wy);
  free(ws);
  tensor *all[] = {&x, &w, &b, &ps, &y, &st};
  for (int i = 0; i < 6; i++) tensor_release(all[i]);
}

int main(void) {
  check(2, 3, 7, 4, false, false, "none");
  check(2, 3, 7, 4, true, true, "silu");
  check(1, 5, 2, 4, true, false, "swish"); /* shorter than the state */
  check(1, 2, 5, 1, false, true, "none");   /* k = 1: empty state */
  check(3, 1, 1, 3, true, true, "none");    /* decode step */
  tensor x = {0}, w = {0}, y = {0};
  nt_rand(&x, SMELT_F32, 3, (int64_t[]){1, 3, 4});
  nt_rand(&w, SMELT_F32, 3, (int64_t[]){2, 1, 3});
  tensor *in[] = {&x, &w}, *out[] = {&y};
  CHECK(nt_run("CausalConvWithState", 27, NULL, 0, in, 2, out, 1) != SMELT_OK);
  CHECK(nt_err_has("weight has 2 channels, input 3"));
  tensor_release(&x);
  tensor_release(&w);
  tensor_release(&y);
  return test_report("test_ops_causal_conv");
}
