/* Transpose (checked against a naive index-mapping copy across dtypes, ranks
 * and tile-breaking shapes), DepthToSpace, SpaceToDepth. */
#include "shape_test_util.h"

#include "kernels/isa.h"
#include "kernels/transpose.h"

/* Fills t's bytes with a pattern unique per byte position. */
static void fill_bytes(tensor *t) {
  for (size_t i = 0; i < t->nbytes; i++) ((uint8_t *)t->data)[i] = (uint8_t)(i * 131 + i / 256);
}

static void naive_transpose(const tensor *x, const int *perm, tensor *y) {
  int r = x->rank;
  int64_t xs[SMELT_MAX_RANK], n = tensor_numel(y);
  size_t es = dtype_size(x->dtype);
  su_dense_strides(r, x->dims, xs);
  for (int64_t o = 0; o < n; o++) {
    int64_t rem = o, off = 0;
    for (int j = r - 1; j >= 0; j--) {
      off += (rem % y->dims[j]) * xs[perm[j]];
      rem /= y->dims[j];
    }
    memcpy((char *)y->data + o * (int64_t)es, (const char *)x->data + off * (int64_t)es, es);
  }
}

static void check_transpose(smelt_dtype dt, int r, const int64_t *dims, const int *perm,
                            smelt_pool *pool) {
  tensor x, y = {0}, ref;
  CHECK_OK(tensor_alloc(&x, dt, r, dims));
  fill_bytes(&x);
  int64_t od[SMELT_MAX_RANK], p64[SMELT_MAX_RANK];
  for (int j = 0; j < r; j++) od[j] = dims[perm[j]], p64[j] = perm[j];
  CHECK_OK(tensor_alloc(&ref, dt, r, od));
  naive_transpose(&x, perm, &ref);
  if (pool) {
    CHECK_OK(tensor_alloc(&y, dt, r, od));
    su_transpose(y.data, x.data, dtype_size(dt), r, dims, perm, pool);
  } else {
    ir_attr a[] = {attr_ints("perm", r, p64)};
    tensor *in[] = {&x};
    CHECK_OK(run1("Transpose", 13, a, 1, in, 1, &y));
  }
  bool ok = same_bytes(&y, &ref);
  CHECK(ok);
  if (!ok) {
    fprintf(stderr, "  dtype %s rank %d perm", dtype_name(dt), r);
    for (int j = 0; j < r; j++) fprintf(stderr, " %d", perm[j]);
    fprintf(stderr, "\n");
  }
  tensor_release(&x);
  tensor_release(&y);
  tensor_release(&ref);
}

static void test_transpose_dtypes(void) {
  static const smelt_dtype dts[] = {SMELT_U8, SMELT_F16, SMELT_F32, SMELT_F64, SMELT_C128};
  for (int k = 0; k < 5; k++) {
    check_transpose(dts[k], 2, DIMS(3, 5), (const int[]){1, 0}, NULL);
    check_transpose(dts[k], 2, DIMS(37, 70), (const int[]){1, 0}, NULL);
    check_transpose(dts[k], 3, DIMS(3, 67, 45), (const int[]){0, 2, 1}, NULL);
    check_transpose(dts[k], 3, DIMS(33, 4, 65), (const int[]){2, 1, 0}, NULL);
    check_transpose(dts[k], 4, DIMS(2, 5, 3, 7), (const int[]){0, 2, 1, 3}, NULL);
    check_transpose(dts[k], 4, DIMS(2, 17, 12, 9), (const int[]){0, 2, 3, 1}, NULL);
    check_transpose(dts[k], 6, DIMS(2, 3, 1, 4, 5, 2), (const int[]){5, 3, 0, 2, 4, 1}, NULL);
    check_transpose(dts[k], 1, DIMS(7), (const int[]){0}, NULL);
    check_transpose(dts[k], 0, NULL, NULL, NULL);
    check_transpose(dts[k], 3, DIMS(4, 0, 3), (const int[]){2, 0, 1}, NULL);
    check_transpose(dts[k], 3, DIMS(1, 1, 9), (const int[]){2, 1, 0}, NULL);
  }
  /* Every permutation of a rank-4 tensor with a prime-sized axis. */
  int p[4];
  for (p[0] = 0; p[0] < 4; p[0]++)
    for (p[1] = 0; p[1] < 4; p[1]++)
      for (p[2] = 0; p[2] < 4; p[2]++)
        for (p[3] = 0; p[3] < 4; p[3]++) {
          if (p[0] == p[1] || p[0] == p[2] || p[0] == p[3] || p[1] == p[2] || p[1] == p[3] ||
              p[2] == p[3])
            continue;
          check_transpose(SMELT_I32, 4, DIMS(3, 5, 6, 11), p, NULL);
        }
}

static void test_transpose_pool(void) {
  smelt_pool *pool = NULL;
  CHECK_OK(pool_create(3, &pool));
  check_transpose(SMELT_F32, 2, DIMS(512, 389), (const int[]){1, 0}, pool);
  check_transpose(SMELT_F16, 4, DIMS(2, 64, 12, 64), (const int[]){0, 2, 1, 3}, pool);
  check_transpose(SMELT_F32, 4, DIMS(2, 12, 64, 65), (const int[]){0, 1, 3, 2}, pool);
  pool_free(pool);
}

/* kernels/transpose.h on its own, at every ISA level the machine has:
 * blocks of 1..33 rows and columns (whole and partial 8 x 8 blocks), row
 * strides past the block, bit patterns (NaNs, signed zeros) moved as they
 * are, and nothing written outside the block. */
static void test_transpose32_kernel(void) {
  static const int64_t sizes[] = {1, 3, 7, 8, 9, 16, 17, 24, 33};
  enum { NS = sizeof sizes / sizeof *sizes };
  for (int isa = 0; isa <= (int)isa_detect(); isa++)
    for (int a = 0; a < NS; a++)
      for (int b = 0; b < NS; b++) {
        int64_t rows = sizes[a], cols = sizes[b], lds = cols + 3, ldd = rows + 5;
        uint32_t *s = malloc(sizeof(uint32_t) * (size_t)(rows * lds)), *d = malloc(sizeof(uint32_t) * (size_t)(cols * ldd));
        for (int64_t i = 0; i < rows * lds; i++) s[i] = (uint32_t)(i * 2654435761u) ^ 0x7fc00001u;
        for (int64_t i = 0; i < cols * ldd; i++) d[i] = 0xdeadbeefu;
        transpose32((isa_level)isa, d, ldd, s, lds, rows, cols);
        bool ok = true;
        for (int64_t j = 0; j < cols; j++)
          for (int64_t i = 0; i < ldd; i++)
            ok &= d[j * ldd + i] == (i < rows ? s[i * lds + j] : 0xdeadbeefu);
        CHECK(ok);
        if (!ok) fprintf(stderr, "  transpose32 %s %lldx%lld\n", isa_name((isa_level)isa), (long long)rows, (long long)cols);
        free(s);
        free(d);
      }
}

static void test_transpose_default_and_errors(void) {
  tensor x = mk(SMELT_F32, 3, DIMS(2, 3, 4), NULL), y, ref;
  tensor *in[] = {&x};
  CHECK_OK(run1("Transpose", 13, NULL, 0, in, 1, &y));
  CHECK_OK(tensor_alloc(&ref, SMELT_F32, 3, DIMS(4, 3, 2)));
  naive_transpose(&x, (const int[]){2, 1, 0}, &ref);
  CHECK(same_bytes(&y, &ref));
  tensor_release(&y);
  tensor_release(&ref);
  ir_attr dup[] = {attr_ints("perm", 3, DIMS(0, 0, 1))};
  CHECK(run1("Transpose", 13, dup, 1, in, 1, &y) == SMELT_ERR_INVALID_MODEL);
  ir_attr shortp[] = {attr_ints("perm", 2, DIMS(0, 1))};
  CHECK(run1("Transpose", 13, shortp, 1, in, 1, &y) == SMELT_ERR_INVALID_MODEL);
  ir_attr big[] = {attr_ints("perm", 3, DIMS(0, 1, 3))};
  CHECK(run1("Transpose", 13, big, 1, in, 1, &y) == SMELT_ERR_INVALID_MODEL);
  ir_attr neg[] = {attr_ints("perm", 3, DIMS(0, 1, -1))};
  CHECK(run1("Transpose", 13, neg, 1, in, 1, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&x);
  /* Static: symbolic dims move with the permutation. */
  int64_t B = dim_sym(0);
  tensor sx = mk_shape(SMELT_F32, 3, DIMS(B, 4, DIM_UNKNOWN)), so, *sin[] = {&sx}, *sout[] = {&so};
  ir_attr p[] = {attr_ints("perm", 3, DIMS(2, 0, 1))};
  CHECK_OK(infer_static("Transpose", 13, p, 1, sin, 1, sout, 1));
  CHECK(same(&so, 3, DIMS(DIM_UNKNOWN, B, 4), NULL));
}

static void test_depth_space(void) {
  /* The ONNX spec's example: x = arange(48) of shape [1, 8, 2, 3], blocksize 2. */
  tensor x = mk(SMELT_F32, 4, DIMS(1, 8, 2, 3), NULL), y, z;
  tensor *in[] = {&x};
  ir_attr dcr[] = {attr_i("blocksize", 2), attr_s("mode", "DCR")};
  CHECK_OK(run1("DepthToSpace", 13, dcr, 2, in, 1, &y));
  CHECK(same(&y, 4, DIMS(1, 2, 4, 6),
             VALS(0, 12, 1, 13, 2, 14, 24, 36, 25, 37, 26, 38, 3, 15, 4, 16, 5, 17, 27, 39, 28, 40,
                  29, 41, 6, 18, 7, 19, 8, 20, 30, 42, 31, 43, 32, 44, 9, 21, 10, 22, 11, 23, 33,
                  45, 34, 46, 35, 47)));
  tensor *in2[] = {&y};
  ir_attr bs[] = {attr_i("blocksize", 2)};
  CHECK_OK(run1("SpaceToDepth", 13, bs, 1, in2, 1, &z)); /* inverse of DCR */
  CHECK(same_bytes(&z, &x));
  tensor_release(&y);
  tensor_release(&z);
  ir_attr crd[] = {attr_i("blocksize", 2), attr_s("mode", "CRD")};
  CHECK_OK(run1("DepthToSpace", 13, crd, 2, in, 1, &y));
  CHECK(same(&y, 4, DIMS(1, 2, 4, 6),
             VALS(0, 6, 1, 7, 2, 8, 12, 18, 13, 19, 14, 20, 3, 9, 4, 10, 5, 11, 15, 21, 16, 22, 17,
                  23, 24, 30, 25, 31, 26, 32, 36, 42, 37, 43, 38, 44, 27, 33, 28, 34, 29, 35, 39,
                  45, 40, 46, 41, 47)));
  tensor_release(&y);
  ir_attr b3[] = {attr_i("blocksize", 3)};
  CHECK(run1("DepthToSpace", 13, b3, 1, in, 1, &y) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(run1("SpaceToDepth", 13, b3, 1, in, 1, &y) == SMELT_ERR_INVALID_ARGUMENT);
  ir_attr b0[] = {attr_i("blocksize", 0)};
  CHECK(run1("DepthToSpace", 13, b0, 1, in, 1, &y) == SMELT_ERR_INVALID_MODEL);
  ir_attr badm[] = {attr_i("blocksize", 2), attr_s("mode", "XYZ")};
  CHECK(run1("DepthToSpace", 13, badm, 2, in, 1, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&x);
  x = mk(SMELT_F32, 3, DIMS(8, 2, 3), NULL);
  CHECK(run1("DepthToSpace", 13, bs, 1, in, 1, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&x);
}

int main(void) {
  test_transpose32_kernel();
  /* the op's copies at every ISA level (SMELT_ISA is read per call) */
  static const char *const isas[] = {"scalar", "avx2", "avx512"};
  for (int l = 0; l <= (int)isa_detect() && l < 3; l++) {
    setenv("SMELT_ISA", isas[l], 1);
    test_transpose_dtypes();
    test_transpose_pool();
  }
  unsetenv("SMELT_ISA");
  test_transpose_default_and_errors();
  test_depth_space();
  return test_report("ops_transpose");
}
