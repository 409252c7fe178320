/* The newer and non-default-domain ops: LinearAttention (all four rules,
 * GQA), CausalConvWithState, SwiGLU, FlexAttention with a score_mod graph,
 * TfIdfVectorizer weighting modes, the training optimizers, TreeEnsemble
 * modes and aggregations, and the random ops' seeding and ranges. */
#include <math.h>

#include "subgraph_builder.h"
#include "shape_test_util.h"

/* harness_run for a node of any domain. */
static smelt_status run_dom(const char *domain, const char *op, int opset, const ir_attr *attrs, int na,
                            tensor **in, int n_in, tensor *outs, int n_out) {
  ir_graph *g = ir_graph_new(NULL);
  if (!g) return err_nomem("graph", 0);
  tensor *o[8];
  int id;
  for (int i = 0; i < n_out; i++) {
    memset(&outs[i], 0, sizeof outs[i]);
    o[i] = &outs[i];
  }
  smelt_status s = ir_graph_add_node(g, "test", op, domain, n_in, n_out, na, &id);
  if (!s) {
    ir_node *n = &g->nodes[id];
    if (na) memcpy(n->attrs, attrs, sizeof(ir_attr) * (size_t)na);
    n->opset = opset;
    n->op = ops_find(domain, op);
    for (int i = 0; i < n_in; i++) n->inputs[i] = in[i] ? i : -1;
    for (int i = 0; i < n_out; i++) n->outputs[i] = n_in + i;
    s = node_run(g, id, in, o, NULL, NULL, NULL);
    n->n_attrs = 0;
  }
  ir_graph_free(g);
  if (s)
    for (int i = 0; i < n_out; i++) tensor_release(&outs[i]);
  return s;
}

static bool near_vals(const tensor *t, const double *v, int64_t n, double tol) {
  if (tensor_numel(t) != n) {
    fprintf(stderr, "  %lld elements, expected %lld\n", (long long)tensor_numel(t), (long long)n);
    return false;
  }
  for (int64_t i = 0; i < n; i++)
    if (fabs(tensor_get_f64(t, i) - v[i]) > tol) {
      fprintf(stderr, "  element %lld: %.9g, expected %.9g\n", (long long)i, tensor_get_f64(t, i), v[i]);
      return false;
    }
  return true;
}

/* ---- LinearAttention: d_k = d_v = 1, two kv heads shared by four query heads ---- */

static void test_linear_attention(void) {
  /* B 1, T 2, Hq 4, Hkv 2: q per head, k and v per kv head */
  tensor q = mk(SMELT_F32, 3, DIMS(1, 2, 4), VALS(1, 2, 3, 4, 1, 1, 1, 1));
  tensor k = mk(SMELT_F32, 3, DIMS(1, 2, 2), VALS(1, 2, 0.5, 1)), v = mk(SMELT_F32, 3, DIMS(1, 2, 2), VALS(3, 4, 5, 6));
  tensor dec = mk(SMELT_F32, 3, DIMS(1, 2, 2), VALS(0, 0, log(0.5), log(0.25)));
  tensor beta = mk(SMELT_F32, 3, DIMS(1, 2, 1), VALS(1, 0.5)), y[2];
  const char *rules[] = {"linear", "gated", "delta", "gated_delta"};
  for (int r = 0; r < 4; r++) {
    bool gated = r == 1 || r == 3, delta = r >= 2;
    tensor *in[] = {&q, &k, &v, NULL, gated ? &dec : NULL, delta ? &beta : NULL};
    ir_attr at[] = {attr_i("q_num_heads", 4), attr_i("kv_num_heads", 2), attr_s("update_rule", rules[r]),
                    attr_f("scale", 1)};
    CHECK_OK(runn("LinearAttention", 27, at, 4, in, 6, y, 2));
    /* the recurrence by hand, per kv head h, state s */
    double out[8], st[2];
    for (int h = 0; h < 2; h++) {
      double s = 0;
      for (int t = 0; t < 2; t++) {
        double kk = tensor_get_f64(&k, t * 2 + h), vv = tensor_get_f64(&v, t * 2 + h);
        if (gated) s *= exp(tensor_get_f64(&dec, t * 2 + h));
        if (delta) vv = tensor_get_f64(&beta, t) * (vv - s * kk);
        s += kk * vv;
        for (int hq = 2 * h; hq < 2 * h + 2; hq++) out[t * 4 + hq] = tensor_get_f64(&q, t * 4 + hq) * s;
      }
      st[h] = s;
    }
    CHECK(near_vals(&y[0], out, 8, 1e-5));
    CHECK(y[1].rank == 4 && near_vals(&y[1], st, 2, 1e-5));
    tensor_release(&y[0]), tensor_release(&y[1]);
  }
  tensor *bad[] = {&q, &k, &v, NULL, &dec, NULL};
  ir_attr lin[] = {attr_i("q_num_heads", 4), attr_i("kv_num_heads", 2), attr_s("update_rule", "linear")};
  CHECK(runn("LinearAttention", 27, lin, 3, bad, 6, y, 2) == SMELT_ERR_INVALID_MODEL); /* decay forbidden */
  ir_attr gqa[] = {attr_i("q_num_heads", 3), attr_i("kv_num_heads", 2), attr_s("update_rule", "linear")};
  tensor *in3[] = {&q, &k, &v};
  CHECK(runn("LinearAttention", 27, gqa, 3, in3, 3, y, 2) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&q), tensor_release(&k), tensor_release(&v), tensor_release(&dec), tensor_release(&beta);
}

static void test_causal_conv(void) {
  tensor x = mk(SMELT_F32, 3, DIMS(1, 1, 3), VALS(1, 2, 3)), w = mk(SMELT_F32, 3, DIMS(1, 1, 3), VALS(1, 10, 100));
  tensor past = mk(SMELT_F32, 3, DIMS(1, 1, 2), VALS(5, 6)), b = mk(SMELT_F32, 1, DIMS(1), VALS(0.5)), y[2];
  tensor *in[] = {&x, &w, &b, &past};
  CHECK_OK(runn("CausalConvWithState", 27, NULL, 0, in, 4, y, 2));
  /* padded 5 6 1 2 3 */
  CHECK(near_vals(&y[0], VALS(5 + 60 + 100 + 0.5, 6 + 10 + 200 + 0.5, 1 + 20 + 300 + 0.5), 3, 1e-4));
  CHECK(same(&y[1], 3, DIMS(1, 1, 2), VALS(2, 3)));
  tensor_release(&y[0]), tensor_release(&y[1]);
  /* one input step with the default zero state: the state keeps a zero */
  tensor x1 = mk(SMELT_F32, 3, DIMS(1, 1, 1), VALS(-2));
  tensor *in1[] = {&x1, &w};
  ir_attr silu[] = {attr_s("activation", "silu")};
  CHECK_OK(runn("CausalConvWithState", 27, silu, 1, in1, 2, y, 2));
  CHECK(near_vals(&y[0], VALS(-200 / (1 + exp(200))), 1, 1e-6) && same(&y[1], 3, DIMS(1, 1, 2), VALS(0, -2)));
  tensor_release(&y[0]), tensor_release(&y[1]);
  /* kernel size one: an empty state */
  tensor w1 = mk(SMELT_F32, 3, DIMS(1, 1, 1), VALS(2));
  tensor *in2[] = {&x, &w1};
  CHECK_OK(runn("CausalConvWithState", 27, NULL, 0, in2, 2, y, 2));
  CHECK(same(&y[0], 3, DIMS(1, 1, 3), VALS(2, 4, 6)) && y[1].rank == 3 && y[1].dims[2] == 0);
  tensor_release(&y[0]), tensor_release(&y[1]);
  tensor_release(&x), tensor_release(&w), tensor_release(&past), tensor_release(&b), tensor_release(&x1);
  tensor_release(&w1);
}

static void test_swiglu(void) {
  tensor a = mk(SMELT_F32, 1, DIMS(2), VALS(1, -2)), b = mk(SMELT_F32, 1, DIMS(2), VALS(3, 4)), y;
  tensor *in[] = {&a, &b};
  ir_attr al[] = {attr_f("alpha", 2)};
  CHECK_OK(run1("SwiGLU", 28, al, 1, in, 2, &y));
  CHECK(near_vals(&y, VALS(3 / (1 + exp(-2.0)), -8 / (1 + exp(4.0))), 2, 1e-6));
  tensor_release(&y);
  tensor c = mk(SMELT_F32, 1, DIMS(3), NULL);
  tensor *in2[] = {&a, &c};
  CHECK(run1("SwiGLU", 28, NULL, 0, in2, 2, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&a), tensor_release(&b), tensor_release(&c);
}

/* FlexAttention with a score_mod that masks key 1 (adds -inf there). */
static void test_flex_attention(void) {
  ir_graph *g = gb_new(NULL);
  gb_input(g, "Q");
  gb_input(g, "K");
  gb_input(g, "V");
  gb_input(g, "mask");
  ir_graph *sm = gb_new(g);
  gb_input(sm, "s");
  gb_node(sm, "Add", GB_IN("s", "mask"), GB_OUT("s2"), GB_NONE);
  gb_output(sm, "s2");
  ir_attr a[] = {gb_graph_attr("score_mod", sm)};
  gb_node_dom(g, "ai.onnx.preview", "FlexAttention", 1, GB_IN("Q", "K", "V"), GB_OUT("Y"), a, 1);
  gb_output(g, "Y");
  /* B 1, Hq 2, Hkv 1, L 1, S 2, E 1 */
  tensor Q = mk(SMELT_F32, 4, DIMS(1, 2, 1, 1), VALS(1, 2)), K = mk(SMELT_F32, 4, DIMS(1, 1, 2, 1), VALS(1, -1));
  tensor V = mk(SMELT_F32, 4, DIMS(1, 1, 2, 2), VALS(1, 2, 3, 4)), mask = mk(SMELT_F32, 0, NULL, VALS(0)), out[1];
  tensor *ins[] = {&Q, &K, &V, &mask};
  CHECK_OK(gb_run(g, ins, out));
  double want[4];
  for (int h = 0; h < 2; h++) { /* softmax of (q*1, q*-1) */
    double qv = h + 1, p0 = 1 / (1 + exp(-2 * qv)), p1 = 1 - p0;
    want[2 * h] = p0 * 1 + p1 * 3;
    want[2 * h + 1] = p0 * 2 + p1 * 4;
  }
  CHECK(near_vals(&out[0], want, 4, 1e-5));
  tensor_release(&out[0]), tensor_release(&mask);
  mask = mk(SMELT_F32, 1, DIMS(2), VALS(-INFINITY, 0)); /* only key 1 is left */
  ins[3] = &mask;
  CHECK_OK(gb_run(g, ins, out));
  CHECK(near_vals(&out[0], VALS(3, 4, 3, 4), 4, 1e-6));
  tensor_release(&out[0]);
  tensor_release(&Q), tensor_release(&K), tensor_release(&V), tensor_release(&mask);
  ir_graph_free(g);
}

static void test_tfidf(void) {
  /* pool: unigrams {2, 3}, bigrams {(2, 3), (3, 2)}; outputs 0..3 */
  tensor x = mk(SMELT_I32, 2, DIMS(2, 4), VALS(2, 3, 2, 5, 3, 5, 2, 3)), y;
  tensor *in[] = {&x};
  ir_attr at[] = {attr_s("mode", "TF"), attr_i("min_gram_length", 1), attr_i("max_gram_length", 2),
                  attr_i("max_skip_count", 1), attr_ints("ngram_counts", 2, DIMS(0, 2)),
                  attr_ints("ngram_indexes", 4, DIMS(0, 1, 2, 3)), attr_ints("pool_int64s", 6, DIMS(2, 3, 2, 3, 3, 2))};
  CHECK_OK(run1("TfIdfVectorizer", 9, at, 7, in, 1, &y));
  /* row 0: 2 3 2 5 -> unigrams 2:2 3:1; skip 0: (2,3) (3,2); skip 1: (2,2) (3,5) -> none
   * row 1: 3 5 2 3 -> unigrams 2:1 3:2; skip 0: (2,3); skip 1: (3,2) (5,3) */
  CHECK(same(&y, 2, DIMS(2, 4), VALS(2, 1, 1, 1, 1, 2, 1, 1)));
  tensor_release(&y);
  at[0] = attr_s("mode", "TFIDF");
  ir_attr at2[8];
  memcpy(at2, at, sizeof at);
  at2[7] = attr_floats("weights", 4, (const float[]){0.5, 1, 2, 4});
  CHECK_OK(run1("TfIdfVectorizer", 9, at2, 8, in, 1, &y));
  CHECK(same(&y, 2, DIMS(2, 4), VALS(1, 1, 2, 4, 0.5, 2, 2, 4)));
  tensor_release(&y);
  at2[0] = attr_s("mode", "IDF");
  CHECK_OK(run1("TfIdfVectorizer", 9, at2, 8, in, 1, &y));
  CHECK(same(&y, 2, DIMS(2, 4), VALS(0.5, 1, 2, 4, 0.5, 1, 2, 4)));
  tensor_release(&y);
  /* only bigrams, no skips */
  ir_attr bi[7];
  memcpy(bi, at, sizeof bi);
  bi[0] = attr_s("mode", "TF"), bi[1] = attr_i("min_gram_length", 2), bi[3] = attr_i("max_skip_count", 0);
  CHECK_OK(run1("TfIdfVectorizer", 9, bi, 7, in, 1, &y));
  CHECK(same(&y, 2, DIMS(2, 4), VALS(0, 0, 1, 1, 0, 0, 1, 0)));
  tensor_release(&y);
  tensor_release(&x);
}

static void test_training(void) {
  tensor r = mk(SMELT_F32, 0, NULL, VALS(0.1)), t = mk(SMELT_I64, 0, NULL, VALS(0)), x = mk(SMELT_F32, 1, DIMS(2), VALS(1, 2));
  tensor g = mk(SMELT_F32, 1, DIMS(2), VALS(0.5, -1)), v = mk(SMELT_F32, 1, DIMS(2), VALS(1, 1)), o[3];
  /* momentum at T 0: beta is taken as 1: v' = 0.9 v + g, x' = x - r v' */
  tensor *mi[] = {&r, &t, &x, &g, &v};
  ir_attr ma[] = {attr_f("alpha", 0.9f), attr_f("beta", 0.5f), attr_f("norm_coefficient", 0), attr_s("mode", "standard")};
  CHECK_OK(run_dom("ai.onnx.preview.training", "Momentum", 1, ma, 4, mi, 5, o, 2));
  CHECK(near_vals(&o[0], VALS(1 - 0.1 * 1.4, 2 - 0.1 * -0.1), 2, 1e-6) && near_vals(&o[1], VALS(1.4, -0.1), 2, 1e-6));
  tensor_release(&o[0]), tensor_release(&o[1]);
  /* Adagrad: h' = h + g^2, x' = x - r g / (sqrt(h') + eps) */
  tensor h = mk(SMELT_F32, 1, DIMS(2), VALS(0, 3));
  tensor *ai[] = {&r, &t, &x, &g, &h};
  ir_attr aa[] = {attr_f("epsilon", 0)};
  CHECK_OK(run_dom("ai.onnx.preview.training", "Adagrad", 1, aa, 1, ai, 5, o, 2));
  CHECK(near_vals(&o[0], VALS(1 - 0.1, 2 + 0.1 / 2), 2, 1e-6) && near_vals(&o[1], VALS(0.25, 4), 2, 1e-6));
  tensor_release(&o[0]), tensor_release(&o[1]);
  /* Adam at T 0: no bias correction */
  tensor *di[] = {&r, &t, &x, &g, &v, &h};
  ir_attr da[] = {attr_f("alpha", 0.5f), attr_f("beta", 0.5f), attr_f("epsilon", 0)};
  CHECK_OK(run_dom("ai.onnx.preview.training", "Adam", 1, da, 3, di, 6, o, 3));
  /* v' = 0.5 v + 0.5 g = (0.75, 0); h' = 0.5 h + 0.5 g^2 = (0.125, 2) */
  CHECK(near_vals(&o[1], VALS(0.75, 0), 2, 1e-6) && near_vals(&o[2], VALS(0.125, 2), 2, 1e-6));
  CHECK(near_vals(&o[0], VALS(1 - 0.1 * 0.75 / sqrt(0.125), 2), 2, 1e-5));
  for (int i = 0; i < 3; i++) tensor_release(&o[i]);
  CHECK(run_dom("ai.onnx.preview.training", "Momentum", 1, ma, 1, mi, 5, o, 2) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&r), tensor_release(&t), tensor_release(&x), tensor_release(&g), tensor_release(&v), tensor_release(&h);
}

/* One tree: node 0 tests feature 0 with mode m against 1.0 (NaN goes true
 * when missing_true); leaves 0 (true, weight 10) and 1 (false, weight 20). */
static void tree(int mode, int missing_true, double x0, double want) {
  tensor x = mk(SMELT_F64, 2, DIMS(1, 1), VALS(x0)), y;
  tensor splits = mk(SMELT_F64, 1, DIMS(1), VALS(1)), modes = mk(SMELT_U8, 1, DIMS(1), VALS(mode));
  tensor lw = mk(SMELT_F64, 1, DIMS(2), VALS(10, 20)), members = mk(SMELT_F32, 1, DIMS(3), VALS(0.5, 1, NAN));
  ir_attr at[] = {attr_ints("nodes_featureids", 1, DIMS(0)), attr_ints("nodes_truenodeids", 1, DIMS(0)),
                  attr_ints("nodes_falsenodeids", 1, DIMS(1)), attr_ints("nodes_trueleafs", 1, DIMS(1)),
                  attr_ints("nodes_falseleafs", 1, DIMS(1)), attr_ints("leaf_targetids", 2, DIMS(0, 0)),
                  attr_ints("tree_roots", 1, DIMS(0)), attr_i("n_targets", 1), attr_t("nodes_splits", &splits),
                  attr_t("nodes_modes", &modes), attr_t("leaf_weights", &lw), attr_t("membership_values", &members),
                  attr_ints("nodes_missing_value_tracks_true", 1, (const int64_t[]){missing_true})};
  tensor *in[] = {&x};
  tensor o[1];
  CHECK_OK(run_dom("ai.onnx.ml", "TreeEnsemble", 5, at, 13, in, 1, o, 1));
  y = o[0];
  CHECK(near_vals(&y, &want, 1, 0));
  if (y.data && tensor_get_f64(&y, 0) != want) fprintf(stderr, "  (mode %d, x %g)\n", mode, x0);
  tensor_release(&y), tensor_release(&x), tensor_release(&splits), tensor_release(&modes), tensor_release(&lw);
  tensor_release(&members);
}

static void test_tree_ensemble(void) {
  tree(0, 0, 1, 10), tree(1, 0, 1, 20), tree(2, 0, 1, 10), tree(3, 0, 1, 20);
  tree(4, 0, 1, 10), tree(5, 0, 1, 20), tree(6, 0, 0.5, 10), tree(6, 0, 2, 20);
  tree(0, 0, NAN, 20), tree(0, 1, NAN, 10); /* NaN: false, unless missing values track true */
  /* two single-leaf trees aggregated, then a logistic post transform */
  tensor x = mk(SMELT_F32, 2, DIMS(2, 1), VALS(0, 0)), splits = mk(SMELT_F32, 1, DIMS(2), VALS(0, 0));
  tensor modes = mk(SMELT_U8, 1, DIMS(2), VALS(0, 0)), lw = mk(SMELT_F32, 1, DIMS(2), VALS(1, 3)), o[1];
  for (int agg = 0; agg < 4; agg++) {
    ir_attr at[] = {attr_ints("nodes_featureids", 2, DIMS(0, 0)), attr_ints("nodes_truenodeids", 2, DIMS(0, 1)),
                    attr_ints("nodes_falsenodeids", 2, DIMS(0, 1)), attr_ints("nodes_trueleafs", 2, DIMS(1, 1)),
                    attr_ints("nodes_falseleafs", 2, DIMS(1, 1)), attr_ints("leaf_targetids", 2, DIMS(0, 0)),
                    attr_ints("tree_roots", 2, DIMS(0, 1)), attr_i("n_targets", 1), attr_t("nodes_splits", &splits),
                    attr_t("nodes_modes", &modes), attr_t("leaf_weights", &lw), attr_i("aggregate_function", agg),
                    attr_i("post_transform", 2)};
    tensor *in[] = {&x};
    CHECK_OK(run_dom("ai.onnx.ml", "TreeEnsemble", 5, at, 13, in, 1, o, 1));
    double raw = agg == 0 ? 2 : agg == 1 ? 4 : agg == 2 ? 1 : 3, v = 1 / (1 + exp(-raw));
    CHECK(near_vals(&o[0], (const double[]){v, v}, 2, 1e-6));
    tensor_release(&o[0]);
  }
  tensor_release(&x), tensor_release(&splits), tensor_release(&modes), tensor_release(&lw);
}

static void test_ml_small(void) {
  tensor x = mk(SMELT_F32, 2, DIMS(2, 3), VALS(1, 2, 3, 4, 5, 6)), idx = mk(SMELT_I64, 1, DIMS(2), VALS(2, 0)), o[1];
  tensor *in[] = {&x, &idx};
  CHECK_OK(run_dom("ai.onnx.ml", "ArrayFeatureExtractor", 1, NULL, 0, in, 2, o, 1));
  CHECK(same(&o[0], 2, DIMS(2, 2), VALS(3, 1, 6, 4)));
  tensor_release(&o[0]);
  tensor bad = mk(SMELT_I64, 1, DIMS(1), VALS(3));
  tensor *in2[] = {&x, &bad};
  CHECK(run_dom("ai.onnx.ml", "ArrayFeatureExtractor", 1, NULL, 0, in2, 2, o, 1) == SMELT_ERR_RUNTIME);
  ir_attr th[] = {attr_f("threshold", 3)};
  tensor *in3[] = {&x};
  CHECK_OK(run_dom("ai.onnx.ml", "Binarizer", 1, th, 1, in3, 1, o, 1));
  CHECK(same(&o[0], 2, DIMS(2, 3), VALS(0, 0, 0, 1, 1, 1)));
  tensor_release(&o[0]), tensor_release(&x), tensor_release(&idx), tensor_release(&bad);
}

static void test_random(void) {
  ir_attr at[] = {attr_ints("shape", 2, DIMS(50, 40)), attr_f("seed", 3), attr_f("low", -2), attr_f("high", 5)};
  tensor a, b;
  CHECK_OK(run1("RandomUniform", 22, at, 4, NULL, 0, &a));
  CHECK_OK(run1("RandomUniform", 22, at, 4, NULL, 0, &b));
  CHECK(same_bytes(&a, &b)); /* seeded: reproducible */
  double mn = 1e9, mx = -1e9, sum = 0;
  for (int64_t i = 0; i < 2000 && a.data; i++) {
    double v = tensor_get_f64(&a, i);
    mn = v < mn ? v : mn, mx = v > mx ? v : mx, sum += v;
  }
  CHECK(mn >= -2 && mx < 5 && fabs(sum / 2000 - 1.5) < 0.2);
  tensor_release(&a), tensor_release(&b);
  ir_attr nt[] = {attr_ints("shape", 1, DIMS(4000)), attr_f("mean", 10), attr_f("scale", 2), attr_i("dtype", SMELT_F64)};
  CHECK_OK(run1("RandomNormal", 22, nt, 4, NULL, 0, &a));
  double m = 0, var = 0;
  for (int64_t i = 0; i < 4000 && a.data; i++) m += tensor_get_f64(&a, i) / 4000;
  for (int64_t i = 0; i < 4000 && a.data; i++) var += pow(tensor_get_f64(&a, i) - m, 2) / 4000;
  CHECK(a.dtype == SMELT_F64 && fabs(m - 10) < 0.2 && fabs(sqrt(var) - 2) < 0.2);
  tensor_release(&a);
  tensor p = mk(SMELT_F32, 1, DIMS(4), VALS(0, 1, 0, 1)), y;
  tensor *in[] = {&p};
  ir_attr bd[] = {attr_i("dtype", SMELT_BOOL)};
  CHECK_OK(run1("Bernoulli", 22, bd, 1, in, 1, &y));
  CHECK(y.dtype == SMELT_BOOL && same(&y, 1, DIMS(4), VALS(0, 1, 0, 1))); /* certain outcomes */
  tensor_release(&y);
  tensor bad = mk(SMELT_F32, 1, DIMS(1), VALS(1.5));
  tensor *in2[] = {&bad};
  CHECK(run1("Bernoulli", 22, NULL, 0, in2, 1, &y) == SMELT_ERR_RUNTIME);
  tensor lp = mk(SMELT_F32, 2, DIMS(2, 3), VALS(0, -1e4, -1e4, -1e4, -1e4, 0));
  tensor *in3[] = {&lp};
  ir_attr mu[] = {attr_i("sample_size", 5), attr_i("dtype", SMELT_I64)};
  CHECK_OK(run1("Multinomial", 22, mu, 2, in3, 1, &y));
  CHECK(same(&y, 2, DIMS(2, 5), VALS(0, 0, 0, 0, 0, 2, 2, 2, 2, 2)));
  tensor_release(&y), tensor_release(&p), tensor_release(&bad), tensor_release(&lp);
}

int main(void) {
  test_linear_attention();
  test_causal_conv();
  test_swiglu();
  test_flex_attention();
  test_tfidf();
  test_training();
  test_tree_ensemble();
  test_ml_small();
  test_random();
  return test_report("ops_newer");
}
