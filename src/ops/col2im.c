/* Col2Im: the inverse of im2col.  Column (c, tap) at block position l adds
 * into image position l * stride - pad + tap * dilation (N-D, any dtype that
 * adds: computed in double, stored once). */
#include <stdlib.h>
#include <string.h>

#include "ops/nn_util.h"
#include "ops/shape_util.h"
#include "util/err.h"

typedef struct c2i_geom {
  int r;
  int64_t img[NN_MAX_SPATIAL], blk[NN_MAX_SPATIAL], nblk[NN_MAX_SPATIAL];
  int64_t dil[NN_MAX_SPATIAL], pad[2 * NN_MAX_SPATIAL], str[NN_MAX_SPATIAL];
  int64_t K, L, S; /* taps, blocks, image size */
} c2i_geom;

static smelt_status c2i_ints(op_ctx *c, const char *name, int n, int64_t dflt, int64_t *out) {
  int cnt;
  const int64_t *v = ir_attr_ints(c->node, name, &cnt);
  for (int i = 0; i < n; i++) out[i] = v ? (i < cnt ? v[i] : dflt) : dflt;
  if (v && cnt != n)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute %s has %d values, expected %d", name, cnt, n);
  return SMELT_OK;
}

static smelt_status c2i_plan(op_ctx *c, c2i_geom *g) {
  const tensor *is = c->in[1], *bs = c->in[2];
  int n1, n2;
  TRY(su_read_ints(is, "input 1 (image_shape)", NN_MAX_SPATIAL, g->img, &n1));
  TRY(su_read_ints(bs, "input 2 (block_shape)", NN_MAX_SPATIAL, g->blk, &n2));
  if (n1 != n2 || n1 < 1)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "image_shape has %d values and block_shape %d", n1, n2);
  g->r = n1;
  TRY(c2i_ints(c, "dilations", g->r, 1, g->dil));
  TRY(c2i_ints(c, "pads", 2 * g->r, 0, g->pad));
  TRY(c2i_ints(c, "strides", g->r, 1, g->str));
  g->K = g->L = g->S = 1;
  for (int i = 0; i < g->r; i++) {
    if (g->img[i] < 0 || g->blk[i] < 1 || g->dil[i] < 1 || g->str[i] < 1 || g->pad[i] < 0 ||
        g->pad[g->r + i] < 0)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "axis %d: invalid image, block, dilation, stride or pad", i);
    int64_t span = g->img[i] + g->pad[i] + g->pad[g->r + i] - g->dil[i] * (g->blk[i] - 1) - 1;
    if (span < 0)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "axis %d: the dilated block does not fit the padded image", i);
    g->nblk[i] = span / g->str[i] + 1;
    const int64_t lim = INT64_C(1) << 40; /* far above any real image; keeps products exact */
    if (g->blk[i] > lim || g->nblk[i] > lim || g->img[i] > lim || g->K > lim / g->blk[i] ||
        g->L > lim / g->nblk[i] || (g->img[i] && g->S > lim / g->img[i]))
      return err_set(SMELT_ERR_UNSUPPORTED, "axis %d: image or block sizes are too large", i);
    g->K *= g->blk[i], g->L *= g->nblk[i], g->S *= g->img[i];
  }
  return SMELT_OK;
}

static smelt_status c2i_infer(op_ctx *c) {
  TRY(nn_check_float(c, 0, "input"));
  const tensor *x = c->in[0];
  if (!c->in[1]->data || !c->in[2]->data || x->rank < 0) {
    nn_out_unknown(c, 0, x->dtype);
    return SMELT_OK;
  }
  c2i_geom g = {0};
  TRY(c2i_plan(c, &g));
  if (x->rank != 3) return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 0 has rank %d, expected 3", x->rank);
  int64_t d[SMELT_MAX_RANK];
  d[0] = x->dims[0];
  d[1] = dim_known(x->dims[1]) ? x->dims[1] / g.K : DIM_UNKNOWN;
  if (dim_known(x->dims[1]) && x->dims[1] % g.K)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 0 has %lld rows, not a multiple of the block size %lld",
                   (long long)x->dims[1], (long long)g.K);
  if (dim_known(x->dims[2]) && x->dims[2] != g.L)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 0 has %lld columns, but there are %lld blocks",
                   (long long)x->dims[2], (long long)g.L);
  memcpy(d + 2, g.img, sizeof(int64_t) * (size_t)g.r);
  op_set_out(c, 0, x->dtype, 2 + g.r, d);
  return SMELT_OK;
}

/* Image offset of tap t at block l, or -1 in the padding. */
static int64_t c2i_pos(const c2i_geom *g, int64_t t, int64_t l) {
  int64_t off = 0, stride = 1;
  for (int i = g->r - 1; i >= 0; i--) {
    int64_t k = t % g->blk[i], b = l % g->nblk[i];
    t /= g->blk[i], l /= g->nblk[i];
    int64_t p = b * g->str[i] - g->pad[i] + k * g->dil[i];
    if (p < 0 || p >= g->img[i]) return -1;
    off += p * stride;
    stride *= g->img[i];
  }
  return off;
}

static smelt_status c2i_run(op_ctx *c) {
  TRY(c2i_infer(c));
  c2i_geom g = {0};
  TRY(c2i_plan(c, &g));
  const tensor *x = c->in[0];
  tensor *y = c->out[0];
  int64_t NC = y->dims[0] * y->dims[1];
  double *img = NULL, *cols = NULL;
  smelt_status s = nn_alloc((void **)&img, g.S + 1, sizeof(double), "image");
  if (!s) s = nn_alloc((void **)&cols, g.K * g.L + 1, sizeof(double), "columns");
  for (int64_t nc = 0; !s && nc < NC; nc++) {
    nn_load_f64(x->dtype, x->data, nc * g.K * g.L, 1, g.K * g.L, cols);
    memset(img, 0, sizeof(double) * (size_t)g.S);
    for (int64_t t = 0; t < g.K; t++)
      for (int64_t l = 0; l < g.L; l++) {
        int64_t p = c2i_pos(&g, t, l);
        if (p >= 0) img[p] += cols[t * g.L + l];
      }
    nn_store_f64(y->dtype, y->data, nc * g.S, 1, g.S, img);
  }
  free(img);
  free(cols);
  return s;
}

const op_def op_family_col2im[] = {
    {"Col2Im", "", 3, 3, 1, 1, c2i_infer, c2i_run, false},
    {0}};
