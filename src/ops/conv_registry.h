/* The convolution kernel registry: a Conv (or smelt.Conv) node does not walk
 * a chain of ifs to find its kernel; it describes itself as a conv_query
 * (element types, the weight's form, ISA, shape class, geometry, what the
 * session can cache) and conv_select filters a table of entries by
 * (element type, weight form, ISA, shape class, applicability) and takes
 * the entry of the lowest tier, the cheapest by the cost model
 * (kernels/conv.h: conv2d_cost) within it, in the spirit of
 * runtime/gemm_registry.h and XNNPACK's per-(datatype, ISA) kernel configs.
 *
 * Entries are the fast kernels of kernels/conv.h (direct, Winograd F(2)
 * and F(4), direct-cv, chanvec, depthwise, pointwise, bf16: each names its
 * conv_algo) and the op's own routes (ops/conv.c, ops/conv_routes.c: the
 * 1x1 route on X in place, the transposed GEMMs, the strided 1x1 over its
 * subsampled input, the depthwise loop, im2col + GEMM, the float64
 * reference loop).  Tiers keep the order the routes were always tried in
 * (docs/BACKENDS.md lists them); the cost model ranks the algorithms of the
 * last tier.  SMELT_CONV names an algorithm: the entry it names, where it
 * applies, takes the FORCED tier (Winograd: F(4) and F(2) by cost);
 * SMELT_CONV=pointwise also puts every 1x1 stride-1 conv on the 1x1 route.
 * A conv whose weight form is bf16 and which the bf16 kernel could take
 * ignores SMELT_CONV, as it always did.
 *
 * f16 and bf16 tensors are widened to f32 by the op before it runs (the f32
 * entries, "via f32 copies"); the registry is keyed by the element type the
 * kernel computes in: f32 or f64. */
#ifndef SMELT_OPS_CONV_REGISTRY_H
#define SMELT_OPS_CONV_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

#include "ir/ir.h"
#include "kernels/conv.h"
#include "kernels/isa.h"

/* The weight's form: as stored (f32) or rounded to bf16 (W declared bf16,
 * ir/quant.h, by passes/autocast.c; the node's precision mark where W has
 * no declaration: ops/conv_routes.c's conv_query_of). */
typedef enum conv_wform { CONV_W_F32, CONV_W_BF16, CONV_W_COUNT } conv_wform;
#define CONV_WF(f) (1u << (f))

/* Shape classes (one per conv; entries take a mask of 1 << class). */
typedef enum conv_shape_class {
  CONV_SHAPE_POINTWISE,         /* one group, 1x1 taps, stride 1 */
  CONV_SHAPE_POINTWISE_STRIDED, /* one group, 1x1 taps, a stride > 1 */
  CONV_SHAPE_GENERAL,           /* one group, KxK taps, stride 1 */
  CONV_SHAPE_STRIDED,           /* one group, KxK taps, a stride > 1 */
  CONV_SHAPE_GROUPED,           /* groups, not depthwise */
  CONV_SHAPE_DEPTHWISE,         /* group == C == M > 1 */
  CONV_SHAPE_ND,                /* 3 spatial dimensions or more (im2col only) */
  CONV_SHAPE_COUNT
} conv_shape_class;
#define CONV_SHAPES_ALL ((1u << CONV_SHAPE_COUNT) - 1)
#define CONV_SHAPES_2D (CONV_SHAPES_ALL & ~(1u << CONV_SHAPE_ND))
#define CONV_SHAPES_ONE_GROUP                                                                                     \
  (1u << CONV_SHAPE_POINTWISE | 1u << CONV_SHAPE_POINTWISE_STRIDED | 1u << CONV_SHAPE_GENERAL |                   \
   1u << CONV_SHAPE_STRIDED)

/* Tiers, tried lowest first. */
typedef enum conv_tier {
  CONV_TIER_BF16,      /* the node's weight form is bf16 and the bf16 kernel pays */
  CONV_TIER_SUBSAMPLE, /* a strided 1x1: its input subsampled, then a stride-1 conv; a patch conv:
                        * space-to-depth, then a 1x1 conv */
  CONV_TIER_POINTWISE, /* the 1x1 route on X in place */
  CONV_TIER_POINTWISE_T, /* 1x1 over small planes as the transposed GEMM */
  CONV_TIER_COL_T,     /* strided KxK over small planes: im2col, then the transposed GEMM */
  CONV_TIER_FORCED,    /* the entry SMELT_CONV names */
  CONV_TIER_DEPTHWISE, /* the depthwise kernel */
  CONV_TIER_CHANVEC,   /* chanvec where the cost model prefers it */
  CONV_TIER_COST,      /* im2col, direct, Winograd, direct-cv: the cheapest */
  CONV_TIER_NEVER      /* only when forced */
} conv_tier;

/* One convolution as the registry sees it. */
typedef struct conv_query {
  smelt_dtype x, w, y;   /* element types the kernel computes in (f32 after the op's widening, or f64) */
  conv_wform wf;         /* the weight's form */
  isa_level isa;         /* the level kernels run at (isa_active()) */
  int threads;
  conv_shape_class shape;
  int nsp;               /* spatial dimensions */
  conv2d_desc d;         /* the geometry (1-D as H = 1); meaningful when nsp <= 2 */
  int64_t taps, kdim;    /* taps per channel, the GEMM depth (C/G * taps; <= 0: empty or unknown) */
  bool pointwise;        /* 1x1, stride 1, no pads, one group: X is the GEMM's B as it lies */
  bool subsample;        /* 1x1, strided, no pads, one group, 1-D or 2-D: a stride-1 conv over X subsampled */
  bool patch;            /* kernel == stride (> 1 tap), no pads or dilation, one group, 1-D or 2-D: a 1x1
                          * conv over X rearranged space-to-depth (ops/conv_patch.c) */
  bool strided;          /* a stride > 1 along some axis */
  int64_t s_out;         /* output positions per plane */
  bool cache;            /* the session keeps prepared weights (an op cache) */
  bool w_const;          /* W is a constant of the graph */
  bool w_f32;            /* W is stored as float32 (routes that pack the node's W itself) */
  conv_algo forced;      /* SMELT_CONV (AUTO: none) */
  conv_algo requested;   /* forced, or AUTO for a conv the bf16 kernel is asked for */
} conv_query;

struct conv_call;       /* a run's operands (ops/conv_route.h) */
struct conv_kernel;
typedef struct conv_kernel conv_kernel;

struct conv_kernel {
  const char *name;
  smelt_dtype x, w, y;   /* element types it computes in */
  unsigned wforms;       /* mask of CONV_WF(conv_wform) it takes */
  isa_level min_isa;     /* runs at this level and above */
  bool (*usable)(isa_level isa); /* NULL, or a feature the level does not imply (AVX512_BF16, AMX) */
  unsigned shapes;       /* mask of 1 << conv_shape_class */
  conv_tier tier;
  conv_algo algo;        /* the fast kernel's algorithm (kernels/conv.h), IM2COL for the op's im2col
                          * family (what SMELT_CONV=im2col names), AUTO for the op's other routes */
  bool (*applies)(const conv_query *q);  /* whether it can run q (NULL: yes) */
  bool (*wanted)(const conv_query *q);   /* unforced, whether its tier takes it (NULL: yes) */
  double (*cost)(const conv_query *q);   /* the cost model's estimate (NULL: 0) */
  bool residual_in_place; /* reads each residual value just before writing its output over it */
  /* Its prepared weights into the session's cache; *taken false: it cannot
   * (no cache or memory for them) and the next entry is asked. */
  smelt_status (*prepare)(const conv_kernel *k, const conv_query *q, const struct conv_call *a, bool *taken);
  /* Y = act(conv(X, W) + B + residual); *taken false: as prepare. */
  smelt_status (*run)(const conv_kernel *k, const conv_query *q, const struct conv_call *a, bool *taken);
  /* One line for --explain ("f32 Winograd F(4x4,3x3) (kernels/conv_winograd.c)"). */
  void (*describe)(const conv_kernel *k, const conv_query *q, const struct conv_call *a, char *buf, size_t n);
};

conv_shape_class conv_shape_of(const conv_query *q);
/* Fills q's shape class and `requested` (from the rest). */
void conv_query_finish(conv_query *q);
/* The best entry for q of those not in skip (a mask of table indices,
 * conv_kernel_index); NULL: none (an element type or form no entry takes). */
const conv_kernel *conv_select(const conv_query *q, unsigned skip);
/* The fast-kernel algorithm conv_select's table gives q when only its
 * kernels/conv.h entries are asked (IM2COL: the op's im2col family). */
conv_algo conv_select_algo(const conv_query *q);
/* For a geometry alone (tests, the kernel bench): a query over d with
 * `requested` as SMELT_CONV (BF16: the weight's form is bf16), cached
 * prepared weights when `cached`, and conv_select_algo's answer. */
conv_algo conv_select_desc(const conv2d_desc *d, isa_level isa, int threads, conv_algo requested, bool cached);
/* A finished query for the 2-D geometry d alone: f32, weight form f32, no
 * SMELT_CONV; a session cache and a constant float32 W when cached_w. */
void conv_query_desc(conv_query *q, const conv2d_desc *d, isa_level isa, int threads, bool cached_w);
int conv_kernel_index(const conv_kernel *k);
/* The table, for tests and listings. */
const conv_kernel *conv_kernels_table(int *n);
const char *conv_wform_name(conv_wform f);
const char *conv_shape_name(conv_shape_class s);

#endif
