/* Gather, GatherElements, GatherND, ScatterElements/Scatter, ScatterND: spec
 * examples, negative and out-of-range indices, int32/int64 indices,
 * reductions, every element size. */
#include "shape_test_util.h"

static void test_gather(void) {
  for (int k = 0; k < N_ALL_SIZES; k++) {
    smelt_dtype dt = all_sizes[k];
    tensor x = mk(dt, 2, DIMS(3, 2), VALS(1, 2, 3, 4, 5, 6)), y;
    tensor ind = mk(SMELT_I64, 2, DIMS(2, 2), VALS(0, 1, -2, 2));
    tensor ref = mk(dt, 3, DIMS(2, 2, 2), VALS(1, 2, 3, 4, 3, 4, 5, 6));
    tensor *in[] = {&x, &ind};
    CHECK_OK(run1("Gather", 13, NULL, 0, in, 2, &y));
    CHECK(same_bytes(&y, &ref));
    tensor_release(&y);
    tensor_release(&ref);
    tensor_release(&ind);
    tensor_release(&x);
  }
  /* axis 1, int32 indices (the spec's second example). */
  tensor x = mk(SMELT_F32, 2, DIMS(3, 3), VALS(1, 1.2, 1.9, 2.3, 3.4, 3.9, 4.5, 5.7, 5.9)), y;
  tensor ind = mk(SMELT_I32, 2, DIMS(1, 2), VALS(0, -1));
  tensor *in[] = {&x, &ind};
  ir_attr a1[] = {attr_i("axis", -1)};
  CHECK_OK(run1("Gather", 13, a1, 1, in, 2, &y));
  CHECK(same(&y, 3, DIMS(3, 1, 2), VALS(1, (float)1.9, (float)2.3, (float)3.9, (float)4.5, (float)5.9)));
  tensor_release(&y);
  tensor_set_f64(&ind, 1, 3);
  CHECK(run1("Gather", 13, a1, 1, in, 2, &y) == SMELT_ERR_RUNTIME);
  tensor_set_f64(&ind, 1, -4);
  CHECK(run1("Gather", 13, a1, 1, in, 2, &y) == SMELT_ERR_RUNTIME);
  tensor_release(&y);
  tensor_release(&ind);
  /* Scalar index drops the axis; empty indices give an empty output. */
  ind = mk(SMELT_I64, 0, NULL, VALS(2));
  CHECK_OK(run1("Gather", 13, NULL, 0, in, 2, &y));
  CHECK(same(&y, 1, DIMS(3), VALS((float)4.5, (float)5.7, (float)5.9)));
  tensor_release(&y);
  tensor_release(&ind);
  ind = mk(SMELT_I64, 1, DIMS(0), NULL);
  CHECK_OK(run1("Gather", 13, a1, 1, in, 2, &y));
  CHECK(same(&y, 2, DIMS(3, 0), NULL));
  tensor_release(&y);
  tensor_release(&ind);
  ind = mk(SMELT_F32, 1, DIMS(1), NULL);
  CHECK(run1("Gather", 13, NULL, 0, in, 2, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&ind);
  ind = mk(SMELT_I64, 1, DIMS(1), NULL);
  ir_attr a2[] = {attr_i("axis", 2)};
  CHECK(run1("Gather", 13, a2, 1, in, 2, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&ind);
  tensor_release(&x);
  /* Static: symbolic indices shape flows into the output. */
  int64_t B = dim_sym(0), S = dim_sym(1);
  tensor sx = mk_shape(SMELT_F32, 2, DIMS(50000, 768)), si = mk_shape(SMELT_I64, 2, DIMS(B, S)), so;
  tensor *sin[] = {&sx, &si}, *sout[] = {&so};
  CHECK_OK(infer_static("Gather", 13, NULL, 0, sin, 2, sout, 1));
  CHECK(same(&so, 3, DIMS(B, S, 768), NULL));
}

static void test_gather_elements(void) {
  tensor x = mk(SMELT_I32, 2, DIMS(3, 3), VALS(1, 2, 3, 4, 5, 6, 7, 8, 9)), y;
  tensor ind = mk(SMELT_I64, 2, DIMS(2, 3), VALS(1, 2, 0, 2, 0, 0));
  tensor *in[] = {&x, &ind};
  CHECK_OK(run1("GatherElements", 13, NULL, 0, in, 2, &y));
  CHECK(same(&y, 2, DIMS(2, 3), VALS(4, 8, 3, 7, 2, 3)));
  tensor_release(&y);
  tensor_release(&ind);
  ind = mk(SMELT_I32, 2, DIMS(3, 2), VALS(-1, 0, 1, -3, 2, 2));
  ir_attr a[] = {attr_i("axis", 1)};
  CHECK_OK(run1("GatherElements", 13, a, 1, in, 2, &y));
  CHECK(same(&y, 2, DIMS(3, 2), VALS(3, 1, 5, 4, 9, 9)));
  tensor_release(&y);
  tensor_set_f64(&ind, 0, 3);
  CHECK(run1("GatherElements", 13, a, 1, in, 2, &y) == SMELT_ERR_RUNTIME);
  tensor_release(&ind);
  ind = mk(SMELT_I64, 1, DIMS(3), NULL);
  CHECK(run1("GatherElements", 13, a, 1, in, 2, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&ind);
  tensor_release(&x);
}

static void test_gather_nd(void) {
  /* The spec's examples 1, 3, 5 (batch_dims 1). */
  tensor x = mk(SMELT_I32, 2, DIMS(2, 2), VALS(0, 1, 2, 3)), y;
  tensor ind = mk(SMELT_I64, 2, DIMS(2, 2), VALS(0, 0, 1, 1));
  tensor *in[] = {&x, &ind};
  CHECK_OK(run1("GatherND", 13, NULL, 0, in, 2, &y));
  CHECK(same(&y, 1, DIMS(2), VALS(0, 3)));
  tensor_release(&y);
  tensor_release(&ind);
  ind = mk(SMELT_I64, 2, DIMS(2, 1), VALS(1, -2));
  CHECK_OK(run1("GatherND", 13, NULL, 0, in, 2, &y));
  CHECK(same(&y, 2, DIMS(2, 2), VALS(2, 3, 0, 1)));
  tensor_release(&y);
  tensor_release(&ind);
  tensor_release(&x);
  x = mk(SMELT_I32, 3, DIMS(2, 2, 2), NULL);
  ind = mk(SMELT_I64, 2, DIMS(2, 1), VALS(1, 0));
  ir_attr b1[] = {attr_i("batch_dims", 1)};
  CHECK_OK(run1("GatherND", 13, b1, 1, in, 2, &y));
  CHECK(same(&y, 2, DIMS(2, 2), VALS(2, 3, 4, 5)));
  tensor_release(&y);
  tensor_release(&ind);
  ind = mk(SMELT_I64, 3, DIMS(2, 1, 3), VALS(0, 1, 1, 1, 0, 0));
  CHECK_OK(run1("GatherND", 13, NULL, 0, in, 2, &y));
  CHECK(same(&y, 2, DIMS(2, 1), VALS(3, 4)));
  tensor_release(&y);
  tensor_set_f64(&ind, 5, 2); /* 2 is out of range for size 2 */
  CHECK(run1("GatherND", 13, NULL, 0, in, 2, &y) == SMELT_ERR_RUNTIME);
  tensor_release(&ind);
  ind = mk(SMELT_I64, 2, DIMS(1, 4), NULL); /* k = 4 > rank 3 */
  CHECK(run1("GatherND", 13, NULL, 0, in, 2, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&ind);
  tensor_release(&x);
}

static smelt_status scatter_el(const char *red, int axis, tensor *x, tensor *ind, tensor *upd,
                               tensor *y) {
  ir_attr a[] = {attr_i("axis", axis), attr_s("reduction", red)};
  tensor *in[] = {x, ind, upd};
  return run1("ScatterElements", 18, a, 2, in, 3, y);
}

static void test_scatter_elements(void) {
  for (int k = 0; k < N_ALL_SIZES; k++) {
    smelt_dtype dt = all_sizes[k];
    tensor x = mk(dt, 2, DIMS(3, 3), VALS(0, 0, 0, 0, 0, 0, 0, 0, 0)), y;
    tensor ind = mk(SMELT_I64, 2, DIMS(2, 3), VALS(1, 0, 2, 0, 2, 1));
    tensor upd = mk(dt, 2, DIMS(2, 3), VALS(1, 0, 1, 0, 1, 1));
    tensor ref = mk(dt, 2, DIMS(3, 3), VALS(0, 0, 0, 1, 0, 1, 0, 1, 1));
    CHECK_OK(scatter_el("none", 0, &x, &ind, &upd, &y));
    CHECK(same_bytes(&y, &ref));
    tensor_release(&y);
    tensor_release(&ref);
    tensor_release(&x);
    tensor_release(&ind);
    tensor_release(&upd);
  }
  tensor x = mk(SMELT_F32, 2, DIMS(1, 5), VALS(1, 2, 3, 4, 5)), y;
  tensor ind = mk(SMELT_I64, 2, DIMS(1, 2), VALS(1, -4)); /* duplicates via negative index */
  tensor upd = mk(SMELT_F32, 2, DIMS(1, 2), VALS(1.5, 3));
  CHECK_OK(scatter_el("add", 1, &x, &ind, &upd, &y));
  CHECK(same(&y, 2, DIMS(1, 5), VALS(1, 6.5, 3, 4, 5)));
  tensor_release(&y);
  CHECK_OK(scatter_el("mul", 1, &x, &ind, &upd, &y));
  CHECK(same(&y, 2, DIMS(1, 5), VALS(1, 9, 3, 4, 5)));
  tensor_release(&y);
  CHECK_OK(scatter_el("max", 1, &x, &ind, &upd, &y));
  CHECK(same(&y, 2, DIMS(1, 5), VALS(1, 3, 3, 4, 5)));
  tensor_release(&y);
  CHECK_OK(scatter_el("min", 1, &x, &ind, &upd, &y));
  CHECK(same(&y, 2, DIMS(1, 5), VALS(1, 1.5, 3, 4, 5)));
  tensor_release(&y);
  CHECK(scatter_el("sum", 1, &x, &ind, &upd, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_set_f64(&ind, 0, 5);
  CHECK(scatter_el("none", 1, &x, &ind, &upd, &y) == SMELT_ERR_RUNTIME);
  tensor_release(&y);
  tensor_release(&x);
  tensor_release(&ind);
  tensor_release(&upd);
  /* Integer add wraps instead of overflowing (no UB). */
  x = mk(SMELT_I8, 1, DIMS(1), VALS(127));
  ind = mk(SMELT_I64, 1, DIMS(1), VALS(0));
  upd = mk(SMELT_I8, 1, DIMS(1), VALS(1));
  CHECK_OK(scatter_el("add", 0, &x, &ind, &upd, &y));
  CHECK(same(&y, 1, DIMS(1), VALS(-128)));
  tensor_release(&y);
  /* Deprecated Scatter = ScatterElements without reduction. */
  tensor *in[] = {&x, &ind, &upd};
  CHECK_OK(run1("Scatter", 9, NULL, 0, in, 3, &y));
  CHECK(same(&y, 1, DIMS(1), VALS(1)));
  tensor_release(&y);
  tensor_release(&x);
  tensor_release(&ind);
  tensor_release(&upd);
}

static void test_scatter_nd(void) {
  /* The spec's example 2. */
  double xv[64], refv[64];
  static const double base[16] = {1, 2, 3, 4, 5, 6, 7, 8, 8, 7, 6, 5, 4, 3, 2, 1};
  for (int i = 0; i < 64; i++) xv[i] = base[i % 16];
  memcpy(refv, xv, sizeof refv);
  for (int i = 0; i < 16; i++) refv[i] = 5, refv[32 + i] = 1;
  for (int j = 0; j < 4; j++)
    for (int i = 0; i < 4; i++) refv[j * 4 + i] = 5 + j, refv[32 + j * 4 + i] = 1 + j;
  tensor x = mk(SMELT_F32, 3, DIMS(4, 4, 4), xv), y;
  tensor ind = mk(SMELT_I64, 2, DIMS(2, 1), VALS(0, -2));
  double uv[32];
  for (int j = 0; j < 4; j++)
    for (int i = 0; i < 4; i++) uv[j * 4 + i] = 5 + j, uv[16 + j * 4 + i] = 1 + j;
  tensor upd = mk(SMELT_F32, 3, DIMS(2, 4, 4), uv);
  tensor *in[] = {&x, &ind, &upd};
  CHECK_OK(run1("ScatterND", 11, NULL, 0, in, 3, &y));
  CHECK(same(&y, 3, DIMS(4, 4, 4), refv));
  tensor_release(&y);
  tensor_release(&x);
  tensor_release(&ind);
  tensor_release(&upd);
  /* Element indices with add: duplicates accumulate. */
  x = mk(SMELT_I64, 1, DIMS(8), VALS(1, 2, 3, 4, 5, 6, 7, 8));
  ind = mk(SMELT_I64, 2, DIMS(4, 1), VALS(4, 3, 1, 7));
  upd = mk(SMELT_I64, 1, DIMS(4), VALS(9, 10, 11, 12));
  ir_attr add[] = {attr_s("reduction", "add")};
  CHECK_OK(run1("ScatterND", 16, add, 1, in, 3, &y));
  CHECK(same(&y, 1, DIMS(8), VALS(1, 13, 3, 14, 14, 6, 7, 20)));
  tensor_release(&y);
  tensor_set_f64(&ind, 0, 1);
  CHECK_OK(run1("ScatterND", 16, add, 1, in, 3, &y));
  CHECK(same(&y, 1, DIMS(8), VALS(1, 22, 3, 14, 5, 6, 7, 20)));
  tensor_release(&y);
  ir_attr mx[] = {attr_s("reduction", "max")};
  CHECK_OK(run1("ScatterND", 18, mx, 1, in, 3, &y));
  CHECK(same(&y, 1, DIMS(8), VALS(1, 11, 3, 10, 5, 6, 7, 12)));
  tensor_release(&y);
  tensor_set_f64(&ind, 3, -9);
  CHECK(run1("ScatterND", 16, add, 1, in, 3, &y) == SMELT_ERR_RUNTIME);
  tensor_release(&upd);
  upd = mk(SMELT_I64, 1, DIMS(3), NULL);
  CHECK(run1("ScatterND", 16, add, 1, in, 3, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&x);
  tensor_release(&ind);
  tensor_release(&upd);
}

static void test_tensor_scatter(void) {
  /* past [2, 4, 2] (batch, seq, d), update [2, 2, 2]. */
  tensor past = mk(SMELT_F16, 3, DIMS(2, 4, 2), NULL), y;
  tensor upd = mk(SMELT_F16, 3, DIMS(2, 2, 2), VALS(90, 91, 92, 93, 94, 95, 96, 97));
  tensor wi = mk(SMELT_I64, 1, DIMS(2), VALS(1, 2));
  tensor *in[] = {&past, &upd, &wi};
  CHECK_OK(run1("TensorScatter", 24, NULL, 0, in, 3, &y));
  CHECK(same(&y, 3, DIMS(2, 4, 2), VALS(0, 1, 90, 91, 92, 93, 6, 7, 8, 9, 10, 11, 94, 95, 96, 97)));
  tensor_release(&y);
  CHECK_OK(run1("TensorScatter", 24, NULL, 0, in, 2, &y)); /* no write_indices: at 0 */
  CHECK(same(&y, 3, DIMS(2, 4, 2), VALS(90, 91, 92, 93, 4, 5, 6, 7, 94, 95, 96, 97, 12, 13, 14, 15)));
  tensor_release(&y);
  tensor_set_f64(&wi, 1, 3); /* 3 + 2 > 4 */
  CHECK(run1("TensorScatter", 24, NULL, 0, in, 3, &y) == SMELT_ERR_RUNTIME);
  ir_attr circ[] = {attr_s("mode", "circular"), attr_i("axis", 1)};
  tensor_set_f64(&wi, 0, -1);
  CHECK_OK(run1("TensorScatter", 24, circ, 2, in, 3, &y));
  CHECK(same(&y, 3, DIMS(2, 4, 2), VALS(92, 93, 2, 3, 4, 5, 90, 91, 96, 97, 10, 11, 12, 13, 94, 95)));
  tensor_release(&y);
  ir_attr ax0[] = {attr_i("axis", 0)};
  CHECK(run1("TensorScatter", 24, ax0, 1, in, 3, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&upd);
  upd = mk(SMELT_F16, 3, DIMS(2, 2, 3), NULL);
  CHECK(run1("TensorScatter", 24, NULL, 0, in, 3, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&upd);
  tensor_release(&past);
  tensor_release(&wi);
}

int main(void) {
  test_tensor_scatter();
  test_gather();
  test_gather_elements();
  test_gather_nd();
  test_scatter_elements();
  test_scatter_nd();
  return test_report("ops_gather_scatter");
}
