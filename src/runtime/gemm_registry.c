/* The GEMM kernel registry (see gemm_registry.h): the table and its entries.
 *
 * Complexity: a linear scan of a table of a few entries per step at compile
 * time; an entry's run is its kernel's. */
#include "runtime/gemm_registry.h"

#include <string.h>

#include "ops/fused_act.h"
#include "ops/gemm_bf16.h"
#include "ops/gemm_int4.h"
#include "ops/gemm_int8.h"
#include "ops/gemm_weights.h"
#include "runtime/gemm_step.h"
#include "util/err.h"

gemm_shape_class gemm_shape_of(int64_t M, int64_t N, int64_t K) {
  (void)N, (void)K;
  return M <= 1 ? GEMM_SHAPE_GEMV : M <= 16 ? GEMM_SHAPE_SMALL_M : GEMM_SHAPE_LARGE;
}

const char *gemm_wform_name(gemm_wform w) {
  static const char *const names[GEMM_W_COUNT] = {"f32", "int8", "bf16", "int4", "fp16"};
  return w >= 0 && w < GEMM_W_COUNT ? names[w] : "?";
}

/* ---- f32: the GEMM library ---- */

static void f32_prepare(gemm_step *gs, const gemm_io *io, smelt_pool *pool) {
  const gemm_params *p = &gs->tmpl;
  if (io->B && p->M > 0 && p->N > 0 && p->K > 0)
    gs->packed_b = gemm_weights_b(io->cache, pool, p->trans_b, p->K, p->N, io->B);
}

static smelt_status f32_run(const gemm_step *gs, const gemm_io *io, smelt_pool *pool, int variant) {
  gemm_params p = gs->tmpl;
  p.A = io->A;
  p.B = io->B;
  p.C = io->Y;
  p.packed_b = gs->packed_b;
  if (gs->has_bias) p.epilogue.bias = io->bias;
  static const gemm_path paths[4] = {GEMM_PATH_AUTO, GEMM_PATH_SMALL_M, GEMM_PATH_DIRECT, GEMM_PATH_PACKED};
  return gemm_f32_run(variant >= 4 ? NULL : pool, &p, gs->isa, paths[variant % 4], NULL);
}

/* ---- reduced-precision weights (precision int8 / bf16 / int4) on f32 activations ---- */

/* The node's context for its op's weight preparation: B (input 1, a constant) as a tensor. */
typedef struct wctx {
  op_ctx c;
  tensor b;
  const tensor *in[2];
} wctx;

static void wctx_init(wctx *w, const gemm_step *gs, const gemm_io *io, smelt_pool *pool) {
  const ir_node *nd = &io->g->nodes[io->node];
  const ir_value *bv = &io->g->values[nd->inputs[1]];
  tensor_view(&w->b, SMELT_F32, bv->rank, bv->dims, (void *)io->B);
  w->in[0] = NULL;
  w->in[1] = &w->b;
  w->c = (op_ctx){.graph = io->g, .node = nd, .opset = nd->opset, .n_in = 2, .in = (tensor **)w->in,
                  .pool = pool, .cache = io->cache};
  (void)gs;
}

/* The weight in the step's form, from the op cache (made there the first
 * time, or mapped from the prep store); NULL when the op would run in fp32. */
static const void *reduced_weights(const gemm_step *gs, wctx *w) {
  const gemm_params *p = &gs->tmpl;
  switch (gs->w) {
    case GEMM_W_INT8: return gemm_int8_weights(&w->c, 1, p->trans_b, p->K, p->N);
    case GEMM_W_BF16:
    case GEMM_W_F16: return gemm_bf16_weights(&w->c, 1, gs->w == GEMM_W_F16, p->trans_b, p->K, p->N);
    case GEMM_W_INT4: return gemm_int4_weights(&w->c, 1, p->trans_b, p->K, p->N);
    default: return NULL;
  }
}

static void reduced_prepare(gemm_step *gs, const gemm_io *io, smelt_pool *pool) {
  wctx w;
  wctx_init(&w, gs, io, pool);
  if (!reduced_weights(gs, &w)) err_clear(); /* runs in fp32 then, as the op would */
}

/* As the op (ops/fused_gemm.c): Y (holding the residual when there is one)
 * = alpha A w + bias (+ Y), then the activation over Y. */
static smelt_status reduced_run(const gemm_step *gs, const gemm_io *io, smelt_pool *pool, int variant) {
  if (variant >= 4) pool = NULL;
  wctx w;
  wctx_init(&w, gs, io, pool);
  const void *q = reduced_weights(gs, &w);
  if (!q) { /* no cache or memory for the converted weight: fp32, as the op */
    err_clear();
    return f32_run(gs, io, pool, 0);
  }
  const gemm_params *p = &gs->tmpl;
  const float *bias = gs->has_bias ? io->bias : NULL;
  smelt_status s;
  switch (gs->w) {
    case GEMM_W_INT8: s = gemm_int8_run(&w.c, q, p->M, io->A, p->K, p->alpha, bias, gs->has_res, io->Y); break;
    case GEMM_W_BF16:
    case GEMM_W_F16: s = gemm_bf16_run(&w.c, q, p->M, io->A, p->K, p->alpha, bias, gs->has_res, io->Y); break;
    default: s = gemm_int4_run(&w.c, q, p->M, io->A, p->K, p->alpha, bias, gs->has_res, io->Y); break;
  }
  if (!s) fused_act_apply_pool(pool, &gs->act, io->Y, p->M * p->N);
  return s;
}

/* ---- bf16 compute (precision bf16, many rows, AVX512_BF16): kernels/bf16dp.h ---- */

static void dp_prepare(gemm_step *gs, const gemm_io *io, smelt_pool *pool) {
  wctx w;
  wctx_init(&w, gs, io, pool);
  const gemm_params *p = &gs->tmpl;
  if (!gemm_bf16dp_weights(&w.c, 1, p->trans_b, p->K, p->N)) err_clear();
}

static smelt_status dp_run(const gemm_step *gs, const gemm_io *io, smelt_pool *pool, int variant) {
  if (variant >= 4) pool = NULL;
  wctx w;
  wctx_init(&w, gs, io, pool);
  const gemm_params *p = &gs->tmpl;
  const bf16dp_weights *q = gemm_bf16dp_weights(&w.c, 1, p->trans_b, p->K, p->N);
  if (!q) { /* no cache or memory for the pairs: the weight-only path, as the op */
    err_clear();
    return reduced_run(gs, io, pool, variant);
  }
  smelt_status s = gemm_bf16dp_run(&w.c, q, p->M, io->A, p->K, p->alpha, gs->has_bias ? io->bias : NULL,
                                   gs->has_res, io->Y);
  if (!s) fused_act_apply_pool(pool, &gs->act, io->Y, p->M * p->N);
  return s;
}

/* ---- f16 / bf16: panels widened to f32 for the f32 kernel ---- */

/* The seam for half-precision activations; nothing faster yet: A, B, the
 * bias and the residual are widened into f32 scratch on every run (B is not
 * packed ahead), the f32 GEMM runs, Y is rounded to nearest even.  The op
 * (its f32 lift) does the same work. */
static void widen(smelt_dtype t, const void *src, float *dst, int64_t n) {
  const uint16_t *h = src;
  if (t == SMELT_F16)
    for (int64_t i = 0; i < n; i++) dst[i] = f16_to_f32(h[i]);
  else
    for (int64_t i = 0; i < n; i++) dst[i] = bf16_to_f32(h[i]);
}

static void narrow(smelt_dtype t, const float *src, void *dst, int64_t n) {
  uint16_t *h = dst;
  if (t == SMELT_F16)
    for (int64_t i = 0; i < n; i++) h[i] = f32_to_f16(src[i]);
  else
    for (int64_t i = 0; i < n; i++) h[i] = f32_to_bf16(src[i]);
}

static void half_prepare(gemm_step *gs, const gemm_io *io, smelt_pool *pool) { (void)gs, (void)io, (void)pool; }

static smelt_status half_run(const gemm_step *gs, const gemm_io *io, smelt_pool *pool, int variant) {
  const gemm_params *p = &gs->tmpl;
  int64_t na = p->M * p->K, nb = p->K * p->N, ny = p->M * p->N, nbias = gs->has_bias ? p->N : 0;
  size_t bytes = sizeof(float) * (size_t)(na + nb + ny + nbias);
  float *a = tensor_data_alloc(bytes);
  if (!a) return err_nomem("GEMM step: f32 panels of a half-precision product", bytes);
  float *b = a + na, *y = b + nb, *bias = y + ny;
  widen(gs->dt_a, io->A, a, na);
  widen(gs->dt_b, io->B, b, nb);
  if (gs->has_res) widen(gs->dt_y, io->Y, y, ny); /* Y holds the residual (gemm_step_run) */
  if (nbias) widen(gs->dt_y, io->bias, bias, nbias);
  gemm_step g32 = *gs;
  g32.packed_b = NULL;
  gemm_io f = *io;
  f.A = a, f.B = b, f.Y = y, f.bias = nbias ? bias : NULL, f.res = NULL;
  smelt_status s = f32_run(&g32, &f, pool, variant);
  if (!s) narrow(gs->dt_y, y, io->Y, ny);
  tensor_data_free(a);
  return s;
}

/* Many rows of a bf16-weight product where there is no bf16 arithmetic
 * (ops/gemm_bf16.h: gemm_half_as_f32_for): the f32 entry's prepare and run. */
static bool no_bf16dp(isa_level isa) { return !bf16dp_wanted(isa); }

static const gemm_kernel table[] = {
    {"f32 gemm (kernels/gemm.h)", SMELT_F32, SMELT_F32, IR_QUANT_NONE, SMELT_F32, GEMM_W_F32, ISA_SCALAR, GEMM_SHAPES_ALL,
     f32_prepare, f32_run, NULL},
    {"int8 u8s8 gemm (kernels/qgemm.h)", SMELT_F32, SMELT_F32, IR_QUANT_INT8_CHANNEL, SMELT_F32, GEMM_W_INT8, ISA_SCALAR,
     GEMM_SHAPES_ALL, reduced_prepare, reduced_run, NULL},
    {"bf16 dot-product gemm, A rounded to bf16 (kernels/bf16dp.h)", SMELT_F32, SMELT_F32, IR_QUANT_BF16, SMELT_F32, GEMM_W_BF16,
     ISA_SCALAR, 1u << GEMM_SHAPE_LARGE, dp_prepare, dp_run, bf16dp_wanted},
    {"f32 gemm over the fp32 weight packed once: many rows, no bf16 arithmetic (kernels/gemm.h, ops/gemm_bf16.h)",
     SMELT_F32, SMELT_F32, IR_QUANT_BF16, SMELT_F32, GEMM_W_BF16, ISA_SCALAR, 1u << GEMM_SHAPE_LARGE, f32_prepare, f32_run,
     no_bf16dp},
    {"bf16-weight gemm (kernels/wbf16.h)", SMELT_F32, SMELT_F32, IR_QUANT_BF16, SMELT_F32, GEMM_W_BF16, ISA_SCALAR,
     GEMM_SHAPES_ALL, reduced_prepare, reduced_run, NULL},
    {"int4 group gemm (kernels/q4gemm.h)", SMELT_F32, SMELT_F32, IR_QUANT_INT4_GROUP, SMELT_F32, GEMM_W_INT4, ISA_SCALAR,
     GEMM_SHAPES_ALL, reduced_prepare, reduced_run, NULL},
    {"f32 gemm over the fp32 weight packed once: many rows of fp16 weights (kernels/gemm.h, ops/gemm_bf16.h)",
     SMELT_F32, SMELT_F32, IR_QUANT_F16, SMELT_F32, GEMM_W_F16, ISA_SCALAR, 1u << GEMM_SHAPE_LARGE, f32_prepare, f32_run, NULL},
    {"fp16-weight gemm (kernels/wbf16.h)", SMELT_F32, SMELT_F32, IR_QUANT_F16, SMELT_F32, GEMM_W_F16, ISA_SCALAR,
     GEMM_SHAPES_ALL, reduced_prepare, reduced_run, NULL},
    {"f16 through f32 panels (kernels/gemm.h)", SMELT_F16, SMELT_F16, IR_QUANT_NONE, SMELT_F16, GEMM_W_F32, ISA_SCALAR,
     GEMM_SHAPES_ALL, half_prepare, half_run, NULL},
    {"bf16 through f32 panels (kernels/gemm.h)", SMELT_BF16, SMELT_BF16, IR_QUANT_NONE, SMELT_BF16, GEMM_W_F32, ISA_SCALAR,
     GEMM_SHAPES_ALL, half_prepare, half_run, NULL},
};

const gemm_kernel *gemm_kernel_select(smelt_dtype a, smelt_dtype b, ir_quant_scheme bq, smelt_dtype y, gemm_wform w,
                                      isa_level isa, gemm_shape_class shape) {
  for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
    const gemm_kernel *k = &table[i];
    if (k->a == a && k->b == b && k->bq == bq && k->y == y && k->w == w && isa >= k->min_isa && (k->shapes >> shape & 1u) &&
        (!k->usable || k->usable(isa)))
      return k;
  }
  return NULL;
}
