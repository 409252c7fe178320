/* The convolution kernel registry (ops/conv_registry.h): selection by
 * element type, weight form, ISA and shape class; an entry refused on an
 * ISA it cannot run (bf16 without AVX512_BF16 / AMX unless forced); no
 * entry for an element type none takes (NULL, and the op's clear error);
 * SMELT_CONV forcing an entry only where it applies; a declined entry
 * (skip mask) giving way to the next; in the cost tier, the cheapest
 * of the cost model's algorithms; and the weight form from W's declared
 * element type (ir/quant.h), else the node's precision mark. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "graph_builder.h"
#include "kernels/conv.h"
#include "kernels/conv_bf16.h"
#include "ops/conv_core.h"
#include "ops/conv_registry.h"
#include "smelt.h"

static conv2d_desc geom(int64_t C, int64_t M, int64_t G, int64_t H, int64_t k, int64_t s, int64_t pad) {
  int64_t O = (H + 2 * pad - k) / s + 1;
  return (conv2d_desc){1, C, H, H, M, G, k, k, O, O, s, s, 1, 1, pad, pad, 0, 0};
}

static const conv_kernel *sel(const conv2d_desc *d, isa_level isa, bool cached) {
  conv_query q;
  conv_query_desc(&q, d, isa, 2, cached);
  return conv_select(&q, 0);
}

static bool named(const conv_kernel *k, const char *part) { return k && strstr(k->name, part); }

static void shape_classes(void) {
  conv2d_desc pw = geom(32, 64, 1, 56, 1, 1, 0), pws = geom(64, 128, 1, 56, 1, 2, 0);
  conv2d_desc g3 = geom(64, 64, 1, 56, 3, 1, 1), s3 = geom(64, 128, 1, 56, 3, 2, 1);
  conv2d_desc dw = geom(32, 32, 32, 56, 3, 1, 1), gr = geom(64, 64, 8, 28, 3, 1, 1);
  const conv2d_desc *all[] = {&pw, &pws, &g3, &s3, &gr, &dw};
  conv_shape_class want[] = {CONV_SHAPE_POINTWISE, CONV_SHAPE_POINTWISE_STRIDED, CONV_SHAPE_GENERAL,
                             CONV_SHAPE_STRIDED, CONV_SHAPE_GROUPED, CONV_SHAPE_DEPTHWISE};
  for (int i = 0; i < 6; i++) {
    conv_query q;
    conv_query_desc(&q, all[i], ISA_SCALAR, 1, true);
    CHECK(q.shape == want[i]);
  }
  /* each class on an entry that takes it */
  CHECK(named(sel(&pw, ISA_SCALAR, true), "1x1 on X in place, W packed once"));
  CHECK(named(sel(&pw, ISA_SCALAR, false), "1x1 on X in place, W as stored"));
  CHECK(named(sel(&pws, ISA_SCALAR, true), "subsampled"));
  CHECK(!named(sel(&pws, ISA_SCALAR, false), "subsampled")); /* it needs the session's cache */
  /* patch convs (kernel == stride, no pads): space-to-depth, then 1x1;
   * not with a pad, an overlap or a dilation, nor without the cache */
  conv2d_desc p2 = geom(96, 192, 1, 56, 2, 2, 0), p16 = geom(3, 768, 1, 224, 16, 16, 0);
  conv2d_desc p2pad = geom(96, 192, 1, 56, 2, 2, 1), ov = geom(96, 192, 1, 56, 3, 2, 0), p2d = p2;
  p2d.dh = p2d.dw = 2;
  CHECK(named(sel(&p2, ISA_AVX512, true), "patch"));
  CHECK(named(sel(&p16, ISA_AVX2, true), "patch"));
  CHECK(!named(sel(&p2, ISA_AVX512, false), "patch"));
  CHECK(!named(sel(&p2pad, ISA_AVX512, true), "patch"));
  CHECK(!named(sel(&ov, ISA_AVX512, true), "patch"));
  CHECK(!named(sel(&p2d, ISA_AVX512, true), "patch"));
  CHECK(sel(&dw, ISA_SCALAR, true)->algo == CONV_ALGO_DEPTHWISE);
  /* Winograd only over prepared weights kept (the transform costs more than one run saves) */
  conv_algo a = sel(&g3, ISA_AVX512, true)->algo;
  CHECK(a == CONV_ALGO_WINO2 || a == CONV_ALGO_WINO4);
  a = sel(&g3, ISA_AVX512, false)->algo;
  CHECK(a != CONV_ALGO_WINO2 && a != CONV_ALGO_WINO4);
  /* a 3-D conv: the n-d class, only the im2col family and the 1x1 routes take it */
  conv_query q;
  conv_query_desc(&q, &g3, ISA_AVX512, 2, true);
  q.nsp = 3;
  conv_query_finish(&q);
  CHECK(q.shape == CONV_SHAPE_ND);
  CHECK(named(conv_select(&q, 0), "im2col + GEMM"));
}

/* Element types: f64 has its reference loop, int8 activations no entry. */
static void element_types(void) {
  conv2d_desc g3 = geom(16, 16, 1, 8, 3, 1, 1);
  conv_query q;
  conv_query_desc(&q, &g3, ISA_SCALAR, 1, true);
  q.x = q.w = q.y = SMELT_F64;
  const conv_kernel *k = conv_select(&q, 0);
  CHECK(k && k->x == SMELT_F64 && named(k, "f64 reference loop"));
  q.x = q.w = q.y = SMELT_I8;
  CHECK(conv_select(&q, 0) == NULL);
  CHECK(conv_select_algo(&q) == CONV_ALGO_IM2COL); /* the algorithm question: none, the op's own */
}

/* Every entry: a run and a description; those the cost model ranks have a
 * cost; bf16 needs a feature its level does not imply. */
static void table(void) {
  int n = 0;
  const conv_kernel *t = conv_kernels_table(&n);
  CHECK(n >= 12);
  for (int i = 0; i < n; i++) {
    CHECK(t[i].run && t[i].describe && t[i].name && t[i].shapes);
    CHECK(conv_kernel_index(&t[i]) == i);
    if (t[i].tier == CONV_TIER_COST && t[i].x == SMELT_F32) CHECK(t[i].cost != NULL);
    if (t[i].algo == CONV_ALGO_BF16) CHECK(t[i].usable && t[i].wforms == CONV_WF(CONV_W_BF16));
  }
}

/* bf16: refused at a level without AVX512_BF16 or AMX (usable), taken
 * everywhere when forced (SMELT_CONV_BF16=1), never when off. */
static void bf16_isa(void) {
  conv2d_desc s3 = geom(64, 128, 1, 56, 3, 2, 1);
  conv_query q;
  conv_query_desc(&q, &s3, ISA_AVX2, 2, true);
  q.wf = CONV_W_BF16;
  unsetenv("SMELT_CONV_BF16");
  conv_query_finish(&q);
  CHECK(conv_select(&q, 0)->algo != CONV_ALGO_BF16); /* AVX2 has no bf16 dot product */
  setenv("SMELT_CONV_BF16", "1", 1);
  q.isa = ISA_SCALAR;
  conv_query_finish(&q);
  CHECK(conv_select(&q, 0)->algo == CONV_ALGO_BF16);
  q.wf = CONV_W_F32; /* an f32 weight never runs in bf16 */
  conv_query_finish(&q);
  CHECK(conv_select(&q, 0)->algo != CONV_ALGO_BF16);
  setenv("SMELT_CONV_BF16", "0", 1);
  q.wf = CONV_W_BF16;
  q.isa = ISA_AVX512;
  conv_query_finish(&q);
  CHECK(conv_select(&q, 0)->algo != CONV_ALGO_BF16);
  unsetenv("SMELT_CONV_BF16");
}

/* SMELT_CONV: the named entry where it applies, the usual choice elsewhere. */
static void forcing(void) {
  conv2d_desc g3 = geom(64, 64, 1, 56, 3, 1, 1), pw = geom(256, 256, 1, 14, 1, 1, 0);
  CHECK(conv_select_desc(&g3, ISA_AVX2, 2, CONV_ALGO_DIRECT, true) == CONV_ALGO_DIRECT);
  CHECK(conv_select_desc(&g3, ISA_AVX2, 2, CONV_ALGO_IM2COL, true) == CONV_ALGO_IM2COL);
  conv_algo w = conv_select_desc(&g3, ISA_AVX2, 2, CONV_ALGO_WINOGRAD, false);
  CHECK(w == CONV_ALGO_WINO2 || w == CONV_ALGO_WINO4); /* forced: cached or not */
  CHECK(conv_select_desc(&pw, ISA_AVX2, 2, CONV_ALGO_WINOGRAD, true) ==
        conv_select_desc(&pw, ISA_AVX2, 2, CONV_ALGO_AUTO, true)); /* Winograd does not apply to a 1x1 */
  conv_query q;
  conv_query_desc(&q, &pw, ISA_AVX2, 2, true);
  q.forced = CONV_ALGO_POINTWISE;
  conv_query_finish(&q);
  CHECK(named(conv_select(&q, 0), "1x1 on X in place"));
}

/* A declined entry (no cache or memory for its weights) gives way to the next. */
static void skipping(void) {
  conv2d_desc g3 = geom(64, 64, 1, 56, 3, 1, 1);
  conv_query q;
  conv_query_desc(&q, &g3, ISA_AVX512, 2, true);
  const conv_kernel *first = conv_select(&q, 0);
  const conv_kernel *next = conv_select(&q, 1u << conv_kernel_index(first));
  CHECK(first && next && next != first);
  CHECK(next->tier >= first->tier);
}

/* The cost tier takes the cheapest of the cost model's algorithms. */
static void cheapest(void) {
  conv2d_desc shapes[] = {geom(64, 64, 1, 56, 3, 1, 1), geom(128, 128, 1, 28, 3, 2, 1),
                          geom(256, 256, 1, 14, 3, 1, 1), geom(3, 64, 1, 224, 7, 2, 3),
                          geom(512, 512, 1, 7, 3, 1, 1)};
  static const conv_algo algos[] = {CONV_ALGO_IM2COL, CONV_ALGO_DIRECT, CONV_ALGO_WINO2, CONV_ALGO_WINO4,
                                    CONV_ALGO_DIRECT_CV};
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
    for (int t = 1; t <= 4; t *= 2)
      for (isa_level isa = ISA_SCALAR; isa <= ISA_AVX512; isa++) {
        conv_query q;
        conv_query_desc(&q, &shapes[i], isa, t, true);
        const conv_kernel *k = conv_select(&q, 0);
        if (!k || k->tier != CONV_TIER_COST) continue; /* a route of a lower tier */
        double best = -1;
        conv_algo b = CONV_ALGO_IM2COL;
        for (int a = 0; a < 5; a++) {
          if (!conv2d_supports(&shapes[i], algos[a])) continue;
          double c = conv2d_cost(&shapes[i], isa, t, algos[a]);
          if (best < 0 || c < best) best = c, b = algos[a];
        }
        CHECK(k->algo == b);
      }
}

/* What conv_op_describe says of g's only node (a Conv), as a compiled run
 * would choose (shapes only, W's data). */
static void describe(const ir_graph *g, char *buf, size_t n) {
  const ir_node *nd = &g->nodes[0];
  const ir_value *xv = &g->values[nd->inputs[0]], *wv = &g->values[nd->inputs[1]];
  tensor x, w, y, *in[2] = {&x, &w}, *out[1] = {&y};
  tensor_view(&x, xv->dtype, xv->rank, xv->dims, NULL);
  tensor_view(&w, wv->dtype, wv->rank, wv->dims, wv->constant->data);
  memset(&y, 0, sizeof y);
  op_ctx c = {.graph = g, .node = nd, .opset = nd->opset, .n_in = 2, .n_out = 1, .in = in, .out = out,
              .static_infer = true};
  CHECK_OK(conv_op_describe(&c, buf, n));
}

/* The weight's form: W declared bf16 (ir/quant.h) takes the bf16 kernel
 * with no precision mark and --explain names the declared type; without a
 * declaration, the mark decides as before; with neither, f32. */
static void declared_weight(void) {
  static float wd[32 * 32 * 9];
  for (int i = 0; i < 32 * 32 * 9; i++) wd[i] = (float)((i * 37) % 19) / 19.f - 0.5f;
  gb b;
  gb_init(&b, 17);
  int x = gb_input(&b, "x", SMELT_F32, 4, (const int64_t[]){1, 32, 8, 8});
  int W = gb_const(&b, SMELT_F32, 4, (const int64_t[]){32, 32, 3, 3}, wd);
  gb_output(&b, gb_node(&b, "Conv", 2, (const int[]){x, W}, NULL, 0));
  CHECK_OK(gb_finish(&b));
  setenv("SMELT_CONV_BF16", "1", 1); /* the bf16 kernel wherever the form is bf16 */
  char buf[512];
  b.g->values[W].quant = ir_quant_float(IR_QUANT_BF16);
  describe(b.g, buf, sizeof buf);
  CHECK(strstr(buf, ", weight bf16 (rounded at prepare): bf16 x bf16 -> f32") != NULL);
  memset(&b.g->values[W].quant, 0, sizeof b.g->values[W].quant);
  describe(b.g, buf, sizeof buf);
  CHECK(!strstr(buf, "bf16"));
  ir_attr mark = {.name = "precision", .type = IR_ATTR_STRING, .s = "bf16", .s_len = 4};
  ir_node *nd = &b.g->nodes[0];
  nd->attrs = &mark; /* the node's only attribute, for this look */
  nd->n_attrs = 1;
  describe(b.g, buf, sizeof buf);
  CHECK(strstr(buf, "bf16 x bf16 -> f32") && !strstr(buf, "weight bf16"));
  nd->attrs = NULL;
  nd->n_attrs = 0;
  unsetenv("SMELT_CONV_BF16");
  gb_free(&b);
}

int main(void) {
  unsetenv("SMELT_CONV");
  shape_classes();
  element_types();
  table();
  bf16_isa();
  forcing();
  skipping();
  cheapest();
  declared_weight();
  return test_report("test_conv_registry");
}
