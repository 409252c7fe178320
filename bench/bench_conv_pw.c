/* Pointwise (1x1) convolution benchmark: per layer shape, every f32 route a
 * 1x1 convolution can take -- the pointwise kernel on X in place over the
 * raw W (conv_pointwise_run) and over W packed once
 * (conv_pointwise_run_packed), the transposed GEMM over W^T packed ahead
 * (conv_pointwise_t_run), the GEMM with W packed ahead as A -- and the one
 * the op picks, median and best ms and GFLOP/s, the routes taking turns run
 * by run so load from elsewhere hits them alike.  Default shapes: the 1x1
 * layers of mobilenet_v2, mnasnet, regnet_y_400mf and resnet50 over planes
 * of 28x28 and smaller, where the routes differ most.
 *
 * usage: bench_conv_pw [--threads N] [--reps R] [--cpu] [--cold] [--shapes C:M:S,...]
 *   --cold evicts the caches before each run (64 MiB written) and then
 *   touches X and Y, as in a model: the input just written by the layer
 *   before, the output a recycled buffer, the weight not touched since the
 *   previous inference.
 *   --cpu times runs by the thread's CPU clock (1 thread only), which other
 *   processes on a shared machine inflate far less than wall time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_time.h"
#include "kernels/conv.h"
#include "kernels/gemm.h"
#include "kernels/isa.h"
#include "parallel/pool.h"

typedef struct shape { int64_t C, M, S; } shape;

static const shape defaults[] = {
    {576, 96, 196}, {96, 576, 196}, {384, 64, 196}, {64, 384, 196}, {384, 96, 196},
    {960, 160, 49}, {160, 960, 49}, {320, 1280, 49}, {960, 320, 49}, {576, 160, 49},
    {192, 32, 784}, {32, 192, 784}, {144, 32, 784},
    {440, 440, 49}, {208, 208, 196}, {104, 104, 784},
    {1024, 256, 196}, {256, 1024, 196}, {2048, 512, 49}, {512, 2048, 49}, {512, 128, 784},
};

enum { R_PW, R_PWP, R_PWT, R_GEMM, R_COUNT };
static const char *route_name[R_COUNT] = {"pointwise", "pw packed", "transposed", "gemm"};

static bool cpu_clock, cold;
static volatile float sink;
static double clock_s(void) {
  if (!cpu_clock) return now_s();
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int parse_shapes(const char *s, shape *out, int cap) {
  int n = 0;
  while (*s && n < cap) {
    long long c, m, p;
    int used = 0;
    if (sscanf(s, "%lld:%lld:%lld%n", &c, &m, &p, &used) != 3 || c < 1 || m < 1 || p < 1) return -1;
    out[n++] = (shape){c, m, p};
    s += used;
    if (*s == ',') s++;
  }
  return n;
}

int main(int argc, char **argv) {
  int threads = 1, reps = 31, n_shapes = (int)(sizeof defaults / sizeof *defaults);
  shape custom[64];
  const shape *shapes = defaults;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--cpu")) cpu_clock = true;
    else if (!strcmp(argv[i], "--cold")) cold = true;
    else if (i + 1 < argc && !strcmp(argv[i], "--threads")) threads = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--shapes")) {
      n_shapes = parse_shapes(argv[++i], custom, 64);
      shapes = custom;
    } else n_shapes = -1;
  }
  if (threads < 1 || reps < 1 || reps > 1000 || n_shapes < 1 || (cpu_clock && threads > 1)) {
    fprintf(stderr, "usage: bench_conv_pw [--threads N] [--reps R] [--cpu (1 thread)] [--shapes C:M:S,...]\n");
    return 2;
  }
  isa_level isa = isa_active();
  smelt_pool *pool = NULL;
  if (threads > 1 && pool_create(threads, &pool)) {
    fprintf(stderr, "bench_conv_pw: no pool of %d threads\n", threads);
    return 1;
  }
  size_t n_evict = cold ? (size_t)16 << 20 : 0;
  float *evict = n_evict ? malloc(sizeof(float) * n_evict) : NULL;
  if (n_evict && !evict) return 1;
  printf("threads %d, isa %s, %s clock, %s; median (best) ms of %d runs, GFLOP/s of the median\n", threads,
         isa_name(isa), cpu_clock ? "thread CPU" : "wall", cold ? "cold weights (caches evicted, X read)" : "hot", reps);
  printf("| C | M | plane | picked |");
  for (int r = 0; r < R_COUNT; r++) printf(" %s ms | GFLOP/s |", route_name[r]);
  printf("\n|---|---|---|---|");
  for (int r = 0; r < R_COUNT; r++) printf("---|---|");
  printf("\n");
  for (int si = 0; si < n_shapes; si++) {
    const shape *s = &shapes[si];
    size_t nx = (size_t)(s->C * s->S), nw = (size_t)(s->M * s->C), ny = (size_t)(s->M * s->S);
    float *X = malloc(sizeof(float) * nx), *W = malloc(sizeof(float) * nw), *Y = malloc(sizeof(float) * ny);
    float *Bv = malloc(sizeof(float) * (size_t)s->M);
    if (!X || !W || !Y || !Bv) return 1;
    for (size_t i = 0; i < nx; i++) X[i] = sinf((float)i * 0.01f);
    for (size_t i = 0; i < nw; i++) W[i] = cosf((float)i * 0.007f) * 0.05f;
    for (int64_t i = 0; i < s->M; i++) Bv[i] = 0.01f * (float)(i % 7);
    int pw = conv_pointwise_panel(isa, s->C, s->M, s->S); /* the panels (and so the tile) the op would pack */
    float *wp = malloc(sizeof(float) * (size_t)conv_pointwise_packed_floats(pw, s->C, s->M));
    if (!wp) return 1;
    conv_pointwise_pack(pw, s->C, s->M, W, wp);
    gemm_packed *wt = NULL, *wa = NULL;
    if (gemm_pack_b_prepare(pool, isa, true, s->C, s->M, W, s->C, &wt) ||
        gemm_pack_a_prepare(pool, isa, false, s->M, s->C, W, s->C, &wa))
      return 1;
    gemm_params gp = gemm_params_default();
    gp.M = s->M, gp.N = s->S, gp.K = s->C, gp.A = W, gp.lda = s->C, gp.B = X, gp.ldb = s->S, gp.C = Y,
    gp.ldc = s->S, gp.packed_a = wa;
    gp.epilogue.bias_kind = GEMM_BIAS_ROW, gp.epilogue.bias = Bv;
    conv2d_epilogue ep = {.residual = NULL, .lo = -INFINITY, .hi = INFINITY};
    double t[R_COUNT][1000];
    for (int r = -2; r < reps; r++) {
      for (int k = 0; k < R_COUNT; k++) {
        int route = (k + (r < 0 ? 0 : r)) % R_COUNT; /* the first to run rotates */
        if (evict) {
          for (size_t i = 0; i < n_evict; i += 16) evict[i] = (float)i;
          float acc = 0;
          for (size_t i = 0; i < nx; i += 16) acc += X[i];
          for (size_t i = 0; i < ny; i += 16) Y[i] = acc;
          sink = acc;
        }
        double t0 = clock_s();
        smelt_status st = SMELT_OK;
        if (route == R_PW) st = conv_pointwise_run(pool, isa, 1, s->C, s->M, s->S, X, W, Bv, &ep, Y);
        else if (route == R_PWT) st = conv_pointwise_t_run(pool, isa, 1, s->C, s->M, s->S, X, W, wt, Bv, &ep, Y);
        else if (route == R_PWP) st = conv_pointwise_run_packed(pool, isa, pw, 1, s->C, s->M, s->S, X, wp, Bv, &ep, Y);
        else st = gemm_f32_ex(pool, &gp);
        if (st) return 1;
        if (r >= 0) t[route][r] = clock_s() - t0;
      }
    }
    const char *picked = conv_pointwise_route(isa, s->C, s->M, s->S)     ? route_name[R_PW]
                         : conv_pointwise_t_suits(isa, s->C, s->M, s->S) ? route_name[R_PWT]
                                                                         : route_name[R_GEMM];
    printf("| %lld | %lld | %lld | %s |", (long long)s->C, (long long)s->M, (long long)s->S, picked);
    double flops = 2.0 * (double)s->C * (double)s->M * (double)s->S;
    for (int k = 0; k < R_COUNT; k++) {
      double med = median(t[k], reps); /* sorts: t[k][0] is the best */
      printf(" %.3f (%.3f) | %.1f |", med * 1e3, t[k][0] * 1e3, flops / med * 1e-9);
    }
    printf("\n");
    gemm_packed_free(wt), gemm_packed_free(wa);
    free(X), free(W), free(Y), free(Bv), free(wp);
  }
  free(evict);
  pool_free(pool);
  return 0;
}
