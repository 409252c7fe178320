/* Depthwise convolution (group == C == M): per channel plane, the padded
 * stride-phase copy (kernels/conv_fill.c), then each output row is a
 * vectorized sum over the taps of contiguous runs of that copy.  Planes run
 * in parallel. */
#include <stdatomic.h>
#include <stdlib.h>

#include "ir/tensor.h"
#include "kernels/conv_internal.h"
#include "util/err.h"

typedef struct dw_job {
  const conv2d_weights *w;
  const float *X, *B;
  float *Y;
  conv_phases ph;
  int64_t plane_len, taps;
  int64_t *off;
  atomic_bool failed;
} dw_job;

static void dw_planes(void *vctx, int64_t q0, int64_t q1) {
  dw_job *j = vctx;
  const conv2d_desc *d = &j->w->d;
  float *buf = tensor_data_alloc(sizeof(float) * (size_t)j->plane_len);
  if (!buf) {
    atomic_store(&j->failed, true);
    return;
  }
  for (int64_t q = q0; q < q1; q++) {
    int64_t c = q % d->C;
    conv_fill_phases(&j->ph, j->X + q * d->H * d->W, 1, 0, 0.f, buf);
    const float *wc = j->w->data + c * j->taps;
    float bias = j->B ? j->B[c] : 0.f, *y = j->Y + q * d->OH * d->OW;
    for (int64_t oh = 0; oh < d->OH; oh++)
      j->w->k->dw_row(buf + oh * j->ph.Wq, j->off, wc, (int)j->taps, bias, y + oh * d->OW, d->OW);
  }
  tensor_data_free(buf);
}

smelt_status conv_dw_run(smelt_pool *pool, const conv2d_weights *w, const float *X,
                         const float *B, float *Y) {
  const conv2d_desc *d = &w->d;
  dw_job j = {.w = w, .X = X, .B = B, .Y = Y};
  int64_t amax = (d->KH - 1) * d->dh / d->sh, bmax = (d->KW - 1) * d->dw / d->sw;
  j.ph = (conv_phases){d->H, d->W, d->sh, d->sw, d->pt, d->pl, d->OH + amax, d->OW + bmax};
  j.plane_len = d->sh * d->sw * j.ph.Hl * j.ph.Wq;
  j.taps = d->KH * d->KW;
  if (j.taps > (1 << 20)) return err_set(SMELT_ERR_UNSUPPORTED, "depthwise: kernel too large");
  j.off = malloc(sizeof(int64_t) * (size_t)j.taps);
  if (!j.off) return err_nomem("depthwise offsets", sizeof(int64_t) * (size_t)j.taps);
  for (int64_t kh = 0, t = 0; kh < d->KH; kh++)
    for (int64_t kw = 0; kw < d->KW; kw++, t++) {
      int64_t ph = kh * d->dh % d->sh, pw = kw * d->dw % d->sw;
      j.off[t] = ((ph * d->sw + pw) * j.ph.Hl + kh * d->dh / d->sh) * j.ph.Wq + kw * d->dw / d->sw;
    }
  int64_t grain = 1 + 32768 / (d->OH * d->OW * j.taps + 1);
  pool_parallel_for(pool, d->N * d->C, grain, dw_planes, &j);
  free(j.off);
  if (atomic_load(&j.failed)) return err_nomem("depthwise plane", sizeof(float) * (size_t)j.plane_len);
  return SMELT_OK;
}
