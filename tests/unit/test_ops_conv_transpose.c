/* ConvTranspose against a naive scatter written here. */
#include "nn_test_util.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef struct ct_case {
  int nsp;
  int64_t N, C, M, G;
  int64_t in[3], k[3], s[3], d[3], pads[6], opad[3], oshape[3];
  const char *auto_pad;
  bool bias, has_oshape;
} ct_case;

static void check_ct(smelt_pool *pool, smelt_dtype dt, ct_case cc) {
  int nsp = cc.nsp;
  for (int i = 0; i < nsp; i++) {
    if (!cc.s[i]) cc.s[i] = 1;
    if (!cc.d[i]) cc.d[i] = 1;
  }
  /* expected geometry, straight from the spec */
  int64_t out[3], pl[3];
  for (int i = 0; i < nsp; i++) {
    int64_t full = cc.s[i] * (cc.in[i] - 1) + cc.opad[i] + (cc.k[i] - 1) * cc.d[i] + 1;
    bool same = cc.auto_pad && !strncmp(cc.auto_pad, "SAME", 4);
    if (cc.has_oshape || same) {
      out[i] = cc.has_oshape ? cc.oshape[i] : cc.in[i] * cc.s[i];
      int64_t total = full - out[i];
      int64_t half = (int64_t)floor((double)total / 2);
      pl[i] = cc.auto_pad && !strcmp(cc.auto_pad, "SAME_UPPER") ? half : total - half;
    } else {
      out[i] = full - cc.pads[i] - cc.pads[nsp + i];
      pl[i] = cc.pads[i];
    }
  }
  int64_t Cg = cc.C / cc.G, Mg = cc.M / cc.G, Sin = 1, Sout = 1, Kk = 1;
  for (int i = 0; i < nsp; i++) Sin *= cc.in[i], Sout *= out[i], Kk *= cc.k[i];
  int64_t xd[5] = {cc.N, cc.C}, wd[5] = {cc.C, Mg};
  for (int i = 0; i < nsp; i++) xd[2 + i] = cc.in[i], wd[2 + i] = cc.k[i];
  tensor x = {0}, w = {0}, b = {0}, y = {0};
  nt_rand(&x, dt, 2 + nsp, xd);
  nt_rand(&w, dt, 2 + nsp, wd);
  if (cc.bias) nt_rand(&b, dt, 1, &cc.M);
  ir_attr at[8];
  int na = 0;
  at[na++] = nt_int("group", cc.G);
  at[na++] = nt_ints("strides", nsp, cc.s);
  at[na++] = nt_ints("dilations", nsp, cc.d);
  at[na++] = nt_ints("output_padding", nsp, cc.opad);
  if (cc.auto_pad) at[na++] = nt_str("auto_pad", cc.auto_pad);
  else at[na++] = nt_ints("pads", 2 * nsp, cc.pads);
  if (cc.has_oshape) at[na++] = nt_ints("output_shape", nsp, cc.oshape);
  tensor *in[] = {&x, &w, cc.bias ? &b : NULL}, *o[] = {&y};
  CHECK_OK(nt_run_pool(pool, "ConvTranspose", 22, at, na, in, 3, o, 1));
  double *want = calloc((size_t)(cc.N * cc.M * Sout) + 1, sizeof(double));
  for (int64_t n = 0; n < cc.N; n++)
    for (int64_t m = 0; m < cc.M; m++)
      for (int64_t p = 0; p < Sout; p++) want[(n * cc.M + m) * Sout + p] = cc.bias ? tensor_get_f64(&b, m) : 0;
  for (int64_t n = 0; n < cc.N; n++)
    for (int64_t ci = 0; ci < cc.C; ci++)
      for (int64_t p = 0; p < Sin; p++)
        for (int64_t t = 0; t < Kk; t++) {
          int64_t ic[3], kc[3], rp = p, rt = t, off = 0;
          for (int i = nsp - 1; i >= 0; i--) ic[i] = rp % cc.in[i], rp /= cc.in[i], kc[i] = rt % cc.k[i], rt /= cc.k[i];
          bool ok = true;
          for (int i = 0; i < nsp; i++) {
            int64_t oc = ic[i] * cc.s[i] - pl[i] + kc[i] * cc.d[i];
            ok = ok && oc >= 0 && oc < out[i];
            off = off * out[i] + oc;
          }
          if (!ok) continue;
          for (int64_t m = 0; m < Mg; m++) {
            int64_t mo = (ci / Cg) * Mg + m;
            want[(n * cc.M + mo) * Sout + off] += tensor_get_f64(&x, (n * cc.C + ci) * Sin + p) *
                                                  tensor_get_f64(&w, (ci * Mg + m) * Kk + t);
          }
        }
  CHECK(y.rank == 2 + nsp && y.dims[0] == cc.N && y.dims[1] == cc.M);
  for (int i = 0; i < nsp; i++) CHECK(y.dims[2 + i] == out[i]);
  double tol = dt == SMELT_F16 ? 2e-2 : dt == SMELT_F64 ? 1e-12 : 1e-5;
  if (!nt_close(&y, want, cc.N * cc.M * Sout, tol, tol, "ConvTranspose")) {
    CHECK(0);
    fprintf(stderr, "  nsp %d in %lld k %lld s %lld\n", nsp, (long long)cc.in[0], (long long)cc.k[0], (long long)cc.s[0]);
  }
  free(want);
  tensor_release(&x);
  tensor_release(&w);
  tensor_release(&b);
  tensor_release(&y);
}

static void test_shapes(smelt_pool *pool) {
  check_ct(pool, SMELT_F32, (ct_case){2, 1, 1, 2, 1, {3, 3}, {3, 3}, .bias = true});
  check_ct(pool, SMELT_F32, (ct_case){2, 2, 3, 4, 1, {5, 4}, {3, 2}, {3, 2}, {1, 1}, {1, 2, 1, 2}, .bias = true});
  check_ct(pool, SMELT_F32, (ct_case){2, 1, 3, 4, 1, {5, 4}, {3, 3}, {3, 2}, {1, 1}, {0}, {1, 1}});
  check_ct(pool, SMELT_F32, (ct_case){2, 1, 1, 2, 1, {3, 3}, {3, 3}, {3, 2}, {1, 1}, {0}, {0}, {10, 8}, .has_oshape = true});
  check_ct(pool, SMELT_F32, (ct_case){2, 1, 1, 2, 1, {3, 3}, {3, 3}, {2, 2}, {1, 1}, {0}, {0}, {4, 5}, .has_oshape = true});
  check_ct(pool, SMELT_F32, (ct_case){2, 1, 2, 2, 1, {3, 4}, {3, 3}, {2, 2}, {1, 1}, .auto_pad = "SAME_UPPER"});
  check_ct(pool, SMELT_F32, (ct_case){2, 1, 2, 2, 1, {3, 4}, {4, 3}, {2, 3}, {1, 1}, .auto_pad = "SAME_LOWER"});
  check_ct(pool, SMELT_F32, (ct_case){2, 2, 4, 6, 2, {4, 5}, {3, 2}, {2, 1}, {2, 2}, {1, 0, 0, 1}, .bias = true});
  check_ct(pool, SMELT_F32, (ct_case){2, 1, 6, 6, 6, {5, 5}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {1, 1}});
  check_ct(pool, SMELT_F32, (ct_case){1, 2, 3, 5, 1, {7}, {4}, {3}, {1}, {1, 2}, .bias = true});
  check_ct(pool, SMELT_F32, (ct_case){3, 1, 2, 3, 1, {3, 4, 2}, {2, 3, 2}, {2, 1, 2}, {1, 2, 1}, {0, 1, 0, 1, 0, 0}, .bias = true});
  /* several column tiles: Mk = 64 * 9, 45*45 input positions */
  check_ct(pool, SMELT_F32, (ct_case){2, 1, 2, 64, 1, {45, 45}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}});
  check_ct(pool, SMELT_F32, (ct_case){2, 0, 2, 3, 1, {3, 3}, {3, 3}});
  check_ct(pool, SMELT_F64, (ct_case){2, 2, 4, 6, 2, {4, 5}, {3, 2}, {2, 1}, {2, 2}, {1, 0, 0, 1}, .bias = true});
  check_ct(pool, SMELT_F16, (ct_case){2, 1, 2, 3, 1, {3, 4}, {2, 2}, {2, 2}, .bias = true});
}

static void test_errors(void) {
  tensor x = {0}, w = {0}, y = {0};
  nt_rand(&x, SMELT_F32, 4, (int64_t[]){1, 3, 4, 4});
  nt_rand(&w, SMELT_F32, 4, (int64_t[]){2, 2, 3, 3});
  tensor *in[] = {&x, &w}, *out[] = {&y};
  CHECK(nt_run("ConvTranspose", 22, NULL, 0, in, 2, out, 1) != SMELT_OK);
  CHECK(nt_err_has("channels 3 of X do not match W's first dim 2"));
  tensor_release(&y);
  tensor_release(&w);
  nt_rand(&w, SMELT_F32, 4, (int64_t[]){3, 2, 3, 3});
  ir_attr bad[] = {nt_ints("output_padding", 2, (int64_t[]){2, 0})};
  CHECK(nt_run("ConvTranspose", 22, bad, 1, in, 2, out, 1) != SMELT_OK);
  CHECK(nt_err_has("output_padding"));
  tensor_release(&y);
  tensor_release(&x);
  tensor_release(&w);
}

int main(void) {
  smelt_pool *pool = NULL;
  CHECK_OK(pool_create(3, &pool));
  test_shapes(NULL);
  test_shapes(pool);
  test_errors();
  pool_free(pool);
  return test_report("test_ops_conv_transpose");
}
