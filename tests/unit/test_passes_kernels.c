/* The kernels behind the fused ops: attention_f32 against a plain
 * softmax(QK^T)V in double, across block edges, strides, broadcasts, masks
 * and the edge cases (fully masked rows, no keys), its products also in
 * bf16; smelt.Gemm with transA and
 * the row-blocked activation path against MatMul/Gemm + ops. */
#include "check.h"
#include "kernels/attention.h"
#include "kernels/bf16dp.h"
#include "kernels/isa.h"
#include "op_harness.h"
#include "passes_util.h"

static uint64_t rng = 88172645463325252ull;
static float frand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)((rng >> 40) & 0xffff) / 32768.f - 1.f;
}

typedef struct attn_ref_case {
  int64_t B, H, Sq, Sk, D, Dv;
  bool causal, q_bsd;        /* q stored [B, Sq, H, D] (strided view) */
  bool k_bcast_h;            /* K has one head for all (stride 0) */
  int mask;                  /* 0 none, 1 additive [B,1,Sq,Sk], 2 bool [1,1,Sq,Sk],
                                3 additive [B,1,1,Sk] with -1e4 and -inf (padding masks),
                                4 bool [B,1,1,Sk] with a -inf fill */
  int64_t kv_group;          /* > 1: K and V have H / kv_group heads (GQA) */
  bool zero_empty;           /* zero_empty_rows */
} attn_ref_case;

/* One output row o[b,h,i,:] in double (Sk <= 512, Dv <= 256). */
static void ref_row(const attn_params *p, int64_t b, int64_t h, int64_t i, double *out, bool *nan) {
  double s[512], mx = -INFINITY, sum = 0;
  int64_t hk = p->kv_group > 1 ? h / p->kv_group : h;
  for (int64_t j = 0; j < p->Sk; j++) {
    double d = 0;
    for (int64_t c = 0; c < p->D; c++)
      d += (double)p->q[b * p->q_str[0] + h * p->q_str[1] + i * p->q_str[2] + c * p->q_str[3]] *
           p->k[b * p->k_str[0] + hk * p->k_str[1] + j * p->k_str[2] + c * p->k_str[3]];
    d *= p->scale;
    int64_t mo = b * p->mask_str[0] + h * p->mask_str[1] + i * p->mask_str[2] + j * p->mask_str[3];
    if (p->mask_kind == ATTN_MASK_ADD) d += ((const float *)p->mask)[mo];
    if (p->mask_kind == ATTN_MASK_BOOL && !((const uint8_t *)p->mask)[mo]) d = p->mask_fill;
    if (p->causal && j > i + p->Sk - p->Sq) d = -INFINITY;
    s[j] = d;
    if (d > mx) mx = d;
  }
  *nan = mx == -INFINITY && p->Sk > 0;
  for (int64_t j = 0; j < p->Sk; j++) sum += exp(s[j] - mx);
  for (int64_t e = 0; e < p->Dv; e++) {
    double acc = 0;
    for (int64_t j = 0; j < p->Sk; j++)
      acc += exp(s[j] - mx) / sum * p->v[b * p->v_str[0] + hk * p->v_str[1] + j * p->v_str[2] + e * p->v_str[3]];
    out[e] = p->Sk ? acc : 0;
  }
}

/* attn_params.bf16 for the cases run now, and the error they may show */
static bool g_bf16;
/* K and V time-major, [Sk, B, H, D] (the static KV cache's rows), for the cases run now */
static bool g_kv_tm;
static double g_worst_bf16;

static void run_case_threads(const attn_ref_case *c, int threads) {
  int64_t nq = c->B * c->H * c->Sq * c->D, nk = c->B * c->H * c->Sk * c->D, nv = c->B * c->H * c->Sk * c->Dv;
  int64_t no = c->B * c->H * c->Sq * c->Dv, nm = c->B * c->Sq * c->Sk + 1;
  float *q = malloc(sizeof(float) * (size_t)(nq + 1)), *k = malloc(sizeof(float) * (size_t)(nk + 1));
  float *v = malloc(sizeof(float) * (size_t)(nv + 1)), *o = malloc(sizeof(float) * (size_t)(no + 1));
  float *madd = malloc(sizeof(float) * (size_t)nm);
  uint8_t *mb = malloc((size_t)nm);
  for (int64_t i = 0; i < nq; i++) q[i] = frand();
  for (int64_t i = 0; i < nk; i++) k[i] = frand();
  for (int64_t i = 0; i < nv; i++) v[i] = frand();
  for (int64_t i = 0; i < nm; i++) {
    float u = frand();
    madd[i] = c->mask == 3 ? (u > 0.7f ? -1e4f : u > 0.6f ? -INFINITY : 0.f) : u > 0.8f ? -INFINITY : frand();
    mb[i] = frand() > -0.5f;
  }
  attn_params p = {.B = c->B, .H = c->H, .Sq = c->Sq, .Sk = c->Sk, .D = c->D, .Dv = c->Dv,
                   .q = q, .k = k, .v = v, .o = o, .scale = 1.f / sqrtf((float)c->D), .causal = c->causal,
                   .kv_group = c->kv_group, .zero_empty_rows = c->zero_empty, .bf16 = g_bf16};
  if (c->q_bsd) { /* [B, Sq, H, D] memory viewed as [B, H, Sq, D] */
    int64_t s[4] = {c->Sq * c->H * c->D, c->D, c->H * c->D, 1};
    memcpy(p.q_str, s, sizeof s);
  } else {
    int64_t s[4] = {c->H * c->Sq * c->D, c->Sq * c->D, c->D, 1};
    memcpy(p.q_str, s, sizeof s);
  }
  int64_t ks[4] = {c->H * c->Sk * c->D, c->k_bcast_h ? 0 : c->Sk * c->D, c->D, 1};
  int64_t vs[4] = {c->H * c->Sk * c->Dv, c->Sk * c->Dv, c->Dv, 1};
  if (g_kv_tm) {
    int64_t kt[4] = {c->H * c->D, c->k_bcast_h ? 0 : c->D, c->B * c->H * c->D, 1};
    int64_t vt[4] = {c->H * c->Dv, c->Dv, c->B * c->H * c->Dv, 1};
    memcpy(ks, kt, sizeof ks);
    memcpy(vs, vt, sizeof vs);
  }
  memcpy(p.k_str, ks, sizeof ks);
  memcpy(p.v_str, vs, sizeof vs);
  /* the output written transposed: [B, Sq, H, Dv] memory */
  int64_t os[4] = {c->Sq * c->H * c->Dv, c->Dv, c->H * c->Dv, 1};
  memcpy(p.o_str, os, sizeof os);
  if (c->mask == 1) {
    p.mask_kind = ATTN_MASK_ADD;
    p.mask = madd;
    int64_t ms[4] = {c->Sq * c->Sk, 0, c->Sk, 1};
    memcpy(p.mask_str, ms, sizeof ms);
  } else if (c->mask == 3) { /* one row per batch, broadcast over heads and queries */
    p.mask_kind = ATTN_MASK_ADD;
    p.mask = madd;
    int64_t ms[4] = {c->Sk, 0, 0, 1};
    memcpy(p.mask_str, ms, sizeof ms);
  } else if (c->mask == 4) {
    p.mask_kind = ATTN_MASK_BOOL;
    p.mask = mb;
    p.mask_fill = -INFINITY;
    int64_t ms[4] = {c->Sk, 0, 0, 1};
    memcpy(p.mask_str, ms, sizeof ms);
  } else if (c->mask == 2) {
    p.mask_kind = ATTN_MASK_BOOL;
    p.mask = mb;
    p.mask_fill = -3.f;
    int64_t ms[4] = {0, 0, c->Sk, 1};
    memcpy(p.mask_str, ms, sizeof ms);
  }
  smelt_pool *pool = NULL;
  CHECK_OK(pool_create(threads, &pool));
  CHECK_OK(attention_f32(pool, &p));
  double worst = 0;
  int bad_nan = 0;
  for (int64_t b = 0; b < c->B; b++)
    for (int64_t h = 0; h < c->H; h++)
      for (int64_t i = 0; i < c->Sq; i++) {
        double want_row[256];
        bool nan;
        ref_row(&p, b, h, i, want_row, &nan);
        for (int64_t e = 0; e < c->Dv; e++) {
          double want = want_row[e];
          float got = o[b * os[0] + h * os[1] + i * os[2] + e];
          if (nan && c->zero_empty) bad_nan += got != 0.f;
          else if (nan) bad_nan += !isnan(got);
          else if (!(fabs(got - want) <= worst)) worst = isnan(got) ? INFINITY : fabs(got - want);
        }
      }
  /* bf16: Q, K, P and V rounded to 8 bits (2^-9 relative each), the
   * output an average of |V| <= 1 */
  double tol = g_bf16 ? 1.5e-2 : 2e-5;
  if (g_bf16 && worst > g_worst_bf16) g_worst_bf16 = worst;
  if (worst > tol || bad_nan)
    fprintf(stderr, "attention%s B%lld H%lld Sq%lld Sk%lld D%lld Dv%lld, %d threads, ISA %s: max error %g, "
            "%d rows not NaN (zero)\n", g_bf16 ? " (bf16)" : "", (long long)c->B, (long long)c->H, (long long)c->Sq,
            (long long)c->Sk, (long long)c->D, (long long)c->Dv, threads, isa_name(isa_active()), worst, bad_nan);
  CHECK(worst <= tol && !bad_nan);
  pool_free(pool);
  free(q), free(k), free(v), free(o), free(madd), free(mb);
}

/* Every case on 1, 2 and 3 threads: the query block shrinks (64, 32, 16)
 * as threads outnumber batch x heads x blocks, so each size meets the
 * causal, masked and strided cases. */
static void run_case(const attn_ref_case *c) {
  for (int t = 1; t <= 3; t++) run_case_threads(c, t);
}

static void test_attention_query_block(void) {
  CHECK(attn_query_block(12, 128, 2) == 64); /* bert_base: 24 tasks already */
  CHECK(attn_query_block(4, 32, 2) == 16);   /* batch 1, 4 heads: 8 tasks */
  CHECK(attn_query_block(4, 32, 1) == 32);   /* no more tasks wanted; block no larger than Sq */
  CHECK(attn_query_block(1, 1, 64) == 16);   /* decode: never under 16 */
  CHECK(attn_query_block(2, 97, 2) == 32);
  CHECK(attn_query_block(2, 97, 3) == 16);
  CHECK(attn_query_block(64, 1000, 64) == 64);
}

static void test_attention_kernel(void) {
  test_attention_query_block();
  static const attn_ref_case cases[] = {
      {1, 1, 1, 1, 1, 1, false, false, false, 0, 1, false},
      {2, 3, 31, 33, 8, 5, false, true, false, 1, 1, false},   /* blocks of 32 and 64 straddled, Dv != D */
      {1, 2, 97, 130, 16, 16, true, false, true, 0, 1, false},  /* causal, end-aligned, shared K head */
      {1, 2, 100, 70, 4, 4, true, true, false, 0, 1, false},    /* Sq > Sk: the first rows see no key (NaN) */
      {2, 1, 40, 65, 3, 7, false, false, false, 2, 1, false},   /* bool mask with a finite fill */
      {1, 2, 64, 64, 64, 64, true, false, false, 1, 1, false},  /* causal + additive, full blocks */
      {1, 1, 3, 0, 4, 4, false, false, false, 0, 1, false},     /* no keys: zeros */
      {1, 3, 37, 37, 64, 64, true, true, false, 0, 1, false},   /* batch 1, few heads: blocks of 16, prime S */
      {1, 1, 1, 29, 64, 64, true, false, false, 1, 1, false},   /* a decode step: one query, causal + mask */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i]);
}

/* The row path (one query per head, attention.c's attn_row; the static KV
 * cache's decode steps) at every ISA level, K and V head-major and
 * time-major: head sizes off the vector (17, 40), Dv != D, a key, keys
 * split across 2 and 3 threads (at least 64 each, so 130 and 300 keys split
 * and 65 does not), more heads than a group takes (70 > 64), GQA, masks
 * (additive, padding with -1e4 and -inf, bool with a finite and a -inf
 * fill), a shared K head, and batches with every key masked (NaN, or zero
 * with zero_empty_rows, also when only some splits see no key). */
static void test_attention_row(void) {
  static const attn_ref_case cases[] = {
      /* B  H  Sq Sk  D    Dv   causal bsd  kbc    mask gqa zero_empty */
      {1, 12, 1, 192, 64, 64, true, false, false, 0, 1, false}, /* GPT-2 small */
      {2, 5, 1, 130, 40, 24, false, true, false, 1, 1, false},
      {1, 8, 1, 300, 128, 128, true, false, false, 3, 4, false},
      {1, 3, 1, 1, 16, 16, false, false, false, 0, 1, false},
      {3, 2, 1, 65, 17, 9, false, false, false, 4, 1, true},
      {4, 2, 1, 200, 32, 32, true, false, false, 4, 2, false},
      {1, 70, 1, 100, 8, 8, false, false, false, 0, 1, false},
      {1, 4, 1, 129, 64, 64, false, false, true, 2, 1, false},
  };
  static const isa_level levels[] = {ISA_SCALAR, ISA_AVX2, ISA_AVX512};
  for (int tm = 0; tm < 2; tm++) {
    g_kv_tm = tm;
    for (size_t l = 0; l < sizeof levels / sizeof *levels; l++) {
      isa_level prev = isa_cap_enter(levels[l]);
      for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i]);
      isa_cap_enter(prev);
    }
  }
  g_kv_tm = false;
}

/* The tiled path (kernels/attention_tile.h) at every ISA level (AVX-512
 * clamps to what the machine has): awkward lengths around its vectors (8 or
 * 16 queries), panels (16 or 32) and register tiles (6 keys, 6 columns),
 * head sizes 32..128, Dv != D, batches, head counts prime to the threads,
 * GQA, padding masks with -1e4 (2^-x underflow flushed) and -inf, the KV
 * cache's causal alignment and rows with no visible key. */
static void test_attention_tiled(void) {
  static const attn_ref_case cases[] = {
      /* B  H  Sq   Sk   D    Dv   causal bsd  kbc    mask gqa zero_empty */
      {1, 3, 1, 1, 32, 32, false, false, false, 0, 1, false},
      {2, 3, 3, 3, 64, 64, false, false, false, 1, 1, false},
      {1, 5, 17, 17, 80, 80, true, true, false, 0, 1, false},
      {2, 3, 65, 65, 96, 96, false, false, false, 3, 1, false},
      {1, 4, 130, 130, 128, 128, true, false, false, 2, 2, false},
      {1, 3, 197, 197, 64, 64, false, true, false, 3, 1, false},
      {1, 6, 33, 70, 32, 48, true, false, false, 1, 3, false},   /* KV cache: Sq < Sk, GQA 3, Dv > D */
      {2, 2, 50, 30, 32, 20, true, false, false, 0, 1, true},    /* Sq > Sk: empty rows give zeros */
      {1, 3, 17, 197, 64, 80, false, true, true, 3, 1, false},
      {1, 1, 65, 65, 128, 128, false, false, false, 1, 1, false},
      {3, 1, 9, 131, 16, 7, true, true, false, 2, 1, false},
      {4, 2, 24, 3, 32, 32, false, false, false, 4, 1, true},   /* some batches with every key masked */
      {2, 3, 70, 150, 64, 64, true, false, false, 4, 3, false},
  };
  static const isa_level levels[] = {ISA_SCALAR, ISA_AVX2, ISA_AVX512};
  for (size_t l = 0; l < sizeof levels / sizeof *levels; l++) {
    isa_level prev = isa_cap_enter(levels[l]);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i]);
    isa_cap_enter(prev);
  }
  /* the same cases with the products in bf16 (kernels/attention_bf16.h:
   * vdpbf16ps where the CPU has AVX512_BF16; elsewhere attn_params.bf16 is
   * ignored and the fp32 path meets the bound too); and under AVX2 the
   * flag must change nothing */
  g_bf16 = true;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i]);
  printf("attention with bf16 products: worst error %.3g (bound 1.5e-2)%s\n", g_worst_bf16,
         bf16dp_hw(isa_active()) ? "" : " -- no AVX512_BF16 here: the fp32 path ran");
  if (bf16dp_hw(isa_active())) CHECK(g_worst_bf16 > 1e-5); /* bf16 ran: its rounding shows */
  isa_level prev = isa_cap_enter(ISA_AVX2);
  g_worst_bf16 = 0;
  for (size_t i = 0; i < 3; i++) run_case(&cases[i]);
  CHECK(g_worst_bf16 <= 2e-5);
  isa_cap_enter(prev);
  g_bf16 = false;
}

/* smelt.Gemm with transA and a large M (row blocks + gelu) vs Gemm + Gelu. */
static void test_fused_gemm_transa(void) {
  int64_t M = 2500, K = 7, N = 130;
  tensor a = {0}, b = {0}, bias = {0};
  tensor_alloc(&a, SMELT_F32, 2, (int64_t[]){K, M});
  tensor_alloc(&b, SMELT_F32, 2, (int64_t[]){K, N});
  tensor_alloc(&bias, SMELT_F32, 1, &N);
  for (int64_t i = 0; i < K * M; i++) ((float *)a.data)[i] = frand();
  for (int64_t i = 0; i < K * N; i++) ((float *)b.data)[i] = frand();
  for (int64_t i = 0; i < N; i++) ((float *)bias.data)[i] = frand();
  ir_attr fa[] = {{.name = "transA", .type = IR_ATTR_INT, .i = 1},
                  {.name = "alpha", .type = IR_ATTR_FLOAT, .f = 0.75f},
                  {.name = "activation", .type = IR_ATTR_STRING, .s = "gelu", .s_len = 4}};
  ir_graph *g = ir_graph_new(NULL);
  int id;
  ir_graph_add_node(g, "f", "Gemm", "smelt", 3, 1, 3, &id);
  ir_node *n = &g->nodes[id];
  memcpy(n->attrs, fa, sizeof fa);
  n->op = ops_find("smelt", "Gemm");
  for (int i = 0; i < 3; i++) n->inputs[i] = i;
  n->outputs[0] = 3;
  tensor y = {0}, *in[] = {&a, &b, &bias}, *out[] = {&y};
  smelt_pool *pool = NULL;
  CHECK_OK(pool_create(2, &pool));
  CHECK_OK(node_run(g, id, in, out, pool, NULL, NULL));
  n->n_attrs = 0;
  ir_graph_free(g);
  /* the same through the ONNX ops */
  ir_attr ga[] = {{.name = "transA", .type = IR_ATTR_INT, .i = 1},
                  {.name = "alpha", .type = IR_ATTR_FLOAT, .f = 0.75f}};
  tensor z = {0}, w = {0}, *zo[] = {&z}, *zi[] = {&z}, *wo[] = {&w};
  CHECK_OK(harness_run("Gemm", 13, ga, 2, in, 3, zo, 1));
  CHECK_OK(harness_run("Gelu", 20, NULL, 0, zi, 1, wo, 1));
  compare_result cr;
  CHECK_OK(tensor_compare(&y, &w, 1e-5, 1e-5, &cr));
  CHECK(cr.ok && y.rank == 2 && y.dims[0] == M && y.dims[1] == N);
  tensor_release(&a), tensor_release(&b), tensor_release(&bias);
  tensor_release(&y), tensor_release(&z), tensor_release(&w);
  pool_free(pool);
}

int main(void) {
  test_attention_kernel();
  test_attention_tiled();
  test_attention_row();
  test_fused_gemm_transa();
  return test_report("test_passes_kernels");
}
