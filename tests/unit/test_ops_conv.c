/* Conv against a naive direct convolution written here. */
#include "kernels/conv.h"
#include "nn_test_util.h"

typedef struct conv_case {
  int nsp;
  int64_t N, C, M, G;
  int64_t in[3], k[3], s[3], d[3], pads[6];
  const char *auto_pad;
  bool bias;
} conv_case;

/* Output size and begin pads the way the ONNX spec states them. */
static void naive_geometry(const conv_case *cc, int64_t *out, int64_t *pad_lo) {
  for (int i = 0; i < cc->nsp; i++) {
    int64_t dk = (cc->k[i] - 1) * cc->d[i] + 1;
    if (cc->auto_pad && !strncmp(cc->auto_pad, "SAME", 4)) {
      out[i] = (cc->in[i] + cc->s[i] - 1) / cc->s[i];
      int64_t total = (out[i] - 1) * cc->s[i] + dk - cc->in[i];
      if (total < 0) total = 0;
      pad_lo[i] = !strcmp(cc->auto_pad, "SAME_UPPER") ? total / 2 : (total + 1) / 2;
    } else if (cc->auto_pad && !strcmp(cc->auto_pad, "VALID")) {
      out[i] = (cc->in[i] - dk) / cc->s[i] + 1;
      pad_lo[i] = 0;
    } else {
      out[i] = (cc->in[i] + cc->pads[i] + cc->pads[cc->nsp + i] - dk) / cc->s[i] + 1;
      pad_lo[i] = cc->pads[i];
    }
  }
}

static double *naive_conv(const conv_case *cc, const tensor *x, const tensor *w, const tensor *b,
                          int64_t *out) {
  int64_t pl[3], Sin = 1, Sout = 1, Kk = 1;
  naive_geometry(cc, out, pl);
  for (int i = 0; i < cc->nsp; i++) {
    Sin *= cc->in[i];
    Sout *= out[i];
    Kk *= cc->k[i];
  }
  int64_t Cg = cc->C / cc->G, Mg = cc->M / cc->G;
  double *y = calloc((size_t)(cc->N * cc->M * Sout) + 1, sizeof(double));
  for (int64_t n = 0; n < cc->N; n++)
    for (int64_t m = 0; m < cc->M; m++)
      for (int64_t p = 0; p < Sout; p++) {
        int64_t o[3], q = p;
        for (int i = cc->nsp - 1; i >= 0; i--) o[i] = q % out[i], q /= out[i];
        double acc = b ? tensor_get_f64(b, m) : 0;
        for (int64_t ci = 0; ci < Cg; ci++)
          for (int64_t t = 0; t < Kk; t++) {
            int64_t kc[3], r = t, off = 0;
            bool ok = true;
            for (int i = cc->nsp - 1; i >= 0; i--) kc[i] = r % cc->k[i], r /= cc->k[i];
            for (int i = 0; i < cc->nsp; i++) {
              int64_t ic = o[i] * cc->s[i] - pl[i] + kc[i] * cc->d[i];
              ok = ok && ic >= 0 && ic < cc->in[i];
              off = off * cc->in[i] + ic;
            }
            if (!ok) continue;
            int64_t c_in = (m / Mg) * Cg + ci;
            acc += tensor_get_f64(x, (n * cc->C + c_in) * Sin + off) *
                   tensor_get_f64(w, (m * Cg + ci) * Kk + t);
          }
        y[(n * cc->M + m) * Sout + p] = acc;
      }
  return y;
}

static bool use_cache; /* run through an op cache, W a constant: the session's routes */

static void check_conv(smelt_pool *pool, smelt_dtype dt, conv_case cc) {
  for (int i = 0; i < cc.nsp; i++) {
    if (!cc.s[i]) cc.s[i] = 1;
    if (!cc.d[i]) cc.d[i] = 1;
  }
  int64_t xd[5] = {cc.N, cc.C}, wd[5] = {cc.M, cc.C / cc.G};
  for (int i = 0; i < cc.nsp; i++) xd[2 + i] = cc.in[i], wd[2 + i] = cc.k[i];
  tensor x = {0}, w = {0}, b = {0}, y = {0};
  nt_rand(&x, dt, 2 + cc.nsp, xd);
  nt_rand(&w, dt, 2 + cc.nsp, wd);
  if (cc.bias) nt_rand(&b, dt, 1, &cc.M);
  ir_attr at[8];
  int na = 0;
  at[na++] = nt_int("group", cc.G);
  at[na++] = nt_ints("strides", cc.nsp, cc.s);
  at[na++] = nt_ints("dilations", cc.nsp, cc.d);
  if (cc.auto_pad) at[na++] = nt_str("auto_pad", cc.auto_pad);
  else at[na++] = nt_ints("pads", 2 * cc.nsp, cc.pads);
  if (cc.N == 1) at[na++] = nt_ints("kernel_shape", cc.nsp, cc.k); /* optional: checked against W */
  tensor *in[] = {&x, &w, cc.bias ? &b : NULL}, *out[] = {&y};
  if (use_cache) {
    op_cache cache = {0};
    CHECK_OK(harness_run_cached(pool, &cache, 0x2u, "Conv", 22, at, na, in, 3, out, 1));
    op_cache_free_all(&cache, 1);
  } else {
    CHECK_OK(nt_run_pool(pool, "Conv", 22, at, na, in, 3, out, 1));
  }
  int64_t od[3];
  double *want = naive_conv(&cc, &x, &w, cc.bias ? &b : NULL, od);
  int64_t n = cc.N * cc.M;
  CHECK(y.rank == 2 + cc.nsp && y.dims[0] == cc.N && y.dims[1] == cc.M);
  for (int i = 0; i < cc.nsp; i++) {
    CHECK(y.dims[2 + i] == od[i]);
    n *= od[i];
  }
  int64_t depth = cc.C / cc.G * cc.k[0] * (cc.nsp > 1 ? cc.k[1] : 1) * (cc.nsp > 2 ? cc.k[2] : 1);
  double tol = dt == SMELT_F16 ? 2e-2 : dt == SMELT_BF16 ? 8e-2 : dt == SMELT_F64 ? 1e-12 : 1e-6 * (10 + depth / 10);
  if (!nt_close(&y, want, n, tol, tol, "Conv")) {
    CHECK(0);
    fprintf(stderr, "  case nsp=%d N=%lld C=%lld M=%lld G=%lld in=%lld,%lld k=%lld,%lld\n", cc.nsp,
            (long long)cc.N, (long long)cc.C, (long long)cc.M, (long long)cc.G,
            (long long)cc.in[0], (long long)cc.in[1], (long long)cc.k[0], (long long)cc.k[1]);
  }
  free(want);
  tensor_release(&x);
  tensor_release(&w);
  tensor_release(&b);
  tensor_release(&y);
}

static void test_conv_shapes(smelt_pool *pool) {
  /* 2-D basics, pads, stride 2, asymmetric pads, dilation */
  check_conv(pool, SMELT_F32, (conv_case){2, 2, 3, 5, 1, {7, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, true});
  check_conv(pool, SMELT_F32, (conv_case){2, 1, 3, 4, 1, {11, 8}, {3, 2}, {2, 2}, {1, 1}, {0, 1, 2, 0}, NULL, false});
  check_conv(pool, SMELT_F32, (conv_case){2, 2, 5, 7, 1, {13, 10}, {3, 3}, {2, 1}, {2, 3}, {2, 0, 1, 3}, NULL, true});
  /* groups, depthwise (with stride, dilation), depthwise with multiplier */
  check_conv(pool, SMELT_F32, (conv_case){2, 2, 4, 6, 2, {9, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, true});
  check_conv(pool, SMELT_F32, (conv_case){2, 3, 5, 5, 5, {10, 11}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, NULL, true});
  check_conv(pool, SMELT_F32, (conv_case){2, 1, 7, 7, 7, {12, 9}, {5, 3}, {1, 2}, {2, 1}, {0, 3, 4, 1}, NULL, false});
  check_conv(pool, SMELT_F32, (conv_case){2, 1, 3, 6, 3, {8, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, true});
  /* pointwise (no im2col), 1x1 with stride (im2col) */
  check_conv(pool, SMELT_F32, (conv_case){2, 2, 17, 9, 1, {5, 6}, {1, 1}, {1, 1}, {1, 1}, {0}, NULL, true});
  check_conv(pool, SMELT_F32, (conv_case){2, 1, 17, 9, 1, {5, 6}, {1, 1}, {2, 2}, {1, 1}, {0}, NULL, true});
  /* strided 1x1 through a session's op cache: the input subsampled, then
   * the stride-1 routes (pointwise over small and large planes, the
   * transposed one at 7x7, the GEMM), odd sizes, unequal strides, 1-D,
   * SAME padding that comes out as none */
  use_cache = true;
  check_conv(pool, SMELT_F32, (conv_case){2, 1, 17, 9, 1, {5, 6}, {1, 1}, {2, 2}, {1, 1}, {0}, NULL, true});
  check_conv(pool, SMELT_F32, (conv_case){2, 2, 64, 40, 1, {55, 57}, {1, 1}, {2, 2}, {1, 1}, {0}, NULL, true});
  check_conv(pool, SMELT_F32, (conv_case){2, 1, 96, 70, 1, {13, 14}, {1, 1}, {2, 2}, {1, 1}, {0}, NULL, false});
  check_conv(pool, SMELT_F32, (conv_case){2, 1, 24, 33, 1, {29, 31}, {1, 1}, {3, 2}, {1, 1}, {0}, NULL, true});
  check_conv(pool, SMELT_F32, (conv_case){2, 1, 8, 16, 1, {9, 9}, {1, 1}, {1, 3}, {1, 1}, {0}, "SAME_UPPER", true});
  check_conv(pool, SMELT_F32, (conv_case){1, 2, 20, 12, 1, {37}, {1}, {2}, {1}, {0, 0}, NULL, true});
  /* strided convolutions with taps over small planes: im2col, then the
   * transposed GEMM over W^T packed (conv_col_t_route): 7x7 and 14x14
   * outputs, pads, a 2-image batch, unequal strides, a 1-D one */
  check_conv(pool, SMELT_F32, (conv_case){2, 1, 64, 64, 1, {14, 14}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, NULL, true});
  check_conv(pool, SMELT_F32, (conv_case){2, 2, 32, 64, 1, {27, 28}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, NULL, true});
  check_conv(pool, SMELT_F32, (conv_case){2, 1, 16, 64, 1, {15, 21}, {3, 5}, {2, 3}, {1, 1}, {1, 2, 1, 2}, NULL, false});
  check_conv(pool, SMELT_F32, (conv_case){1, 1, 24, 32, 1, {99}, {3}, {2}, {1}, {1, 1}, NULL, true});
  /* patch convs (kernel == stride, no pads: ops/conv_patch.c), the input
   * rearranged space-to-depth, then the 1x1 routes, at every ISA level
   * the machine has: 2x2/2 over an odd plane (its last row and column
   * dropped), ConvNeXt's 4x4/4 stem over 2 images, unequal 2x3 windows,
   * 1-D, a ViT-style 16x16/16 over 3 channels, enough channels for the
   * copy to split over the pool */
  static const char *const isas[] = {"scalar", "avx2", "avx512"};
  for (int l = 0; l <= (int)isa_detect() && l < 3; l++) {
    setenv("SMELT_ISA", isas[l], 1);
    check_conv(pool, SMELT_F32, (conv_case){2, 1, 8, 12, 1, {9, 11}, {2, 2}, {2, 2}, {1, 1}, {0}, NULL, true});
    check_conv(pool, SMELT_F32, (conv_case){2, 2, 3, 16, 1, {16, 20}, {4, 4}, {4, 4}, {1, 1}, {0}, NULL, false});
    check_conv(pool, SMELT_F32, (conv_case){2, 1, 5, 7, 1, {8, 9}, {2, 3}, {2, 3}, {1, 1}, {0}, NULL, true});
    check_conv(pool, SMELT_F32, (conv_case){1, 1, 6, 10, 1, {25}, {4}, {4}, {1}, {0, 0}, NULL, true});
    check_conv(pool, SMELT_F32, (conv_case){2, 1, 3, 24, 1, {112, 112}, {16, 16}, {16, 16}, {1, 1}, {0}, NULL, true});
    check_conv(pool, SMELT_F32, (conv_case){2, 1, 64, 32, 1, {28, 28}, {2, 2}, {2, 2}, {1, 1}, {0}, NULL, true});
  }
  unsetenv("SMELT_ISA");
  use_cache = false;
  /* auto_pad */
  check_conv(pool, SMELT_F32, (conv_case){2, 1, 3, 4, 1, {7, 8}, {3, 4}, {2, 2}, {1, 1}, {0}, "SAME_UPPER", true});
  check_conv(pool, SMELT_F32, (conv_case){2, 1, 3, 4, 1, {7, 8}, {3, 4}, {2, 2}, {1, 1}, {0}, "SAME_LOWER", true});
  check_conv(pool, SMELT_F32, (conv_case){2, 1, 3, 4, 1, {7, 8}, {3, 4}, {2, 3}, {1, 1}, {0}, "VALID", false});
  /* 1-D and 3-D */
  check_conv(pool, SMELT_F32, (conv_case){1, 3, 2, 5, 1, {13}, {4}, {3}, {1}, {2, 1}, NULL, true});
  check_conv(pool, SMELT_F32, (conv_case){1, 1, 4, 4, 4, {31}, {3}, {1}, {2}, {2, 2}, NULL, true});
  check_conv(pool, SMELT_F32, (conv_case){3, 1, 2, 3, 1, {5, 6, 4}, {2, 3, 2}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1, 0, 1, 1}, NULL, true});
  /* several im2col tiles (ops/conv.c's conv_im2col_tile: whole 32-column
   * panels, at least 64 positions, at least 4 tasks a thread where the
   * positions allow), many tasks; a 1-D stride-2 one over 700 positions
   * (tiles of 160 on one thread, the last one short) */
  check_conv(pool, SMELT_F32, (conv_case){2, 1, 128, 5, 1, {17, 17}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, true});
  check_conv(pool, SMELT_F32, (conv_case){2, 8, 16, 8, 4, {9, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, true});
  check_conv(pool, SMELT_F32, (conv_case){1, 1, 520, 24, 1, {1401}, {3}, {2}, {1}, {0, 0}, NULL, true});
  /* empty batch */
  check_conv(pool, SMELT_F32, (conv_case){2, 0, 3, 4, 1, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {0}, NULL, true});
  /* other dtypes */
  check_conv(pool, SMELT_F64, (conv_case){2, 2, 4, 6, 2, {6, 7}, {3, 2}, {2, 1}, {1, 2}, {1, 0, 0, 1}, NULL, true});
  check_conv(pool, SMELT_F16, (conv_case){2, 1, 3, 4, 1, {6, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, true});
  check_conv(pool, SMELT_BF16, (conv_case){2, 1, 3, 4, 1, {6, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, true});
}

static void test_conv_errors(void) {
  tensor x = {0}, w = {0}, b = {0}, y = {0};
  nt_rand(&x, SMELT_F32, 4, (int64_t[]){1, 64, 5, 5});
  nt_rand(&w, SMELT_F32, 4, (int64_t[]){8, 32, 3, 3});
  tensor *in[] = {&x, &w, NULL}, *out[] = {&y};
  CHECK(nt_run("Conv", 22, NULL, 0, in, 2, out, 1) != SMELT_OK);
  CHECK(nt_err_has("channels 64 of X do not match W's 32*group 1"));
  tensor_release(&y);
  tensor_release(&w);
  nt_rand(&w, SMELT_F32, 3, (int64_t[]){8, 64, 3});
  CHECK(nt_run("Conv", 22, NULL, 0, in, 2, out, 1) != SMELT_OK);
  CHECK(nt_err_has("input 1 (W) has rank 3, expected 4"));
  tensor_release(&y);
  tensor_release(&w);
  nt_rand(&w, SMELT_F32, 4, (int64_t[]){8, 64, 7, 7});
  CHECK(nt_run("Conv", 22, NULL, 0, in, 2, out, 1) != SMELT_OK); /* kernel larger than input */
  tensor_release(&y);
  tensor_release(&w);
  nt_rand(&w, SMELT_F32, 4, (int64_t[]){8, 64, 3, 3});
  nt_rand(&b, SMELT_F32, 1, (int64_t[]){7});
  in[2] = &b;
  CHECK(nt_run("Conv", 22, NULL, 0, in, 3, out, 1) != SMELT_OK);
  CHECK(nt_err_has("(B) has 7 values"));
  tensor_release(&y);
  ir_attr bad[] = {nt_ints("strides", 1, (int64_t[]){2})};
  in[2] = NULL;
  CHECK(nt_run("Conv", 22, bad, 1, in, 2, out, 1) != SMELT_OK);
  CHECK(nt_err_has("strides"));
  tensor_release(&y);
  ir_attr bad2[] = {nt_str("auto_pad", "SAME")};
  CHECK(nt_run("Conv", 22, bad2, 1, in, 2, out, 1) != SMELT_OK);
  tensor_release(&y);
  tensor_release(&x);
  tensor_release(&w);
  tensor_release(&b);

  /* static: symbolic batch stays, symbolic H gives unknown */
  tensor sx = nt_shape(SMELT_F32, 4, (int64_t[]){dim_sym(0), 3, dim_sym(1), 32});
  tensor sw = nt_shape(SMELT_F32, 4, (int64_t[]){16, 3, 3, 3});
  tensor so = {0};
  tensor *sin[] = {&sx, &sw}, *sout[] = {&so};
  ir_attr at[] = {nt_ints("strides", 2, (int64_t[]){2, 2}), nt_ints("pads", 4, (int64_t[]){1, 1, 1, 1})};
  CHECK_OK(nt_infer("Conv", 22, at, 2, sin, 2, sout, 1));
  CHECK(so.rank == 4 && so.dims[0] == dim_sym(0) && so.dims[1] == 16 && so.dims[2] == DIM_UNKNOWN &&
        so.dims[3] == 16);
}

int main(void) {
  smelt_pool *pool = NULL;
  CHECK_OK(pool_create(3, &pool));
  test_conv_shapes(NULL);
  test_conv_shapes(pool);
  /* SMELT_CONV=pointwise: 1x1 convs the cost rule leaves on the GEMM (many input
   * channels over a large plane) on the pointwise kernel instead */
  setenv("SMELT_CONV", "pointwise", 1);
  CHECK(!conv_pointwise_suits(260, 70, 40 * 30) && !conv_pointwise_suits(300, 33, 33 * 40));
  check_conv(pool, SMELT_F32, (conv_case){2, 2, 260, 70, 1, {40, 30}, {1, 1}, {1, 1}, {1, 1}, {0}, NULL, true});
  check_conv(NULL, SMELT_F32, (conv_case){2, 1, 300, 33, 1, {33, 40}, {1, 1}, {1, 1}, {1, 1}, {0}, NULL, false});
  unsetenv("SMELT_CONV");
  test_conv_errors();
  pool_free(pool);
  return test_report("test_ops_conv");
}
