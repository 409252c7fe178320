/* MatMul and Gemm against naive loops written here. */
#include "nn_test_util.h"

/* numpy matmul in double on tensors of any dtype. */
static double *naive_matmul(const tensor *a, const tensor *b, int *rank, int64_t *dims) {
  int ra = a->rank, rb = b->rank;
  int64_t M = ra >= 2 ? a->dims[ra - 2] : 1, K = a->dims[ra - 1];
  int64_t N = rb >= 2 ? b->dims[rb - 1] : 1;
  int ba = ra > 2 ? ra - 2 : 0, bb = rb > 2 ? rb - 2 : 0, nb = ba > bb ? ba : bb;
  int64_t batch[SMELT_MAX_RANK], nbatch = 1;
  for (int i = 0; i < nb; i++) {
    int ia = i - (nb - ba), ib = i - (nb - bb);
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    batch[i] = da == 1 ? db : da;
    nbatch *= batch[i];
  }
  *rank = 0;
  for (int i = 0; i < nb; i++) dims[(*rank)++] = batch[i];
  if (ra >= 2) dims[(*rank)++] = M;
  if (rb >= 2) dims[(*rank)++] = N;
  double *y = calloc((size_t)(nbatch * M * N) + 1, sizeof(double));
  for (int64_t bi = 0; bi < nbatch; bi++) {
    int64_t rem = bi, oa = 0, ob = 0, sa = 1, sb = 1;
    for (int i = nb - 1; i >= 0; i--) {
      int64_t idx = rem % batch[i];
      rem /= batch[i];
      int ia = i - (nb - ba), ib = i - (nb - bb);
      int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
      oa += (da == 1 ? 0 : idx) * sa;
      ob += (db == 1 ? 0 : idx) * sb;
      sa *= da;
      sb *= db;
    }
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < N; n++) {
        double acc = 0;
        for (int64_t k = 0; k < K; k++)
          acc += tensor_get_f64(a, oa * M * K + m * K + k) * tensor_get_f64(b, ob * K * N + k * N + n);
        y[bi * M * N + m * N + n] = acc;
      }
  }
  return y;
}

static void check_matmul(smelt_pool *pool, smelt_dtype dt, int ra, const int64_t *da, int rb,
                         const int64_t *db, double tol) {
  tensor a = {0}, b = {0}, y = {0};
  nt_rand(&a, dt, ra, da);
  nt_rand(&b, dt, rb, db);
  if (dtype_is_int(dt)) { /* small integers, some negative for signed types */
    double sh = dtype_is_signed_int(dt) ? 1 : 0;
    for (int64_t i = 0; i < tensor_numel(&a); i++) tensor_set_f64(&a, i, (double)(i % 7) - 3 * sh);
    for (int64_t i = 0; i < tensor_numel(&b); i++) tensor_set_f64(&b, i, (double)(i % 5) - 2 * sh);
  }
  tensor *in[] = {&a, &b}, *out[] = {&y};
  CHECK_OK(nt_run_pool(pool, "MatMul", 13, NULL, 0, in, 2, out, 1));
  int rank;
  int64_t dims[SMELT_MAX_RANK];
  double *want = naive_matmul(&a, &b, &rank, dims);
  CHECK(y.rank == rank && y.dtype == dt);
  for (int i = 0; i < rank && i < y.rank; i++) CHECK(y.dims[i] == dims[i]);
  CHECK(nt_close(&y, want, shape_numel(rank, dims), tol, tol, "MatMul"));
  free(want);
  tensor_release(&a);
  tensor_release(&b);
  tensor_release(&y);
}

static void test_matmul(smelt_pool *pool) {
  const int64_t sizes[] = {1, 7, 17, 33};
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++)
      for (int k = 0; k < 4; k++)
        check_matmul(pool, SMELT_F32, 2, (int64_t[]){sizes[i], sizes[k]}, 2,
                     (int64_t[]){sizes[k], sizes[j]}, 1e-5);
  check_matmul(pool, SMELT_F32, 4, (int64_t[]){2, 1, 5, 3}, 3, (int64_t[]){4, 3, 6}, 1e-5);
  check_matmul(pool, SMELT_F32, 3, (int64_t[]){1, 5, 3}, 4, (int64_t[]){2, 3, 3, 6}, 1e-5);
  check_matmul(pool, SMELT_F32, 3, (int64_t[]){3, 9, 20}, 2, (int64_t[]){20, 15}, 1e-5);
  check_matmul(pool, SMELT_F32, 3, (int64_t[]){64, 5, 3}, 3, (int64_t[]){64, 3, 6}, 1e-5);
  check_matmul(pool, SMELT_F32, 1, (int64_t[]){13}, 1, (int64_t[]){13}, 1e-5);
  check_matmul(pool, SMELT_F32, 1, (int64_t[]){13}, 3, (int64_t[]){2, 13, 4}, 1e-5);
  check_matmul(pool, SMELT_F32, 3, (int64_t[]){2, 4, 13}, 1, (int64_t[]){13}, 1e-5);
  check_matmul(pool, SMELT_F32, 3, (int64_t[]){0, 4, 13}, 2, (int64_t[]){13, 3}, 1e-5);
  check_matmul(pool, SMELT_F32, 2, (int64_t[]){4, 0}, 2, (int64_t[]){0, 3}, 1e-5);
  check_matmul(pool, SMELT_F64, 3, (int64_t[]){2, 5, 7}, 3, (int64_t[]){1, 7, 3}, 1e-12);
  check_matmul(pool, SMELT_F16, 2, (int64_t[]){5, 9}, 2, (int64_t[]){9, 3}, 1e-2);
  check_matmul(pool, SMELT_BF16, 2, (int64_t[]){5, 9}, 2, (int64_t[]){9, 3}, 5e-2);
  check_matmul(pool, SMELT_I32, 3, (int64_t[]){2, 5, 7}, 2, (int64_t[]){7, 3}, 0);
  check_matmul(pool, SMELT_U64, 2, (int64_t[]){3, 4}, 2, (int64_t[]){4, 2}, 0);
}

static void test_matmul_errors(void) {
  tensor a = {0}, b = {0}, y = {0};
  nt_rand(&a, SMELT_F32, 2, (int64_t[]){3, 4});
  nt_rand(&b, SMELT_F32, 2, (int64_t[]){5, 2});
  tensor *in[] = {&a, &b}, *out[] = {&y};
  CHECK(nt_run("MatMul", 13, NULL, 0, in, 2, out, 1) != SMELT_OK);
  CHECK(nt_err_has("inner dims do not match"));
  tensor_release(&y);
  tensor_release(&b);
  nt_rand(&b, SMELT_F64, 2, (int64_t[]){4, 2});
  CHECK(nt_run("MatMul", 13, NULL, 0, in, 2, out, 1) != SMELT_OK);
  CHECK(nt_err_has("float64"));
  tensor_release(&y);
  tensor_release(&b);
  tensor_release(&a);
  /* symbolic batch stays symbolic */
  tensor sa = nt_shape(SMELT_F32, 3, (int64_t[]){dim_sym(0), 5, 3});
  tensor sb = nt_shape(SMELT_F32, 2, (int64_t[]){3, 8});
  tensor *sin[] = {&sa, &sb};
  tensor so = {0};
  tensor *sout[] = {&so};
  CHECK_OK(nt_infer("MatMul", 13, NULL, 0, sin, 2, sout, 1));
  CHECK(so.rank == 3 && so.dims[0] == dim_sym(0) && so.dims[1] == 5 && so.dims[2] == 8);
}

/* ---- Gemm ---- */

static void check_gemm(smelt_pool *pool, smelt_dtype dt, int64_t M, int64_t N, int64_t K, int ta,
                       int tb, float alpha, float beta, int crank, const int64_t *cdims) {
  tensor a = {0}, b = {0}, cc = {0}, y = {0};
  nt_rand(&a, dt, 2, ta ? (int64_t[]){K, M} : (int64_t[]){M, K});
  nt_rand(&b, dt, 2, tb ? (int64_t[]){N, K} : (int64_t[]){K, N});
  if (crank >= 0) nt_rand(&cc, dt, crank, cdims);
  if (dtype_is_int(dt)) {
    for (int64_t i = 0; i < tensor_numel(&a); i++) tensor_set_f64(&a, i, (double)(i % 7) - 3);
    for (int64_t i = 0; i < tensor_numel(&b); i++) tensor_set_f64(&b, i, (double)(i % 5) - 2);
    for (int64_t i = 0; crank >= 0 && i < tensor_numel(&cc); i++) tensor_set_f64(&cc, i, (double)i);
  }
  ir_attr at[] = {nt_int("transA", ta), nt_int("transB", tb), nt_float("alpha", alpha),
                  nt_float("beta", beta)};
  tensor *in[] = {&a, &b, crank >= 0 ? &cc : NULL}, *out[] = {&y};
  CHECK_OK(nt_run_pool(pool, "Gemm", 13, at, 4, in, 3, out, 1));
  double *want = calloc((size_t)(M * N) + 1, sizeof(double));
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double acc = 0;
      for (int64_t k = 0; k < K; k++)
        acc += tensor_get_f64(&a, ta ? k * M + m : m * K + k) *
               tensor_get_f64(&b, tb ? n * K + k : k * N + n);
      double cv = 0;
      if (crank == 0) cv = tensor_get_f64(&cc, 0);
      if (crank == 1) cv = tensor_get_f64(&cc, cdims[0] == 1 ? 0 : n);
      if (crank == 2)
        cv = tensor_get_f64(&cc, (cdims[0] == 1 ? 0 : m) * cdims[1] + (cdims[1] == 1 ? 0 : n));
      want[m * N + n] = alpha * acc + beta * cv;
    }
  CHECK(y.rank == 2 && y.dims[0] == M && y.dims[1] == N);
  double tol = dt == SMELT_F64 ? 1e-12 : dt == SMELT_F16 ? 1e-2 : 1e-5;
  CHECK(nt_close(&y, want, M * N, tol, tol, "Gemm"));
  free(want);
  tensor_release(&a);
  tensor_release(&b);
  tensor_release(&cc);
  tensor_release(&y);
}

static void test_gemm(smelt_pool *pool) {
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      check_gemm(pool, SMELT_F32, 17, 9, 33, ta, tb, 1.f, 1.f, -1, NULL);
      check_gemm(pool, SMELT_F32, 5, 31, 8, ta, tb, 0.5f, 2.f, 2, (int64_t[]){5, 31});
    }
  check_gemm(pool, SMELT_F32, 7, 6, 5, 0, 0, 1.f, 1.f, 0, NULL);
  check_gemm(pool, SMELT_F32, 7, 6, 5, 0, 0, 1.f, 0.3f, 1, (int64_t[]){6});
  check_gemm(pool, SMELT_F32, 7, 6, 5, 0, 0, 1.f, 1.f, 1, (int64_t[]){1});
  check_gemm(pool, SMELT_F32, 7, 6, 5, 1, 0, 1.f, 1.f, 2, (int64_t[]){7, 1});
  check_gemm(pool, SMELT_F32, 7, 6, 5, 0, 1, 1.f, 1.f, 2, (int64_t[]){1, 6});
  check_gemm(pool, SMELT_F32, 7, 6, 5, 0, 1, 1.f, 0.f, 2, (int64_t[]){7, 6});
  check_gemm(pool, SMELT_F32, 3, 4, 0, 0, 0, 1.f, 1.f, 2, (int64_t[]){3, 4});
  check_gemm(pool, SMELT_F64, 6, 5, 4, 1, 1, 0.5f, 2.f, 1, (int64_t[]){5});
  check_gemm(pool, SMELT_F16, 6, 5, 4, 0, 1, 1.f, 1.f, 1, (int64_t[]){5});
  check_gemm(pool, SMELT_I64, 6, 5, 4, 1, 0, 1.f, 1.f, 2, (int64_t[]){6, 1});
  check_gemm(pool, SMELT_I32, 6, 5, 4, 0, 0, 2.f, 1.f, 1, (int64_t[]){5});

  /* C that does not broadcast */
  tensor a = {0}, b = {0}, cc = {0}, y = {0};
  nt_rand(&a, SMELT_F32, 2, (int64_t[]){3, 4});
  nt_rand(&b, SMELT_F32, 2, (int64_t[]){4, 5});
  nt_rand(&cc, SMELT_F32, 1, (int64_t[]){3});
  tensor *in[] = {&a, &b, &cc}, *out[] = {&y};
  CHECK(nt_run("Gemm", 13, NULL, 0, in, 3, out, 1) != SMELT_OK);
  CHECK(nt_err_has("does not broadcast"));
  tensor_release(&y);
  tensor_release(&cc);
  nt_rand(&cc, SMELT_F32, 3, (int64_t[]){1, 3, 5});
  CHECK(nt_run("Gemm", 13, NULL, 0, in, 3, out, 1) != SMELT_OK);
  tensor_release(&y);
  tensor_release(&a);
  nt_rand(&a, SMELT_F32, 3, (int64_t[]){1, 3, 4});
  CHECK(nt_run("Gemm", 13, NULL, 0, in, 2, out, 1) != SMELT_OK);
  CHECK(nt_err_has("input 0 (A) has rank 3, expected 2"));
  tensor_release(&y);
  tensor_release(&a);
  tensor_release(&b);
  tensor_release(&cc);
}

int main(void) {
  smelt_pool *pool = NULL;
  CHECK_OK(pool_create(3, &pool));
  test_matmul(NULL);
  test_matmul(pool);
  test_matmul_errors();
  test_gemm(NULL);
  test_gemm(pool);
  pool_free(pool);
  return test_report("test_ops_matmul");
}
