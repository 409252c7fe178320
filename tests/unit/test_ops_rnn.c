/* RNN, GRU, LSTM: scalar cases against the spec's equations written out,
 * and properties over random weights that tie the attributes together:
 * reverse = forward on the flipped sequence, bidirectional = both stacked,
 * layout 1 = layout 0 transposed, sequence_lens = the truncated sequence. */
#include <math.h>

#include "shape_test_util.h"

static double lcg(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return ((double)(*s >> 8) / (double)(1u << 24)) - 0.5;
}

static tensor rnd(int rank, const int64_t *dims, uint32_t *seed) {
  tensor t = mk(SMELT_F32, rank, dims, NULL);
  for (int64_t i = 0; i < tensor_numel(&t); i++) tensor_set_f64(&t, i, lcg(seed));
  return t;
}

static bool close_to(const tensor *a, const tensor *b, double tol) {
  if (tensor_numel(a) != tensor_numel(b)) return false;
  for (int64_t i = 0; i < tensor_numel(a); i++)
    if (fabs(tensor_get_f64(a, i) - tensor_get_f64(b, i)) > tol) {
      fprintf(stderr, "  element %lld: %g vs %g\n", (long long)i, tensor_get_f64(a, i), tensor_get_f64(b, i));
      return false;
    }
  return true;
}

static double sig(double x) { return 1 / (1 + exp(-x)); }

static void test_rnn_scalar(void) {
  tensor x = mk(SMELT_F32, 3, DIMS(2, 1, 1), VALS(1, -1)), w = mk(SMELT_F32, 3, DIMS(1, 1, 1), VALS(2));
  tensor r = mk(SMELT_F32, 3, DIMS(1, 1, 1), VALS(0.5)), b = mk(SMELT_F32, 2, DIMS(1, 2), VALS(0.1, 0.2));
  tensor y[2];
  tensor *in[] = {&x, &w, &r, &b};
  const char *relu[] = {"Relu"}, *affine[] = {"Affine"};
  ir_attr a1[] = {{.name = "activations", .type = IR_ATTR_STRINGS, .n = 1, .strings = relu}};
  CHECK_OK(runn("RNN", 22, a1, 1, in, 4, y, 2));
  tensor want = mk(SMELT_F32, 4, DIMS(2, 1, 1, 1), VALS(2.3, 0));
  CHECK(close_to(&y[0], &want, 1e-6));
  CHECK(fabs(tensor_get_f64(&y[1], 0)) < 1e-7);
  tensor_release(&y[0]), tensor_release(&y[1]), tensor_release(&want);
  /* clip bounds the activation input: Affine(alpha 1, beta 0) then shows it */
  ir_attr a2[] = {{.name = "activations", .type = IR_ATTR_STRINGS, .n = 1, .strings = affine},
                  attr_floats("activation_alpha", 1, (const float[]){1}),
                  attr_floats("activation_beta", 1, (const float[]){0}), attr_f("clip", 1)};
  CHECK_OK(runn("RNN", 22, a2, 4, in, 4, y, 2));
  want = mk(SMELT_F32, 4, DIMS(2, 1, 1, 1), VALS(1, -1));
  CHECK(close_to(&y[0], &want, 1e-6));
  tensor_release(&y[0]), tensor_release(&y[1]), tensor_release(&want);
  const char *bad[] = {"Cosh"};
  ir_attr a3[] = {{.name = "activations", .type = IR_ATTR_STRINGS, .n = 1, .strings = bad}};
  CHECK(runn("RNN", 22, a3, 1, in, 4, y, 2) == SMELT_ERR_UNSUPPORTED);
  tensor_release(&x), tensor_release(&w), tensor_release(&r), tensor_release(&b);
}

/* Two LSTM steps with H = I = 1, input_forget and peepholes, by the equations. */
static void test_lstm_scalar(void) {
  double wi = 0.5, wo = -0.3, wf = 0.8, wc = 0.2, ri = 0.1, ro = 0.2, rf = -0.4, rc = 0.6;
  double pi = 0.3, po = -0.2, x[2] = {1.0, -0.5};
  tensor X = mk(SMELT_F32, 3, DIMS(2, 1, 1), x), W = mk(SMELT_F32, 3, DIMS(1, 4, 1), VALS(wi, wo, wf, wc));
  tensor R = mk(SMELT_F32, 3, DIMS(1, 4, 1), VALS(ri, ro, rf, rc)), B = mk(SMELT_F32, 2, DIMS(1, 8), NULL);
  tensor P = mk(SMELT_F32, 2, DIMS(1, 3), VALS(pi, po, 0.7));
  for (int i = 0; i < 8; i++) tensor_set_f64(&B, i, 0);
  tensor y[3];
  tensor *in[] = {&X, &W, &R, &B, NULL, NULL, NULL, &P};
  ir_attr at[] = {attr_i("input_forget", 1)};
  CHECK_OK(runn("LSTM", 22, at, 1, in, 8, y, 3));
  double h = 0, c = 0, hs[2];
  for (int t = 0; t < 2; t++) {
    double i = sig(wi * x[t] + ri * h + pi * c), f = 1 - i, cc = tanh(wc * x[t] + rc * h);
    c = f * c + i * cc;
    double o = sig(wo * x[t] + ro * h + po * c);
    hs[t] = h = o * tanh(c);
  }
  tensor want = mk(SMELT_F32, 4, DIMS(2, 1, 1, 1), hs);
  CHECK(close_to(&y[0], &want, 1e-5));
  CHECK(fabs(tensor_get_f64(&y[2], 0) - c) < 1e-5);
  for (int k = 0; k < 3; k++) tensor_release(&y[k]);
  tensor_release(&want), tensor_release(&X), tensor_release(&W), tensor_release(&R), tensor_release(&B);
  tensor_release(&P);
}

/* One GRU step with H = I = 1 for both linear_before_reset values. */
static void test_gru_scalar(void) {
  double wz = 0.4, wr = -0.6, wh = 0.9, rz = 0.3, rr = 0.5, rh = -0.7, rbh = 0.25, h0 = 0.8, x = 1.5;
  for (int lbr = 0; lbr < 2; lbr++) {
    tensor X = mk(SMELT_F32, 3, DIMS(1, 1, 1), VALS(x)), W = mk(SMELT_F32, 3, DIMS(1, 3, 1), VALS(wz, wr, wh));
    tensor R = mk(SMELT_F32, 3, DIMS(1, 3, 1), VALS(rz, rr, rh));
    tensor B = mk(SMELT_F32, 2, DIMS(1, 6), VALS(0, 0, 0, 0, 0, rbh)), H0 = mk(SMELT_F32, 3, DIMS(1, 1, 1), VALS(h0));
    tensor y[2];
    tensor *in[] = {&X, &W, &R, &B, NULL, &H0};
    ir_attr at[] = {attr_i("linear_before_reset", lbr)};
    CHECK_OK(runn("GRU", 22, at, 1, in, 6, y, 2));
    double z = sig(wz * x + rz * h0), r = sig(wr * x + rr * h0);
    double hh = lbr ? tanh(wh * x + r * (rh * h0 + rbh)) : tanh(wh * x + rh * (r * h0) + rbh);
    double want = (1 - z) * hh + z * h0;
    CHECK(fabs(tensor_get_f64(&y[1], 0) - want) < 1e-5);
    tensor_release(&y[0]), tensor_release(&y[1]), tensor_release(&X), tensor_release(&W), tensor_release(&R);
    tensor_release(&B), tensor_release(&H0);
  }
}

/* ---- properties over random weights ---- */

typedef struct rnn_case {
  const char *op;
  int G;
  int64_t S, B, I, H;
} rnn_case;

/* Runs op with the given direction/layout/lens on X (in that layout). */
static smelt_status run_case(const rnn_case *k, const char *dir, int layout, tensor *X, tensor *W,
                             tensor *R, tensor *Bias, tensor *lens, tensor *y) {
  tensor *in[] = {X, W, R, Bias, lens};
  ir_attr at[] = {attr_s("direction", dir), attr_i("layout", layout), attr_i("hidden_size", k->H)};
  return runn(k->op, 22, at, 3, in, 5, y, 2);
}

/* X flipped along the sequence axis (layout 0: axis 0). */
static tensor flip_seq(const tensor *x) {
  tensor f = mk(SMELT_F32, 3, x->dims, NULL);
  int64_t S = x->dims[0], row = x->dims[1] * x->dims[2];
  for (int64_t t = 0; t < S; t++)
    for (int64_t i = 0; i < row; i++) tensor_set_f64(&f, t * row + i, tensor_get_f64(x, (S - 1 - t) * row + i));
  return f;
}

static void test_properties(const rnn_case *k) {
  uint32_t seed = 12345;
  int64_t GH = k->G * k->H;
  tensor X = rnd(3, DIMS(k->S, k->B, k->I), &seed), W = rnd(3, DIMS(1, GH, k->I), &seed);
  tensor R = rnd(3, DIMS(1, GH, k->H), &seed), Bi = rnd(2, DIMS(1, 2 * GH), &seed);
  tensor fw[2], rv[2], Xf = flip_seq(&X);
  CHECK_OK(run_case(k, "forward", 0, &X, &W, &R, &Bi, NULL, fw));
  CHECK_OK(run_case(k, "reverse", 0, &Xf, &W, &R, &Bi, NULL, rv));
  /* reverse over the flipped input = forward, step for step */
  tensor rvf = flip_seq(&(tensor){.dtype = SMELT_F32, .rank = 3, .dims = {k->S, k->B, k->H}, .data = rv[0].data,
                                  .nbytes = rv[0].nbytes});
  CHECK(close_to(&rvf, &fw[0], 1e-6) && close_to(&rv[1], &fw[1], 1e-6));
  /* bidirectional = forward and reverse stacked on the direction axis */
  tensor W2 = mk(SMELT_F32, 3, DIMS(2, GH, k->I), NULL), R2 = mk(SMELT_F32, 3, DIMS(2, GH, k->H), NULL);
  tensor B2 = mk(SMELT_F32, 2, DIMS(2, 2 * GH), NULL), bi[2], rvx[2];
  for (int d = 0; d < 2; d++) {
    memcpy((char *)W2.data + d * W.nbytes, W.data, W.nbytes);
    memcpy((char *)R2.data + d * R.nbytes, R.data, R.nbytes);
    memcpy((char *)B2.data + d * Bi.nbytes, Bi.data, Bi.nbytes);
  }
  CHECK_OK(run_case(k, "bidirectional", 0, &X, &W2, &R2, &B2, NULL, bi));
  CHECK_OK(run_case(k, "reverse", 0, &X, &W, &R, &Bi, NULL, rvx));
  int64_t BH = k->B * k->H;
  for (int64_t t = 0; t < k->S && bi[0].data; t++)
    for (int64_t j = 0; j < BH; j++) {
      CHECK(fabs(tensor_get_f64(&bi[0], (t * 2) * BH + j) - tensor_get_f64(&fw[0], t * BH + j)) < 1e-6);
      CHECK(fabs(tensor_get_f64(&bi[0], (t * 2 + 1) * BH + j) - tensor_get_f64(&rvx[0], t * BH + j)) < 1e-6);
    }
  /* layout 1: [B, S, I] in, [B, S, D, H] and [B, D, H] out */
  tensor Xl = mk(SMELT_F32, 3, DIMS(k->B, k->S, k->I), NULL), lay[2];
  for (int64_t t = 0; t < k->S; t++)
    for (int64_t b = 0; b < k->B; b++)
      for (int64_t i = 0; i < k->I; i++)
        tensor_set_f64(&Xl, (b * k->S + t) * k->I + i, tensor_get_f64(&X, (t * k->B + b) * k->I + i));
  CHECK_OK(run_case(k, "forward", 1, &Xl, &W, &R, &Bi, NULL, lay));
  for (int64_t t = 0; t < k->S && lay[0].data; t++)
    for (int64_t b = 0; b < k->B; b++)
      for (int64_t j = 0; j < k->H; j++)
        CHECK(fabs(tensor_get_f64(&lay[0], (b * k->S + t) * k->H + j) -
                   tensor_get_f64(&fw[0], (t * k->B + b) * k->H + j)) < 1e-6);
  for (int i = 0; i < 2; i++) {
    tensor_release(&rv[i]), tensor_release(&bi[i]), tensor_release(&rvx[i]), tensor_release(&lay[i]);
  }
  /* sequence_lens: entry 1 stops after one step (forward and reverse) */
  tensor lens = mk(SMELT_I32, 1, DIMS(k->B), NULL), X1 = mk(SMELT_F32, 3, DIMS(1, k->B, k->I), NULL), one[2], sl[2];
  for (int64_t b = 0; b < k->B; b++) tensor_set_f64(&lens, b, b == 1 ? 1 : (double)k->S);
  memcpy(X1.data, X.data, X1.nbytes);
  for (int r = 0; r < 2; r++) {
    const char *dir = r ? "reverse" : "forward";
    CHECK_OK(run_case(k, dir, 0, &X, &W, &R, &Bi, &lens, sl));
    CHECK_OK(run_case(k, dir, 0, &X1, &W, &R, &Bi, NULL, one));
    for (int64_t j = 0; j < k->H && sl[1].data && one[1].data; j++)
      CHECK(fabs(tensor_get_f64(&sl[1], k->H + j) - tensor_get_f64(&one[1], k->H + j)) < 1e-6);
    for (int64_t t = 1; t < k->S && sl[0].data; t++)
      for (int64_t j = 0; j < k->H; j++) CHECK(tensor_get_f64(&sl[0], (t * k->B + 1) * k->H + j) == 0);
    if (!r) /* entry 0 runs the whole sequence */
      for (int64_t j = 0; j < k->H && sl[1].data; j++)
        CHECK(fabs(tensor_get_f64(&sl[1], j) - tensor_get_f64(&fw[1], j)) < 1e-6);
    tensor_release(&sl[0]), tensor_release(&sl[1]), tensor_release(&one[0]), tensor_release(&one[1]);
  }
  tensor_release(&fw[0]), tensor_release(&fw[1]), tensor_release(&rvf), tensor_release(&X), tensor_release(&Xf);
  tensor_release(&W), tensor_release(&R), tensor_release(&Bi), tensor_release(&W2), tensor_release(&R2);
  tensor_release(&B2), tensor_release(&Xl), tensor_release(&lens), tensor_release(&X1);
}

static void test_errors(void) {
  tensor x = mk(SMELT_F32, 3, DIMS(2, 1, 3), NULL), w = mk(SMELT_F32, 3, DIMS(1, 4, 3), NULL);
  tensor r = mk(SMELT_F32, 3, DIMS(1, 4, 4), NULL), y[2];
  tensor *in[] = {&x, &w, &r};
  ir_attr dir[] = {attr_s("direction", "bidirectional")}, hs[] = {attr_i("hidden_size", 3)};
  CHECK(runn("RNN", 22, dir, 1, in, 3, y, 2) == SMELT_ERR_INVALID_ARGUMENT); /* W has one direction */
  CHECK(runn("RNN", 22, hs, 1, in, 3, y, 2) == SMELT_ERR_INVALID_MODEL);     /* hidden_size vs R */
  CHECK(runn("GRU", 22, NULL, 0, in, 3, y, 2) == SMELT_ERR_INVALID_ARGUMENT); /* 4 rows, not 3*4 */
  tensor_release(&x), tensor_release(&w), tensor_release(&r);
}

int main(void) {
  test_rnn_scalar();
  test_lstm_scalar();
  test_gru_scalar();
  const rnn_case cases[] = {{"RNN", 1, 4, 3, 2, 5}, {"GRU", 3, 3, 2, 3, 4}, {"LSTM", 4, 5, 3, 2, 3}};
  for (int i = 0; i < 3; i++) test_properties(&cases[i]);
  test_errors();
  return test_report("ops_rnn");
}
