/* The convolution kernel registry (see conv_registry.h): the table, the
 * applicability and cost of each entry, and the selection.
 *
 * Complexity: a scan of a table of a dozen entries per decision; an entry's
 * cost is the cost model's closed form (kernels/conv_select.c). */
#include "ops/conv_registry.h"

#include <string.h>

#include "kernels/conv_bf16.h"
#include "ops/conv_route.h"

const char *conv_wform_name(conv_wform f) {
  static const char *const names[CONV_W_COUNT] = {"f32", "bf16"};
  return f >= 0 && f < CONV_W_COUNT ? names[f] : "?";
}

const char *conv_shape_name(conv_shape_class s) {
  static const char *const names[CONV_SHAPE_COUNT] = {"pointwise", "pointwise strided", "general", "strided",
                                                      "grouped",   "depthwise",         "n-d"};
  return s >= 0 && s < CONV_SHAPE_COUNT ? names[s] : "?";
}

conv_shape_class conv_shape_of(const conv_query *q) {
  const conv2d_desc *d = &q->d;
  if (q->nsp > 2) return CONV_SHAPE_ND;
  if (d->G > 1) return d->G == d->C && d->G == d->M ? CONV_SHAPE_DEPTHWISE : CONV_SHAPE_GROUPED;
  bool strided = d->sh > 1 || d->sw > 1;
  if (q->taps == 1) return strided ? CONV_SHAPE_POINTWISE_STRIDED : CONV_SHAPE_POINTWISE;
  return strided ? CONV_SHAPE_STRIDED : CONV_SHAPE_GENERAL;
}

/* Whether the bf16 kernel is asked for q: its weight form is bf16 and the
 * kernel could take the shape at this level (the node's mark honoured). */
static bool bf16_asked(const conv_query *q) {
  return q->wf == CONV_W_BF16 && q->nsp <= 2 && q->d.G == 1 && q->kdim > 0 && conv_bf16_channels(q->d.C, q->taps) &&
         conv_bf16_wanted(q->isa);
}

void conv_query_finish(conv_query *q) {
  q->shape = conv_shape_of(q);
  q->requested = bf16_asked(q) ? CONV_ALGO_AUTO : q->forced;
}

/* ---- applicability and cost ---- */

/* The fast kernels (kernels/conv.h) take 1-D and 2-D convs with taps. */
static bool fast_ok(const conv_query *q) { return q->nsp <= 2 && q->kdim > 0; }

static bool supports(const conv_query *q, conv_algo a) { return fast_ok(q) && conv2d_supports(&q->d, a); }
static bool direct_ok(const conv_query *q) { return supports(q, CONV_ALGO_DIRECT); }
static bool wino_ok(const conv_query *q) { return supports(q, CONV_ALGO_WINO2); }
static bool dcv_ok(const conv_query *q) { return supports(q, CONV_ALGO_DIRECT_CV); }
static bool chanvec_ok(const conv_query *q) { return supports(q, CONV_ALGO_CHANVEC); }
static bool depthwise_ok(const conv_query *q) { return supports(q, CONV_ALGO_DEPTHWISE); }
static bool pointwise_ok(const conv_query *q) { return supports(q, CONV_ALGO_POINTWISE); }
static bool chanvec_wanted(const conv_query *q) { return conv2d_chanvec_suits(&q->d, q->isa); }
/* Winograd's weight transform costs more than one run saves: only over prepared weights kept. */
static bool cached(const conv_query *q) { return q->cache && q->w_const; }

static double cost_of(const conv_query *q, conv_algo a) {
  return fast_ok(q) ? conv2d_cost(&q->d, q->isa, q->threads, a) : 0;
}
static double im2col_cost(const conv_query *q) { return cost_of(q, CONV_ALGO_IM2COL); }
static double direct_cost(const conv_query *q) { return cost_of(q, CONV_ALGO_DIRECT); }
static double wino2_cost(const conv_query *q) { return cost_of(q, CONV_ALGO_WINO2); }
static double wino4_cost(const conv_query *q) { return cost_of(q, CONV_ALGO_WINO4); }
static double dcv_cost(const conv_query *q) { return cost_of(q, CONV_ALGO_DIRECT_CV); }
static double bf16_cost(const conv_query *q) { return cost_of(q, CONV_ALGO_BF16); }

/* bf16 where it runs (usable: conv_bf16_wanted) on a shape it takes; by the
 * cost model on the vdpbf16ps kernel (conv_bf16_by_cost): against the fp32
 * algorithm the table picks for the same conv with an f32 weight. */
static bool bf16_ok(const conv_query *q) {
  if (!supports(q, CONV_ALGO_BF16)) return false;
  if (!conv_bf16_by_cost(conv2d_kernel_isa(q->isa))) return true;
  conv_query f = *q;
  f.wf = CONV_W_F32;
  f.requested = CONV_ALGO_AUTO;
  return conv2d_bf16_pays(&q->d, q->isa, q->threads, conv_select_algo(&f));
}

static bool subsample_ok(const conv_query *q) { return q->cache && q->subsample; }
static bool patch_ok(const conv_query *q) { return q->cache && q->patch; }

/* The 1x1 route (kernels/conv.h: conv_pointwise_route): few input channels,
 * a small plane, or on AVX-512 most planes; every 1x1 under SMELT_CONV=pointwise. */
static bool pw_route(const conv_query *q) {
  return q->pointwise &&
         (conv_pointwise_route(q->isa, q->d.C, q->d.M, q->s_out) || q->forced == CONV_ALGO_POINTWISE);
}
/* ... over W packed once: a constant float32 W of a 1-D or 2-D conv, with a cache */
static bool pw_packs(const conv_query *q) { return q->cache && q->w_f32 && q->w_const && q->nsp <= 2; }
static bool pw_packed_ok(const conv_query *q) { return pw_route(q) && pw_packs(q); }
static bool pw_raw_ok(const conv_query *q) { return pw_route(q) && !pw_packs(q); }

/* The transposed GEMM for 1x1 convs over planes the GEMM's columns fit badly (7x7). */
static bool pw_t_ok(const conv_query *q) {
  return q->pointwise && !pw_route(q) && q->w_f32 && q->w_const &&
         conv_pointwise_t_suits(q->isa, q->d.C, q->d.M, q->s_out);
}

/* im2col, then the transposed GEMM: strided one-group KxK convs over small
 * planes, where the cost model does not pick direct-cv. */
static bool col_t_ok(const conv_query *q) {
  return q->cache && q->d.G == 1 && q->taps > 1 && q->kdim == q->d.C * q->taps && q->strided && q->w_f32 &&
         q->w_const && q->s_out <= CONV_COL_T_MAX_S && conv_pointwise_t_suits(q->isa, q->kdim, q->d.M, q->s_out) &&
         conv_select_algo(q) != CONV_ALGO_DIRECT_CV;
}

/* The op's depthwise loop (2-D, group == C == M, also one channel). */
static bool dw_loop_ok(const conv_query *q) { return q->nsp == 2 && q->d.G == q->d.C && q->d.G == q->d.M; }

/* ---- the table ---- */

#define F32 SMELT_F32, SMELT_F32, SMELT_F32
#define WF_ANY (CONV_WF(CONV_W_F32) | CONV_WF(CONV_W_BF16))
#define ONE(s) (1u << CONV_SHAPE_##s)
#define FAST conv_route_fast_prepare, conv_route_fast_run, conv_route_fast_describe

static const conv_kernel table[] = {
    {"f64 reference loop (ops/conv.c)", SMELT_F64, SMELT_F64, SMELT_F64, WF_ANY, ISA_SCALAR, NULL, CONV_SHAPES_ALL,
     CONV_TIER_COST, CONV_ALGO_AUTO, NULL, NULL, NULL, false, NULL, conv_route_f64_run, conv_route_f64_describe},
    {"bf16 (kernels/conv_bf16.c)", F32, CONV_WF(CONV_W_BF16), ISA_SCALAR, conv_bf16_wanted, CONV_SHAPES_ONE_GROUP,
     CONV_TIER_BF16, CONV_ALGO_BF16, bf16_ok, NULL, bf16_cost, true, FAST},
    {"strided 1x1 over its subsampled input (ops/conv_routes.c)", F32, WF_ANY, ISA_SCALAR, NULL,
     ONE(POINTWISE_STRIDED), CONV_TIER_SUBSAMPLE, CONV_ALGO_AUTO, subsample_ok, NULL, NULL, false,
     conv_route_sub_prepare, conv_route_sub_run, conv_route_sub_describe},
    {"patch conv: space-to-depth, then the 1x1 routes (ops/conv_patch.c)", F32, WF_ANY, ISA_SCALAR, NULL,
     ONE(STRIDED), CONV_TIER_SUBSAMPLE, CONV_ALGO_AUTO, patch_ok, NULL, NULL, false, conv_route_patch_prepare,
     conv_route_patch_run, conv_route_patch_describe},
    {"1x1 on X in place, W packed once (kernels/conv_pointwise.c)", F32, WF_ANY, ISA_SCALAR, NULL, ONE(POINTWISE),
     CONV_TIER_POINTWISE, CONV_ALGO_AUTO, pw_packed_ok, NULL, NULL, true, conv_route_pw_prepare, conv_route_pw_run,
     conv_route_pw_describe},
    {"1x1 on X in place, W as stored (kernels/conv_pointwise.c)", F32, WF_ANY, ISA_SCALAR, NULL,
     ONE(POINTWISE) | ONE(ND), CONV_TIER_POINTWISE, CONV_ALGO_AUTO, pw_raw_ok, NULL, NULL, true,
     conv_route_pw_prepare, conv_route_pw_run, conv_route_pw_raw_describe},
    {"1x1 as the transposed GEMM over W^T packed once (kernels/conv_pointwise.c)", F32, WF_ANY, ISA_SCALAR, NULL,
     ONE(POINTWISE) | ONE(ND), CONV_TIER_POINTWISE_T, CONV_ALGO_AUTO, pw_t_ok, NULL, NULL, false,
     conv_route_pw_t_prepare, conv_route_pw_t_run, conv_route_pw_t_describe},
    {"im2col, then the transposed GEMM over W^T packed once (ops/conv.c)", F32, WF_ANY, ISA_SCALAR, NULL,
     ONE(STRIDED) | ONE(ND), CONV_TIER_COL_T, CONV_ALGO_AUTO, col_t_ok, NULL, NULL, false, conv_route_col_t_prepare,
     conv_route_col_t_run, conv_route_col_t_describe},
    {"depthwise (kernels/conv_depthwise.c)", F32, WF_ANY, ISA_SCALAR, NULL, ONE(DEPTHWISE), CONV_TIER_DEPTHWISE,
     CONV_ALGO_DEPTHWISE, depthwise_ok, NULL, NULL, false, FAST},
    {"chanvec (kernels/conv_cvec.c)", F32, WF_ANY, ISA_SCALAR, NULL, CONV_SHAPES_2D, CONV_TIER_CHANVEC,
     CONV_ALGO_CHANVEC, chanvec_ok, chanvec_wanted, NULL, false, FAST},
    /* the im2col family: the depthwise loop where it applies, else im2col + GEMM (one cost) */
    {"depthwise loop (ops/conv.c)", F32, WF_ANY, ISA_SCALAR, NULL, ONE(DEPTHWISE) | CONV_SHAPES_ONE_GROUP,
     CONV_TIER_COST, CONV_ALGO_IM2COL, dw_loop_ok, NULL, im2col_cost, false, conv_route_im2col_prepare,
     conv_route_dw_loop_run, conv_route_dw_loop_describe},
    {"im2col + GEMM (ops/conv.c)", F32, WF_ANY, ISA_SCALAR, NULL, CONV_SHAPES_ALL, CONV_TIER_COST, CONV_ALGO_IM2COL,
     NULL, NULL, im2col_cost, false, conv_route_im2col_prepare, conv_route_im2col_run, conv_route_im2col_describe},
    {"direct implicit GEMM (kernels/conv_direct.c)", F32, WF_ANY, ISA_SCALAR, NULL, CONV_SHAPES_2D, CONV_TIER_COST,
     CONV_ALGO_DIRECT, direct_ok, NULL, direct_cost, false, FAST},
    {"Winograd F(2x2,3x3) (kernels/conv_winograd.c)", F32, WF_ANY, ISA_SCALAR, NULL, ONE(GENERAL), CONV_TIER_COST,
     CONV_ALGO_WINO2, wino_ok, cached, wino2_cost, false, FAST},
    {"Winograd F(4x4,3x3) (kernels/conv_winograd.c)", F32, WF_ANY, ISA_SCALAR, NULL, ONE(GENERAL), CONV_TIER_COST,
     CONV_ALGO_WINO4, wino_ok, cached, wino4_cost, false, FAST},
    {"direct-cv (kernels/conv_direct_cv.c)", F32, WF_ANY, ISA_SCALAR, NULL, CONV_SHAPES_ONE_GROUP, CONV_TIER_COST,
     CONV_ALGO_DIRECT_CV, dcv_ok, NULL, dcv_cost, false, FAST},
    {"pointwise over W packed, when forced (kernels/conv_pointwise.c)", F32, WF_ANY, ISA_SCALAR, NULL,
     ONE(POINTWISE), CONV_TIER_NEVER, CONV_ALGO_POINTWISE, pointwise_ok, NULL, NULL, false, FAST},
};

#define N_ENTRIES ((int)(sizeof table / sizeof *table))

const conv_kernel *conv_kernels_table(int *n) {
  *n = N_ENTRIES;
  return table;
}

int conv_kernel_index(const conv_kernel *k) { return k >= table && k < table + N_ENTRIES ? (int)(k - table) : -1; }

/* ---- selection ---- */

/* Whether SMELT_CONV (q->requested) names k: its algorithm, or either
 * Winograd for "winograd". */
static bool forced(const conv_kernel *k, const conv_query *q) {
  conv_algo r = q->requested;
  if (r == CONV_ALGO_AUTO || k->algo == CONV_ALGO_AUTO) return false;
  return k->algo == r || (r == CONV_ALGO_WINOGRAD && (k->algo == CONV_ALGO_WINO2 || k->algo == CONV_ALGO_WINO4));
}

static bool fits(const conv_kernel *k, const conv_query *q) {
  return k->x == q->x && k->w == q->w && k->y == q->y && (k->wforms & CONV_WF(q->wf)) && q->isa >= k->min_isa &&
         (!k->usable || k->usable(q->isa)) && (k->shapes >> q->shape & 1u) && (!k->applies || k->applies(q));
}

/* Lowest tier, then lowest cost, then first in the table; fast: the
 * entries with an algorithm only (conv_select_algo). */
static const conv_kernel *pick(const conv_query *q, unsigned skip, bool fast) {
  const conv_kernel *best = NULL;
  conv_tier best_tier = CONV_TIER_NEVER;
  double best_cost = 0;
  for (int i = 0; i < N_ENTRIES; i++) {
    const conv_kernel *k = &table[i];
    if ((skip >> i & 1u) || (fast && k->algo == CONV_ALGO_AUTO)) continue;
    bool f = forced(k, q);
    conv_tier t = f ? CONV_TIER_FORCED : k->tier;
    if (t == CONV_TIER_NEVER || (best && t > best_tier) || (!f && k->wanted && !k->wanted(q)) || !fits(k, q))
      continue;
    double c = k->cost ? k->cost(q) : 0;
    if (!best || t < best_tier || c < best_cost) best = k, best_tier = t, best_cost = c;
  }
  return best;
}

const conv_kernel *conv_select(const conv_query *q, unsigned skip) { return pick(q, skip, false); }

conv_algo conv_select_algo(const conv_query *q) {
  const conv_kernel *k = pick(q, 0, true);
  return k ? k->algo : CONV_ALGO_IM2COL;
}

void conv_query_desc(conv_query *q, const conv2d_desc *d, isa_level isa, int threads, bool cached_w) {
  *q = (conv_query){.x = SMELT_F32, .w = SMELT_F32, .y = SMELT_F32, .wf = CONV_W_F32, .isa = isa,
                    .threads = threads, .nsp = 2, .d = *d, .taps = d->KH * d->KW, .cache = cached_w,
                    .w_const = cached_w, .w_f32 = true, .s_out = d->OH * d->OW, .forced = CONV_ALGO_AUTO};
  q->kdim = d->G > 0 ? d->C / d->G * q->taps : 0;
  q->strided = d->sh > 1 || d->sw > 1;
  bool one = d->G == 1 && q->taps == 1 && d->pt == 0 && d->pl == 0 && q->kdim > 0;
  q->pointwise = one && !q->strided && d->OH == d->H && d->OW == d->W;
  q->subsample = one && q->strided && d->OH == (d->H - 1) / d->sh + 1 && d->OW == (d->W - 1) / d->sw + 1;
  q->patch = d->G == 1 && q->taps > 1 && q->kdim > 0 && d->KH == d->sh && d->KW == d->sw && d->dh == 1 &&
             d->dw == 1 && d->pt == 0 && d->pl == 0 && d->OH == d->H / d->sh && d->OW == d->W / d->sw;
  conv_query_finish(q);
}

conv_algo conv_select_desc(const conv2d_desc *d, isa_level isa, int threads, conv_algo requested, bool cached_w) {
  conv_query q;
  conv_query_desc(&q, d, isa, threads, cached_w);
  if (requested == CONV_ALGO_BF16) q.wf = CONV_W_BF16; /* asked even where bf16 does not run: no request */
  else q.forced = q.requested = requested;
  return conv_select_algo(&q);
}
