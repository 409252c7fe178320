/* Einsum against a brute-force oracle written here (letters only), plus
 * hand-written loops for ellipsis broadcasting. */
#include "nn_test_util.h"

/* Sizes of letters a..z from a dims table; operands given as label strings. */
static double *oracle(const char *const *terms, int n, tensor **ops, const char *out, int64_t *nout) {
  int64_t size[128] = {0};
  char all[64];
  int na = 0;
  for (int i = 0; i < n; i++)
    for (int d = 0; terms[i][d]; d++) {
      char ch = terms[i][d];
      size[(int)ch] = ops[i]->dims[d];
      if (!memchr(all, ch, (size_t)na)) all[na++] = ch;
    }
  int64_t total = 1, no = 1;
  for (int k = 0; k < na; k++) total *= size[(int)all[k]];
  for (int d = 0; out[d]; d++) no *= size[(int)out[d]];
  double *y = calloc((size_t)no + 1, sizeof(double));
  for (int64_t it = 0; it < total; it++) {
    int64_t val[128] = {0}, rem = it;
    for (int k = na - 1; k >= 0; k--) val[(int)all[k]] = rem % size[(int)all[k]], rem /= size[(int)all[k]];
    double prod = 1;
    for (int i = 0; i < n; i++) {
      int64_t off = 0;
      for (int d = 0; terms[i][d]; d++) off = off * ops[i]->dims[d] + val[(int)terms[i][d]];
      prod *= tensor_get_f64(ops[i], off);
    }
    int64_t o = 0;
    for (int d = 0; out[d]; d++) o = o * size[(int)out[d]] + val[(int)out[d]];
    y[o] += prod;
  }
  *nout = no;
  return y;
}

static void check(smelt_pool *pool, smelt_dtype dt, const char *eq, const char *const *terms,
                  int n, const char *out, int64_t dims[][4], const int *ranks) {
  tensor t[4] = {{0}}, y = {0};
  tensor *in[4];
  for (int i = 0; i < n; i++) {
    nt_rand(&t[i], dt, ranks[i], dims[i]);
    if (dtype_is_int(dt))
      for (int64_t k = 0; k < tensor_numel(&t[i]); k++) tensor_set_f64(&t[i], k, (double)(k % 7) - 3);
    in[i] = &t[i];
  }
  ir_attr a[] = {nt_str("equation", eq)};
  tensor *o[] = {&y};
  CHECK_OK(nt_run_pool(pool, "Einsum", 12, a, 1, in, n, o, 1));
  int64_t no;
  double *want = oracle(terms, n, in, out, &no);
  CHECK(y.rank == (int)strlen(out));
  double tol = dt == SMELT_F64 ? 1e-12 : dtype_is_int(dt) ? 0 : 1e-5;
  if (!nt_close(&y, want, no, tol, tol, eq)) CHECK(0);
  free(want);
  for (int i = 0; i < n; i++) tensor_release(&t[i]);
  tensor_release(&y);
}

#define T(...) ((const char *const[]){__VA_ARGS__})
#define D(...) ((int64_t[][4]){__VA_ARGS__})
#define R(...) ((const int[]){__VA_ARGS__})

static void test_equations(smelt_pool *pool, smelt_dtype dt) {
  check(pool, dt, "ij,jk->ik", T("ij", "jk"), 2, "ik", D({5, 7}, {7, 3}), R(2, 2));
  check(pool, dt, "ij,jk", T("ij", "jk"), 2, "ik", D({5, 7}, {7, 3}), R(2, 2));
  check(pool, dt, "bij,bjk->bik", T("bij", "bjk"), 2, "bik", D({3, 4, 5}, {3, 5, 2}), R(3, 3));
  check(pool, dt, "bhqd,bhkd->bhqk", T("bhqd", "bhkd"), 2, "bhqk", D({2, 3, 4, 5}, {2, 3, 6, 5}), R(4, 4));
  check(pool, dt, "ij->ji", T("ij"), 1, "ji", D({4, 6}), R(2));
  check(pool, dt, "ii->i", T("ii"), 1, "i", D({5, 5}), R(2));
  check(pool, dt, "ii", T("ii"), 1, "", D({5, 5}), R(2));
  check(pool, dt, "ij->", T("ij"), 1, "", D({3, 4}), R(2));
  check(pool, dt, "i,i", T("i", "i"), 2, "", D({7}, {7}), R(1, 1));
  check(pool, dt, "i,j->ij", T("i", "j"), 2, "ij", D({3}, {4}), R(1, 1));
  check(pool, dt, "ij,ij->ij", T("ij", "ij"), 2, "ij", D({3, 4}, {3, 4}), R(2, 2));
  check(pool, dt, "bn,anm,bm->ba", T("bn", "anm", "bm"), 3, "ba", D({2, 3}, {4, 3, 5}, {2, 5}), R(2, 3, 2));
  check(pool, dt, "ijk,jil->kl", T("ijk", "jil"), 2, "kl", D({2, 3, 4}, {3, 2, 5}), R(3, 3));
  check(pool, dt, "ij,jk->ki", T("ij", "jk"), 2, "ki", D({5, 7}, {7, 3}), R(2, 2));
  check(pool, dt, "ij,kj->", T("ij", "kj"), 2, "", D({2, 3}, {4, 3}), R(2, 2));
  check(pool, dt, "iij,jk->ik", T("iij", "jk"), 2, "ik", D({3, 3, 4}, {4, 2}), R(3, 2));
  check(pool, dt, "Ab,bA", T("Ab", "bA"), 2, "", D({3, 4}, {4, 3}), R(2, 2));
  check(pool, dt, "ba,ac", T("ba", "ac"), 2, "bc", D({3, 4}, {4, 2}), R(2, 2));
}

static void test_ellipsis(smelt_pool *pool) {
  /* "...ij,...jk->...ik" with batch [2,1] x [3] -> [2,3] */
  tensor a = {0}, b = {0}, y = {0};
  nt_rand(&a, SMELT_F32, 4, (int64_t[]){2, 1, 3, 4});
  nt_rand(&b, SMELT_F32, 3, (int64_t[]){3, 4, 5});
  ir_attr at[] = {nt_str("equation", "...ij,...jk->...ik")};
  tensor *in[] = {&a, &b}, *o[] = {&y};
  CHECK_OK(nt_run_pool(pool, "Einsum", 12, at, 1, in, 2, o, 1));
  CHECK(y.rank == 4 && y.dims[0] == 2 && y.dims[1] == 3 && y.dims[2] == 3 && y.dims[3] == 5);
  double want[2 * 3 * 3 * 5];
  for (int p = 0; p < 2; p++)
    for (int q = 0; q < 3; q++)
      for (int i = 0; i < 3; i++)
        for (int k = 0; k < 5; k++) {
          double s = 0;
          for (int j = 0; j < 4; j++)
            s += tensor_get_f64(&a, (p * 3 + i) * 4 + j) * tensor_get_f64(&b, (q * 4 + j) * 5 + k);
          want[((p * 3 + q) * 3 + i) * 5 + k] = s;
        }
  CHECK(nt_close(&y, want, 90, 1e-5, 1e-5, "ellipsis matmul"));
  tensor_release(&y);
  /* an output of only the ellipsis sums the labelled dim away */
  ir_attr at2[] = {nt_str("equation", "...j->...")};
  tensor *in2[] = {&b};
  CHECK_OK(nt_run_pool(pool, "Einsum", 12, at2, 1, in2, 1, o, 1));
  CHECK(y.rank == 2 && y.dims[0] == 3 && y.dims[1] == 4);
  double w2[12];
  for (int q = 0; q < 12; q++) {
    w2[q] = 0;
    for (int k = 0; k < 5; k++) w2[q] += tensor_get_f64(&b, q * 5 + k);
  }
  CHECK(nt_close(&y, w2, 12, 1e-5, 1e-5, "ellipsis sum"));
  tensor_release(&y);
  /* errors */
  ir_attr bad[] = {nt_str("equation", "ij,jk->ik")};
  tensor c = {0};
  nt_rand(&c, SMELT_F32, 2, (int64_t[]){5, 5});
  tensor *in3[] = {&a, &c};
  CHECK(nt_run("Einsum", 12, bad, 1, in3, 2, o, 1) != SMELT_OK);
  CHECK(nt_err_has("operand 0 has 2 labels for rank 4"));
  tensor_release(&y);
  tensor *in4[] = {&c, &b};
  ir_attr bad2[] = {nt_str("equation", "ij,jkl->ik")};
  CHECK(nt_run("Einsum", 12, bad2, 1, in4, 2, o, 1) != SMELT_OK);
  CHECK(nt_err_has("has size"));
  tensor_release(&y);
  ir_attr bad3[] = {nt_str("equation", "ij,jk->iz")};
  tensor d = {0};
  nt_rand(&d, SMELT_F32, 2, (int64_t[]){5, 2});
  tensor *in5[] = {&c, &d};
  CHECK(nt_run("Einsum", 12, bad3, 1, in5, 2, o, 1) != SMELT_OK);
  CHECK(nt_err_has("not in any operand"));
  tensor_release(&y);
  tensor_release(&a);
  tensor_release(&b);
  tensor_release(&c);
  tensor_release(&d);
}

int main(void) {
  smelt_pool *pool = NULL;
  CHECK_OK(pool_create(3, &pool));
  test_equations(NULL, SMELT_F32);
  test_equations(pool, SMELT_F32);
  test_equations(NULL, SMELT_F64);
  test_equations(NULL, SMELT_I64);
  test_ellipsis(pool);
  pool_free(pool);
  return test_report("test_ops_einsum");
}
