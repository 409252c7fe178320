/* Normalization ops against naive loops written here. */
#include "nn_test_util.h"

static double at(const tensor *t, int64_t i) { return tensor_get_f64(t, i); }

static void test_batchnorm(smelt_pool *pool, smelt_dtype dt, int rank, const int64_t *dims) {
  int64_t C = dims[1], S = 1;
  for (int i = 2; i < rank; i++) S *= dims[i];
  tensor x = {0}, sc = {0}, b = {0}, m = {0}, v = {0}, y = {0};
  nt_rand(&x, dt, rank, dims);
  nt_rand(&sc, dt, 1, &C);
  nt_rand(&b, dt, 1, &C);
  nt_rand(&m, dt, 1, &C);
  nt_rand(&v, dt, 1, &C);
  for (int64_t i = 0; i < C; i++) tensor_set_f64(&v, i, fabs(at(&v, i)) + 0.1);
  ir_attr a[] = {nt_float("epsilon", 1e-3f)};
  tensor *in[] = {&x, &sc, &b, &m, &v}, *out[] = {&y};
  CHECK_OK(nt_run_pool(pool, "BatchNormalization", 15, a, 1, in, 5, out, 1));
  int64_t n = tensor_numel(&x);
  double *want = malloc(sizeof(double) * (size_t)(n + 1));
  for (int64_t i = 0; i < n; i++) {
    int64_t ch = (i / S) % C;
    want[i] = (at(&x, i) - at(&m, ch)) / sqrt(at(&v, ch) + (double)1e-3f) * at(&sc, ch) + at(&b, ch);
  }
  double tol = dt == SMELT_F16 ? 1e-2 : 1e-5;
  CHECK(nt_close(&y, want, n, tol, tol, "BatchNormalization"));
  free(want);
  tensor_release(&y);
  ir_attr tr[] = {nt_int("training_mode", 1)};
  CHECK(nt_run("BatchNormalization", 15, tr, 1, in, 5, out, 1) != SMELT_OK);
  CHECK(nt_err_has("training mode is not supported"));
  tensor_release(&y);
  tensor *t[] = {&x, &sc, &b, &m, &v};
  for (int i = 0; i < 5; i++) tensor_release(t[i]);
}

/* LayerNormalization / RMSNormalization with a scale (and bias) of the given
 * shape broadcast over X.shape[axis:]. */
static void test_layernorm(smelt_pool *pool, bool rms, int rank, const int64_t *dims, int axis,
                           int srank, const int64_t *sdims, bool bias, int n_out) {
  tensor x = {0}, sc = {0}, b = {0}, y = {0}, mo = {0}, io = {0};
  nt_rand(&x, SMELT_F32, rank, dims);
  nt_rand(&sc, SMELT_F32, srank, sdims);
  if (bias) nt_rand(&b, SMELT_F32, srank, sdims);
  int ax = axis < 0 ? axis + rank : axis;
  int64_t rows = 1, n = 1;
  for (int i = 0; i < rank; i++) *(i < ax ? &rows : &n) *= dims[i];
  ir_attr a[] = {nt_int("axis", axis), nt_float("epsilon", 1e-4f)};
  tensor *in[] = {&x, &sc, bias ? &b : NULL}, *out[] = {&y, &mo, &io};
  CHECK_OK(nt_run_pool(pool, rms ? "RMSNormalization" : "LayerNormalization", rms ? 23 : 17, a, 2,
                       in, rms ? 2 : 3, out, n_out));
  double *want = malloc(sizeof(double) * (size_t)(rows * n + 1));
  double *wm = malloc(sizeof(double) * (size_t)(rows + 1)), *wi = malloc(sizeof(double) * (size_t)(rows + 1));
  for (int64_t r = 0; r < rows; r++) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n && !rms; i++) mean += at(&x, r * n + i) / (double)n;
    for (int64_t i = 0; i < n; i++) var += pow(at(&x, r * n + i) - mean, 2) / (double)n;
    double inv = 1 / sqrt(var + (double)1e-4f);
    wm[r] = mean;
    wi[r] = inv;
    for (int64_t i = 0; i < n; i++) {
      /* broadcast index of position i into the scale shape */
      int64_t rem = i, off = 0, mul = 1;
      for (int d = rank - 1; d >= ax; d--) {
        int64_t c = rem % dims[d];
        rem /= dims[d];
        int sd = d - (rank - srank);
        if (sd >= 0) {
          off += (sdims[sd] == 1 ? 0 : c) * mul;
          mul *= sdims[sd];
        }
      }
      want[r * n + i] = (at(&x, r * n + i) - mean) * inv * at(&sc, off) + (bias ? at(&b, off) : 0);
    }
  }
  CHECK(nt_close(&y, want, rows * n, 1e-5, 1e-5, "LayerNormalization Y"));
  if (n_out > 1) {
    CHECK(mo.rank == rank && mo.dtype == SMELT_F32);
    for (int i = 0; i < rank; i++) CHECK(mo.dims[i] == (i < ax ? dims[i] : 1));
    if (rms) CHECK(nt_close(&mo, wi, rows, 1e-5, 1e-5, "RMS InvStdDev"));
    else CHECK(nt_close(&mo, wm, rows, 1e-6, 1e-5, "LayerNormalization Mean"));
  }
  if (n_out > 2) CHECK(nt_close(&io, wi, rows, 1e-5, 1e-5, "LayerNormalization InvStdDev"));
  free(want);
  free(wm);
  free(wi);
  tensor *t[] = {&x, &sc, &b, &y, &mo, &io};
  for (int i = 0; i < 6; i++) tensor_release(t[i]);
}

/* InstanceNormalization (groups == C) and GroupNormalization. */
static void test_groupnorm(smelt_pool *pool, const char *op, int opset, int rank,
                           const int64_t *dims, int64_t G) {
  int64_t N = dims[0], C = dims[1], S = 1;
  for (int i = 2; i < rank; i++) S *= dims[i];
  bool per_group = !strcmp(op, "GroupNormalization") && opset < 21;
  int64_t np = per_group ? G : C, Cg = C / G;
  tensor x = {0}, sc = {0}, b = {0}, y = {0};
  nt_rand(&x, SMELT_F32, rank, dims);
  nt_rand(&sc, SMELT_F32, 1, &np);
  nt_rand(&b, SMELT_F32, 1, &np);
  ir_attr a[] = {nt_float("epsilon", 1e-3f), nt_int("num_groups", G)};
  tensor *in[] = {&x, &sc, &b}, *out[] = {&y};
  CHECK_OK(nt_run_pool(pool, op, opset, a, 2, in, 3, out, 1));
  double *want = malloc(sizeof(double) * (size_t)(N * C * S + 1));
  for (int64_t n = 0; n < N; n++)
    for (int64_t g = 0; g < G; g++) {
      int64_t base = (n * C + g * Cg) * S, cnt = Cg * S;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < cnt; i++) mean += at(&x, base + i) / (double)cnt;
      for (int64_t i = 0; i < cnt; i++) var += pow(at(&x, base + i) - mean, 2) / (double)cnt;
      for (int64_t i = 0; i < cnt; i++) {
        int64_t p = per_group ? g : g * Cg + i / S;
        want[base + i] = (at(&x, base + i) - mean) / sqrt(var + (double)1e-3f) * at(&sc, p) + at(&b, p);
      }
    }
  CHECK(nt_close(&y, want, N * C * S, 1e-5, 1e-5, op));
  free(want);
  tensor *t[] = {&x, &sc, &b, &y};
  for (int i = 0; i < 4; i++) tensor_release(t[i]);
}

static void test_lpnorm(smelt_pool *pool, int p, int axis) {
  int64_t dims[] = {3, 4, 5};
  tensor x = {0}, y = {0};
  nt_rand(&x, SMELT_F32, 3, dims);
  for (int i = 0; i < 5; i++) tensor_set_f64(&x, 5 + i, 0.0); /* a zero row along the last axis */
  ir_attr a[] = {nt_int("axis", axis), nt_int("p", p)};
  tensor *in[] = {&x}, *out[] = {&y};
  CHECK_OK(nt_run_pool(pool, "LpNormalization", 22, a, 2, in, 1, out, 1));
  int ax = axis < 0 ? axis + 3 : axis;
  int64_t stride = ax == 2 ? 1 : ax == 1 ? 5 : 20;
  double want[60];
  for (int64_t i = 0; i < 60; i++) {
    int64_t coord = (i / stride) % dims[ax], base = i - coord * stride;
    double norm = 0;
    for (int64_t k = 0; k < dims[ax]; k++) {
      double v = at(&x, base + k * stride);
      norm += p == 1 ? fabs(v) : v * v;
    }
    if (p == 2) norm = sqrt(norm);
    want[i] = norm == 0 ? 0 : at(&x, i) / norm;
  }
  CHECK(nt_close(&y, want, 60, 1e-6, 1e-5, "LpNormalization"));
  tensor_release(&x);
  tensor_release(&y);
}

static void test_mvn(void) {
  int64_t dims[] = {2, 3, 4, 5};
  tensor x = {0}, y = {0};
  nt_rand(&x, SMELT_F32, 4, dims);
  tensor *in[] = {&x}, *out[] = {&y};
  CHECK_OK(nt_run("MeanVarianceNormalization", 13, NULL, 0, in, 1, out, 1));
  double want[120];
  for (int64_t ch = 0; ch < 3; ch++) {
    double mean = 0, sq = 0;
    for (int64_t n = 0; n < 2; n++)
      for (int64_t s = 0; s < 20; s++) {
        double v = at(&x, (n * 3 + ch) * 20 + s);
        mean += v / 40;
        sq += v * v / 40;
      }
    double sd = sqrt(sq - mean * mean) + 1e-9;
    for (int64_t n = 0; n < 2; n++)
      for (int64_t s = 0; s < 20; s++) {
        int64_t i = (n * 3 + ch) * 20 + s;
        want[i] = (at(&x, i) - mean) / sd;
      }
  }
  CHECK(nt_close(&y, want, 120, 1e-5, 1e-5, "MeanVarianceNormalization"));
  tensor_release(&y);
  ir_attr a[] = {nt_ints("axes", 2, (int64_t[]){1, -1})};
  CHECK_OK(nt_run("MeanVarianceNormalization", 13, a, 1, in, 1, out, 1));
  for (int64_t n = 0; n < 2; n++)
    for (int64_t h = 0; h < 4; h++) {
      double mean = 0, var = 0;
      for (int64_t ch = 0; ch < 3; ch++)
        for (int64_t w = 0; w < 5; w++) mean += at(&x, ((n * 3 + ch) * 4 + h) * 5 + w) / 15;
      for (int64_t ch = 0; ch < 3; ch++)
        for (int64_t w = 0; w < 5; w++) var += pow(at(&x, ((n * 3 + ch) * 4 + h) * 5 + w) - mean, 2) / 15;
      for (int64_t ch = 0; ch < 3; ch++)
        for (int64_t w = 0; w < 5; w++) {
          int64_t i = ((n * 3 + ch) * 4 + h) * 5 + w;
          want[i] = (at(&x, i) - mean) / (sqrt(var) + 1e-9);
        }
    }
  CHECK(nt_close(&y, want, 120, 1e-5, 1e-5, "MeanVarianceNormalization axes"));
  tensor_release(&x);
  tensor_release(&y);
}

static void test_lrn(smelt_pool *pool, int64_t size) {
  int64_t dims[] = {2, 7, 3, 4}, C = 7, S = 12;
  tensor x = {0}, y = {0};
  nt_rand(&x, SMELT_F32, 4, dims);
  ir_attr a[] = {nt_int("size", size), nt_float("alpha", 0.01f), nt_float("beta", 0.6f),
                 nt_float("bias", 2.f)};
  tensor *in[] = {&x}, *out[] = {&y};
  CHECK_OK(nt_run_pool(pool, "LRN", 13, a, 4, in, 1, out, 1));
  double want[168];
  for (int64_t n = 0; n < 2; n++)
    for (int64_t ch = 0; ch < C; ch++)
      for (int64_t s = 0; s < S; s++) {
        double sq = 0;
        for (int64_t cc = ch - (size - 1) / 2; cc <= ch + size / 2; cc++)
          if (cc >= 0 && cc < C) sq += pow(at(&x, (n * C + cc) * S + s), 2);
        int64_t i = (n * C + ch) * S + s;
        want[i] = at(&x, i) / pow(2.0 + (double)0.01f / (double)size * sq, (double)0.6f);
      }
  CHECK(nt_close(&y, want, 168, 1e-6, 1e-5, "LRN"));
  tensor_release(&x);
  tensor_release(&y);
}

static void test_errors(void) {
  tensor x = {0}, sc = {0}, b = {0}, y = {0};
  nt_rand(&x, SMELT_F32, 4, (int64_t[]){2, 6, 3, 3});
  nt_rand(&sc, SMELT_F32, 1, (int64_t[]){4});
  nt_rand(&b, SMELT_F32, 1, (int64_t[]){6});
  tensor *in[] = {&x, &sc, &b}, *out[] = {&y};
  ir_attr g4[] = {nt_int("num_groups", 4)};
  CHECK(nt_run("GroupNormalization", 21, g4, 1, in, 3, out, 1) != SMELT_OK);
  CHECK(nt_err_has("not divisible by num_groups 4"));
  tensor_release(&y);
  CHECK(nt_run("InstanceNormalization", 22, NULL, 0, in, 3, out, 1) != SMELT_OK);
  CHECK(nt_err_has("input 1 (scale) has 4 values, expected 6"));
  tensor_release(&y);
  ir_attr ax[] = {nt_int("axis", 4)};
  CHECK(nt_run("LayerNormalization", 17, ax, 1, in, 2, out, 1) != SMELT_OK);
  CHECK(nt_err_has("axis 4 is out of range"));
  tensor_release(&y);
  CHECK(nt_run("LayerNormalization", 17, NULL, 0, in, 2, out, 1) != SMELT_OK);
  CHECK(nt_err_has("does not broadcast"));
  tensor_release(&y);
  tensor *t[] = {&x, &sc, &b};
  for (int i = 0; i < 3; i++) tensor_release(t[i]);
}

int main(void) {
  smelt_pool *pool = NULL;
  CHECK_OK(pool_create(3, &pool));
  for (int k = 0; k < 2; k++) {
    smelt_pool *p = k ? pool : NULL;
    test_batchnorm(p, SMELT_F32, 4, (int64_t[]){2, 3, 5, 7});
    test_batchnorm(p, SMELT_F32, 2, (int64_t[]){4, 17});
    test_batchnorm(p, SMELT_F16, 3, (int64_t[]){2, 3, 5});
    test_batchnorm(p, SMELT_F64, 3, (int64_t[]){0, 3, 5});
    test_layernorm(p, false, 3, (int64_t[]){2, 3, 17}, -1, 1, (int64_t[]){17}, true, 3);
    test_layernorm(p, false, 3, (int64_t[]){2, 3, 17}, 1, 2, (int64_t[]){3, 17}, true, 3);
    test_layernorm(p, false, 4, (int64_t[]){2, 3, 4, 5}, 1, 2, (int64_t[]){1, 5}, false, 2);
    test_layernorm(p, false, 2, (int64_t[]){3, 4}, 0, 2, (int64_t[]){3, 4}, true, 1);
    test_layernorm(p, true, 3, (int64_t[]){2, 3, 17}, -1, 1, (int64_t[]){17}, false, 1);
    test_layernorm(p, true, 4, (int64_t[]){2, 3, 4, 5}, -2, 1, (int64_t[]){5}, false, 1);
    test_groupnorm(p, "InstanceNormalization", 22, 4, (int64_t[]){2, 3, 4, 5}, 3);
    test_groupnorm(p, "InstanceNormalization", 22, 3, (int64_t[]){1, 4, 9}, 4);
    test_groupnorm(p, "GroupNormalization", 21, 4, (int64_t[]){2, 6, 3, 5}, 3);
    test_groupnorm(p, "GroupNormalization", 18, 4, (int64_t[]){2, 6, 3, 5}, 2);
    test_groupnorm(p, "GroupNormalization", 21, 3, (int64_t[]){3, 4, 7}, 1);
    test_lpnorm(p, 1, -1);
    test_lpnorm(p, 2, -1);
    test_lpnorm(p, 2, 1);
    test_lpnorm(p, 1, 0);
    test_lrn(p, 3);
    test_lrn(p, 4);
  }
  test_mvn();
  test_errors();
  pool_free(pool);
  return test_report("test_ops_norm");
}
