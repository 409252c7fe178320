/* FlexAttention (without modifier subgraphs, which need the executor)
 * against naive loops written here. */
#include "nn_test_util.h"

static smelt_status run_flex(const ir_attr *at, int na, tensor **in, tensor **out) {
  ir_graph *g = ir_graph_new(NULL);
  int id;
  smelt_status s = ir_graph_add_node(g, "test", "FlexAttention", "ai.onnx.preview", 3, 1, na, &id);
  if (!s) {
    ir_node *n = &g->nodes[id];
    if (na) memcpy(n->attrs, at, sizeof(ir_attr) * (size_t)na);
    n->opset = 1;
    n->op = ops_find("ai.onnx.preview", "FlexAttention");
    for (int i = 0; i < 3; i++) n->inputs[i] = i;
    n->outputs[0] = 3;
    s = n->op ? node_run(g, id, in, out, NULL, NULL, NULL) : err_set(SMELT_ERR_UNSUPPORTED, "no op");
    n->n_attrs = 0;
  }
  ir_graph_free(g);
  return s;
}

static void check(smelt_dtype dt, int64_t B, int64_t Hq, int64_t Hkv, int64_t L, int64_t S,
                  int64_t E, int64_t Ev, float scale) {
  tensor q = {0}, k = {0}, v = {0}, y = {0};
  nt_rand(&q, dt, 4, (int64_t[]){B, Hq, L, E});
  nt_rand(&k, dt, 4, (int64_t[]){B, Hkv, S, E});
  nt_rand(&v, dt, 4, (int64_t[]){B, Hkv, S, Ev});
  ir_attr at[] = {nt_float("scale", scale)};
  tensor *in[] = {&q, &k, &v}, *out[] = {&y};
  CHECK_OK(run_flex(at, scale > 0 ? 1 : 0, in, out));
  double sc = scale > 0 ? scale : 1 / sqrt((double)E), s[64];
  double *want = calloc((size_t)(B * Hq * L * Ev), sizeof(double));
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < Hq; h++) {
      int64_t hk = h / (Hq / Hkv);
      for (int64_t i = 0; i < L; i++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t t = 0; t < S; t++) {
          double acc = 0;
          for (int64_t e = 0; e < E; e++)
            acc += tensor_get_f64(&q, ((b * Hq + h) * L + i) * E + e) * tensor_get_f64(&k, ((b * Hkv + hk) * S + t) * E + e);
          s[t] = acc * sc;
          mx = fmax(mx, s[t]);
        }
        for (int64_t t = 0; t < S; t++) sum += (s[t] = exp(s[t] - mx));
        for (int64_t d = 0; d < Ev; d++) {
          double acc = 0;
          for (int64_t t = 0; t < S; t++) acc += s[t] / sum * tensor_get_f64(&v, ((b * Hkv + hk) * S + t) * Ev + d);
          want[((b * Hq + h) * L + i) * Ev + d] = acc;
        }
      }
    }
  double tol = dt == SMELT_F64 ? 1e-12 : 1e-5;
  CHECK(y.rank == 4 && y.dims[1] == Hq && y.dims[3] == Ev);
  CHECK(nt_close(&y, want, B * Hq * L * Ev, tol, tol, "FlexAttention"));
  free(want);
  tensor *all[] = {&q, &k, &v, &y};
  for (int i = 0; i < 4; i++) tensor_release(all[i]);
}

int main(void) {
  check(SMELT_F32, 2, 3, 3, 5, 7, 8, 4, 0.f);
  check(SMELT_F32, 2, 6, 2, 4, 9, 5, 3, 0.3f);
  check(SMELT_F64, 1, 4, 1, 3, 6, 4, 4, 0.f);
  /* a modifier subgraph needs the executor */
  tensor q = {0}, k = {0}, v = {0}, y = {0};
  nt_rand(&q, SMELT_F32, 4, (int64_t[]){1, 1, 2, 4});
  nt_rand(&k, SMELT_F32, 4, (int64_t[]){1, 1, 3, 4});
  nt_rand(&v, SMELT_F32, 4, (int64_t[]){1, 1, 3, 4});
  ir_graph *body = ir_graph_new(NULL);
  ir_attr at[] = {{.name = "score_mod", .type = IR_ATTR_GRAPH, .g = body}};
  tensor *in[] = {&q, &k, &v}, *out[] = {&y};
  CHECK(run_flex(at, 1, in, out) != SMELT_OK);
  CHECK(nt_err_has("needs the executor"));
  ir_graph_free(body);
  tensor *all[] = {&q, &k, &v, &y};
  for (int i = 0; i < 4; i++) tensor_release(all[i]);
  return test_report("test_ops_flex_attention");
}
