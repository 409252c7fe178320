/* DeformConv against a naive bilinear loop written here, and against Conv
 * when all offsets are zero. */
#include "nn_test_util.h"

static double sample(const tensor *x, int64_t base, int64_t H, int64_t W, double h, double w) {
  double v = 0;
  int64_t h0 = (int64_t)floor(h), w0 = (int64_t)floor(w);
  for (int64_t hh = h0; hh <= h0 + 1; hh++)
    for (int64_t ww = w0; ww <= w0 + 1; ww++) {
      if (hh < 0 || hh >= H || ww < 0 || ww >= W) continue;
      v += (1 - fabs(h - (double)hh)) * (1 - fabs(w - (double)ww)) * tensor_get_f64(x, base + hh * W + ww);
    }
  return v;
}

static void check(smelt_pool *pool, smelt_dtype dt, int64_t N, int64_t C, int64_t M, int64_t G,
                  int64_t OG, int64_t H, int64_t W, int64_t KH, int64_t KW, int64_t s, int64_t d,
                  int64_t pad, bool with_mask, bool zero_offsets) {
  int64_t OH = (H + 2 * pad - (KH - 1) * d - 1) / s + 1, OW = (W + 2 * pad - (KW - 1) * d - 1) / s + 1;
  int64_t K = KH * KW, Cg = C / G, Mg = M / G;
  tensor x = {0}, w = {0}, off = {0}, b = {0}, m = {0}, y = {0};
  nt_rand(&x, dt, 4, (int64_t[]){N, C, H, W});
  nt_rand(&w, dt, 4, (int64_t[]){M, Cg, KH, KW});
  nt_rand(&off, dt, 4, (int64_t[]){N, OG * K * 2, OH, OW});
  for (int64_t i = 0; i < tensor_numel(&off); i++)
    tensor_set_f64(&off, i, zero_offsets ? 0.0 : 2.5 * tensor_get_f64(&off, i));
  nt_rand(&b, dt, 1, &M);
  if (with_mask) nt_rand(&m, dt, 4, (int64_t[]){N, OG * K, OH, OW});
  ir_attr at[] = {nt_int("group", G), nt_int("offset_group", OG), nt_ints("strides", 2, (int64_t[]){s, s}),
                  nt_ints("dilations", 2, (int64_t[]){d, d}), nt_ints("pads", 4, (int64_t[]){pad, pad, pad, pad})};
  tensor *in[] = {&x, &w, &off, &b, with_mask ? &m : NULL}, *out[] = {&y};
  CHECK_OK(nt_run_pool(pool, "DeformConv", 19, at, 5, in, 5, out, 1));
  double *want = calloc((size_t)(N * M * OH * OW), sizeof(double));
  for (int64_t n = 0; n < N; n++)
    for (int64_t mo = 0; mo < M; mo++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          double acc = tensor_get_f64(&b, mo);
          for (int64_t ci = 0; ci < Cg; ci++) {
            int64_t cin = (mo / Mg) * Cg + ci, og = cin / (C / OG);
            for (int64_t i = 0; i < KH; i++)
              for (int64_t j = 0; j < KW; j++) {
                int64_t t = i * KW + j, p = oh * OW + ow;
                double dh = tensor_get_f64(&off, ((n * OG + og) * K * 2 + 2 * t) * OH * OW + p);
                double dw = tensor_get_f64(&off, ((n * OG + og) * K * 2 + 2 * t + 1) * OH * OW + p);
                double v = sample(&x, (n * C + cin) * H * W, H, W, (double)(oh * s - pad + i * d) + dh,
                                  (double)(ow * s - pad + j * d) + dw);
                if (with_mask) v *= tensor_get_f64(&m, ((n * OG + og) * K + t) * OH * OW + p);
                acc += v * tensor_get_f64(&w, ((mo * Cg + ci) * KH + i) * KW + j);
              }
          }
          want[((n * M + mo) * OH + oh) * OW + ow] = acc;
        }
  double tol = dt == SMELT_F64 ? 1e-12 : 1e-5;
  CHECK(y.rank == 4 && y.dims[2] == OH && y.dims[3] == OW);
  CHECK(nt_close(&y, want, N * M * OH * OW, tol, tol, "DeformConv"));
  if (zero_offsets && !with_mask) { /* the same as Conv */
    tensor yc = {0};
    tensor *cin[] = {&x, &w, &b}, *cout[] = {&yc};
    ir_attr ca[] = {at[0], at[2], at[3], at[4]};
    CHECK_OK(nt_run("Conv", 22, ca, 4, cin, 3, cout, 1));
    double *cv = nt_f64(&yc);
    CHECK(nt_close(&y, cv, N * M * OH * OW, tol, tol, "DeformConv vs Conv"));
    free(cv);
    tensor_release(&yc);
  }
  free(want);
  tensor *all[] = {&x, &w, &off, &b, &m, &y};
  for (int i = 0; i < 6; i++) tensor_release(all[i]);
}

int main(void) {
  smelt_pool *pool = NULL;
  CHECK_OK(pool_create(3, &pool));
  check(pool, SMELT_F32, 2, 4, 6, 2, 2, 7, 6, 3, 3, 1, 1, 1, true, false);
  check(pool, SMELT_F32, 1, 4, 4, 1, 4, 9, 8, 2, 3, 2, 2, 2, false, false);
  check(NULL, SMELT_F64, 2, 2, 3, 1, 1, 5, 5, 3, 2, 1, 1, 0, true, false);
  check(pool, SMELT_F32, 2, 6, 4, 2, 3, 8, 7, 3, 3, 2, 1, 1, false, true);
  pool_free(pool);
  return test_report("test_ops_deform_conv");
}
