/* The Conv op's query for the kernel registry (conv_registry.h) and the
 * routes over the fast kernels (kernels/conv.h): the kernels over prepared
 * weights kept in the session's op cache (and the prepared-weight store on
 * disk), the 1x1 routes on X in place and as the transposed GEMM, and the
 * strided 1x1 over its subsampled input. */
#include <math.h>
#include <string.h>

#include "kernels/conv.h"
#include "kernels/conv_bf16.h"
#include "kernels/gemm.h"
#include "ops/conv_memo.h"
#include "ops/conv_route.h"
#include "ops/gemm_weights.h"
#include "ops/op_cache.h"
#include "parallel/run_ctl.h"
#include "util/err.h"
#include "util/ro_map.h"

/* ---- geometry and the query ---- */

void conv_desc_of(const conv_geom *g, conv2d_desc *d) {
  const nn_window *w = &g->w;
  int two = w->nsp == 2; /* 1-D runs as H = 1 */
  *d = (conv2d_desc){.N = g->N, .C = g->C, .H = two ? w->in[0] : 1, .W = w->in[two],
                     .M = g->M, .G = g->G, .KH = two ? w->kernel[0] : 1, .KW = w->kernel[two],
                     .OH = two ? w->out[0] : 1, .OW = w->out[two], .sh = two ? w->stride[0] : 1,
                     .sw = w->stride[two], .dh = two ? w->dil[0] : 1, .dw = w->dil[two],
                     .pt = two ? w->pad_lo[0] : 0, .pl = w->pad_lo[two], .x_cl = g->x_cl, .y_cl = g->y_cl};
}

/* 1x1, stride 1, no pads, one group: X is the GEMM's B as it lies. */
static bool conv_pw_shape(const conv_geom *g) {
  if (g->G != 1 || g->Kdim <= 0 || g->Kdim != g->C) return false;
  for (int i = 0; i < g->w.nsp; i++)
    if (g->w.kernel[i] != 1 || g->w.stride[i] != 1 || g->w.pad_lo[i] != 0 || g->w.pad_hi[i] != 0)
      return false;
  return g->S_in == g->S_out;
}

static bool conv_strided(const conv_geom *g) {
  bool s = false;
  for (int i = 0; i < g->w.nsp; i++) s |= g->w.stride[i] > 1;
  return s;
}

/* A strided 1x1 conv (one group, no pads, 1-D or 2-D: ResNet's downsample
 * shortcuts) is a stride-1 one over the input subsampled: *g2 is that
 * geometry.  Copying the kept positions (a quarter of the input at stride 2)
 * and taking the 1x1 routes costs far less than the direct kernel's strided
 * form, which ran at half their rate (resnet50's 256->512 stride-2 shortcut
 * at 28x28, 2 threads on an AVX-512 Xeon: 1.57 ms, the stride-1 1x1 layers
 * of the same size 0.39 ms for half the work). */
bool conv_pw_subsample(const conv_geom *g, conv_geom *g2) {
  if (g->G != 1 || g->Kdim <= 0 || g->Kdim != g->C || g->w.nsp < 1 || g->w.nsp > 2 || !conv_strided(g))
    return false;
  for (int i = 0; i < g->w.nsp; i++)
    if (g->w.kernel[i] != 1 || g->w.pad_lo[i] != 0 || g->w.pad_hi[i] != 0 || g->w.stride[i] < 1 ||
        g->w.out[i] != (g->w.in[i] - 1) / g->w.stride[i] + 1)
      return false;
  *g2 = *g;
  for (int i = 0; i < g->w.nsp; i++) g2->w.stride[i] = 1, g2->w.in[i] = g->w.out[i];
  g2->S_in = g->S_out;
  return true;
}

const ir_quant *conv_weight_declared(const op_ctx *c) {
  const ir_node *nd = c->node;
  if (!c->graph || !nd || nd->n_inputs < 2 || nd->inputs[1] < 0 || nd->inputs[1] >= c->graph->n_values)
    return NULL;
  const ir_quant *d = &c->graph->values[nd->inputs[1]].quant;
  return d->scheme == IR_QUANT_BF16 ? d : NULL;
}

/* A shape-only context (the scheduler's conv_residual_in_place) asks what a
 * compiled run, which has an op cache, would pick. */
void conv_query_of(op_ctx *c, const conv_geom *g, conv_query *q) {
  smelt_dtype t = c->in[0]->dtype == SMELT_F64 ? SMELT_F64 : SMELT_F32;
  conv_geom g2;
  *q = (conv_query){.x = t, .w = t, .y = t, .isa = isa_active(), .threads = pool_threads(c->pool),
                    .nsp = g->w.nsp, .taps = g->Kk, .kdim = g->Kdim, .s_out = g->S_out,
                    .pointwise = conv_pw_shape(g), .subsample = conv_pw_subsample(g, &g2), .patch = conv_patch_geom(g, &g2),
                    .strided = conv_strided(g), .cache = c->cache != NULL || c->static_infer,
                    .w_const = op_input_is_constant(c, 1),
                    .w_f32 = c->in[1]->dtype == SMELT_F32, .forced = conv_algo_from_env()};
  /* the weight's form: W's declared element type, else the node's
   * precision mark (passes/autocast.c) */
  bool bf16 = conv_weight_declared(c) ||
              (c->node && !strcmp(ir_attr_string(c->node, "precision", "fp32"), "bf16"));
  q->wf = bf16 ? CONV_W_BF16 : CONV_W_F32;
  conv_desc_of(g, &q->d);
  conv_query_finish(q);
}

/* ---- epilogues ---- */

typedef struct epi_after_job {
  const conv_epilogue *ep;
  float *y;
} epi_after_job;

static void epi_after_chunk(void *ctx, int64_t b, int64_t e) {
  const epi_after_job *j = ctx;
  float *y = j->y + b;
  if (j->ep->residual) {
    const float *r = j->ep->residual + b;
    for (int64_t i = 0; i < e - b; i++) y[i] += r[i];
  }
  fused_act_apply(&j->ep->act, y, e - b);
}

/* In cache-sized chunks on the pool (after a fast kernel: the activations
 * it does not apply itself). */
void conv_epilogue_after(smelt_pool *pool, const conv_epilogue *ep, float *y, int64_t n) {
  if (!ep->residual && ep->act.kind == FUSED_ACT_NONE) return;
  epi_after_job j = {ep, y};
  pool_parallel_for(pool, n, 16384, epi_after_chunk, &j);
}

conv2d_epilogue conv_kernel_epilogue(const conv_epilogue *ep, fused_act *rest) {
  conv2d_epilogue k = {ep->residual, -INFINITY, INFINITY};
  *rest = (fused_act){FUSED_ACT_NONE, -INFINITY, INFINITY, NULL};
  if (ep->act.kind == FUSED_ACT_RELU) k.lo = 0.f;
  else if (ep->act.kind == FUSED_ACT_CLIP) k.lo = ep->act.lo, k.hi = ep->act.hi;
  else *rest = ep->act;
  return k;
}

/* ---- prepared weights ---- */

/* What cached prepared weights were made from (compared bytewise). */
typedef struct conv_cache_key {
  const void *w;
  int32_t algo, isa, dtype, pad_;
  int64_t C, M, G, KH, KW;
} conv_cache_key;

/* Prepared weights through the session's store on disk (op_cache.store,
 * ops/op_cache.h): a saved copy is mapped instead of transforming W again. */
typedef struct conv_prep_desc {
  int64_t algo, isa, C, M, G, KH, KW, layout;
} conv_prep_desc;

static smelt_status conv_prepare_stored(op_ctx *c, const conv2d_desc *d, conv_algo algo, isa_level isa,
                                        const float *W, conv2d_weights **pw) {
  if (!c->cache || !c->cache->store) return conv2d_prepare(c->pool, d, algo, isa, W, pw);
  conv_prep_desc pd = {algo, isa, d->C, d->M, d->G, d->KH, d->KW, conv2d_prepared_layout(d, algo, isa)};
  size_t w_bytes = sizeof(float) * (size_t)(d->M * (d->C / d->G) * d->KH * d->KW);
  int64_t n = 0;
  TRY(conv2d_prepared_floats(d, algo, isa, &n));
  op_prep_key k;
  const float *saved = op_prep_get(c->cache, c->pool, "conv", &pd, sizeof pd, W, w_bytes, sizeof(float) * (size_t)n, &k);
  if (saved) return conv2d_weights_wrap(d, algo, isa, saved, n, pw);
  TRY(conv2d_prepare(c->pool, d, algo, isa, W, pw));
  if (k.stored) op_prep_put(c->cache, c->pool, &k, conv2d_weights_data(*pw, &n));
  return SMELT_OK;
}

/* algo's prepared weights for W: from the session's op cache, from the
 * store on disk, or made now (*own: the caller frees them; otherwise the
 * cache holds them). */
static smelt_status conv_weights_algo(op_ctx *c, const float *W, const conv2d_desc *d, conv_algo algo,
                                      conv2d_weights **pw, bool *own) {
  *pw = NULL;
  *own = false;
  isa_level isa = isa_active();
  bool cacheable = c->cache && op_input_is_constant(c, 1);
  conv_cache_key key;
  memset(&key, 0, sizeof key);
  key = (conv_cache_key){.w = c->in[1]->data, .algo = algo, .isa = isa,
                         .dtype = c->in[1]->dtype, .C = d->C, .M = d->M, .G = d->G, .KH = d->KH,
                         .KW = d->KW};
  *pw = cacheable ? op_cache_find(c->cache, &key, sizeof key) : NULL;
  if (*pw) return SMELT_OK;
  /* kept for later runs (and maybe on disk): a run stopping now must not cut it short */
  run_ctl *saved = run_ctl_enter(NULL);
  smelt_status st = cacheable ? conv_prepare_stored(c, d, algo, isa, W, pw)
                              : conv2d_prepare(c->pool, d, algo, isa, W, pw);
  run_ctl_enter(saved);
  TRY(st);
  void *kept = cacheable ? op_cache_add(c->cache, &key, sizeof key, *pw, conv2d_weights_free_v) : NULL;
  if (kept) { /* the kernel runs from *pw now: W's pages, a view of the model file, go back to it */
    *pw = kept;
    ro_map_release(W, sizeof(float) * (size_t)(d->M * (d->C / d->G) * d->KH * d->KW));
  } else {
    *own = true;
    op_prep_drain(c->cache); /* the caller frees *pw, which the store may still be saving */
  }
  return SMELT_OK;
}

/* ---- the fast kernels (kernels/conv.h) over prepared weights ---- */

smelt_status conv_route_fast_prepare(const conv_kernel *k, const conv_query *q, const conv_call *a, bool *taken) {
  conv2d_weights *pw;
  bool own;
  *taken = true;
  TRY(conv_weights_algo(a->c, a->W, &q->d, k->algo, &pw, &own));
  if (own) conv2d_weights_free(pw);
  return SMELT_OK;
}

/* a's operands are its node's own, all fp32: a run the memo can repeat */
static bool fast_as_given(const conv_call *a) {
  const op_ctx *c = a->c;
  const tensor *b = c->n_in > 2 ? c->in[2] : NULL;
  return c->in[0]->dtype == SMELT_F32 && c->in[1]->dtype == SMELT_F32 && (!b || b->dtype == SMELT_F32) &&
         c->out[0]->dtype == SMELT_F32 && a->X == c->in[0]->data && a->W == c->in[1]->data &&
         a->B == (b ? b->data : NULL) && a->Y == c->out[0]->data;
}

/* Later runs of a straight here (ops/conv_memo.h), where a runs as given */
static void note_fast(const conv_kernel *k, const conv_query *q, const conv_call *a, const conv2d_weights *pw,
                      const conv2d_epilogue *kep, const fused_act *rest) {
  if (!a->ep->rec || !fast_as_given(a)) return;
  conv_memo_note(a->ep->rec, CM_FAST, &q->d, pw, kep);
  a->ep->rec->rest = *rest, a->ep->rec->residual_in_place = k->residual_in_place;
}

smelt_status conv_route_fast_run(const conv_kernel *k, const conv_query *q, const conv_call *a, bool *taken) {
  conv2d_weights *pw;
  bool own;
  *taken = true;
  TRY(conv_weights_algo(a->c, a->W, &q->d, k->algo, &pw, &own));
  conv_epilogue rest = {0};
  conv2d_epilogue kep = conv_kernel_epilogue(a->ep, &rest.act);
  smelt_status st = conv2d_run_ep(a->c->pool, &q->d, pw, a->X, a->B, &kep, a->Y);
  if (!own) note_fast(k, q, a, pw, &kep, &rest.act);
  if (own) conv2d_weights_free(pw);
  if (!st) conv_epilogue_after(a->c->pool, &rest, a->Y, a->g->N * a->g->M * a->g->S_out);
  return st;
}

/* ---- bf16 activations (passes/bf16_acts.c) ---- */

bool conv_marked_bf16(const ir_node *nd) { return nd && !strcmp(ir_attr_string(nd, "precision", "fp32"), "bf16"); }

bool conv_bf16_acts_node(const ir_node *nd) { return conv_marked_bf16(nd) || conv_cl_of(nd); }

/* Input i is a bf16 activation or fp32 */
static bool f32_or_bf16(const tensor *t) { return t->dtype == SMELT_F32 || t->dtype == SMELT_BF16; }

bool conv_bf16_act_in(op_ctx *c) {
  const tensor *x = c->in[0], *w = c->in[1], *b = op_in(c, 2), *r = op_in(c, 3);
  bool bf16 = x->dtype == SMELT_BF16 || (r && r->dtype == SMELT_BF16);
  return bf16 && f32_or_bf16(x) && (!r || f32_or_bf16(r)) && w->dtype == SMELT_F32 &&
         (!b || b->dtype == SMELT_F32) && conv_bf16_acts_node(c->node);
}

op_ctx *conv_x_as_f32(op_ctx *c, op_ctx *c2, tensor *xf, tensor **ins) {
  if (!conv_bf16_act_in(c) || c->n_in > 4) return c;
  for (int i = 0; i < c->n_in; i++) {
    ins[i] = c->in[i];
    if ((i == 0 || i == 3) && ins[i] && ins[i]->dtype == SMELT_BF16) {
      xf[i ? 1 : 0] = *ins[i], xf[i ? 1 : 0].dtype = SMELT_F32;
      ins[i] = &xf[i ? 1 : 0];
    }
  }
  *c2 = *c, c2->in = ins;
  return c2;
}

bool conv_bf16_io_applies(op_ctx *c, const conv_geom *g, const fused_act *act, int threads) {
  return conv_bf16_io_pick(c, g, act, threads, NULL, NULL);
}

unsigned conv_cl_of(const ir_node *nd) {
  if (!nd) return 0;
  return (ir_attr_int(nd, "cl_in", 0) ? CB_CL_X : 0u) | (ir_attr_int(nd, "cl_res", 0) ? CB_CL_R : 0u) |
         (ir_attr_int(nd, "cl_out", 0) ? CB_CL_Y : 0u);
}

bool conv_bf16_io_pick(op_ctx *c, const conv_geom *g, const fused_act *act, int threads, int *form,
                       conv2d_desc *d) {
  const tensor *x = c->in[0], *w = c->in[1], *b = op_in(c, 2);
  if ((x->dtype != SMELT_F32 && x->dtype != SMELT_BF16) || w->dtype != SMELT_F32 || (b && b->dtype != SMELT_F32))
    return false;
  if (act->kind != FUSED_ACT_NONE && act->kind != FUSED_ACT_RELU && act->kind != FUSED_ACT_CLIP) return false;
  if (g->w.nsp > 2 || g->Kdim <= 0) return false;
  conv_query q;
  conv_query_of(c, g, &q);
  if (threads > 0) q.threads = threads;
  const conv_kernel *k = conv_select(&q, 0);
  if (!k || k->algo != CONV_ALGO_BF16 || !conv_bf16_io_native(conv2d_kernel_isa(q.isa))) return false;
  if (form) *form = (int)conv_bf16_form(&q.d, conv2d_kernel_isa(q.isa));
  if (d) *d = q.d;
  return true;
}

smelt_status conv_bf16_io_run(op_ctx *c, const conv_geom *g, const conv_epilogue *e, unsigned cl, bool *done) {
  *done = false;
  if (!conv_bf16_io_applies(c, g, &e->act, 0)) return SMELT_OK;
  const tensor *x = c->in[0], *w = c->in[1], *b = op_in(c, 2);
  tensor *y = c->out[0];
  if (y->dtype != SMELT_F32 && y->dtype != SMELT_BF16) return SMELT_OK;
  conv2d_desc d;
  conv_desc_of(g, &d);
  conv2d_weights *pw;
  bool own;
  TRY(conv_weights_algo(c, w->data, &d, CONV_ALGO_BF16, &pw, &own));
  smelt_status st = SMELT_OK;
  if (conv2d_bf16_io(pw)) {
    fused_act rest;
    conv2d_epilogue kep = conv_kernel_epilogue(e, &rest);
    bool xh = x->dtype == SMELT_BF16, yh = y->dtype == SMELT_BF16;
    st = conv2d_run_bf16io(c->pool, &d, pw, xh ? NULL : x->data, xh ? x->data : NULL, b ? b->data : NULL, &kep,
                           e->residual_h, yh ? NULL : y->data, yh ? y->data : NULL, cl);
    *done = true;
    if (!own && rest.kind == FUSED_ACT_NONE && e->rec) {
      conv_memo_note(e->rec, CM_BF16IO, &d, pw, &kep);
      e->rec->cl = cl;
    }
  }
  if (own) conv2d_weights_free(pw);
  return st;
}

bool conv_dw_cl_applies(op_ctx *c, const conv_geom *g, const fused_act *act) {
  const tensor *w = c->in[1], *b = op_in(c, 2);
  if (w->dtype != SMELT_F32 || (b && b->dtype != SMELT_F32) || g->w.nsp != 2) return false;
  if (act->kind != FUSED_ACT_NONE && act->kind != FUSED_ACT_RELU && act->kind != FUSED_ACT_CLIP) return false;
  conv2d_desc d;
  conv_desc_of(g, &d);
  return conv_dw_cl_shape(&d) && conv_bf16_io_native(isa_active());
}

bool conv_dw_cl_marks(unsigned cl) { return (cl & CB_CL_Y) && !(cl & CB_CL_R); }

smelt_status conv_dw_cl_try(op_ctx *c, const conv_geom *g, const conv_epilogue *e, unsigned cl, bool *done) {
  *done = false;
  const tensor *x = c->in[0], *b = op_in(c, 2);
  tensor *y = c->out[0];
  bool planes = !(cl & CB_CL_X);
  if (e->residual || e->residual_h || y->dtype != SMELT_BF16 || !conv_dw_cl_marks(cl) ||
      (x->dtype != SMELT_BF16 && !(planes && x->dtype == SMELT_F32)) || !conv_dw_cl_applies(c, g, &e->act))
    return SMELT_OK;
  conv2d_desc d;
  conv_desc_of(g, &d);
  fused_act rest;
  conv2d_epilogue kep = conv_kernel_epilogue(e, &rest);
  /* its weights in bf16 pairs, made once per session for a constant W (the
   * op cache), else for this run */
  int64_t nw = conv_dw_cl_packed_words(&d);
  struct {
    const void *w;
    int64_t tag, C, KH, KW;
  } key = {c->in[1]->data, 0x64776c32 /* "dwl2": the bf16 pairs' layout */, d.C, d.KH, d.KW};
  bool cacheable = c->cache && op_input_is_constant(c, 1);
  uint32_t *Wt = cacheable ? op_cache_find(c->cache, &key, sizeof key) : NULL;
  bool own = false;
  if (!Wt) {
    Wt = tensor_data_alloc(sizeof *Wt * (size_t)nw);
    if (!Wt) return err_nomem("depthwise channels-last: its weights in bf16 pairs", sizeof *Wt * (size_t)nw);
    conv_dw_cl_pack(&d, c->in[1]->data, Wt);
    uint32_t *kept = cacheable ? op_cache_add(c->cache, &key, sizeof key, Wt, tensor_data_free) : NULL;
    if (kept) Wt = kept;
    else own = true;
  }
  *done = true;
  smelt_status st = conv_dw_cl_run(c->pool, isa_active(), &d, Wt, b ? b->data : NULL, &kep,
                                   x->dtype == SMELT_F32 ? x->data : NULL, x->dtype == SMELT_BF16 ? x->data : NULL,
                                   planes, y->data);
  if (own) tensor_data_free(Wt);
  else if (e->rec && rest.kind == FUSED_ACT_NONE) {
    conv_memo_note(e->rec, CM_DWCL, &d, Wt, &kep);
    e->rec->planes = planes;
  }
  return st;
}

void conv_route_fast_describe(const conv_kernel *k, const conv_query *q, const conv_call *a, char *buf, size_t n) {
  (void)a;
  cb_form f = k->algo == CONV_ALGO_BF16 ? conv_bf16_form(&q->d, conv2d_kernel_isa(q->isa)) : CB_FORM_PV;
  snprintf(buf, n, "%s%s", conv_algo_desc(k->algo, q->isa),
           f == CB_FORM_WINO                 ? ", Winograd F(2x2,3x3) (x86/conv_bf16_wino.c)"
           : conv_bf16_colpair(&q->d, f)     ? ", output channels along the vector, input columns in pairs"
           : f == CB_FORM_MV                 ? ", output channels along the vector"
                                             : "");
}

/* ---- the strided 1x1 over its subsampled input ---- */

static void subsample_planes(void *ctx, int64_t p0, int64_t p1) {
  const conv_xcopy_job *j = ctx;
  const nn_window *w = &j->g->w;
  int64_t oh = w->nsp == 2 ? w->out[0] : 1, ow = w->out[w->nsp - 1];
  int64_t sh = w->nsp == 2 ? w->stride[0] : 1, sw = w->stride[w->nsp - 1], iw = w->in[w->nsp - 1];
  for (int64_t p = p0; p < p1; p++) {
    const float *x = j->X + p * j->g->S_in;
    float *y = j->dst + p * j->g->S_out;
    for (int64_t r = 0; r < oh; r++)
      for (int64_t q = 0; q < ow; q++) y[r * ow + q] = x[r * sh * iw + q * sw];
  }
}

smelt_status conv_route_sub_prepare(const conv_kernel *k, const conv_query *q, const conv_call *a, bool *taken) {
  (void)k, (void)q;
  conv_geom g2;
  *taken = true;
  if (!conv_pw_subsample(a->g, &g2)) return err_set(SMELT_ERR_INTERNAL, "conv: not a strided 1x1 conv");
  return conv_prepare_geom(a->c, &g2);
}

smelt_status conv_run_rewritten(const conv_call *a, const conv_geom *g2, int64_t items, int64_t grain,
                                void (*copy)(void *ctx, int64_t i0, int64_t i1), const char *what) {
  int64_t n = a->g->N * g2->C * g2->S_in;
  size_t bytes = sizeof(float) * (size_t)n;
  float *Xs = tensor_data_alloc(bytes ? bytes : sizeof(float));
  if (!Xs) return err_nomem(what, bytes);
  conv_xcopy_job j = {a->g, a->X, Xs};
  pool_parallel_for(n >= (1 << 15) ? a->c->pool : NULL, items, grain, copy, &j);
  smelt_status st = conv_f32(a->c, g2, Xs, a->W, a->B, a->Y, a->ep);
  tensor_data_free(Xs);
  return st;
}

/* X's kept positions into scratch, then the stride-1 conv over them. */
smelt_status conv_route_sub_run(const conv_kernel *k, const conv_query *q, const conv_call *a, bool *taken) {
  (void)k, (void)q;
  conv_geom g2;
  *taken = true;
  if (!conv_pw_subsample(a->g, &g2)) return err_set(SMELT_ERR_INTERNAL, "conv: not a strided 1x1 conv");
  return conv_run_rewritten(a, &g2, a->g->N * a->g->C, 8, subsample_planes,
                            "conv: the subsampled input of a strided 1x1 conv");
}

void conv_describe_rewritten(const conv_call *a, const conv_geom *g2, const char *how, char *buf, size_t n) {
  char rest[160];
  if (!g2) snprintf(rest, sizeof rest, "?");
  else conv_describe_geom(a->c, g2, rest, sizeof rest);
  snprintf(buf, n, "%s, then %s", how, rest);
}

void conv_route_sub_describe(const conv_kernel *k, const conv_query *q, const conv_call *a, char *buf, size_t n) {
  (void)k, (void)q;
  conv_geom g2;
  conv_describe_rewritten(a, conv_pw_subsample(a->g, &g2) ? &g2 : NULL, "the strided input subsampled", buf, n);
}

/* ---- 1x1 on X in place (kernels/conv.h: conv_pointwise_run) ---- */

/* The 1x1 route's weights packed once per session (CONV_ALGO_POINTWISE,
 * cached and stored like the other algorithms' prepared weights) when the
 * entry packs (conv_registry.c: pw_packs) and W is the node's; *pw NULL: W
 * is read as it is. */
static smelt_status conv_pw_weights(const conv_query *q, const conv_call *a, conv2d_weights **pw, bool *own) {
  *pw = NULL;
  *own = false;
  op_ctx *c = a->c;
  bool packs = c->cache && q->w_f32 && q->w_const && q->nsp <= 2;
  if (a->W != c->in[1]->data || !packs || !conv2d_supports(&q->d, CONV_ALGO_POINTWISE)) return SMELT_OK;
  return conv_weights_algo(c, a->W, &q->d, CONV_ALGO_POINTWISE, pw, own);
}

smelt_status conv_route_pw_prepare(const conv_kernel *k, const conv_query *q, const conv_call *a, bool *taken) {
  (void)k;
  conv2d_weights *pw;
  bool own;
  *taken = true;
  TRY(conv_pw_weights(q, a, &pw, &own));
  if (own) conv2d_weights_free(pw);
  return SMELT_OK;
}

smelt_status conv_route_pw_run(const conv_kernel *k, const conv_query *q, const conv_call *a, bool *taken) {
  (void)k;
  const conv_geom *g = a->g;
  conv_epilogue rest = {0};
  conv2d_epilogue kep = conv_kernel_epilogue(a->ep, &rest.act);
  conv2d_weights *pw;
  bool own;
  *taken = true;
  TRY(conv_pw_weights(q, a, &pw, &own));
  smelt_status st =
      pw ? conv2d_run_ep(a->c->pool, &q->d, pw, a->X, a->B, &kep, a->Y)
         : conv_pointwise_run(a->c->pool, q->isa, g->N, g->C, g->M, g->S_out, a->X, a->W, a->B, &kep, a->Y);
  if (pw && !own) note_fast(k, q, a, pw, &kep, &rest.act);
  if (own) conv2d_weights_free(pw);
  TRY(st);
  conv_epilogue_after(a->c->pool, &rest, a->Y, g->N * g->M * g->S_out);
  return SMELT_OK;
}

void conv_route_pw_describe(const conv_kernel *k, const conv_query *q, const conv_call *a, char *buf, size_t n) {
  (void)k, (void)a;
  snprintf(buf, n, "%s", conv_algo_desc(CONV_ALGO_POINTWISE, q->isa));
}

void conv_route_pw_raw_describe(const conv_kernel *k, const conv_query *q, const conv_call *a, char *buf, size_t n) {
  (void)k, (void)q, (void)a;
  snprintf(buf, n, "f32 1x1 pointwise on X in place, W as stored (kernels/conv_pointwise.c)");
}

/* ---- 1x1 as the transposed GEMM (kernels/conv.h: conv_pointwise_t_run) ---- */

smelt_status conv_pw_t_ep(op_ctx *c, const conv_geom *g, int64_t C, const float *X, const float *W,
                          const gemm_packed *wt, const float *B, const conv_epilogue *ep, float *Y) {
  conv_epilogue rest = {0};
  conv2d_epilogue kep = conv_kernel_epilogue(ep, &rest.act);
  TRY(conv_pointwise_t_run(c->pool, isa_active(), g->N, C, g->M, g->S_out, X, W, wt, B, &kep, Y));
  conv_epilogue_after(c->pool, &rest, Y, g->N * g->M * g->S_out);
  return SMELT_OK;
}

/* W^T packed once per session as the GEMM's B (ops/gemm_weights.h); NULL:
 * no cache or memory for it, and the next entry runs the conv. */
static const gemm_packed *pw_t_weights(const conv_call *a) {
  return gemm_weights_b(a->c->cache, a->c->pool, true, a->g->C, a->g->M, a->c->in[1]->data);
}

smelt_status conv_route_pw_t_prepare(const conv_kernel *k, const conv_query *q, const conv_call *a, bool *taken) {
  (void)k, (void)q;
  *taken = pw_t_weights(a) != NULL;
  return SMELT_OK;
}

smelt_status conv_route_pw_t_run(const conv_kernel *k, const conv_query *q, const conv_call *a, bool *taken) {
  (void)k, (void)q;
  const gemm_packed *wt = a->W == a->c->in[1]->data ? pw_t_weights(a) : NULL;
  *taken = wt != NULL;
  if (!wt) return SMELT_OK;
  return conv_pw_t_ep(a->c, a->g, a->g->C, a->X, a->W, wt, a->B, a->ep, a->Y);
}

void conv_route_pw_t_describe(const conv_kernel *k, const conv_query *q, const conv_call *a, char *buf, size_t n) {
  (void)k, (void)q, (void)a;
  snprintf(buf, n, "f32 1x1 as the transposed GEMM over W^T packed once (kernels/conv_pointwise.c)");
}
