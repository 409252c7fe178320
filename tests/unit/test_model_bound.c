/* smelt_model_load_bytes_with: graph inputs given values by the caller become
 * constants that view the caller's memory (no copy); the model then has only
 * the remaining inputs and runs like a model with those initializers, in
 * eager and compiled modes; bad bindings fail with a message naming them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "onnx/model_internal.h"
#include "onnx_test_util.h"
#include "smelt.h"

/* x[2,3]; W[3,4] and T[4,3] are inputs: Y = x W, Z = x T^T (a weight used
 * through a Transpose, as exporters write Linear with a weight input). */
static void build(pb_buf *m, const char *w_dims) {
  pb_buf g = {0}, a = {0};
  b_input(&g, "x", 1, "2,3");
  b_input(&g, "W", 1, w_dims);
  b_input(&g, "T", 1, "4,3");
  b_node(&g, "mm", "MatMul", NULL, "x,W", "Y", NULL);
  int64_t perm[2] = {1, 0};
  b_attr_ints(&a, "perm", perm, 2, 1);
  b_node(&g, "tr", "Transpose", NULL, "T", "Tt", &a);
  b_node(&g, "mm2", "MatMul", NULL, "x,Tt", "Z", NULL);
  b_output(&g, "Y", 1, "2,4");
  b_output(&g, "Z", 1, "2,4");
  b_model(m, 8, 17, &g);
}

static smelt_tensor f32(const char *name, int rank, int64_t d0, int64_t d1, float *data) {
  smelt_tensor t = {.name = name, .dtype = SMELT_F32, .rank = rank, .data = data};
  t.dims[0] = d0;
  t.dims[1] = d1;
  t.nbytes = (size_t)(d0 * (rank > 1 ? d1 : 1)) * sizeof(float);
  return t;
}

static void run(const smelt_model *m, smelt_mode mode, const float *W, const float *T) {
  smelt_session_options o = smelt_session_options_default();
  o.mode = mode;
  o.threads = 1;
  smelt_session *s = NULL;
  CHECK_OK(smelt_session_create(m, &o, &s));
  if (!s) return;
  float x[6] = {1, -2, 0.5f, 3, 0.25f, -1};
  smelt_tensor in = f32("x", 2, 2, 3, x), out[2] = {{.name = "Y"}, {.name = "Z"}};
  CHECK_OK(smelt_session_run(s, &in, 1, out, 2));
  if (out[0].data && out[1].data) {
    const float *y = out[0].data, *z = out[1].data;
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 4; j++) {
        float ey = 0, ez = 0;
        for (int k = 0; k < 3; k++) {
          ey += x[i * 3 + k] * W[k * 4 + j];
          ez += x[i * 3 + k] * T[j * 3 + k];
        }
        CHECK(fabsf(y[i * 4 + j] - ey) < 1e-5f);
        CHECK(fabsf(z[i * 4 + j] - ez) < 1e-5f);
      }
  }
  smelt_tensor_release(&out[0]);
  smelt_tensor_release(&out[1]);
  smelt_session_free(s);
}

static void expect_error(const pb_buf *m, const smelt_tensor *c, size_t n, const char *what) {
  smelt_model *mm = (smelt_model *)1;
  CHECK(smelt_model_load_bytes_with(m->data, m->len, c, n, &mm) != SMELT_OK && mm == NULL);
  if (!strstr(smelt_last_error(), what)) {
    fprintf(stderr, "  message %s lacks %s\n", smelt_last_error(), what);
    CHECK(0);
  }
}

int main(void) {
  pb_buf mb = {0};
  build(&mb, "3,4");
  float *W = aligned_alloc(64, 64), *T = aligned_alloc(64, 64);
  for (int i = 0; i < 12; i++) W[i] = (float)(i % 5) - 2.0f, T[i] = 0.5f * (float)(i % 7) - 1.0f;
  smelt_tensor c[2] = {f32("W", 2, 3, 4, W), f32("T", 2, 4, 3, T)};

  smelt_model *m = NULL;
  CHECK_OK(smelt_model_load_bytes_with(mb.data, mb.len, c, 2, &m));
  if (m) {
    CHECK(smelt_model_num_inputs(m) == 1);
    smelt_value_info vi;
    CHECK_OK(smelt_model_input(m, 0, &vi));
    CHECK(!strcmp(vi.name, "x"));
    /* viewed, not copied */
    const ir_graph *g = m->onnx->graph;
    int w = ir_graph_find_value(g, "W");
    CHECK(w >= 0 && g->values[w].constant && g->values[w].constant->data == W);
    CHECK(m->onnx->n_viewed == 2 && m->onnx->n_copied == 0);
    run(m, SMELT_MODE_EAGER, W, T);
    run(m, SMELT_MODE_DEFAULT, W, T);
    smelt_model_free(m);
  }
  /* no bindings: the plain model, three inputs */
  CHECK_OK(smelt_model_load_bytes_with(mb.data, mb.len, NULL, 0, &m));
  if (m) CHECK(smelt_model_num_inputs(m) == 3);
  smelt_model_free(m);

  smelt_tensor bad[2] = {c[0], c[1]};
  bad[1].name = "nope";
  expect_error(&mb, bad, 2, "'nope' names no input");
  bad[1] = c[0];
  expect_error(&mb, bad, 2, "given twice");
  bad[1] = c[1];
  bad[0].dtype = SMELT_I32;
  expect_error(&mb, bad, 2, "declared float32");
  bad[0] = f32("W", 2, 4, 3, W);
  expect_error(&mb, bad, 2, "dim 0 is 4");
  bad[0] = c[0];
  bad[0].nbytes = 4;
  expect_error(&mb, bad, 2, "nbytes 4");
  bad[0] = c[0];
  bad[0].data = (char *)W + 2;
  expect_error(&mb, bad, 2, "not aligned");
  bad[0] = c[0];
  bad[0].name = NULL;
  expect_error(&mb, bad, 2, "has no name");
  smelt_model *mm = (smelt_model *)1;
  CHECK(smelt_model_load_bytes_with(mb.data, mb.len, NULL, 1, &mm) == SMELT_ERR_INVALID_ARGUMENT && !mm);
  /* a symbolic declared dim takes the bound dims */
  pb_buf sym = {0};
  build(&sym, "3,n");
  CHECK_OK(smelt_model_load_bytes_with(sym.data, sym.len, c, 2, &m));
  if (m) run(m, SMELT_MODE_EAGER, W, T);
  smelt_model_free(m);
  pb_buf_discard(&sym);
  pb_buf_discard(&mb);
  free(W);
  free(T);
  return test_report("test_model_bound");
}
