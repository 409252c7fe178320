/* DFT (opset 17 and 20 forms: onesided, inverse, axis, dft_length; inverse
 * with onesided is the real inverse, irfft) and STFT.
 *
 * Signals are [..., n, ..., 1 | 2]: the last axis holds real or (re, im).
 * Each 1-D transform is a direct sum over a twiddle table computed once in
 * double (exact k*n mod N indexing, no accumulated phase error), so any length
 * works; inputs are truncated or zero-padded to the DFT length. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn_util.h"
#include "util/err.h"

#define DFT_PI 3.14159265358979323846

/* cos/sin of 2*pi*k/N for k in [0, N). */
typedef struct dft_plan {
  int64_t N;
  double *cs, *sn;
} dft_plan;

static smelt_status plan_make(int64_t N, dft_plan *p) {
  p->N = N;
  p->cs = p->sn = NULL;
  smelt_status s = nn_alloc((void **)&p->cs, N + 1, sizeof(double), "twiddles");
  if (!s) s = nn_alloc((void **)&p->sn, N + 1, sizeof(double), "twiddles");
  if (s) {
    free(p->cs);
    return s;
  }
  for (int64_t k = 0; k < N; k++) {
    double a = 2.0 * DFT_PI * (double)k / (double)N;
    p->cs[k] = cos(a);
    p->sn[k] = sin(a);
  }
  return SMELT_OK;
}

static void plan_free(dft_plan *p) {
  free(p->cs);
  free(p->sn);
}

/* out[k] for k < n_out = sum_{t < n_in} in[t] * e^{sign 2 pi i k t / N}
 * (complex in and out as re/im arrays). */
static void dft_1d(const dft_plan *p, int sign, const double *re, const double *im, int64_t n_in,
                   int64_t n_out, double *ore, double *oim) {
  int64_t N = p->N;
  if (n_in > N) n_in = N;
  for (int64_t k = 0; k < n_out; k++) {
    double sr = 0, si = 0;
    int64_t idx = 0; /* k * t mod N, stepped without overflow */
    for (int64_t t = 0; t < n_in; t++) {
      double c = p->cs[idx], s = sign * p->sn[idx];
      sr += re[t] * c - im[t] * s;
      si += re[t] * s + im[t] * c;
      idx += k; /* k < N, so one subtraction keeps it in range */
      if (idx >= N) idx -= N;
    }
    ore[k] = sr;
    oim[k] = si;
  }
}

/* ---- DFT ---- */

typedef struct dft_cfg {
  int axis;
  bool inverse, onesided;
  int64_t n_in, N, n_out; /* input length on the axis, DFT length, output length */
  int out_last;           /* 1 (irfft: real) or 2 */
} dft_cfg;

static smelt_status dft_config(op_ctx *c, const tensor *x, dft_cfg *g) {
  if (x->rank < 2 || (dim_known(x->dims[x->rank - 1]) && x->dims[x->rank - 1] != 1 &&
                      x->dims[x->rank - 1] != 2))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input's last axis must have size 1 (real) or 2 (complex)");
  int64_t axis = op_attr_int(c, "axis", 1);
  const tensor *at = op_in(c, 2);
  if (c->opset >= 20) {
    axis = -2;
    if (at && !at->data) return err_set(SMELT_ERR_UNSUPPORTED, "the axis input is not known");
    if (at) axis = tensor_get_i64(at, 0);
  }
  TRY(op_axis(axis, x->rank, "axis", &g->axis));
  if (g->axis == x->rank - 1)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "axis %d is the real/imaginary axis", g->axis);
  g->inverse = op_attr_int(c, "inverse", 0) != 0;
  g->onesided = op_attr_int(c, "onesided", 0) != 0;
  g->n_in = x->dims[g->axis];
  const tensor *lt = op_in(c, 1);
  if (lt && !lt->data) return err_set(SMELT_ERR_UNSUPPORTED, "the dft_length input is not known");
  g->N = lt ? tensor_get_i64(lt, 0) : g->inverse && g->onesided ? 2 * (g->n_in - 1) : g->n_in;
  g->out_last = g->onesided && g->inverse ? 1 : 2;
  if (!lt && !dim_known(g->n_in)) { /* static inference over a symbolic length */
    g->N = g->n_out = DIM_UNKNOWN;
    return SMELT_OK;
  }
  if (g->N < 1) return err_set(SMELT_ERR_INVALID_ARGUMENT, "dft_length %lld must be >= 1", (long long)g->N);
  g->n_out = g->onesided && !g->inverse ? g->N / 2 + 1 : g->N;
  return SMELT_OK;
}

static smelt_status dft_infer(op_ctx *c) {
  TRY(nn_check_float(c, 0, "input"));
  const tensor *x = c->in[0];
  if (x->rank < 0 || (op_in(c, 1) && !c->in[1]->data) || (c->opset >= 20 && op_in(c, 2) && !c->in[2]->data)) {
    nn_out_unknown(c, 0, x->dtype);
    return SMELT_OK;
  }
  dft_cfg g = {0};
  TRY(dft_config(c, x, &g));
  int64_t d[SMELT_MAX_RANK];
  memcpy(d, x->dims, sizeof(int64_t) * (size_t)x->rank);
  d[g.axis] = g.n_out;
  d[x->rank - 1] = g.out_last;
  op_set_out(c, 0, x->dtype, x->rank, d);
  return SMELT_OK;
}

/* Hermitian-extends a one-sided spectrum of m bins to N (irfft input). */
static void hermitian_extend(double *re, double *im, int64_t m, int64_t N) {
  for (int64_t k = m; k < N; k++) re[k] = im[k] = 0;
  for (int64_t k = N / 2 + 1; k < N; k++) {
    re[k] = re[N - k];
    im[k] = -im[N - k];
  }
}

static smelt_status dft_run(op_ctx *c) {
  const tensor *x = c->in[0];
  tensor *y = c->out[0];
  dft_cfg g = {0};
  TRY(dft_config(c, x, &g));
  int r = x->rank, cin = (int)x->dims[r - 1];
  int64_t outer = nn_prod(x->dims, 0, g.axis), inner = nn_prod(x->dims, g.axis + 1, r - 1);
  int64_t len = g.n_in > g.N ? g.n_in : g.N;
  double *buf = NULL, *re, *im, *ore, *oim;
  dft_plan p = {0};
  TRY(nn_alloc((void **)&buf, 4 * len + 4, sizeof(double), "DFT rows"));
  smelt_status s = plan_make(g.N, &p);
  re = buf, im = buf + len + 1, ore = im + len + 1, oim = ore + len + 1;
  double scale = g.inverse ? 1.0 / (double)g.N : 1.0, v[2];
  for (int64_t o = 0; !s && o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      for (int64_t t = 0; t < g.n_in; t++) {
        nn_load_f64(x->dtype, x->data, ((o * g.n_in + t) * inner + i) * cin, 1, cin, v);
        re[t] = v[0];
        im[t] = cin == 2 ? v[1] : 0;
      }
      int64_t n_in = g.n_in;
      if (g.inverse && g.onesided) {
        int64_t m = g.N / 2 + 1 < n_in ? g.N / 2 + 1 : n_in;
        hermitian_extend(re, im, m, g.N);
        n_in = g.N;
      }
      dft_1d(&p, g.inverse ? 1 : -1, re, im, n_in, g.n_out, ore, oim);
      for (int64_t k = 0; k < g.n_out; k++) {
        v[0] = ore[k] * scale;
        v[1] = oim[k] * scale;
        nn_store_f64(y->dtype, y->data, ((o * g.n_out + k) * inner + i) * g.out_last, 1, g.out_last, v);
      }
    }
  plan_free(&p);
  free(buf);
  return s;
}

/* ---- STFT ---- */

typedef struct stft_cfg {
  int64_t B, L, step, flen, frames, bins;
  int cin;
} stft_cfg;

static smelt_status stft_config(op_ctx *c, stft_cfg *g) {
  const tensor *x = c->in[0], *st = c->in[1], *w = op_in(c, 2), *fl = op_in(c, 3);
  if (x->rank != 3 || (x->dims[2] != 1 && x->dims[2] != 2))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "signal must be [batch, length, 1 or 2]");
  if (!st->data || (fl && !fl->data)) return err_set(SMELT_ERR_UNSUPPORTED, "frame_step/frame_length not known");
  g->B = x->dims[0], g->L = x->dims[1], g->cin = (int)x->dims[2];
  g->step = tensor_get_i64(st, 0);
  g->flen = fl ? tensor_get_i64(fl, 0) : w ? w->dims[0] : g->L;
  if (w && (w->rank != 1 || w->dims[0] != g->flen))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "window must be 1-D of frame_length %lld values", (long long)g->flen);
  if (g->step < 1 || g->flen < 1 || g->flen > g->L)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "frame_step %lld and frame_length %lld do not fit a signal "
                   "of %lld", (long long)g->step, (long long)g->flen, (long long)g->L);
  g->frames = (g->L - g->flen) / g->step + 1;
  bool onesided = op_attr_int(c, "onesided", 1) != 0;
  if (onesided && g->cin == 2)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "onesided output needs a real signal");
  g->bins = onesided ? g->flen / 2 + 1 : g->flen;
  return SMELT_OK;
}

static smelt_status stft_infer(op_ctx *c) {
  TRY(nn_check_float(c, 0, "signal"));
  const tensor *x = c->in[0];
  stft_cfg g = {0};
  if (x->rank != 3 || tensor_numel(x) < 0 || !c->in[1]->data || (op_in(c, 3) && !c->in[3]->data) ||
      (op_in(c, 2) && c->in[2]->rank != 1)) {
    nn_out_unknown(c, 0, x->dtype);
    return SMELT_OK;
  }
  TRY(stft_config(c, &g));
  op_set_out(c, 0, x->dtype, 4, (int64_t[]){g.B, g.frames, g.bins, 2});
  return SMELT_OK;
}

static smelt_status stft_run(op_ctx *c) {
  stft_cfg g = {0};
  TRY(stft_config(c, &g));
  const tensor *x = c->in[0], *w = op_in(c, 2);
  tensor *y = c->out[0];
  double *buf = NULL, *win, *re, *im, *ore, *oim, v[2];
  dft_plan p = {0};
  int64_t n = g.flen;
  TRY(nn_alloc((void **)&buf, 5 * n + 5, sizeof(double), "STFT frame"));
  win = buf, re = win + n + 1, im = re + n + 1, ore = im + n + 1, oim = ore + n + 1;
  for (int64_t t = 0; t < n; t++) win[t] = 1;
  if (w) nn_load_f64(w->dtype, w->data, 0, 1, n, win);
  smelt_status s = plan_make(n, &p);
  for (int64_t b = 0; !s && b < g.B; b++)
    for (int64_t f = 0; f < g.frames; f++) {
      for (int64_t t = 0; t < n; t++) {
        nn_load_f64(x->dtype, x->data, (b * g.L + f * g.step + t) * g.cin, 1, g.cin, v);
        re[t] = v[0] * win[t];
        im[t] = g.cin == 2 ? v[1] * win[t] : 0;
      }
      dft_1d(&p, -1, re, im, n, g.bins, ore, oim);
      for (int64_t k = 0; k < g.bins; k++) {
        v[0] = ore[k], v[1] = oim[k];
        nn_store_f64(y->dtype, y->data, ((b * g.frames + f) * g.bins + k) * 2, 1, 2, v);
      }
    }
  plan_free(&p);
  free(buf);
  return s;
}

const op_def op_family_dft[] = {
    {"DFT", "", 1, 3, 1, 1, dft_infer, dft_run, false},
    {"STFT", "", 2, 4, 1, 1, stft_infer, stft_run, false},
    {0}};
