/* LinearAttention against a naive recurrence written here. */
#include "nn_test_util.h"

static void check(const char *rule, int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t dk,
                  int64_t dv, bool past, bool decay_per_dk, bool beta_shared, float scale) {
  bool gating = strstr(rule, "gated") != NULL, delta = strstr(rule, "delta") != NULL;
  tensor q = {0}, k = {0}, v = {0}, ps = {0}, dc = {0}, bt = {0}, y = {0}, st = {0};
  nt_rand(&q, SMELT_F32, 3, (int64_t[]){B, T, Hq * dk});
  nt_rand(&k, SMELT_F32, 3, (int64_t[]){B, T, Hkv * dk});
  nt_rand(&v, SMELT_F32, 3, (int64_t[]){B, T, Hkv * dv});
  if (past) nt_rand(&ps, SMELT_F32, 4, (int64_t[]){B, Hkv, dk, dv});
  int64_t dw = decay_per_dk ? Hkv * dk : Hkv, bw = beta_shared ? 1 : Hkv;
  if (gating) nt_rand(&dc, SMELT_F32, 3, (int64_t[]){B, T, dw});
  if (delta) {
    nt_rand(&bt, SMELT_F32, 3, (int64_t[]){B, T, bw});
    for (int64_t i = 0; i < tensor_numel(&bt); i++) tensor_set_f64(&bt, i, 0.5 + 0.4 * tensor_get_f64(&bt, i));
  }
  ir_attr a[] = {nt_str("update_rule", rule), nt_int("q_num_heads", Hq), nt_int("kv_num_heads", Hkv),
                 nt_float("scale", scale)};
  tensor *in[] = {&q, &k, &v, past ? &ps : NULL, gating ? &dc : NULL, delta ? &bt : NULL};
  tensor *out[] = {&y, &st};
  CHECK_OK(nt_run("LinearAttention", 27, a, 4, in, 6, out, 2));
  double sc = scale != 0 ? scale : 1 / sqrt((double)dk);
  double *wy = calloc((size_t)(B * T * Hq * dv), sizeof(double)), *ws = calloc((size_t)(B * Hkv * dk * dv), sizeof(double));
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < Hkv; h++) {
      double *S = ws + (b * Hkv + h) * dk * dv;
      for (int64_t i = 0; i < dk * dv; i++) S[i] = past ? tensor_get_f64(&ps, (b * Hkv + h) * dk * dv + i) : 0;
      for (int64_t t = 0; t < T; t++) {
        double vt[16], kt[16];
        for (int64_t i = 0; i < dk; i++) kt[i] = tensor_get_f64(&k, (b * T + t) * Hkv * dk + h * dk + i);
        for (int64_t m = 0; m < dv; m++) vt[m] = tensor_get_f64(&v, (b * T + t) * Hkv * dv + h * dv + m);
        for (int64_t i = 0; gating && i < dk; i++)
          for (int64_t m = 0; m < dv; m++)
            S[i * dv + m] *= exp(tensor_get_f64(&dc, (b * T + t) * dw + (decay_per_dk ? h * dk + i : h)));
        if (delta) {
          double be = tensor_get_f64(&bt, (b * T + t) * bw + (beta_shared ? 0 : h)), r[16] = {0};
          for (int64_t m = 0; m < dv; m++)
            for (int64_t i = 0; i < dk; i++) r[m] += S[i * dv + m] * kt[i];
          for (int64_t m = 0; m < dv; m++) vt[m] = be * (vt[m] - r[m]);
        }
        for (int64_t i = 0; i < dk; i++)
          for (int64_t m = 0; m < dv; m++) S[i * dv + m] += kt[i] * vt[m];
        for (int64_t hq = h * (Hq / Hkv); hq < (h + 1) * (Hq / Hkv); hq++)
          for (int64_t m = 0; m < dv; m++) {
            double acc = 0;
            for (int64_t i = 0; i < dk; i++) acc += tensor_get_f64(&q, (b * T + t) * Hq * dk + hq * dk + i) * S[i * dv + m];
            wy[(b * T + t) * Hq * dv + hq * dv + m] = sc * acc;
          }
      }
    }
  CHECK(nt_close(&y, wy, B * T * Hq * dv, 1e-5, 1e-4, rule));
  CHECK(nt_close(&st, ws, B * Hkv * dk * dv, 1e-5, 1e-4, "present_state"));
  free(wy);
  free(ws);
  tensor *all[] = {&q, &k, &v, &ps, &dc, &bt, &y, &st};
  for (int i = 0; i < 8; i++) tensor_release(all[i]);
}

int main(void) {
  check("linear", 2, 5, 2, 2, 4, 3, false, false, false, 0.f);
  check("gated", 2, 4, 4, 2, 3, 5, true, false, false, 0.5f);
  check("gated", 1, 3, 2, 1, 4, 4, true, true, false, 0.f);
  check("delta", 2, 6, 3, 3, 4, 2, true, false, true, 0.f);
  check("gated_delta", 2, 5, 6, 2, 3, 3, true, true, false, 0.f);
  check("gated_delta", 1, 1, 2, 2, 8, 8, true, false, true, 0.25f);
  /* the rule decides which inputs must be there */
  tensor q = {0}, k = {0}, v = {0}, y = {0};
  nt_rand(&q, SMELT_F32, 3, (int64_t[]){1, 2, 4});
  nt_rand(&k, SMELT_F32, 3, (int64_t[]){1, 2, 4});
  nt_rand(&v, SMELT_F32, 3, (int64_t[]){1, 2, 4});
  ir_attr a[] = {nt_int("q_num_heads", 1), nt_int("kv_num_heads", 1)};
  tensor *in[] = {&q, &k, &v}, *out[] = {&y};
  CHECK(nt_run("LinearAttention", 27, a, 2, in, 3, out, 1) != SMELT_OK);
  CHECK(nt_err_has("requires the decay input"));
  tensor_release(&y);
  tensor_release(&k);
  nt_rand(&k, SMELT_F32, 3, (int64_t[]){1, 3, 4});
  ir_attr a2[] = {nt_int("q_num_heads", 1), nt_int("kv_num_heads", 1), nt_str("update_rule", "linear")};
  CHECK(nt_run("LinearAttention", 27, a2, 3, in, 3, out, 1) != SMELT_OK);
  CHECK(nt_err_has("input 1 (key) dim 1 is 3"));
  tensor *all[] = {&q, &k, &v, &y};
  for (int i = 0; i < 4; i++) tensor_release(all[i]);
  return test_report("test_ops_linear_attention");
}
