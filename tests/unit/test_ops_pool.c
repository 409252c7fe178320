/* Pooling ops against naive loops written here. */
#include "nn_test_util.h"

/* cases below list only the leading fields */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef struct pool_case {
  const char *op;
  int nsp;
  int64_t N, C, in[3], k[3], s[3], d[3], pads[6];
  int ceil, count_pad, storage_order;
  const char *auto_pad;
  int64_t p;
} pool_case;

static void out_geometry(const pool_case *pc, int64_t *out, int64_t *pl, int64_t *ph) {
  for (int i = 0; i < pc->nsp; i++) {
    int64_t dk = (pc->k[i] - 1) * pc->d[i] + 1;
    pl[i] = pc->pads[i];
    ph[i] = pc->pads[pc->nsp + i];
    if (pc->auto_pad) {
      out[i] = (pc->in[i] + pc->s[i] - 1) / pc->s[i];
      int64_t total = (out[i] - 1) * pc->s[i] + dk - pc->in[i];
      if (total < 0) total = 0;
      pl[i] = !strcmp(pc->auto_pad, "SAME_UPPER") ? total / 2 : total - total / 2;
      ph[i] = total - pl[i];
      continue;
    }
    double f = (double)(pc->in[i] + pl[i] + ph[i] - dk) / (double)pc->s[i] + 1;
    out[i] = pc->ceil ? (int64_t)ceil(f) : (int64_t)floor(f);
    if (pc->ceil && (out[i] - 1) * pc->s[i] >= pc->in[i] + pl[i]) out[i]--;
  }
}

/* Y and (MaxPool) flat indices. */
static void naive_pool(const pool_case *pc, const tensor *x, double *y, int64_t *ind,
                       int64_t *out) {
  int64_t pl[3], ph[3], Sin = 1, Sout = 1, Kk = 1;
  out_geometry(pc, out, pl, ph);
  for (int i = 0; i < pc->nsp; i++) Sin *= pc->in[i], Sout *= out[i], Kk *= pc->k[i];
  bool is_max = !strcmp(pc->op, "MaxPool"), is_lp = !strcmp(pc->op, "LpPool");
  for (int64_t q = 0; q < pc->N * pc->C; q++)
    for (int64_t p = 0; p < Sout; p++) {
      int64_t o[3], r = p;
      for (int i = pc->nsp - 1; i >= 0; i--) o[i] = r % out[i], r /= out[i];
      double acc = is_max ? -INFINITY : 0;
      int64_t best = -1, valid = 0, padded = 0;
      for (int64_t t = 0; t < Kk; t++) {
        int64_t kc[3], rr = t, off = 0, offc = 0, mul = 1;
        bool ok = true, inpad = true;
        for (int i = pc->nsp - 1; i >= 0; i--) kc[i] = rr % pc->k[i], rr /= pc->k[i];
        for (int i = 0; i < pc->nsp; i++) {
          int64_t ic = o[i] * pc->s[i] - pl[i] + kc[i] * pc->d[i];
          ok = ok && ic >= 0 && ic < pc->in[i];
          inpad = inpad && ic >= -pl[i] && ic < pc->in[i] + ph[i];
          off = off * pc->in[i] + ic;
          offc += ic * mul;
          mul *= pc->in[i];
        }
        padded += inpad;
        if (!ok) continue;
        valid++;
        double v = tensor_get_f64(x, q * Sin + off);
        if (is_max) {
          if (best < 0 || v > acc) acc = v, best = pc->storage_order ? offc : off;
        } else if (is_lp) {
          acc += pow(fabs(v), (double)pc->p);
        } else {
          acc += v;
        }
      }
      if (is_lp) acc = pow(acc, 1.0 / (double)pc->p);
      else if (!is_max) acc /= (double)(pc->count_pad ? padded : valid);
      y[q * Sout + p] = acc;
      if (ind) ind[q * Sout + p] = q * Sin + best;
    }
}

static void check_pool(smelt_pool *pool, smelt_dtype dt, pool_case pc) {
  for (int i = 0; i < pc.nsp; i++) {
    if (!pc.s[i]) pc.s[i] = 1;
    if (!pc.d[i]) pc.d[i] = 1;
  }
  if (!pc.p) pc.p = 2;
  bool is_max = !strcmp(pc.op, "MaxPool");
  int64_t xd[5] = {pc.N, pc.C};
  for (int i = 0; i < pc.nsp; i++) xd[2 + i] = pc.in[i];
  tensor x = {0}, y = {0}, ind = {0};
  nt_rand(&x, dt, 2 + pc.nsp, xd);
  if (dt == SMELT_U8)
    for (int64_t i = 0; i < tensor_numel(&x); i++) tensor_set_f64(&x, i, (double)((i * 37) % 251));
  ir_attr at[10];
  int na = 0;
  at[na++] = nt_ints("kernel_shape", pc.nsp, pc.k);
  at[na++] = nt_ints("strides", pc.nsp, pc.s);
  if (pc.d[0] != 1 || (pc.nsp > 1 && pc.d[1] != 1)) at[na++] = nt_ints("dilations", pc.nsp, pc.d);
  if (pc.auto_pad) at[na++] = nt_str("auto_pad", pc.auto_pad);
  else at[na++] = nt_ints("pads", 2 * pc.nsp, pc.pads);
  at[na++] = nt_int("ceil_mode", pc.ceil);
  at[na++] = nt_int("count_include_pad", pc.count_pad);
  at[na++] = nt_int("storage_order", pc.storage_order);
  at[na++] = nt_int("p", pc.p);
  tensor *in[] = {&x}, *out[] = {&y, &ind};
  CHECK_OK(nt_run_pool(pool, pc.op, 22, at, na, in, 1, out, is_max ? 2 : 1));
  int64_t od[3], n = pc.N * pc.C;
  double *want = calloc(4096 * 4, sizeof(double));
  int64_t *wind = calloc(4096 * 4, sizeof(int64_t));
  naive_pool(&pc, &x, want, is_max ? wind : NULL, od);
  CHECK(y.rank == 2 + pc.nsp);
  for (int i = 0; i < pc.nsp; i++) {
    CHECK(y.dims[2 + i] == od[i]);
    n *= od[i];
  }
  double tol = dt == SMELT_F16 ? 1e-2 : 1e-6;
  if (!nt_close(&y, want, n, tol, tol, pc.op)) {
    CHECK(0);
    fprintf(stderr, "  case %s nsp=%d in=%lld k=%lld s=%lld ceil=%d\n", pc.op, pc.nsp,
            (long long)pc.in[0], (long long)pc.k[0], (long long)pc.s[0], pc.ceil);
  }
  if (is_max) {
    bool same = ind.dtype == SMELT_I64 && tensor_numel(&ind) == n;
    for (int64_t i = 0; same && i < n; i++) same = ((int64_t *)ind.data)[i] == wind[i];
    CHECK(same);
  }
  free(want);
  free(wind);
  tensor_release(&x);
  tensor_release(&y);
  tensor_release(&ind);
}

static void test_pools(smelt_pool *pool) {
  const char *ops[] = {"MaxPool", "AveragePool", "LpPool"};
  for (int o = 0; o < 3; o++) {
    const char *op = ops[o];
    check_pool(pool, SMELT_F32, (pool_case){op, 2, 2, 3, {7, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}});
    check_pool(pool, SMELT_F32, (pool_case){op, 2, 1, 2, {8, 11}, {3, 2}, {2, 3}, {1, 1}, {0, 1, 2, 0}, 1});
    check_pool(pool, SMELT_F32, (pool_case){op, 2, 1, 2, {8, 11}, {3, 2}, {2, 3}, {1, 1}, {0, 1, 2, 0}, 1, 1});
    check_pool(pool, SMELT_F32, (pool_case){op, 2, 1, 2, {10, 7}, {2, 3}, {3, 2}, {2, 2}, {1, 0, 1, 1}, 0, 1});
    check_pool(pool, SMELT_F32, (pool_case){op, 1, 2, 3, {13}, {4}, {3}, {1}, {2, 1}, 1});
    check_pool(pool, SMELT_F32, (pool_case){op, 3, 1, 2, {5, 6, 4}, {2, 3, 2}, {1, 2, 1}, {1, 1, 1}, {1, 0, 1, 0, 1, 1}, 0, 1});
    check_pool(pool, SMELT_F32, (pool_case){op, 2, 1, 3, {7, 8}, {3, 4}, {2, 2}, {1, 1}, {0}, 0, 0, 0, "SAME_UPPER"});
    check_pool(pool, SMELT_F32, (pool_case){op, 2, 1, 3, {7, 8}, {3, 4}, {2, 2}, {1, 1}, {0}, 0, 0, 0, "SAME_LOWER"});
    check_pool(pool, SMELT_F32, (pool_case){op, 2, 0, 3, {7, 8}, {3, 3}, {1, 1}, {1, 1}, {0}});
    check_pool(pool, SMELT_F16, (pool_case){op, 2, 1, 2, {6, 5}, {2, 2}, {1, 1}, {1, 1}, {1, 1, 0, 0}});
    check_pool(pool, SMELT_F64, (pool_case){op, 2, 1, 2, {6, 5}, {3, 2}, {2, 1}, {1, 1}, {1, 1, 1, 1}, 1});
  }
  /* max with dilation, storage_order 1, uint8 */
  check_pool(pool, SMELT_F32, (pool_case){"MaxPool", 2, 2, 2, {11, 10}, {3, 2}, {1, 2}, {2, 3}, {1, 2, 2, 1}});
  check_pool(pool, SMELT_F32, (pool_case){"MaxPool", 2, 2, 2, {9, 7}, {3, 2}, {2, 2}, {1, 1}, {1, 0, 1, 1}, 0, 0, 1});
  check_pool(pool, SMELT_F32, (pool_case){"MaxPool", 3, 1, 2, {5, 6, 4}, {2, 3, 2}, {1, 2, 1}, {1, 1, 1}, {1, 0, 1, 0, 1, 1}, 0, 0, 1});
  check_pool(pool, SMELT_U8, (pool_case){"MaxPool", 2, 1, 3, {9, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}});
  check_pool(pool, SMELT_F32, (pool_case){"LpPool", 2, 1, 2, {6, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 0, 0, 0, NULL, 3});
}

static void test_global(smelt_pool *pool) {
  const char *ops[] = {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"};
  for (int o = 0; o < 3; o++)
    for (int r = 3; r <= 5; r++) {
      int64_t dims[5] = {2, 3, 5, 4, 3};
      tensor x = {0}, y = {0};
      nt_rand(&x, SMELT_F32, r, dims);
      tensor *in[] = {&x}, *out[] = {&y};
      CHECK_OK(nt_run_pool(pool, ops[o], 22, NULL, 0, in, 1, out, 1));
      int64_t S = 1;
      for (int i = 2; i < r; i++) S *= dims[i];
      double want[6];
      for (int q = 0; q < 6; q++) {
        double acc = o == 1 ? -INFINITY : 0;
        for (int64_t i = 0; i < S; i++) {
          double v = tensor_get_f64(&x, q * S + i);
          acc = o == 0 ? acc + v : o == 1 ? fmax(acc, v) : acc + v * v;
        }
        want[q] = o == 0 ? acc / (double)S : o == 1 ? acc : sqrt(acc);
      }
      CHECK(y.rank == r && y.dims[0] == 2 && y.dims[1] == 3);
      for (int i = 2; i < r; i++) CHECK(y.dims[i] == 1);
      CHECK(nt_close(&y, want, 6, 1e-6, 1e-6, ops[o]));
      tensor_release(&x);
      tensor_release(&y);
    }
}

static void test_unpool(void) {
  /* MaxPool then MaxUnpool puts each max back where it came from */
  tensor x = {0}, y = {0}, ind = {0}, u = {0}, u2 = {0}, os = {0};
  nt_rand(&x, SMELT_F32, 4, (int64_t[]){2, 2, 6, 8});
  ir_attr at[] = {nt_ints("kernel_shape", 2, (int64_t[]){2, 2}), nt_ints("strides", 2, (int64_t[]){2, 2})};
  tensor *in[] = {&x}, *out[] = {&y, &ind};
  CHECK_OK(nt_run("MaxPool", 22, at, 2, in, 1, out, 2));
  tensor *uin[] = {&y, &ind, NULL}, *uout[] = {&u};
  CHECK_OK(nt_run("MaxUnpool", 22, at, 2, uin, 2, uout, 1));
  CHECK(u.rank == 4 && u.dims[2] == 6 && u.dims[3] == 8);
  int nonzero = 0, match = 1;
  for (int64_t i = 0; i < 2 * 2 * 6 * 8; i++) {
    float v = ((float *)u.data)[i];
    if (v != 0.f) {
      nonzero++;
      match &= v == ((float *)x.data)[i];
    }
  }
  CHECK(nonzero == 2 * 2 * 3 * 4 && match);
  /* output_shape embeds the default result at the origin */
  harness_i64(&os, 1, (int64_t[]){4}, (int64_t[]){2, 2, 7, 9});
  uin[2] = &os;
  uout[0] = &u2;
  CHECK_OK(nt_run("MaxUnpool", 22, at, 2, uin, 3, uout, 1));
  CHECK(u2.rank == 4 && u2.dims[2] == 7 && u2.dims[3] == 9);
  int same = 1;
  for (int64_t q = 0; q < 4; q++)
    for (int64_t h = 0; h < 7; h++)
      for (int64_t w = 0; w < 9; w++) {
        float got = ((float *)u2.data)[(q * 7 + h) * 9 + w];
        float exp = h < 6 && w < 8 ? ((float *)u.data)[(q * 6 + h) * 8 + w] : 0.f;
        same &= got == exp;
      }
  CHECK(same);
  /* an index outside the tensor is a run-time error, not a crash */
  ((int64_t *)ind.data)[3] = 1000;
  tensor u3 = {0};
  uout[0] = &u3;
  CHECK(nt_run("MaxUnpool", 22, at, 2, uin, 2, uout, 1) != SMELT_OK);
  CHECK(nt_err_has("outside"));
  tensor_release(&u3);
  tensor_release(&x);
  tensor_release(&y);
  tensor_release(&ind);
  tensor_release(&u);
  tensor_release(&u2);
  tensor_release(&os);
}

static void test_errors(void) {
  tensor x = {0}, y = {0};
  nt_rand(&x, SMELT_F32, 4, (int64_t[]){1, 2, 4, 4});
  tensor *in[] = {&x}, *out[] = {&y};
  CHECK(nt_run("MaxPool", 22, NULL, 0, in, 1, out, 1) != SMELT_OK);
  CHECK(nt_err_has("kernel_shape is required"));
  tensor_release(&y);
  ir_attr big[] = {nt_ints("kernel_shape", 2, (int64_t[]){5, 5})};
  CHECK(nt_run("AveragePool", 22, big, 1, in, 1, out, 1) != SMELT_OK);
  tensor_release(&y);
  ir_attr wrong[] = {nt_ints("kernel_shape", 3, (int64_t[]){2, 2, 2})};
  CHECK(nt_run("AveragePool", 22, wrong, 1, in, 1, out, 1) != SMELT_OK);
  CHECK(nt_err_has("kernel_shape has 3 values, expected 2"));
  tensor_release(&y);
  tensor_release(&x);
  nt_rand(&x, SMELT_I32, 4, (int64_t[]){1, 2, 4, 4});
  ir_attr k2[] = {nt_ints("kernel_shape", 2, (int64_t[]){2, 2})};
  CHECK(nt_run("MaxPool", 22, k2, 1, in, 1, out, 1) != SMELT_OK);
  tensor_release(&y);
  tensor_release(&x);
  tensor sx = nt_shape(SMELT_F32, 4, (int64_t[]){dim_sym(0), 3, 32, dim_sym(1)}), so = {0};
  tensor *sin[] = {&sx}, *sout[] = {&so};
  CHECK_OK(nt_infer("MaxPool", 22, k2, 1, sin, 1, sout, 1));
  CHECK(so.rank == 4 && so.dims[0] == dim_sym(0) && so.dims[2] == 31 && so.dims[3] == DIM_UNKNOWN);
}

int main(void) {
  smelt_pool *pool = NULL;
  CHECK_OK(pool_create(3, &pool));
  test_pools(NULL);
  test_pools(pool);
  test_global(pool);
  test_unpool();
  test_errors();
  pool_free(pool);
  return test_report("test_ops_pool");
}
