/* Integer matmul and conv: MatMulInteger, ConvInteger (int32 results) and
 * their requantizing forms QLinearMatMul, QLinearConv.
 *
 * MatMulInteger with a 2-D B (ONNX Runtime's quantize_dynamic writes it
 * so) runs on the exact int32 kernel (kernels/igemm.h) when the op has a
 * cache (not on device cpu-ref): the same values, as fast as a GEMM; so
 * does QLinearMatMul's product when it cannot wrap (K <= 33025), followed
 * by the reference's requantization.
 *
 * Operands are widened to int32 with their zero points subtracted, products
 * accumulate exactly in int64 (an int32 result wraps like the reference's
 * astype), and requantization multiplies by scale_a*scale_b/scale_y (computed
 * in the scales' type, one rounding per operation, as ONNX's reference does),
 * adds the output zero point and rounds half to even with saturation. */
#include <stdlib.h>
#include <string.h>

#include "ir/tensor.h"
#include "kernels/igemm.h"
#include "ops/convert.h"
#include "ops/op_cache.h"
#include "ops/nn_util.h"
#include "ops/quant_util.h"
#include "util/err.h"

static bool is_q8(smelt_dtype t) { return t == SMELT_U8 || t == SMELT_I8; }

static smelt_status check_q8(op_ctx *c, int i, const char *name) {
  const tensor *t = op_in(c, i);
  if (t && t->dtype != SMELT_UNDEFINED && !is_q8(t->dtype))
    return err_set(SMELT_ERR_UNSUPPORTED, "input %d (%s) is %s, expected uint8 or int8", i, name,
                   dtype_name(t->dtype));
  return SMELT_OK;
}

/* A zero point or scale: one value, or one per row/column/channel (n). */
static smelt_status per_vec(const tensor *p, int64_t n, const char *what, double *vals_out,
                            bool *per) {
  int64_t cnt = p ? tensor_numel(p) : 1;
  *per = false;
  if (!p) {
    vals_out[0] = 0;
    return SMELT_OK;
  }
  if (cnt != 1 && cnt != n)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "%s has %lld values, expected 1 or %lld", what,
                   (long long)cnt, (long long)n);
  cvt_load_f64(p->dtype, p->data, 1, cnt, vals_out);
  *per = cnt != 1;
  return SMELT_OK;
}

/* ---- batched integer matmul ---- */

typedef struct imm_shape {
  int rank;                      /* output rank */
  int64_t dims[SMELT_MAX_RANK];  /* output dims */
  int64_t M, K, N, batch;
  int64_t a_off_mult[SMELT_MAX_RANK], b_off_mult[SMELT_MAX_RANK]; /* batch strides (0: broadcast) */
  int nb;                        /* batch dims */
  int64_t bdims[SMELT_MAX_RANK];
} imm_shape;

static smelt_status imm_plan(const tensor *a, const tensor *b, imm_shape *s) {
  if (a->rank < 1 || b->rank < 1)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "matmul operands must have rank >= 1");
  int ra = a->rank, rb = b->rank;
  s->M = ra >= 2 ? a->dims[ra - 2] : 1;
  s->K = a->dims[ra - 1];
  int64_t kb = rb >= 2 ? b->dims[rb - 2] : b->dims[0];
  s->N = rb >= 2 ? b->dims[rb - 1] : 1;
  if (kb != s->K)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "inner dims differ: A has %lld, B has %lld",
                   (long long)s->K, (long long)kb);
  int na = ra > 2 ? ra - 2 : 0, nbb = rb > 2 ? rb - 2 : 0;
  s->nb = na > nbb ? na : nbb;
  int64_t sa = s->M * s->K, sb = s->K * s->N;
  s->batch = 1;
  for (int i = s->nb - 1; i >= 0; i--) {
    int ia = i - (s->nb - na), ib = i - (s->nb - nbb);
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "batch dims %lld and %lld cannot be broadcast",
                     (long long)da, (long long)db);
    s->bdims[i] = da > db ? da : db;
    if (da == 0 || db == 0) s->bdims[i] = 0;
    s->a_off_mult[i] = da == 1 ? 0 : sa;
    s->b_off_mult[i] = db == 1 ? 0 : sb;
    sa *= da;
    sb *= db;
    s->batch *= s->bdims[i];
  }
  s->rank = 0;
  for (int i = 0; i < s->nb; i++) s->dims[s->rank++] = s->bdims[i];
  if (ra >= 2) s->dims[s->rank++] = s->M;
  if (rb >= 2) s->dims[s->rank++] = s->N;
  return SMELT_OK;
}

/* Element offsets of batch entry t in A and B. */
static void imm_offsets(const imm_shape *s, int64_t t, int64_t *oa, int64_t *ob) {
  *oa = *ob = 0;
  for (int i = s->nb - 1; i >= 0; i--) {
    int64_t idx = t % s->bdims[i];
    t /= s->bdims[i];
    *oa += idx * s->a_off_mult[i];
    *ob += idx * s->b_off_mult[i];
  }
}

/* acc[batch][M][N] = sum_k (A - azp[m]) (B - bzp[n]), exact. */
static smelt_status imm_compute(const tensor *a, const tensor *b, const double *azp, bool a_per,
                                const double *bzp, bool b_per, const imm_shape *s, int64_t **acc) {
  int64_t total = s->batch * s->M * s->N;
  int64_t *rowa = NULL, *colb = NULL;
  TRY(nn_alloc((void **)acc, total ? total : 1, sizeof(int64_t), "matmul accumulators"));
  smelt_status st = nn_alloc((void **)&rowa, s->K ? s->K : 1, sizeof(int64_t), "row");
  if (!st) st = nn_alloc((void **)&colb, s->K * s->N > 0 ? s->K * s->N : 1, sizeof(int64_t), "B");
  for (int64_t t = 0; !st && t < s->batch; t++) {
    int64_t oa, ob;
    imm_offsets(s, t, &oa, &ob);
    cvt_load_i64(b->dtype, (const char *)b->data + ob * (int64_t)dtype_size(b->dtype), 1, s->K * s->N, colb);
    for (int64_t k = 0; k < s->K; k++)
      for (int64_t n = 0; n < s->N; n++) colb[k * s->N + n] -= (int64_t)bzp[b_per ? n : 0];
    for (int64_t m = 0; m < s->M; m++) {
      cvt_load_i64(a->dtype, (const char *)a->data + (oa + m * s->K) * (int64_t)dtype_size(a->dtype), 1,
                   s->K, rowa);
      int64_t *out = *acc + (t * s->M + m) * s->N;
      for (int64_t n = 0; n < s->N; n++) out[n] = 0;
      for (int64_t k = 0; k < s->K; k++) {
        int64_t av = rowa[k] - (int64_t)azp[a_per ? m : 0];
        for (int64_t n = 0; n < s->N; n++) out[n] += av * colb[k * s->N + n];
      }
    }
  }
  free(rowa);
  free(colb);
  if (st) {
    free(*acc);
    *acc = NULL;
  }
  return st;
}

/* Zero points and scales of up to max(M, N) values. */
static smelt_status vec_alloc(double **p, int64_t n) {
  return nn_alloc((void **)p, n > 0 ? n : 1, sizeof(double), "quantization parameters");
}

/* ---- MatMulInteger ---- */

/* Runs the exact product with the given zero points (inputs za, zb). */
static smelt_status imm_run_with(op_ctx *c, int ia, int ib, int za, int zb, int64_t **acc,
                                 imm_shape *s) {
  const tensor *a = c->in[ia], *b = c->in[ib];
  TRY(imm_plan(a, b, s));
  double *azp = NULL, *bzp = NULL;
  bool ap, bp;
  smelt_status st = vec_alloc(&azp, s->M);
  if (!st) st = vec_alloc(&bzp, s->N);
  if (!st) st = per_vec(op_in(c, za), s->M, "A's zero point", azp, &ap);
  if (!st) st = per_vec(op_in(c, zb), s->N, "B's zero point", bzp, &bp);
  if (!st) st = imm_compute(a, b, azp, ap, bzp, bp, s, acc);
  free(azp);
  free(bzp);
  return st;
}

/* A zero point as int32 values: NULL -> one 0; else one value or n (per). */
static bool zp_of(const tensor *z, int64_t n, int32_t *buf1, int32_t **vals, bool *per) {
  *per = false;
  *vals = buf1;
  buf1[0] = 0;
  if (!z) return true;
  int64_t cnt = tensor_numel(z);
  if (!is_q8(z->dtype) || (cnt != 1 && cnt != n)) return false;
  if (cnt > 1) {
    *vals = malloc(sizeof(int32_t) * (size_t)cnt);
    if (!*vals) return false;
    *per = true;
  }
  for (int64_t i = 0; i < cnt; i++)
    (*vals)[i] = z->dtype == SMELT_I8 ? ((const int8_t *)z->data)[i] : ((const uint8_t *)z->data)[i];
  return true;
}

typedef struct mmi_pack {
  smelt_pool *pool;
  const igemm_args *g;
} mmi_pack;

static void tensor_data_free_v(void *p) { tensor_data_free(p); }

static void *mmi_make_packed(void *ctx) {
  const mmi_pack *pk = ctx;
  int16_t *p = tensor_data_alloc(sizeof(int16_t) * (size_t)igemm_packed_b_len(pk->g->K, pk->g->N));
  if (p) igemm_pack_b(pk->pool, pk->g, p);
  return p;
}

static void *mmi_make_vnni(void *ctx) {
  const mmi_pack *pk = ctx;
  void *p = tensor_data_alloc(igemm_vnni_b_bytes(pk->g->K, pk->g->N));
  if (p) igemm_vnni_pack_b(pk->pool, pk->g, p);
  return p;
}

/* The shape the exact kernel takes: inputs ia (A, 8-bit) and ib (a 2-D
 * 8-bit B, a weight as ONNX Runtime's quantizers write it), A's leading
 * dims flattened into *rows (its last matrix has *m_last rows); false for
 * other shapes, which the reference loop takes. */
static bool imm_fast_shape(const op_ctx *c, int ia, int ib, int64_t *rows, int64_t *K, int64_t *N,
                           int64_t *m_last) {
  const tensor *a = c->in[ia], *b = c->in[ib];
  if (b->rank != 2 || a->rank < 1 || !is_q8(a->dtype) || !is_q8(b->dtype)) return false;
  *K = a->dims[a->rank - 1], *N = b->dims[1];
  if (*K <= 0 || b->dims[0] != *K || *N <= 0) return false;
  *rows = tensor_numel(a) / *K, *m_last = a->rank >= 2 ? a->dims[a->rank - 2] : 1;
  return true;
}

/* The integer product of inputs ia (A) and ib (B) with zero points iza,
 * izb on the exact kernel (kernels/igemm.h), into out (rows x N int32, as
 * imm_fast_shape); false (nothing done) for shapes or zero points it does
 * not take, which the reference loop takes. */
static bool imm_fast(op_ctx *c, int ia, int ib, int iza, int izb, int32_t *out, smelt_status *st) {
  const tensor *a = c->in[ia], *b = c->in[ib];
  int64_t M, K, N, ml;
  if (!imm_fast_shape(c, ia, ib, &M, &K, &N, &ml)) return false;
  int32_t za1, zb1, *za, *zb;
  bool zap, zbp;
  /* a per-row zero point of A is per row of its last matrix: batch 1 only */
  if (!zp_of(op_in(c, iza), ml, &za1, &za, &zap)) return false;
  if ((zap && M != ml) || !zp_of(op_in(c, izb), N, &zb1, &zb, &zbp)) {
    if (zap) free(za);
    return false;
  }
  igemm_args g = {.M = M, .N = N, .K = K, .A = a->data, .lda = K, .a_signed = a->dtype == SMELT_I8,
                  .za = za, .za_per = zap, .B = b->data, .ldb = N, .b_signed = b->dtype == SMELT_I8,
                  .zb = zb, .zb_per = zbp, .C = out, .ldc = N};
  const void *packed = NULL;
  isa_level isa = isa_active();
  bool vnni = igemm_vnni_usable(isa); /* the byte form (its own packing) */
  if (op_input_is_constant(c, ib) && (!op_in(c, izb) || op_input_is_constant(c, izb))) {
    /* a weight: packed once, kept in the op cache (the two forms under their own tags) */
    struct { const void *b, *zb; int64_t K, N; char tag[8]; } key = {b->data, op_in(c, izb) ? op_in(c, izb)->data : NULL,
                                                                      K, N, "igemm"};
    if (vnni) memcpy(key.tag, "igemm-v", 8);
    mmi_pack pk = {c->pool, &g};
    packed = op_cache_get_or_make(c->cache, &key, sizeof key, vnni ? mmi_make_vnni : mmi_make_packed, &pk,
                                  tensor_data_free_v);
  }
  if (vnni) *st = igemm_s32_vnni(c->pool, &g, packed);
  else *st = packed ? igemm_s32_packed(c->pool, isa, &g, packed) : igemm_s32(c->pool, isa, &g);
  if (zap) free(za);
  if (zbp) free(zb);
  return true;
}

static smelt_status mmi_run(op_ctx *c) {
  smelt_status fst;
  /* the reference loop below: device cpu-ref (no cache) */
  if (c->cache && imm_fast(c, 0, 1, 2, 3, c->out[0]->data, &fst)) return fst;
  int64_t *acc = NULL;
  imm_shape s;
  TRY(imm_run_with(c, 0, 1, 2, 3, &acc, &s));
  int32_t *y = c->out[0]->data;
  for (int64_t i = 0; i < s.batch * s.M * s.N; i++) y[i] = (int32_t)(uint32_t)acc[i];
  free(acc);
  return SMELT_OK;
}

/* ---- QLinearMatMul ---- */

/* The requantization multipliers a_scale[m] * b_scale[n] / y_scale[n] in the
 * scales' type, and the output zero points. */
typedef struct requant {
  double *as, *bs, *ys, *yz;
  bool as_per, bs_per, ys_per, yz_per;
  smelt_dtype st;
  int64_t lo, hi;
} requant;

static double requant_value(const requant *r, int64_t acc, int64_t m, int64_t n) {
  double mult = nn_round_to(r->st, nn_round_to(r->st, r->as[r->as_per ? m : 0] * r->bs[r->bs_per ? n : 0]) /
                                      r->ys[r->ys_per ? n : 0]);
  return (double)acc * mult + r->yz[r->yz_per ? n : 0];
}

static void requant_free(requant *r) {
  free(r->as);
  free(r->bs);
  free(r->ys);
  free(r->yz);
}

static smelt_status requant_setup(op_ctx *c, int ias, int ibs, int iys, int iyz, int64_t M,
                                  int64_t N, requant *r) {
  memset(r, 0, sizeof *r);
  r->st = c->in[ias]->dtype;
  for (int i = 0; i < 3; i++) {
    const tensor *s = c->in[i == 0 ? ias : i == 1 ? ibs : iys];
    if (!nn_is_float(s->dtype) || s->dtype != r->st)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "scales must be float tensors of one type");
  }
  smelt_dtype yt = op_in(c, iyz) ? c->in[iyz]->dtype : c->out[0]->dtype;
  q_int_range(yt, &r->lo, &r->hi);
  smelt_status st = vec_alloc(&r->as, M);
  if (!st) st = vec_alloc(&r->bs, N);
  if (!st) st = vec_alloc(&r->ys, N);
  if (!st) st = vec_alloc(&r->yz, N);
  if (!st) st = per_vec(c->in[ias], M, "a's scale", r->as, &r->as_per);
  if (!st) st = per_vec(c->in[ibs], N, "b's scale", r->bs, &r->bs_per);
  if (!st) st = per_vec(c->in[iys], N, "y's scale", r->ys, &r->ys_per);
  if (!st) st = per_vec(op_in(c, iyz), N, "y's zero point", r->yz, &r->yz_per);
  if (st) requant_free(r);
  return st;
}

/* Requantizes acc[rows][cols] into output 0 with the scales and zero point
 * of inputs 1, 4, 6, 7 (M "row" scales, N channels), and frees acc.  In a
 * matmul a row of acc is row m = row % M of A and a column is channel n; in
 * a conv (chan_rows) a row is channel n = row % N's plane and m is 0. */
static smelt_status requant_out(op_ctx *c, int64_t *acc, int64_t rows, int64_t cols, int64_t M,
                                int64_t N, bool chan_rows) {
  requant r;
  smelt_status st = requant_setup(c, 1, 4, 6, 7, M, N, &r);
  if (st) {
    free(acc);
    return st;
  }
  int64_t *q = NULL;
  st = nn_alloc((void **)&q, cols ? cols : 1, sizeof(int64_t), "row");
  size_t es = dtype_size(c->out[0]->dtype);
  for (int64_t row = 0; !st && row < rows; row++) {
    int64_t m = chan_rows ? 0 : row % M;
    for (int64_t j = 0; j < cols; j++)
      q[j] = q_round_clamp(requant_value(&r, acc[row * cols + j], m, chan_rows ? row % N : j), r.lo,
                           r.hi);
    cvt_store_i64(c->out[0]->dtype, q, false, cols,
                  (char *)c->out[0]->data + (size_t)(row * cols) * es, false);
  }
  requant_free(&r);
  free(q);
  free(acc);
  return st;
}

/* QLinearMatMul's integer product on the exact kernel when it cannot
 * wrap (K * 255 * 255 < 2^31: the int32 sums are the reference's int64
 * ones), then the reference's requantization; false: the reference. */
static bool qlmm_fast(op_ctx *c, smelt_status *st) {
  int64_t rows, K, N, ml;
  if (!imm_fast_shape(c, 0, 3, &rows, &K, &N, &ml) || K > 33025) return false;
  int32_t *acc32 = malloc(sizeof(int32_t) * (size_t)(rows * N));
  int64_t *acc = malloc(sizeof(int64_t) * (size_t)(rows * N));
  bool done = acc32 && acc && imm_fast(c, 0, 3, 2, 5, acc32, st);
  if (done && !*st) {
    for (int64_t i = 0; i < rows * N; i++) acc[i] = acc32[i];
    *st = requant_out(c, acc, rows, N, ml, N, false); /* frees acc */
    acc = NULL;
  }
  free(acc32);
  free(acc);
  return done;
}

static smelt_status qlmm_run(op_ctx *c) {
  smelt_status fst;
  if (c->cache && qlmm_fast(c, &fst)) return fst; /* the reference below: device cpu-ref (no cache) */
  int64_t *acc = NULL;
  imm_shape s;
  TRY(imm_run_with(c, 0, 3, 2, 5, &acc, &s));
  return requant_out(c, acc, s.batch * s.M, s.N, s.M, s.N, false);
}

/* ---- integer convolution ---- */

typedef struct iconv {
  nn_window w;
  int64_t N, C, M, G, Cg, Mg, S_in, S_out, Kk;
} iconv;

static smelt_status iconv_plan(op_ctx *c, const tensor *x, const tensor *w, iconv *g) {
  if (x->rank < 3 || w->rank != x->rank)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "x has rank %d and w rank %d; expected equal ranks >= 3",
                   x->rank, w->rank);
  g->G = op_attr_int(c, "group", 1);
  g->N = x->dims[0], g->C = x->dims[1], g->M = w->dims[0], g->Cg = w->dims[1];
  if (g->G < 1 || g->C != g->Cg * g->G || g->M % g->G)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "channels: x has %lld, w has %lld x %lld, group %lld",
                   (long long)g->C, (long long)g->M, (long long)g->Cg, (long long)g->G);
  g->Mg = g->M / g->G;
  TRY(nn_window_attrs(c, x->rank - 2, w->dims + 2, &g->w));
  TRY(nn_window_out(&g->w, x->dims + 2, false));
  g->S_in = nn_prod(x->dims, 2, x->rank);
  g->S_out = nn_window_out_size(&g->w);
  g->Kk = nn_window_kernel_size(&g->w);
  return SMELT_OK;
}

static void iconv_out_dims(const tensor *x, const iconv *g, int64_t *d) {
  d[0] = g->N;
  d[1] = g->M;
  memcpy(d + 2, g->w.out, sizeof(int64_t) * (size_t)g->w.nsp);
  (void)x;
}

/* Flat input offset (within one channel plane) of output position p and
 * kernel tap t, or -1 when it falls in the padding. */
static int64_t iconv_src(const iconv *g, int64_t p, int64_t t) {
  int64_t off = 0, stride_in = 1;
  for (int d = g->w.nsp - 1; d >= 0; d--) {
    int64_t o = p % g->w.out[d], k = t % g->w.kernel[d];
    p /= g->w.out[d];
    t /= g->w.kernel[d];
    int64_t i = o * g->w.stride[d] - g->w.pad_lo[d] + k * g->w.dil[d];
    if (i < 0 || i >= g->w.in[d]) return -1;
    off += i * stride_in;
    stride_in *= g->w.in[d];
  }
  return off;
}

/* acc[N][M][S_out] = bias[m] + sum (x - xzp)(w - wzp[m]), exact. */
static smelt_status iconv_compute(const iconv *g, const tensor *x, double xzp, const tensor *w,
                                  const double *wzp, bool w_per, const tensor *bias, int64_t *acc) {
  int64_t *xv = NULL, *wv = NULL, *src = NULL, nx = tensor_numel(x), nw = tensor_numel(w);
  smelt_status st = nn_alloc((void **)&xv, nx ? nx : 1, sizeof(int64_t), "x");
  if (!st) st = nn_alloc((void **)&wv, nw ? nw : 1, sizeof(int64_t), "w");
  if (!st) st = nn_alloc((void **)&src, g->Kk ? g->Kk : 1, sizeof(int64_t), "taps");
  if (st) goto done;
  cvt_load_i64(x->dtype, x->data, 1, nx, xv);
  cvt_load_i64(w->dtype, w->data, 1, nw, wv);
  for (int64_t i = 0; i < nx; i++) xv[i] -= (int64_t)xzp;
  for (int64_t i = 0; i < nw; i++) wv[i] -= (int64_t)wzp[w_per ? i / (g->Cg * g->Kk) : 0];
  for (int64_t p = 0; p < g->S_out; p++) {
    for (int64_t t = 0; t < g->Kk; t++) src[t] = iconv_src(g, p, t);
    for (int64_t n = 0; n < g->N; n++)
      for (int64_t m = 0; m < g->M; m++) {
        int64_t s = bias ? tensor_get_i64(bias, m) : 0, grp = m / g->Mg;
        for (int64_t cg = 0; cg < g->Cg; cg++) {
          const int64_t *xp = xv + (n * g->C + grp * g->Cg + cg) * g->S_in;
          const int64_t *wp = wv + (m * g->Cg + cg) * g->Kk;
          for (int64_t t = 0; t < g->Kk; t++)
            if (src[t] >= 0) s += xp[src[t]] * wp[t];
        }
        acc[(n * g->M + m) * g->S_out + p] = s;
      }
  }
done:
  free(xv);
  free(wv);
  free(src);
  return st;
}

static smelt_status iconv_acc(op_ctx *c, int ix, int iw, int ixz, int iwz, const tensor *bias,
                              iconv *g, int64_t **acc) {
  const tensor *x = c->in[ix], *w = c->in[iw];
  TRY(iconv_plan(c, x, w, g));
  double xzp = 0, *wzp = NULL;
  bool xper, wper;
  TRY(per_vec(op_in(c, ixz), 1, "x's zero point", &xzp, &xper));
  smelt_status st = vec_alloc(&wzp, g->M);
  if (!st) st = per_vec(op_in(c, iwz), g->M, "w's zero point", wzp, &wper);
  if (!st && bias && (bias->dtype != SMELT_I32 || tensor_numel(bias) != g->M))
    st = err_set(SMELT_ERR_INVALID_ARGUMENT, "the bias must be %lld int32 values", (long long)g->M);
  int64_t total = g->N * g->M * g->S_out;
  if (!st) st = nn_alloc((void **)acc, total ? total : 1, sizeof(int64_t), "conv accumulators");
  if (!st) st = iconv_compute(g, x, xzp, w, wzp, wper, bias, *acc);
  if (st) {
    free(*acc);
    *acc = NULL;
  }
  free(wzp);
  return st;
}

/* ---- ConvInteger ---- */

static smelt_status convi_run(op_ctx *c) {
  iconv g = {0};
  int64_t *acc = NULL;
  TRY(iconv_acc(c, 0, 1, 2, 3, NULL, &g, &acc));
  int32_t *y = c->out[0]->data;
  for (int64_t i = 0; i < g.N * g.M * g.S_out; i++) y[i] = (int32_t)(uint32_t)acc[i];
  free(acc);
  return SMELT_OK;
}

/* ---- QLinearConv ---- */

static smelt_status qlconv_run(op_ctx *c) {
  iconv g = {0};
  int64_t *acc = NULL;
  TRY(iconv_acc(c, 0, 3, 2, 5, op_in(c, 8), &g, &acc));
  /* "rows" are the input scale (one), channels the output channels */
  return requant_out(c, acc, g.N * g.M, g.S_out, 1, g.M, true);
}

/* ---- inference ---- */

/* Input 0 and input ib (named na, nb) are 8-bit, and so is y's zero point
 * (input 7) of the QLinear forms, whose type is the output's (else input
 * 0's); the Integer forms give int32.  The shape is the matmul's or (conv)
 * the convolution's; unknown while static inference lacks the operands'. */
static smelt_status q_infer(op_ctx *c, int ib, const char *na, const char *nb, bool qlinear,
                            bool conv) {
  TRY(check_q8(c, 0, na));
  TRY(check_q8(c, ib, nb));
  if (qlinear) TRY(check_q8(c, 7, "y_zero_point"));
  const tensor *a = c->in[0], *b = c->in[ib], *yz = qlinear ? op_in(c, 7) : NULL;
  smelt_dtype dt = !qlinear ? SMELT_I32 : yz ? yz->dtype : a->dtype;
  if (c->static_infer && (a->rank < 0 || b->rank < 0 || tensor_numel(a) < 0 || tensor_numel(b) < 0)) {
    nn_out_unknown(c, 0, dt);
    return SMELT_OK;
  }
  if (conv) {
    iconv g = {0};
    TRY(iconv_plan(c, a, b, &g));
    int64_t d[SMELT_MAX_RANK];
    iconv_out_dims(a, &g, d);
    op_set_out(c, 0, dt, a->rank, d);
  } else {
    imm_shape s;
    TRY(imm_plan(a, b, &s));
    op_set_out(c, 0, dt, s.rank, s.dims);
  }
  return SMELT_OK;
}

static smelt_status mmi_infer(op_ctx *c) { return q_infer(c, 1, "A", "B", false, false); }
static smelt_status qlmm_infer(op_ctx *c) { return q_infer(c, 3, "a", "b", true, false); }
static smelt_status convi_infer(op_ctx *c) { return q_infer(c, 1, "x", "w", false, true); }
static smelt_status qlconv_infer(op_ctx *c) { return q_infer(c, 3, "x", "w", true, true); }

const op_def op_family_qlinear[] = {
    {"MatMulInteger", "", 2, 4, 1, 1, mmi_infer, mmi_run, false},
    {"QLinearMatMul", "", 8, 8, 1, 1, qlmm_infer, qlmm_run, false},
    {"ConvInteger", "", 2, 4, 1, 1, convi_infer, convi_run, false},
    {"QLinearConv", "", 8, 9, 1, 1, qlconv_infer, qlconv_run, false},
    {0}};
