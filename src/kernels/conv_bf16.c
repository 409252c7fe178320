/* bf16 convolution (kernels/conv_bf16.h): the layout, the weight packing,
 * the scalar fill / block kernel / store, and the driver. */
#include "kernels/conv_bf16_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/tensor.h"
#include "kernels/bf16dp.h"
#include "kernels/conv_internal.h"
#include "util/env.h"
#include "util/err.h"

/* Bytes of converted input a group of items shares (cb_item): a quarter
 * of a 1 MiB L2, beside the weights and the output rows. */
#define CB_GROUP_BYTES (256 << 10)

/* x rounded up to a multiple of m */
static int64_t round_up(int64_t x, int64_t m) { return conv_cdiv(x, m) * m; }

bool conv_bf16_channels(int64_t C, int64_t taps) {
  return C >= CONV_BF16_MIN_C || (taps > 1 && C >= 1 && C * taps >= CONV_BF16_MIN_C);
}

/* The gathered form, for fewer than CONV_BF16_MIN_C channels (a network's
 * first convolution: 3 channels): the (channel, tap) pairs become the
 * channels of a 1x1 convolution over the output plane, C*KH*KW of them
 * padded to 32 instead of C padded to 32 per tap (3 -> 32 would multiply
 * the work by 10; 3 x 7 x 7 = 147 -> 160 adds 9%).  The fill gathers each
 * virtual channel's shifted input row; the weights are W as it lies
 * ([M][C*KH*KW], one tap). */
bool conv_bf16_gathered(const conv2d_desc *d) { return d->C < CONV_BF16_MIN_C; }

bool conv_bf16_shape(const conv2d_desc *d) {
  return d->G == 1 && d->M >= 1 && conv_bf16_channels(d->C, d->KH * d->KW) &&
         conv_phases_sane(d->OH, d->OW, d->KH, d->KW, d->sh, d->sw, d->dh, d->dw);
}

bool conv_bf16_wanted(isa_level isa) {
  const char *e = env_get("SMELT_CONV_BF16");
  if (e && !strcmp(e, "0")) return false;
  if (e && !strcmp(e, "1")) return true;
  return bf16dp_amx_hw(isa) || bf16dp_hw(isa);
}

bool conv_bf16_by_cost(isa_level isa) {
  const char *e = env_get("SMELT_CONV_BF16");
  return !(e && !strcmp(e, "1")) && !bf16dp_amx_hw(isa) && bf16dp_hw(isa);
}

int64_t conv_bf16_mv_np(int64_t S) {
  int64_t best = 8;
  for (int64_t np = 7; np >= 4; np--)
    if (conv_cdiv(S, np) * np < conv_cdiv(S, best) * best) best = np;
  return best;
}

static int env_01(const char *name) {
  const char *e = env_get(name);
  return e && (!strcmp(e, "0") || !strcmp(e, "1")) ? *e - '0' : -1;
}

bool conv_bf16_colpair(const conv2d_desc *d, cb_form form) {
  return form == CB_FORM_MV && conv_bf16_gathered(d) && d->sw == 2 && d->dw == 1 && d->KW >= 2 &&
         env_flag_on("SMELT_CONV_BF16_COLPAIR");
}

bool conv_bf16_bands(int64_t rows, int64_t positions) {
  return rows <= positions && env_flag_on("SMELT_CONV_BF16_BANDS");
}

/* d as form's kernel sees it: the gathered form is a 1x1 convolution over
 * C*KH*KW virtual channels on the output plane; the paired-columns form a
 * stride-(sh, 1) one over 2C virtual channels (channel c's even and odd
 * padded columns) of word columns, ceil(KW/2) taps a row, its padding in
 * the converted copy (W: the word columns the outputs read). */
static conv2d_desc colpair_desc(const conv2d_desc *d) {
  conv2d_desc v = *d;
  v.C = 2 * d->C, v.KW = (d->KW + 1) / 2, v.sw = 1, v.pl = 0, v.W = d->OW + v.KW - 1;
  return v;
}
static conv2d_desc as_run(const conv2d_desc *d, cb_form form) {
  if (conv_bf16_colpair(d, form)) return colpair_desc(d);
  conv2d_desc v = *d;
  if (conv_bf16_gathered(d)) v.C = d->C * d->KH * d->KW, v.KH = v.KW = 1, v.sh = v.sw = 1, v.dh = v.dw = 1;
  return v;
}

/* The gathered form's fill per output value: ~1.5 cycles a word of its
 * copy (cq a position, written by the fill and read back; 2-core Zen 5,
 * resnet50's 7x7/2 stem in the model, 1 thread: 1.13 ms gathered on
 * channel vectors, 74 pairs a position, against 0.885 paired columns,
 * 84 pairs and no gather); 0 for other forms */
static double gathered_fill(const conv2d_desc *d, int64_t cq) {
  return conv_bf16_gathered(d) ? 1.5 * (double)cq / (double)d->M : 0.0;
}

/* Cycles of one core per output value of each kernel: the multiply-adds,
 * 16 lanes of pairs a cycle, over the share of what it computes that is
 * output (padded channels, pairs and positions computed and dropped), plus
 * its store.  The position-vector kernel pads C to 32, M to CB_VR and the
 * flat positions (OH rows of Wq) to 32 and stores 16 lanes of a row at a
 * time; the channel-vector kernel pads C to 2, M to 16 and the positions
 * to np and stores through a register transpose (1 cycle an output against
 * 0.6: at 56x56 over 64 channels, where the multiply-adds are 2 cycles an
 * output, the position-vector kernel measured faster). */
static double per_output_pv(const conv2d_desc *d0) {
  conv2d_desc v = as_run(d0, CB_FORM_PV), *d = &v;
  int64_t Wq = d->OW + (d->KW - 1) * d->dw / d->sw, S = d->OH * d->OW;
  double pos = (double)S / (double)(conv_cdiv(d->OH * Wq, 32) * 32);
  double m = (double)d->M / (double)(conv_cdiv(d->M, CB_VR) * CB_VR);
  return (double)(conv_cdiv(d->C, 32) * 16 * d->KH * d->KW) / 16.0 / (pos * m) + 0.6 +
         gathered_fill(d0, conv_cdiv(d->C, 32) * 16);
}
static double per_output_mv(const conv2d_desc *d0) {
  conv2d_desc v = as_run(d0, CB_FORM_MV), *d = &v;
  int64_t S = d->OH * d->OW, np = conv_bf16_mv_np(S);
  double pos = (double)S / (double)(conv_cdiv(S, np) * np), m = (double)d->M / (double)(conv_cdiv(d->M, 16) * 16);
  return (double)(conv_cdiv(d->C, 2) * d->KH * d->KW) / 16.0 / (pos * m) + 1.0 +
         (conv_bf16_colpair(d0, CB_FORM_MV) ? 0.0 : gathered_fill(d0, conv_cdiv(d->C, 2)));
}

/* Winograd F(2x2, 3x3): 16 products a tile of 4 outputs over channel
 * pairs, tiles in row blocks of np (conv_bf16_mv_np of the tile columns),
 * plus the store (2 cycles an output) and the input and output transforms,
 * ~30 cycles a tile and input or output channel (2-core Zen 4, 1 thread,
 * resnet50's 3x3/1 layers in the model less their products: 64 channels
 * at 56x56 0.8 ms, 128 at 28x28 0.28, 256 at 14x14 0.21, 512 at 7x7
 * 0.14). */
static double per_output_wino(const conv2d_desc *d) {
  int64_t TH = conv_cdiv(d->OH, 2), TW = conv_cdiv(d->OW, 2), np = conv_bf16_mv_np(TW);
  double pos = (double)(d->OH * d->OW) / (double)(4 * TH * conv_cdiv(TW, np) * np);
  double m = (double)d->M / (double)(conv_cdiv(d->M, 16) * 16);
  return (double)(conv_cdiv(d->C, 2) * 4) / 16.0 / (pos * m) + 2.0 + 7.5 * (double)(d->C + d->M) / (double)d->M;
}

/* 1x1, unpadded (any stride), an even channel count */
static bool cl_direct_shape(const conv2d_desc *d) {
  return !conv_bf16_gathered(d) && d->C % 2 == 0 && d->KH == 1 && d->KW == 1 && d->pt == 0 && d->pl == 0 &&
         (d->OH - 1) * d->sh < d->H && (d->OW - 1) * d->sw < d->W;
}

/* 3x3, stride 1, undilated, one group, not the gathered form */
static bool wino_shape(const conv2d_desc *d) {
  return d->KH == 3 && d->KW == 3 && d->sh == 1 && d->sw == 1 && d->dh == 1 && d->dw == 1 && !conv_bf16_gathered(d);
}

cb_form conv_bf16_form(const conv2d_desc *d, isa_level isa) {
  if (bf16dp_amx_hw(isa) || !bf16dp_hw(isa) || d->OH * d->OW < 1) return CB_FORM_PV;
  int mv = env_01("SMELT_CONV_BF16_MV"), wino = env_01("SMELT_CONV_BF16_WINO");
  if (wino == 1 && wino_shape(d)) return CB_FORM_WINO;
  if (mv >= 0) return mv ? CB_FORM_MV : CB_FORM_PV;
  if (d->x_cl && cl_direct_shape(d)) return CB_FORM_MV; /* reads X as it lies: no converted copy */
  /* between channels-last activations: the one 3x3 form that reads them
   * with no gathers (its input transform on vectors of channels) */
  if (d->x_cl && d->y_cl && wino != 0 && wino_shape(d)) return CB_FORM_WINO;
  double pv_c = per_output_pv(d), mv_c = per_output_mv(d);
  if (wino != 0 && wino_shape(d) && per_output_wino(d) < (mv_c < pv_c ? mv_c : pv_c)) return CB_FORM_WINO;
  /* a channels-last Y: the position-vector form would store it a value at a time */
  return mv_c < pv_c || d->y_cl ? CB_FORM_MV : CB_FORM_PV;
}

int64_t conv_bf16_words(const conv2d_desc *d, cb_form form) {
  int64_t taps = d->KH * d->KW;
  if (form == CB_FORM_WINO) return 16 * round_up(d->M, 16) * conv_cdiv(d->C, 2);
  if (form == CB_FORM_MV) {
    conv2d_desc v = as_run(d, form);
    return round_up(d->M, 16) * conv_cdiv(v.C, 2) * v.KH * v.KW;
  }
  if (conv_bf16_gathered(d)) return round_up(d->M, CB_BLOCK) * (round_up(d->C * taps, 32) / 2);
  return taps * round_up(d->M, CB_BLOCK) * (round_up(d->C, 32) / 2);
}

typedef struct pack_job {
  const conv2d_desc *d, *d0; /* as the kernel sees it (as_run), as given */
  const float *W;
  uint32_t *out;
  int64_t Mp, Cq;
  bool wino;    /* the values are Winograd's U at 16 points, not W at the taps */
  bool colpair; /* d is conv_bf16_colpair's: virtual channel 2c + e, tap (kh, k) is W's
                 * channel c at (kh, 2k + e), 0 at kw = KW */
} pack_job;

/* Winograd's U = G g G^T at point xi, in double, rounded once to bf16 */
uint16_t conv_bf16_wino_u(const float *g, int xi) {
  int a = xi / 4, b = xi % 4;
  double u = 0;
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 3; k++) u += conv_wino_g2[a][i] * (double)g[i * 3 + k] * conv_wino_g2[b][k];
  return f32_to_bf16((float)u);
}

/* Output m's value at tap (or Winograd point) t for input channel c, as
 * bf16; 0 past M and C. */
static uint16_t weight_at(const pack_job *j, int64_t m, int64_t c, int64_t t) {
  const conv2d_desc *d = j->d;
  if (m >= d->M || c >= d->C) return 0;
  if (j->colpair) {
    const conv2d_desc *g = j->d0;
    int64_t kh = t / d->KW, kw = 2 * (t % d->KW) + c % 2;
    return kw < g->KW ? f32_to_bf16(j->W[((m * g->C + c / 2) * g->KH + kh) * g->KW + kw]) : 0;
  }
  if (j->wino) return conv_bf16_wino_u(j->W + (m * d->C + c) * 9, (int)t);
  return f32_to_bf16(j->W[(m * d->C + c) * d->KH * d->KW + t]);
}

/* The pair of channels 2q, 2q + 1 for output m and tap (point) t */
static uint32_t weight_pair(const pack_job *j, int64_t m, int64_t q, int64_t t) {
  return (uint32_t)weight_at(j, m, 2 * q, t) | (uint32_t)weight_at(j, m, 2 * q + 1, t) << 16;
}

/* [taps][Mp][Cq] */
static void pack_rows(void *ctx, int64_t m0, int64_t m1) {
  const pack_job *j = ctx;
  int64_t taps = j->d->KH * j->d->KW;
  for (int64_t m = m0; m < m1; m++)
    for (int64_t t = 0; t < taps; t++) {
      uint32_t *o = j->out + (t * j->Mp + m) * j->Cq;
      for (int64_t q = 0; q < j->Cq; q++) o[q] = weight_pair(j, m, q, t);
    }
}

/* The channel-vector and Winograd kernels': blocks of channels
 * (cb_mv_block), each [taps, or 16 points][Cq][width] */
static void pack_mv_blocks(void *ctx, int64_t b0, int64_t b1) {
  const pack_job *j = ctx;
  int64_t taps = j->wino ? 16 : j->d->KH * j->d->KW;
  for (int64_t b = b0; b < b1; b++) {
    int64_t m0, wd;
    cb_mv_block(j->Mp, b, &m0, &wd);
    uint32_t *o = j->out + m0 * taps * j->Cq;
    for (int64_t t = 0; t < taps; t++)
      for (int64_t q = 0; q < j->Cq; q++, o += wd)
        for (int64_t i = 0; i < wd; i++) o[i] = weight_pair(j, m0 + i, q, t);
  }
}

void conv_bf16_pack(smelt_pool *pool, const conv2d_desc *d, cb_form form, const float *W, uint32_t *out) {
  conv2d_desc v = as_run(d, form); /* the gathered form: [M][C*KH*KW] as one tap */
  if (form == CB_FORM_MV || form == CB_FORM_WINO) {
    pack_job j = {&v, d, W, out, round_up(d->M, 16), conv_cdiv(v.C, 2), form == CB_FORM_WINO,
                  conv_bf16_colpair(d, form)};
    pool_parallel_for(pool, conv_cdiv(j.Mp, CB_MV_BLOCK), 1, pack_mv_blocks, &j);
    return;
  }
  pack_job j = {&v, d, W, out, round_up(v.M, CB_BLOCK), round_up(v.C, 32) / 2, false, false};
  pool_parallel_for(pool, j.Mp, 4, pack_rows, &j);
}

/* ---- scalar fill, block kernel and store ---- */

/* Virtual channel cv of the gathered form at output (oh, ow), as bf16 (0 past
 * the channels or in the padding). */
static uint32_t gathered_at(const cb_job *j, int64_t cv, int64_t oh, int64_t ow) {
  const conv2d_desc *d = j->d;
  if (cv >= d->C * j->taps_v) return 0;
  int64_t c = cv / j->taps_v, t = cv % j->taps_v;
  int64_t r = oh * d->sh - d->pt + t / d->KW * d->dh, s = ow * d->sw - d->pl + t % d->KW * d->dw;
  return r >= 0 && r < d->H && s >= 0 && s < d->W ? f32_to_bf16(j->X[(c * d->H + r) * d->W + s]) : 0;
}

void cb_fill_scalar(void *ctx, int64_t q0, int64_t q1) {
  const cb_job *j = ctx;
  const conv2d_desc *d = j->d;
  if (j->taps_v) {
    for (int64_t q = q0; q < q1; q++) {
      uint32_t *o = j->xp + q * j->L;
      for (int64_t oh = 0; oh < d->OH; oh++)
        for (int64_t ow = 0; ow < d->OW; ow++)
          o[oh * d->OW + ow] = gathered_at(j, 2 * q, oh, ow) | gathered_at(j, 2 * q + 1, oh, ow) << 16;
      memset(o + d->OH * d->OW, 0, sizeof *o * (size_t)(j->L - d->OH * d->OW));
    }
    return;
  }
  for (int64_t q = q0; q < q1; q++)
    for (int64_t ph = 0; ph < d->sh; ph++)
      for (int64_t pw = 0; pw < d->sw; pw++) {
        if (!j->used[ph * d->sw + pw]) continue; /* no tap reads it */
        uint32_t *o = j->xp + (q * j->P + ph * d->sw + pw) * j->L;
        const float *x0 = 2 * q < d->C ? j->X + 2 * q * d->H * d->W : NULL;
        const float *x1 = 2 * q + 1 < d->C ? j->X + (2 * q + 1) * d->H * d->W : NULL;
        for (int64_t i = 0; i < j->Hq; i++) {
          int64_t r = i * d->sh + ph - d->pt;
          for (int64_t c = 0; c < j->Wq; c++) {
            int64_t s = c * d->sw + pw - d->pl;
            uint32_t v = 0;
            if (r >= 0 && r < d->H && s >= 0 && s < d->W) {
              if (x0) v |= f32_to_bf16(x0[r * d->W + s]);
              if (x1) v |= (uint32_t)f32_to_bf16(x1[r * d->W + s]) << 16;
            }
            o[i * j->Wq + c] = v;
          }
        }
        memset(o + j->Hq * j->Wq, 0, sizeof *o * (size_t)(j->L - j->Hq * j->Wq));
      }
}

int cb_segments(const cb_job *j, int64_t fb, cb_seg *segs) {
  const conv2d_desc *d = j->d;
  int n = 0;
  for (int64_t c = 0; c < CB_BLOCK;) {
    int64_t f = fb * CB_BLOCK + c, oh = f / j->Wq, ow = f % j->Wq;
    if (oh >= d->OH) break;
    if (ow >= d->OW) {
      c += j->Wq - ow;
      continue;
    }
    int64_t len = d->OW - ow < CB_BLOCK - c ? d->OW - ow : CB_BLOCK - c;
    segs[n++] = (cb_seg){c, len, oh * d->OW + ow};
    c += len;
  }
  return n;
}

void cb_store_scalar(const cb_job *j, const float *acc, int64_t mb, int64_t fb) {
  cb_seg segs[CB_BLOCK];
  int ns = cb_segments(j, fb, segs);
  for (int i = 0; i < ns; i++)
    for (int64_t r = 0; r < CB_BLOCK && mb * CB_BLOCK + r < j->d->M; r++) {
      int64_t m = mb * CB_BLOCK + r;
      float b = j->B ? j->B[m] : 0.f;
      float *y = j->Y + m * j->S + segs[i].y0;
      const float *res = j->res ? j->res + m * j->S + segs[i].y0 : NULL;
      for (int64_t k = 0; k < segs[i].len; k++) {
        float v = acc[r * CB_BLOCK + segs[i].c + k] + b;
        if (res) v += res[k];
        v = v < j->lo ? j->lo : v; /* NaN passes through */
        y[k] = v > j->hi ? j->hi : v;
      }
    }
}

void cb_items_scalar(void *ctx, int64_t it0, int64_t it1) {
  const cb_job *j = ctx;
  float acc[CB_BLOCK * CB_BLOCK];
  for (int64_t it = it0; it < it1; it++) {
    int64_t mb, fb;
    cb_item(j, it, j->nmb, &mb, &fb);
    memset(acc, 0, sizeof acc);
    for (int64_t t = 0; t < j->taps; t++)
      for (int64_t q = 0; q < j->Cq; q++) {
        const uint32_t *b = j->xp + q * j->P * j->L + j->toff[t] + fb * CB_BLOCK;
        for (int64_t r = 0; r < CB_BLOCK; r++) {
          uint32_t a = j->w[(t * j->Mp + mb * CB_BLOCK + r) * j->Cq + q];
          if (!a) continue;
          float alo = bf16_to_f32((uint16_t)a), ahi = bf16_to_f32((uint16_t)(a >> 16));
          for (int64_t c = 0; c < CB_BLOCK; c++) {
            float s = acc[r * CB_BLOCK + c] + ahi * bf16_to_f32((uint16_t)(b[c] >> 16));
            acc[r * CB_BLOCK + c] = s + alo * bf16_to_f32((uint16_t)b[c]);
          }
        }
      }
    cb_store_scalar(j, acc, mb, fb);
  }
}

/* ---- the driver ---- */

/* Position blocks per item group (cb_item) whose converted input, words
 * per block, fits CB_GROUP_BYTES: it stays in the core's L2 while each
 * output-channel block passes over it */
static int64_t group_blocks(int64_t block_words) {
  int64_t g = CB_GROUP_BYTES / ((int64_t)sizeof(uint32_t) * block_words);
  return g > 1 ? g : 1;
}

bool conv_bf16_cl_direct(const conv2d_desc *d, cb_form form) { return form == CB_FORM_MV && cl_direct_shape(d); }

bool conv_bf16_io_native(isa_level isa) { return bf16dp_hw(isa) && !bf16dp_amx_hw(isa); }

smelt_status conv_bf16_run(smelt_pool *pool, isa_level isa, const conv2d_desc *d, cb_form form, const uint32_t *wts,
                           const float *X, const float *B, const conv2d_epilogue *ep, float *Y) {
  return conv_bf16_run_io(pool, isa, d, form, wts, X, NULL, B, ep, NULL, Y, NULL);
}

smelt_status conv_bf16_run_io(smelt_pool *pool, isa_level isa, const conv2d_desc *d, cb_form form,
                              const uint32_t *wts, const float *X, const uint16_t *Xh, const float *B,
                              const conv2d_epilogue *ep, const uint16_t *Rh, float *Y, uint16_t *Yh) {
  return conv_bf16_run_cl(pool, isa, d, form, wts, X, Xh, B, ep, Rh, Y, Yh, 0);
}

smelt_status conv_bf16_run_cl(smelt_pool *pool, isa_level isa, const conv2d_desc *d, cb_form form,
                              const uint32_t *wts, const float *X, const uint16_t *Xh, const float *B,
                              const conv2d_epilogue *ep, const uint16_t *Rh, float *Y, uint16_t *Yh, unsigned cl) {
  if (((cl & CB_CL_X) && (!Xh || d->C % 2)) || ((cl & CB_CL_Y) && (!Yh || d->M % 2)) ||
      ((cl & CB_CL_R) && (!Rh || d->M % 2)))
    return err_set(SMELT_ERR_INTERNAL, "bf16 conv: a channels-last operand not in bf16 or with odd channels");
  if ((cl & CB_CL_X) && (uintptr_t)Xh % 4)
    return err_set(SMELT_ERR_INTERNAL, "bf16 conv: a channels-last input not on a 4-byte boundary");
  if ((cl & CB_CL_X) && d->W * d->C > INT32_MAX / 2)
    return err_set(SMELT_ERR_INTERNAL, "bf16 conv: a channels-last row of %lld values is past the gathers' reach",
                   (long long)(d->W * d->C));
  if ((Xh || Yh || Rh) && !conv_bf16_io_native(isa))
    return err_set(SMELT_ERR_INTERNAL, "bf16 conv: bf16 input or output asked of a kernel without them");
  if ((Xh ? 1 : 0) + (X ? 1 : 0) != 1 || (Yh ? 1 : 0) + (Y ? 1 : 0) != 1)
    return err_set(SMELT_ERR_INTERNAL, "bf16 conv: give the input and the output each in one type");
  if (Rh && ep && ep->residual) return err_set(SMELT_ERR_INTERNAL, "bf16 conv: a residual in two types");
  if (!conv_bf16_shape(d) || d->N < 0 || d->H < 1 || d->W < 1 || d->pt < 0 || d->pl < 0)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "bf16 conv: unsupported geometry (C=%lld, group %lld)",
                   (long long)d->C, (long long)d->G);
  if (d->N * d->M * d->OH * d->OW == 0) return SMELT_OK;
  /* the paired-columns form: the kernels see its virtual layer, the fill
   * the given one */
  const conv2d_desc *d0 = d;
  bool colpair = conv_bf16_colpair(d, form);
  conv2d_desc v;
  if (colpair) v = colpair_desc(d), d = &v;
  cb_job j = {.d = d, .d0 = d0, .w = wts, .B = B};
  bool gathered = !colpair && conv_bf16_gathered(d);
  j.taps = d->KH * d->KW, j.S = d->OH * d->OW, j.Mp = round_up(d->M, CB_BLOCK);
  j.Cq = round_up(d->C * (gathered ? j.taps : 1), 32) / 2;
  j.P = gathered ? 1 : d->sh * d->sw;
  j.Hq = d->OH + (gathered ? 0 : (d->KH - 1) * d->dh / d->sh);
  j.Wq = d->OW + (gathered ? 0 : (d->KW - 1) * d->dw / d->sw);
  j.F = d->OH * j.Wq, j.nfb = (j.F + CB_BLOCK - 1) / CB_BLOCK, j.nmb = j.Mp / CB_BLOCK;
  int64_t reach = gathered ? 0 : (d->KH - 1) * d->dh / d->sh * j.Wq + (d->KW - 1) * d->dw / d->sw;
  if (gathered) j.taps_v = j.taps, j.taps = 1;
  j.L = j.Hq * j.Wq;
  if (j.L < j.nfb * CB_BLOCK + reach) j.L = j.nfb * CB_BLOCK + reach;
  j.L = round_up(j.L, 16); /* planes start on a cache line */
  j.gfb = group_blocks(j.Cq * j.P * CB_BLOCK);
  bool amx = bf16dp_amx_hw(isa), vdp = !amx && bf16dp_hw(isa);
  bool mv = form == CB_FORM_MV, wino = form == CB_FORM_WINO;
  if ((mv || wino) && !vdp)
    return err_set(SMELT_ERR_INTERNAL, "bf16 conv: weights laid out for a kernel this CPU lacks");
  if (wino && !wino_shape(d))
    return err_set(SMELT_ERR_INTERNAL, "bf16 conv: Winograd weights for a %lldx%lld convolution", (long long)d->KH,
                   (long long)d->KW);
  if (wino) { /* Winograd F(2x2): V per point, tile block and pair (x86/conv_bf16_wino.c) */
    j.TW = conv_cdiv(d->OW, 2), j.Cq = conv_cdiv(d->C, 2), j.np = conv_bf16_mv_np(j.TW);
    j.tbr = conv_cdiv(j.TW, j.np);
    j.nfb = conv_cdiv(d->OH, 2) * j.tbr, j.nmb = conv_cdiv(round_up(d->M, 16), CB_MV_BLOCK);
    j.gfb = group_blocks(j.Cq * 16 * j.np);
    j.P = 16, j.L = j.nfb * j.np; /* xp: [16 points][nfb blocks][Cq][np], Cq * P * L words */
  }
  j.xcl = cl & CB_CL_X, j.ycl = cl & CB_CL_Y, j.rcl = cl & CB_CL_R;
  if (mv) { /* the channel-vector kernel: channels in pairs, positions in blocks of np */
    j.Cq = conv_cdiv(d->C * (gathered ? j.taps_v : 1), 2), j.np = conv_bf16_mv_np(j.S);
    j.nfb = conv_cdiv(j.S, j.np), j.nmb = conv_cdiv(round_up(d->M, 16), CB_MV_BLOCK);
    /* a 1x1 over a channels-last input as it lies: its pairs are the words */
    j.xdirect = j.xcl && conv_bf16_cl_direct(d, form);
    if (j.xdirect) j.P = 1, j.L = 1; /* toff[0] = 0: one tap, one phase */
    /* else over a channels-last input: a padded channels-last copy, each
     * position's pairs together (cb_fill_mv_cl), read with stride 1 */
    j.mcl = j.xcl && !j.xdirect && !gathered && !colpair;
    j.gfb = group_blocks(j.Cq * j.P * j.np);
  }
  /* Winograd over a channels-last input: its transform as vectors of
   * channels, a tile's pairs together in V; fused into the items where
   * the whole V would outweigh the weights (it has as many tiles as M has
   * channels, padded) and a block's V fits the items' stack buffer
   * (SMELT_CONV_BF16_WINO_FUSED=0: never) */
  j.wcl = wino && j.xcl;
  bool fused = j.wcl && 16 * j.np * j.Cq <= CB_WINO_FUSED_WORDS &&
               conv_cdiv(d->OH, 2) * j.TW >= round_up(d->M, 16) && env_flag_on("SMELT_CONV_BF16_WINO_FUSED");
  /* groups no longer than a thread's share of the positions: the threads'
   * home ranges of items (parallel/pool.h) are then bands of positions,
   * every output channel -- the positions the layer before wrote on that
   * thread and the one after reads there -- not blocks of output channels.
   * (conv_bf16_bands) */
  int threads = pool_threads(pool);
  j.bands = threads > 1 && !fused && conv_bf16_bands(d->M * j.taps * (j.taps_v ? j.taps_v : 1), j.S);
  if (j.bands && j.gfb > conv_cdiv(j.nfb, threads)) j.gfb = conv_cdiv(j.nfb, threads);
  j.lo = ep ? ep->lo : -INFINITY, j.hi = ep ? ep->hi : INFINITY;
  size_t xp_bytes = j.xdirect || fused ? 0 : sizeof(uint32_t) * (size_t)(j.Cq * j.P * j.L);
  int64_t *toff = malloc(sizeof *toff * (size_t)j.taps);
  uint8_t *used = calloc((size_t)j.P, 1);
  uint32_t *xp = xp_bytes ? tensor_data_alloc(xp_bytes) : NULL;
  if (!toff || !used || (xp_bytes && !xp)) {
    free(toff), free(used), tensor_data_free(xp);
    return err_nomem("bf16 conv: the converted input", xp_bytes);
  }
  j.xp = xp;
  for (int64_t kh = 0; kh < (gathered ? 1 : d->KH); kh++)
    for (int64_t kw = 0; kw < (gathered ? 1 : d->KW); kw++) {
      int64_t a = kh * d->dh, b = kw * d->dw, phase = a % d->sh * d->sw + b % d->sw;
      toff[kh * d->KW + kw] = (phase * j.L + a / d->sh * j.Wq + b / d->sw) * (j.mcl ? j.Cq : 1);
      used[phase] = 1;
    }
  j.toff = toff, j.used = used;
  /* AMX; else vdpbf16ps: Winograd, channel vectors or CB_VR output
   * channels x 32 positions per item (conv_bf16_form); else scalar */
  int64_t items = vdp && !mv && !wino ? (d->M + CB_VR - 1) / CB_VR * j.nfb : j.nmb * j.nfb;
  void (*body)(void *, int64_t, int64_t) = amx    ? cb_items_amx
                                           : wino ? cb_items_wino
                                           : mv   ? cb_items_mv
                                           : vdp  ? cb_items_vdp
                                                  : cb_items_scalar;
  void (*fill)(void *, int64_t, int64_t) = wino ? cb_fill_wino : amx || vdp ? cb_fill_avx512 : cb_fill_scalar;
  if (fused) body = cb_items_wino_fused, items = j.nfb, fill = NULL;
  int64_t fill_items = j.wcl ? conv_cdiv(d->OH, 2) * conv_cdiv(j.Cq, 16) : j.mcl ? j.P * j.Hq : j.Cq;
  if (j.wcl && !fused) fill = cb_fill_wino_cl;
  if (j.mcl) fill = cb_fill_mv_cl;
  if (colpair) fill = cb_fill_colpair, fill_items = j.Cq * j.P * j.Hq; /* rows */
  for (int64_t n = 0; n < d->N; n++) {
    if (X) j.X = X + n * d0->C * d0->H * d0->W;
    else j.Xh = Xh + n * d0->C * d0->H * d0->W;
    if (Y) j.Y = Y + n * d->M * j.S;
    else j.Yh = Yh + n * d->M * j.S;
    j.res = ep && ep->residual ? ep->residual + n * d->M * j.S : NULL;
    j.resh = Rh ? Rh + n * d->M * j.S : NULL;
    if (j.xdirect) j.xp = (uint32_t *)(uintptr_t)j.Xh; /* read only: no fill */
    else if (fill) pool_parallel_for(pool, fill_items, colpair ? 8 : 1, fill, &j);
    pool_parallel_for(pool, items, 1, body, &j);
  }
  free(toff), free(used);
  tensor_data_free(xp);
  return SMELT_OK;
}
