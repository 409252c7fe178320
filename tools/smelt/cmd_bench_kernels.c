/* smelt bench-kernels: the machine's ceilings and each fast kernel on a fixed
 * list of shapes, as GFLOP/s (or GB/s for memory-bound kernels) and a
 * fraction of the ceiling.  sgemm is shown beside OpenBLAS's cblas_sgemm
 * when libopenblas can be dlopen'ed (no link dependency); vmath beside
 * libm's scalar functions.
 *
 * Conv GFLOP/s count the direct convolution's multiply-adds, so Winograd's
 * "effective" rate can pass the FMA peak.  Attention counts 4 B H Sq Sk D
 * (the two matrix products; half of it when causal).
 *
 * Each kernel: two warm-up runs, then runs until ~0.25 s (at least 5, at
 * most 200); the median is reported.  Conv layers run through the Conv op
 * with a session-style weight cache, once per algorithm (SMELT_CONV is set
 * around each, as a user would), so the numbers are what a model gets. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "kernels/attention.h"
#include "kernels/ceiling.h"
#include "kernels/conv.h"
#include "kernels/gemm.h"
#include "kernels/isa.h"
#include "kernels/vmath.h"
#include "ops/conv_registry.h"
#include "ops/op.h"
#include "ops/node_run.h"
#include "ops/op_cache.h"
#include "util/err.h"

typedef struct bk_row {
  char kernel[48], shape[96];
  /* < 0: not measured.  ref_*: the comparison (OpenBLAS, libm).  best: from
   * the fastest run instead of the median (the likeliest undisturbed one on
   * a shared machine) */
  double gflops, ref_gflops, gbs, gelems, ref_gelems, best_ratio;
  const char *note;
} bk_row;

typedef struct bk {
  smelt_pool *pool;
  int threads;
  double min_seconds;
  double peak, stream;
  const char *filter;
  bk_row *rows;
  int n_rows, cap_rows;
} bk;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median seconds of fn(ctx) after two warm-up calls; *best_ratio (if not
 * NULL) gets median / fastest. */
static double bk_time2(const bk *b, void (*fn)(void *), void *ctx, double *best_ratio) {
  fn(ctx);
  fn(ctx);
  double t[200], start = cli_now_s();
  int n = 0;
  while (n < 200 && (n < 5 || cli_now_s() - start < b->min_seconds)) {
    double t0 = cli_now_s();
    fn(ctx);
    t[n++] = cli_now_s() - t0;
  }
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  double med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
  if (best_ratio) *best_ratio = med / t[0];
  return med;
}

static double last_best_ratio;
static double bk_time(const bk *b, void (*fn)(void *), void *ctx) {
  return bk_time2(b, fn, ctx, &last_best_ratio);
}

static bool bk_want(const bk *b, const char *kernel, const char *shape) {
  return !b->filter || strstr(kernel, b->filter) || strstr(shape, b->filter);
}

static const char *col(char *buf, size_t n, const char *fmt, double v) {
  if (v >= 0 && isfinite(v)) snprintf(buf, n, fmt, v);
  else snprintf(buf, n, "-");
  return buf;
}

static void bk_add(bk *b, const char *kernel, const char *shape, bk_row r) {
  if (b->n_rows == b->cap_rows) {
    int cap = b->cap_rows ? 2 * b->cap_rows : 64;
    bk_row *rows = realloc(b->rows, sizeof *rows * (size_t)cap);
    if (!rows) return;
    b->rows = rows, b->cap_rows = cap;
  }
  snprintf(r.kernel, sizeof r.kernel, "%s", kernel);
  snprintf(r.shape, sizeof r.shape, "%s", shape);
  b->rows[b->n_rows++] = r;
  char c1[32], c2[32], c3[32], c4[32], c5[32], c6[32], c7[32];
  double main_rate = r.gflops >= 0 ? r.gflops : r.gbs;
  printf("%-22s %-34s %8s %6s %8s %7s %7s %7s %7s  %s\n", r.kernel, r.shape,
         col(c1, sizeof c1, "%.1f", r.gflops),
         col(c2, sizeof c2, "%.1f%%", r.gflops >= 0 ? 100 * r.gflops / b->peak : -1),
         col(c3, sizeof c3, "%.1f", r.ref_gflops), col(c4, sizeof c4, "%.1f", r.gbs),
         col(c5, sizeof c5, "%.2f", r.gelems), col(c6, sizeof c6, "%.2f", r.ref_gelems),
         col(c7, sizeof c7, "%.1f", main_rate >= 0 ? main_rate * r.best_ratio : -1),
         r.note ? r.note : "");
  fflush(stdout);
}

/* a row for the kernel timed last (its fastest/median ratio) */
static bk_row row0(void) {
  return (bk_row){.gflops = -1, .ref_gflops = -1, .gbs = -1, .gelems = -1, .ref_gelems = -1,
                  .best_ratio = last_best_ratio};
}

/* ---- sgemm ---- */

typedef void (*cblas_sgemm_fn)(int, int, int, int, int, int, float, const float *, int,
                               const float *, int, float, float *, int);

typedef struct gemm_ctx {
  smelt_pool *pool;
  int64_t M, N, K;
  float *A, *B, *C;
  cblas_sgemm_fn blas;
  smelt_status st; /* of the last gemm_f32 call */
} gemm_ctx;

static void run_gemm(void *v) {
  gemm_ctx *g = v;
  g->st = gemm_f32(g->pool, false, false, g->M, g->N, g->K, 1.f, g->A, g->K, g->B, g->N, 0.f, g->C, g->N);
}

static void run_blas(void *v) {
  gemm_ctx *g = v; /* CblasRowMajor = 101, CblasNoTrans = 111 */
  g->blas(101, 111, 111, (int)g->M, (int)g->N, (int)g->K, 1.f, g->A, (int)g->K, g->B, (int)g->N,
          0.f, g->C, (int)g->N);
}

static float *bk_rand(int64_t n) {
  float *p = tensor_data_alloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  uint64_t s = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
  for (int64_t i = 0; p && i < n; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = (float)((double)(s >> 11) / (double)(1ull << 53) * 2 - 1);
  }
  return p;
}

static void *open_blas(int threads) {
  static const char *const names[] = {"libopenblas.so.0", "libopenblas.so",
                                      "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) continue;
    void (*set)(int) = (void (*)(int))dlsym(h, "openblas_set_num_threads");
    if (set) set(threads);
    return h;
  }
  return NULL;
}

static void bench_gemm_shape(bk *b, cblas_sgemm_fn blas, int64_t M, int64_t K, int64_t N,
                             const char *what) {
  char shape[96];
  snprintf(shape, sizeof shape, "%s %lldx%lldx%lld", what, (long long)M, (long long)K, (long long)N);
  if (!bk_want(b, "sgemm", shape)) return;
  gemm_ctx g = {b->pool, M, N, K, bk_rand(M * K), bk_rand(K * N), bk_rand(M * N), blas, SMELT_OK};
  if (g.A && g.B && g.C) {
    double flops = 2.0 * M * N * K;
    double ratio, t = bk_time2(b, run_gemm, &g, &ratio);
    double tr = blas ? bk_time2(b, run_blas, &g, NULL) : -1;
    bk_row r = row0();
    r.best_ratio = ratio;
    r.gflops = flops / t * 1e-9;
    r.ref_gflops = tr > 0 ? flops / tr * 1e-9 : -1;
    r.note = g.st ? "gemm_f32 refused its arguments: not timed" : blas ? "ref: OpenBLAS cblas_sgemm" : "OpenBLAS not found";
    bk_add(b, "sgemm", shape, r);
  }
  tensor_data_free(g.A), tensor_data_free(g.B), tensor_data_free(g.C);
}

static void bench_gemms(bk *b) {
  void *h = open_blas(b->threads);
  cblas_sgemm_fn blas = h ? (cblas_sgemm_fn)dlsym(h, "cblas_sgemm") : NULL;
  for (int64_t n = 64; n <= 2048; n *= 2) bench_gemm_shape(b, blas, n, n, n, "square");
  bench_gemm_shape(b, blas, 128, 768, 3072, "MxKxN");
  bench_gemm_shape(b, blas, 1, 768, 768, "MxKxN");
  bench_gemm_shape(b, blas, 1, 768, 50257, "MxKxN");
  if (h) dlclose(h);
}

/* ---- one op in a one-node graph (weights as initializers, a node cache) ---- */

typedef struct bk_node {
  ir_graph *g;
  int id;
  tensor *in[3];
  tensor out[1];
  op_cache cache;
  smelt_pool *pool;
  smelt_status st;
} bk_node;

/* in[i] with is_const[i] become initializers owned by the graph. */
static smelt_status bk_node_make(bk_node *n, const char *op, const ir_attr *attrs, int n_attrs,
                                 tensor **in, const bool *is_const, int n_in) {
  memset(n, 0, sizeof *n);
  n->g = ir_graph_new(NULL);
  if (!n->g) return err_nomem("graph", 0);
  TRY(ir_graph_add_node(n->g, op, op, "", n_in, 1, n_attrs, &n->id));
  ir_node *nd = &n->g->nodes[n->id];
  if (n_attrs) memcpy(nd->attrs, attrs, sizeof *attrs * (size_t)n_attrs);
  nd->opset = 17;
  nd->op = ops_find("", op);
  char name[16];
  for (int i = 0; i <= n_in; i++) {
    int v;
    snprintf(name, sizeof name, "v%d", i);
    TRY(ir_graph_add_value(n->g, name, &v));
    if (i == n_in) nd->outputs[0] = v;
    else nd->inputs[i] = v;
    if (i < n_in && is_const[i]) {
      n->g->values[v].flags |= IR_VALUE_INITIALIZER;
      n->g->values[v].constant = in[i];
    }
    if (i < n_in) n->in[i] = in[i];
  }
  return SMELT_OK;
}

static void bk_node_free(bk_node *n) {
  if (!n->g) return;
  op_cache_free_all(&n->cache, 1);
  tensor_release(&n->out[0]);
  n->g->nodes[n->id].n_attrs = 0; /* borrowed */
  ir_graph_free(n->g);              /* frees the initializers */
}

static void run_node(void *v) {
  bk_node *n = v;
  tensor_release(&n->out[0]);
  tensor *out[1] = {&n->out[0]};
  smelt_status s = node_run_cached(n->g, n->id, n->in, out, n->pool, NULL, NULL, &n->cache);
  if (s && !n->st) n->st = s;
}

/* ---- conv ---- */

typedef struct conv_shape {
  const char *name;
  int64_t C, H, M, k, s;
} conv_shape;

static const conv_shape conv_shapes[] = {
    {"r18 conv1", 3, 224, 64, 7, 2},        {"r18 l1 3x3", 64, 56, 64, 3, 1},
    {"r18 l2 3x3", 128, 28, 128, 3, 1},     {"r18 l3 3x3", 256, 14, 256, 3, 1},
    {"r18 l4 3x3", 512, 7, 512, 3, 1},      {"r18 l2 3x3 s2", 64, 56, 128, 3, 2},
    {"r18 l2 1x1 s2", 64, 56, 128, 1, 2},   {"r50 l1 1x1 64>256", 64, 56, 256, 1, 1},
    {"r50 l1 1x1 256>64", 256, 56, 64, 1, 1}, {"r50 l2 1x1 512>128", 512, 28, 128, 1, 1},
    {"r50 l3 1x1 1024>256", 1024, 14, 256, 1, 1}, {"r50 l4 1x1 2048>512", 2048, 7, 512, 1, 1},
    {"mbv2 dw 3x3 144", 144, 56, 144, 3, 1}, {"mbv2 dw 3x3 s2 144", 144, 56, 144, 3, 2},
};

static void bench_conv_algo(bk *b, const conv_shape *cs, conv_algo algo, bool dw) {
  int64_t G = dw ? cs->C : 1, pad = cs->k / 2, OH = (cs->H + 2 * pad - cs->k) / cs->s + 1;
  int64_t xd[4] = {1, cs->C, cs->H, cs->H}, wd[4] = {cs->M, cs->C / G, cs->k, cs->k}, bd[1] = {cs->M};
  int64_t kern[2] = {cs->k, cs->k}, str[2] = {cs->s, cs->s}, pads[4] = {pad, pad, pad, pad};
  ir_attr attrs[4] = {{.name = "kernel_shape", .type = IR_ATTR_INTS, .n = 2, .ints = kern},
                      {.name = "strides", .type = IR_ATTR_INTS, .n = 2, .ints = str},
                      {.name = "pads", .type = IR_ATTR_INTS, .n = 4, .ints = pads},
                      {.name = "group", .type = IR_ATTR_INT, .i = G}};
  tensor *x = NULL, *w = NULL, *bias = NULL;
  bk_node n = {0};
  if (tensor_new(&x, SMELT_F32, 4, xd) || tensor_new(&w, SMELT_F32, 4, wd) ||
      tensor_new(&bias, SMELT_F32, 1, bd)) {
    tensor_free(x), tensor_free(w), tensor_free(bias);
    return;
  }
  float *px = bk_rand(tensor_numel(x)), *pw = bk_rand(tensor_numel(w));
  if (px && pw) {
    memcpy(x->data, px, x->nbytes);
    memcpy(w->data, pw, w->nbytes);
  }
  tensor_data_free(px), tensor_data_free(pw);
  tensor *in[3] = {x, w, bias};
  bool is_const[3] = {false, true, true};
  if (!bk_node_make(&n, "Conv", attrs, 4, in, is_const, 3)) {
    w = bias = NULL; /* the graph owns them now */
    n.pool = b->pool;
    setenv("SMELT_CONV", conv_algo_name(algo), 1);
    double t = bk_time(b, run_node, &n);
    unsetenv("SMELT_CONV");
    char kernel[48], shape[96];
    conv2d_desc d = {1, cs->C, cs->H, cs->H, cs->M, G, cs->k, cs->k, OH, OH, cs->s, cs->s, 1, 1, pad, pad, 0, 0};
    snprintf(kernel, sizeof kernel, "conv_%s", conv_algo_name(algo));
    conv_algo chosen = conv_select_desc(&d, isa_active(), b->threads, algo, true);
    if (algo == CONV_ALGO_AUTO)
      snprintf(kernel, sizeof kernel, "conv_auto(%s)", conv_algo_name(chosen));
    snprintf(shape, sizeof shape, "%s %lldx%lldx%lld>%lld", cs->name, (long long)cs->C,
             (long long)cs->H, (long long)cs->H, (long long)cs->M);
    double flops = 2.0 * cs->M * OH * OH * (double)(cs->C / G) * cs->k * cs->k;
    bk_row r = row0();
    if (n.st) r.note = "failed";
    else r.gflops = flops / t * 1e-9;
    if (chosen == CONV_ALGO_WINO2 || chosen == CONV_ALGO_WINO4)
      r.note = "effective: direct-conv flop count";
    bk_add(b, kernel, shape, r);
  }
  bk_node_free(&n);
  tensor_free(x), tensor_free(w), tensor_free(bias);
}

static void bench_convs(bk *b) {
  for (size_t i = 0; i < sizeof conv_shapes / sizeof *conv_shapes; i++) {
    const conv_shape *cs = &conv_shapes[i];
    bool dw = !strncmp(cs->name, "mbv2 dw", 7);
    if (!bk_want(b, "conv", cs->name)) continue;
    conv2d_desc d = {1, cs->C, cs->H, cs->H, cs->M, dw ? cs->C : 1, cs->k, cs->k, 1, 1, cs->s, cs->s, 1, 1, 0, 0, 0, 0};
    static const conv_algo algos[] = {CONV_ALGO_AUTO, CONV_ALGO_IM2COL, CONV_ALGO_DIRECT,
                                      CONV_ALGO_WINO2, CONV_ALGO_WINO4};
    for (size_t a = 0; a < sizeof algos / sizeof *algos; a++)
      if (algos[a] == CONV_ALGO_AUTO || conv2d_supports(&d, algos[a]))
        bench_conv_algo(b, cs, algos[a], dw);
  }
}

/* ---- pooling ---- */

static void bench_pool(bk *b, const char *op, int64_t C, int64_t H, bool global) {
  char shape[96];
  snprintf(shape, sizeof shape, "%lldx%lldx%lld%s", (long long)C, (long long)H, (long long)H,
           global ? "" : " 3x3 s2 p1");
  if (!bk_want(b, op, shape)) return;
  int64_t xd[4] = {1, C, H, H}, kern[2] = {3, 3}, str[2] = {2, 2}, pads[4] = {1, 1, 1, 1};
  ir_attr attrs[3] = {{.name = "kernel_shape", .type = IR_ATTR_INTS, .n = 2, .ints = kern},
                      {.name = "strides", .type = IR_ATTR_INTS, .n = 2, .ints = str},
                      {.name = "pads", .type = IR_ATTR_INTS, .n = 4, .ints = pads}};
  tensor *x = NULL;
  if (tensor_new(&x, SMELT_F32, 4, xd)) return;
  float *px = bk_rand(tensor_numel(x));
  if (px) memcpy(x->data, px, x->nbytes);
  tensor_data_free(px);
  bk_node n;
  bool is_const[1] = {false};
  if (!bk_node_make(&n, op, attrs, global ? 0 : 3, &x, is_const, 1)) {
    n.pool = b->pool;
    double t = bk_time(b, run_node, &n);
    double bytes = (double)x->nbytes + (double)n.out[0].nbytes;
    bk_row r = row0();
    if (n.st) r.note = "failed";
    else r.gbs = bytes / t * 1e-9;
    bk_add(b, op, shape, r);
  }
  bk_node_free(&n);
  tensor_free(x);
}

/* ---- vmath, softmax, layernorm ---- */

typedef struct vm_ctx {
  const vmath_kernels *k;
  vmath_op op;
  float *x, *y, *scale, *bias;
  int64_t n, rows;
} vm_ctx;

static void run_vmath(void *v) {
  vm_ctx *c = v;
  c->k->op[c->op](c->x, c->y, c->n);
}

static void run_libm(void *v) {
  vm_ctx *c = v;
  for (int64_t i = 0; i < c->n; i++) {
    float x = c->x[i];
    switch (c->op) {
      case VMATH_EXP: c->y[i] = expf(x); break;
      case VMATH_ERF: c->y[i] = erff(x); break;
      case VMATH_TANH: c->y[i] = tanhf(x); break;
      case VMATH_SIGMOID: c->y[i] = 1.f / (1.f + expf(-x)); break;
      case VMATH_GELU_ERF: c->y[i] = 0.5f * x * (1.f + erff(x * 0.70710678f)); break;
      default: c->y[i] = 0.5f * x * (1.f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
    }
  }
}

static void run_softmax(void *v) {
  vm_ctx *c = v;
  for (int64_t r = 0; r < c->rows; r++) c->k->softmax_row(c->x + r * c->n, c->y + r * c->n, c->n);
}

static void run_layernorm(void *v) {
  vm_ctx *c = v;
  for (int64_t r = 0; r < c->rows; r++)
    c->k->layernorm_row(c->x + r * c->n, c->y + r * c->n, c->n, c->scale, c->bias, 1e-5f, NULL, NULL);
}

/* A row kernel (run) over rows x n floats in and out, on ISA isa. */
static void bench_rows(bk *b, const char *kernel, void (*run)(void *), vm_ctx *c, int64_t rows,
                       int64_t n, int isa) {
  char shape[96];
  c->rows = rows, c->n = n;
  snprintf(shape, sizeof shape, "%lld rows x %lld, %s, 1 thread", (long long)rows, (long long)n,
           isa_name((isa_level)isa));
  if (!bk_want(b, kernel, shape)) return;
  double t = bk_time(b, run, c);
  bk_row r = row0();
  r.gbs = 8.0 * rows * n / t * 1e-9;
  r.gelems = rows * n / t * 1e-9;
  bk_add(b, kernel, shape, r);
}

static void bench_vmath(bk *b) {
  int64_t n = 1 << 18; /* 1 MiB in, 1 MiB out: cache-resident, so compute is measured */
  vm_ctx c = {.x = bk_rand(n), .y = bk_rand(n), .scale = bk_rand(768), .bias = bk_rand(768), .n = n};
  for (int64_t i = 0; c.x && i < n; i++) c.x[i] *= 8; /* [-8, 8) */
  for (int isa = (int)isa_detect(); c.x && c.y && isa >= 0; isa--) {
    c.k = vmath_get((isa_level)isa);
    char kernel[48], shape[96];
    for (int op = 0; op < VMATH_OP_COUNT; op++) {
      snprintf(kernel, sizeof kernel, "vmath_%s", vmath_op_name((vmath_op)op));
      snprintf(shape, sizeof shape, "%lld floats, %s, 1 thread", (long long)n, isa_name((isa_level)isa));
      if (!bk_want(b, kernel, shape)) continue;
      c.op = (vmath_op)op;
      double ratio, t = bk_time2(b, run_vmath, &c, &ratio), tl = bk_time2(b, run_libm, &c, NULL);
      bk_row r = row0();
      r.best_ratio = ratio;
      r.gbs = 8.0 * n / t * 1e-9;
      r.gelems = n / t * 1e-9;
      r.ref_gelems = n / tl * 1e-9;
      r.note = "ref: libm, scalar";
      bk_add(b, kernel, shape, r);
    }
    bench_rows(b, "softmax_row", run_softmax, &c, 12 * 128, 128, isa);
    bench_rows(b, "layernorm_row", run_layernorm, &c, 128, 768, isa);
    c.n = n;
  }
  tensor_data_free(c.x), tensor_data_free(c.y), tensor_data_free(c.scale), tensor_data_free(c.bias);
}

/* ---- attention ---- */

typedef struct attn_ctx {
  smelt_pool *pool;
  attn_params p;
  smelt_status st;
} attn_ctx;

static void run_attn(void *v) {
  attn_ctx *a = v;
  smelt_status s = attention_f32(a->pool, &a->p);
  if (s && !a->st) a->st = s;
}

/* 12 heads of 64 (BERT-base), batch 1, [B, H, S, D] dense; causal or not */
static void bench_attention(bk *b, int64_t S, bool causal) {
  char shape[96];
  snprintf(shape, sizeof shape, "B1 H12 S%lld D64%s", (long long)S, causal ? " causal" : "");
  if (!bk_want(b, "attention", shape)) return;
  int64_t H = 12, D = 64, n = H * S * D;
  attn_ctx a = {.pool = b->pool};
  float *q = bk_rand(n), *k = bk_rand(n), *v = bk_rand(n), *o = bk_rand(n);
  attn_params *p = &a.p;
  *p = (attn_params){.B = 1, .H = H, .Sq = S, .Sk = S, .D = D, .Dv = D, .q = q, .k = k, .v = v,
                     .o = o, .scale = 0.125f, .causal = causal};
  int64_t str[4] = {H * S * D, S * D, D, 1};
  memcpy(p->q_str, str, sizeof str), memcpy(p->k_str, str, sizeof str);
  memcpy(p->v_str, str, sizeof str), memcpy(p->o_str, str, sizeof str);
  if (q && k && v && o) {
    double t = bk_time(b, run_attn, &a);
    double flops = 4.0 * H * S * S * D * (causal ? 0.5 : 1.0);
    bk_row r = row0();
    if (a.st) r.note = "failed";
    else r.gflops = flops / t * 1e-9;
    if (!a.st && causal) r.note = "flops of the visible half";
    bk_add(b, "attention", shape, r);
  }
  tensor_data_free(q), tensor_data_free(k), tensor_data_free(v), tensor_data_free(o);
}

/* ---- report ---- */

static void json_num(FILE *f, double v) {
  if (v >= 0 && isfinite(v)) fprintf(f, "%.4g", v);
  else fprintf(f, "null");
}

static int write_json(const bk *b, const char *path, const double *peaks) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "smelt: cannot write %s\n", path);
    return 1;
  }
  fprintf(f, "{\"peak_gflops\": ");
  json_num(f, b->peak);
  fprintf(f, ", \"peak_gflops_by_isa\": {");
  for (int i = 0; i <= (int)isa_detect(); i++) {
    fprintf(f, "%s\"%s\": ", i ? ", " : "", isa_name((isa_level)i));
    json_num(f, peaks[i]);
  }
  fprintf(f, "}, \"isa\": \"%s\", \"stream_gbs\": ", isa_name(isa_active()));
  json_num(f, b->stream);
  fprintf(f, ", \"threads\": %d,\n \"results\": [", b->threads);
  for (int i = 0; i < b->n_rows; i++) {
    const bk_row *r = &b->rows[i];
    fprintf(f, "%s\n  {\"kernel\": \"%s\", \"shape\": \"%s\", \"threads\": %d, \"gflops\": ",
            i ? "," : "", r->kernel, r->shape, strstr(r->shape, "1 thread") ? 1 : b->threads);
    json_num(f, r->gflops);
    fprintf(f, ", \"gflops_best\": ");
    json_num(f, r->gflops >= 0 ? r->gflops * r->best_ratio : -1);
    fprintf(f, ", \"fraction_of_peak\": ");
    json_num(f, r->gflops >= 0 ? r->gflops / b->peak : -1);
    fprintf(f, ", \"ref_gflops\": ");
    json_num(f, r->ref_gflops);
    fprintf(f, ", \"gbs\": ");
    json_num(f, r->gbs);
    fprintf(f, ", \"fraction_of_stream\": ");
    json_num(f, r->gbs >= 0 && b->stream > 0 ? r->gbs / b->stream : -1);
    fprintf(f, ", \"gelems\": ");
    json_num(f, r->gelems);
    fprintf(f, ", \"ref_gelems\": ");
    json_num(f, r->ref_gelems);
    fprintf(f, ", \"note\": \"%s\"}", r->note ? r->note : "");
  }
  fprintf(f, "\n]}\n");
  return fclose(f) ? 1 : 0;
}

static int usage(FILE *f) {
  fprintf(f, "usage: smelt bench-kernels [--json FILE] [--threads N] [--quick] [--filter TEXT]\n"
             "  measures the FMA peak per ISA and a stream triad, then sgemm (beside OpenBLAS\n"
             "  when it can be loaded), conv layers per algorithm, pooling, vmath, softmax and\n"
             "  layernorm rows; medians after warm-up.  --threads: default all cores.\n"
             "  --filter: only kernels or shapes containing TEXT.  --quick: shorter runs.\n");
  return f == stdout ? 0 : 2;
}

int cmd_bench_kernels(int argc, char **argv) {
  bk b = {.threads = pool_machine_cores(), .min_seconds = 0.25};
  const char *json = NULL, *val;
  for (int i = 1; i < argc; i++) {
    int64_t v;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(stdout);
    if (cli_flag_arg(argc, argv, &i, "--json", &val)) json = val;
    else if (cli_flag_arg(argc, argv, &i, "--filter", &val)) b.filter = val;
    else if (cli_flag_arg(argc, argv, &i, "--threads", &val)) {
      if (!cli_int("--threads", val, 1, 1024, &v)) return 2;
      b.threads = (int)v;
    } else if (!strcmp(argv[i], "--quick")) b.min_seconds = 0.05;
    else return usage(stderr);
  }
  if (pool_create(b.threads, &b.pool)) return cli_fail("thread pool");
  double peaks[ISA_COUNT] = {0};
  printf("ceilings (%d thread%s):\n", b.threads, b.threads > 1 ? "s" : "");
  for (int i = 0; i <= (int)isa_detect(); i++) {
    peaks[i] = ceiling_peak_gflops(b.pool, (isa_level)i, b.threads);
    printf("  FMA peak %-7s %8.1f GFLOP/s\n", isa_name((isa_level)i), peaks[i]);
  }
  b.peak = peaks[isa_active()];
  b.stream = ceiling_stream_gbs(b.pool, b.threads);
  printf("  stream triad     %8.1f GB/s\n\n", b.stream);
  printf("%-22s %-34s %8s %6s %8s %7s %7s %7s %7s\n", "kernel", "shape", "GFLOP/s", "%peak",
         "ref", "GB/s", "Gelem/s", "ref", "best");
  bench_gemms(&b);
  bench_convs(&b);
  bench_pool(&b, "MaxPool", 64, 112, false);
  bench_pool(&b, "GlobalAveragePool", 512, 7, true);
  bench_pool(&b, "GlobalAveragePool", 2048, 7, true);
  bench_vmath(&b);
  static const int64_t seqs[] = {128, 512, 2048};
  for (int i = 0; i < 3; i++) bench_attention(&b, seqs[i], false);
  bench_attention(&b, 512, true);
  int rc = json ? write_json(&b, json, peaks) : 0;
  free(b.rows);
  pool_free(b.pool);
  return rc;
}
