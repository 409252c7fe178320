/* bf16 convolution benchmark (kernels/conv_bf16.h): per layer shape, the
 * fp32 convolution the cost model picks (weights prepared ahead, as a
 * session does) beside the bf16 AMX one, median ms and the bf16 rate in
 * GMAC/s; the kernels take turns run by run, so load from elsewhere hits
 * them alike.  Default shapes: ResNet-50's convolutions (C, M, input plane,
 * kernel, stride; the stem's 3 channels in the gathered form), batch 1.
 *
 * usage: bench_conv_bf16 [--threads N] [--reps R] [--shapes C:M:H:K:S,...] [--cl 1]
 * (--shapes: these layers instead, square input plane H, kernel K x K,
 * stride S, padding K/2; --cl 1: the bf16 column reads X and writes Y in
 * bf16 channels-last, as between two convolutions bf16_acts keeps so
 * (conv_bf16_run_cl; vdpbf16ps only))
 * The bf16 column runs on AMX, else vdpbf16ps (AVX512_BF16; SMELT_AMX=0
 * picks it on an AMX CPU) -- the kernel conv_bf16_mv picks by shape, or
 * SMELT_CONV_BF16_MV=0 / 1 for position / channel vectors on every layer;
 * elsewhere it says n/a unless SMELT_CONV_BF16=1 (the scalar block kernel:
 * a check, not a speed). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_time.h"
#include "kernels/bf16dp.h"
#include "kernels/conv.h"
#include "kernels/conv_bf16.h"
#include "ir/tensor.h"
#include "kernels/isa.h"
#include "ops/conv_registry.h"
#include "parallel/pool.h"

typedef struct layer { int64_t C, M, H, K, s; } layer;

static const layer resnet50[] = {
    {3, 64, 224, 7, 2},     {64, 64, 56, 1, 1},     {64, 64, 56, 3, 1},     {64, 256, 56, 1, 1},   {256, 64, 56, 1, 1},
    {256, 128, 56, 1, 1},   {128, 128, 56, 3, 2},   {256, 512, 56, 1, 2},  {128, 512, 28, 1, 1},
    {512, 128, 28, 1, 1},   {128, 128, 28, 3, 1},   {512, 256, 28, 1, 1},  {256, 256, 28, 3, 2},
    {512, 1024, 28, 1, 2},  {256, 1024, 14, 1, 1},  {1024, 256, 14, 1, 1}, {256, 256, 14, 3, 1},
    {1024, 512, 14, 1, 1},  {512, 512, 14, 3, 2},   {1024, 2048, 14, 1, 2}, {512, 2048, 7, 1, 1},
    {2048, 512, 7, 1, 1},   {512, 512, 7, 3, 1},
};

int main(int argc, char **argv) {
  int threads = 1, reps = 21, bad = 0, cl = 0;
  layer given[64];
  const layer *layers = resnet50;
  size_t n_layers = sizeof resnet50 / sizeof *resnet50;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--cl")) cl = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--shapes")) {
      n_layers = 0, layers = given;
      for (const char *s = argv[i + 1]; *s && !bad; s += *s == ',') {
        layer *l = &given[n_layers];
        int used = 0;
        long long c, m, h, k, st;
        if (n_layers == 64 || sscanf(s, "%lld:%lld:%lld:%lld:%lld%n", &c, &m, &h, &k, &st, &used) != 5 || c < 1 ||
            m < 1 || k < 1 || st < 1 || h < k)
          bad = 1;
        else *l = (layer){c, m, h, k, st}, n_layers++, s += used;
      }
    } else bad = 1;
  }
  if (threads < 1 || reps < 1 || reps > 1000 || bad || !n_layers) {
    fprintf(stderr, "usage: bench_conv_bf16 [--threads N] [--reps R] [--shapes C:M:H:K:S,...] [--cl 1]\n");
    return 2;
  }
  isa_level isa = isa_active();
  bool bf16 = conv_bf16_wanted(isa);
  if (cl && !conv_bf16_io_native(isa)) {
    fprintf(stderr, "bench_conv_bf16: --cl 1 needs the vdpbf16ps kernels (AVX512_BF16 without AMX)\n");
    return 1;
  }
  smelt_pool *pool = NULL;
  if (threads > 1 && pool_create(threads, &pool)) {
    fprintf(stderr, "bench_conv_bf16: no pool of %d threads\n", threads);
    return 1;
  }
  printf("threads %d, isa %s, bf16 on %s; median of %d runs\n", threads, isa_name(isa),
         !bf16 ? "n/a" : bf16dp_amx_hw(isa) ? "AMX" : bf16dp_hw(isa) ? "vdpbf16ps" : "the scalar kernel (forced)", reps);
  printf("| C | M | plane | k | s | fp32 algo | fp32 ms | bf16 ms | bf16/fp32 speed-up | bf16 GMAC/s | --precision bf16 runs |\n");
  printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  double sum32 = 0, sum16 = 0;
  for (size_t li = 0; li < n_layers; li++) {
    const layer *l = &layers[li];
    int64_t pad = l->K / 2, OH = (l->H + 2 * pad - l->K) / l->s + 1;
    conv2d_desc d = {.N = 1, .C = l->C, .H = l->H, .W = l->H, .M = l->M, .G = 1, .KH = l->K, .KW = l->K,
                     .OH = OH, .OW = OH, .sh = l->s, .sw = l->s, .dh = 1, .dw = 1, .pt = pad, .pl = pad,
                     .x_cl = cl && l->C % 2 == 0, .y_cl = cl && l->M % 2 == 0};
    conv2d_desc d32 = d;
    d32.x_cl = d32.y_cl = 0;
    size_t nx = (size_t)(l->C * l->H * l->H), nw = (size_t)(l->M * l->C * l->K * l->K), ny = (size_t)(l->M * OH * OH);
    float *X = malloc(sizeof(float) * nx), *W = malloc(sizeof(float) * nw), *Y = malloc(sizeof(float) * ny);
    float *Bv = calloc((size_t)l->M, sizeof(float));
    uint16_t *Xh = malloc(2 * nx), *Yh = malloc(2 * ny);
    if (!X || !W || !Y || !Bv || !Xh || !Yh) return 1;
    for (size_t i = 0; i < nx; i++) X[i] = sinf((float)i * 0.01f);
    for (size_t i = 0; i < nw; i++) W[i] = cosf((float)i * 0.007f) * 0.05f;
    for (size_t i = 0; i < nx; i++) Xh[i] = f32_to_bf16(X[i]);
    unsigned clf = (d.x_cl ? CB_CL_X : 0u) | (d.y_cl ? CB_CL_Y : 0u);
    conv_algo a32 = conv_select_desc(&d32, isa, threads, CONV_ALGO_AUTO, true);
    if (a32 == CONV_ALGO_IM2COL) a32 = CONV_ALGO_DIRECT; /* the benchmark runs a prepared kernel */
    conv2d_weights *w32 = NULL, *w16 = NULL;
    if (conv2d_prepare(pool, &d32, a32, isa, W, &w32)) return 1;
    if (bf16 && conv2d_prepare(pool, &d, CONV_ALGO_BF16, isa, W, &w16)) return 1;
    double t32[1000], t16[1000];
    for (int r = -2; r < reps; r++) {
      double t0 = now_s();
      if (conv2d_run(pool, &d32, w32, X, Bv, Y)) return 1;
      double t1 = now_s();
      if (w16 && cl && conv2d_run_bf16io(pool, &d, w16, NULL, Xh, Bv, NULL, NULL, NULL, Yh, clf)) return 1;
      if (w16 && !cl && conv2d_run(pool, &d, w16, X, Bv, Y)) return 1;
      double t2 = now_s();
      if (r >= 0) t32[r] = t1 - t0, t16[r] = t2 - t1;
    }
    double m32 = median(t32, reps) * 1e3, m16 = w16 ? median(t16, reps) * 1e3 : NAN;
    double macs = (double)l->M * OH * OH * l->C * l->K * l->K;
    sum32 += m32, sum16 += m16;
    printf("| %lld | %lld | %lld | %lld | %lld | %s | %.3f | ", (long long)l->C, (long long)l->M, (long long)l->H,
           (long long)l->K, (long long)l->s, conv_algo_name(a32), m32);
    /* what a convolution marked bf16 runs (kernels/conv_bf16.h: by cost on vdpbf16ps) */
    conv_algo pick = conv_select_desc(&d, isa, threads, bf16 ? CONV_ALGO_BF16 : CONV_ALGO_AUTO, true);
    if (w16) printf("%.3f | %.2fx | %.0f | %s |\n", m16, m32 / m16, macs / (m16 * 1e-3) * 1e-9, conv_algo_name(pick));
    else printf("n/a | n/a | n/a | %s |\n", conv_algo_name(pick));
    conv2d_weights_free(w32), conv2d_weights_free(w16);
    free(X), free(W), free(Y), free(Bv), free(Xh), free(Yh);
  }
  if (bf16) printf("sum of the layers (each once): fp32 %.2f ms, bf16 %.2f ms (%.2fx)\n", sum32, sum16, sum32 / sum16);
  pool_free(pool);
  return 0;
}
