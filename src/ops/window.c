/* Signal windows (HannWindow, HammingWindow, BlackmanWindow) and
 * MelWeightMatrix.  Their outputs depend on input values (sizes), so shapes
 * are known statically only when those inputs are constants. */
#include <math.h>
#include <stdlib.h>

#include "ops/convert.h"
#include "ops/nn_util.h"
#include "util/err.h"

#define WIN_PI 3.14159265358979323846

static smelt_status out_dtype(op_ctx *c, smelt_dtype *dt) {
  int64_t d = op_attr_int(c, "output_datatype", SMELT_F32);
  if (d <= 0 || d >= SMELT_DTYPE_COUNT || !cvt_supported((smelt_dtype)d) || d == SMELT_BOOL)
    return err_set(SMELT_ERR_UNSUPPORTED, "attribute output_datatype %lld is not supported", (long long)d);
  *dt = (smelt_dtype)d;
  return SMELT_OK;
}

static smelt_status scalar_int(const tensor *t, const char *what, int64_t *v) {
  if (!dtype_is_int(t->dtype) || tensor_numel(t) != 1)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "%s must be an integer scalar", what);
  *v = tensor_get_i64(t, 0);
  return SMELT_OK;
}

/* ---- windows ---- */

static smelt_status win_infer(op_ctx *c) {
  smelt_dtype dt = SMELT_F32;
  TRY(out_dtype(c, &dt));
  int64_t n = DIM_UNKNOWN;
  if (c->in[0]->data) {
    TRY(scalar_int(c->in[0], "input 0 (size)", &n));
    if (n < 0) return err_set(SMELT_ERR_INVALID_ARGUMENT, "window size %lld is negative", (long long)n);
  }
  op_set_out(c, 0, dt, 1, &n);
  return SMELT_OK;
}

typedef double (*win_fn)(double n, double N1);

static double hann(double n, double N1) {
  double s = sin(WIN_PI * n / N1);
  return s * s;
}
static double hamming(double n, double N1) {
  const double a = 25.0 / 46.0;
  return a - (1 - a) * cos(2 * WIN_PI * n / N1);
}
static double blackman(double n, double N1) {
  return 0.42 - 0.5 * cos(2 * WIN_PI * n / N1) + 0.08 * cos(4 * WIN_PI * n / N1);
}

/* periodic windows divide by N, symmetric ones by N - 1 */
static smelt_status win_run(op_ctx *c, win_fn f) {
  tensor *y = c->out[0];
  int64_t N = y->dims[0];
  double N1 = op_attr_int(c, "periodic", 1) ? (double)N : (double)(N - 1);
  double *v = NULL;
  TRY(nn_alloc((void **)&v, N + 1, sizeof(double), "window"));
  for (int64_t i = 0; i < N; i++) v[i] = N1 > 0 ? f((double)i, N1) : 1.0;
  cvt_store_f64(y->dtype, v, N, y->data, true);
  free(v);
  return SMELT_OK;
}

static smelt_status hann_run(op_ctx *c) { return win_run(c, hann); }
static smelt_status hamming_run(op_ctx *c) { return win_run(c, hamming); }
static smelt_status blackman_run(op_ctx *c) { return win_run(c, blackman); }

/* ---- MelWeightMatrix ---- */

typedef struct mel_cfg {
  int64_t bins, dft_len, rate;
  double lo, hi;
} mel_cfg;

static smelt_status mel_config(op_ctx *c, mel_cfg *m) {
  TRY(scalar_int(c->in[0], "input 0 (num_mel_bins)", &m->bins));
  TRY(scalar_int(c->in[1], "input 1 (dft_length)", &m->dft_len));
  TRY(scalar_int(c->in[2], "input 2 (sample_rate)", &m->rate));
  if (!nn_is_float(c->in[3]->dtype) || !nn_is_float(c->in[4]->dtype) || tensor_numel(c->in[3]) != 1 ||
      tensor_numel(c->in[4]) != 1)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "lower_edge_hertz and upper_edge_hertz must be float scalars");
  m->lo = tensor_get_f64(c->in[3], 0);
  m->hi = tensor_get_f64(c->in[4], 0);
  if (m->bins < 1 || m->dft_len < 1 || m->rate < 1)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "num_mel_bins, dft_length and sample_rate must be >= 1");
  return SMELT_OK;
}

static smelt_status mel_infer(op_ctx *c) {
  smelt_dtype dt = SMELT_F32;
  TRY(out_dtype(c, &dt));
  int64_t d[2] = {DIM_UNKNOWN, DIM_UNKNOWN};
  for (int i = 0; i < 5; i++)
    if (!c->in[i]->data) {
      op_set_out(c, 0, dt, 2, d);
      return SMELT_OK;
    }
  mel_cfg m;
  TRY(mel_config(c, &m));
  d[0] = m.dft_len / 2 + 1;
  d[1] = m.bins;
  op_set_out(c, 0, dt, 2, d);
  return SMELT_OK;
}

/* Hertz to mel as ONNX's reference computes it (f32 steps, then f64). */
static double mel_of(double hz) {
  float a = (float)hz / 700.0f;
  float b = 2595.0f * log1pf(a);
  return (double)b / log(10.0);
}

static smelt_status mel_run(op_ctx *c) {
  mel_cfg m;
  TRY(mel_config(c, &m));
  tensor *y = c->out[0];
  int64_t rows = m.dft_len / 2 + 1, nb = m.bins + 2;
  int64_t *fb = NULL;
  double *w = NULL;
  smelt_status s = nn_alloc((void **)&fb, nb, sizeof(int64_t), "mel bins");
  if (!s) s = nn_alloc((void **)&w, rows * m.bins, sizeof(double), "mel weights");
  if (s) {
    free(fb);
    return s;
  }
  double lo = mel_of(m.lo), step = (mel_of(m.hi) - lo) / (double)nb;
  for (int64_t i = 0; i < nb; i++) {
    double hz = 700.0 * expm1(((double)i * step + lo) / 2595.0 * log(10.0));
    fb[i] = (int64_t)floor((double)(m.dft_len + 1) * hz / (double)m.rate);
  }
  for (int64_t i = 0; i < rows * m.bins; i++) w[i] = 0;
  for (int64_t i = 0; i < m.bins && !s; i++) {
    int64_t l = fb[i], ctr = fb[i + 1], h = fb[i + 2];
    if (l < 0 || ctr < l || h < ctr || h > rows || ctr >= rows) {
      s = err_set(SMELT_ERR_INVALID_ARGUMENT, "mel bin %lld covers frequency bins %lld..%lld outside 0..%lld",
                  (long long)i, (long long)l, (long long)h, (long long)rows - 1);
      break;
    }
    if (ctr == l) w[ctr * m.bins + i] = 1;
    for (int64_t j = l; ctr > l && j <= ctr; j++) w[j * m.bins + i] = (double)(j - l) / (double)(ctr - l);
    for (int64_t j = ctr; j < h; j++) w[j * m.bins + i] = (double)(h - j) / (double)(h - ctr);
  }
  if (!s) cvt_store_f64(y->dtype, w, rows * m.bins, y->data, true);
  free(fb);
  free(w);
  return s;
}

const op_def op_family_window[] = {
    {"HannWindow", "", 1, 1, 1, 1, win_infer, hann_run, false},
    {"HammingWindow", "", 1, 1, 1, 1, win_infer, hamming_run, false},
    {"BlackmanWindow", "", 1, 1, 1, 1, win_infer, blackman_run, false},
    {"MelWeightMatrix", "", 5, 5, 1, 1, mel_infer, mel_run, false},
    {0}};
