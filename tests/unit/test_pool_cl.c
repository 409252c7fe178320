/* MaxPool over channels-last bf16 activations (kernels/pool2d.h:
 * pool2d_max_cl_bf16) against a direct loop, bit for bit (the max of bf16
 * values is one of them): channel counts around the 16-lane vector (1, 15,
 * 16, 17, 64, 70), 3x3/2 with pad 1 (a ResNet stem), 2x2/2, 3x3/1, a
 * dilated 3x3, asymmetric strides, windows wholly in the padding (-inf),
 * NaN inputs (ignored, as the reference does), batch 2, 1 and 3 threads,
 * at AVX-512 where the CPU has it and on the scalar path. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir/tensor.h"
#include "kernels/isa.h"
#include "kernels/pool2d.h"
#include "parallel/pool.h"
#include "smelt.h"

#define TEST_RNG_SEED 0x7a3c19e5d02b4f81ull
#include "test_rng.h"

static long n_values;

static pool2d_desc geom(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t sh, int64_t sw, int64_t dil,
                        int64_t pad) {
  pool2d_desc d = {.N = N, .C = C, .H = H, .W = W, .KH = K, .KW = K, .sh = sh, .sw = sw, .dh = dil, .dw = dil,
                   .pt = pad, .pl = pad, .pb = pad, .pr = pad, .is_max = true};
  d.OH = (H + 2 * pad - dil * (K - 1) - 1) / sh + 1, d.OW = (W + 2 * pad - dil * (K - 1) - 1) / sw + 1;
  return d;
}

static void one(smelt_pool *pool, isa_level isa, pool2d_desc d) {
  size_t nx = (size_t)(d.N * d.H * d.W * d.C), ny = (size_t)(d.N * d.OH * d.OW * d.C);
  uint16_t *X = malloc(2 * nx), *Y = malloc(2 * (ny + 8));
  CHECK(X && Y);
  if (!X || !Y) goto done;
  for (size_t i = 0; i < nx; i++) X[i] = f32_to_bf16(i % 97 == 5 ? NAN : frand());
  for (size_t i = 0; i < ny + 8; i++) Y[i] = 0x7fc1;
  CHECK_OK(pool2d_max_cl_bf16(pool, &d, isa, X, Y));
  long bad = 0;
  for (int64_t n = 0; n < d.N; n++)
    for (int64_t oh = 0; oh < d.OH; oh++)
      for (int64_t ow = 0; ow < d.OW; ow++)
        for (int64_t c = 0; c < d.C; c++) {
          float m = -INFINITY;
          for (int64_t kh = 0; kh < d.KH; kh++)
            for (int64_t kw = 0; kw < d.KW; kw++) {
              int64_t ih = oh * d.sh - d.pt + kh * d.dh, iw = ow * d.sw - d.pl + kw * d.dw;
              if (ih < 0 || ih >= d.H || iw < 0 || iw >= d.W) continue;
              float v = bf16_to_f32(X[((n * d.H + ih) * d.W + iw) * d.C + c]);
              if (v > m) m = v;
            }
          uint16_t got = Y[((n * d.OH + oh) * d.OW + ow) * d.C + c];
          n_values++;
          if (got != f32_to_bf16(m) && bad++ < 3)
            fprintf(stderr, "max pool C%lld %lldx%lld k%lld s%lld,%lld isa %d: y[%lld][%lld][%lld][%lld] 0x%04x, want %g\n",
                    (long long)d.C, (long long)d.H, (long long)d.W, (long long)d.KH, (long long)d.sh, (long long)d.sw,
                    (int)isa, (long long)n, (long long)oh, (long long)ow, (long long)c, got, m);
        }
  CHECK(bad == 0);
  for (size_t i = ny; i < ny + 8; i++) CHECK(Y[i] == 0x7fc1);
done:
  free(X), free(Y);
}

int main(void) {
  isa_level isas[2] = {ISA_SCALAR, isa_active()};
  for (int th = 1; th <= 3; th += 2) {
    smelt_pool *pool = NULL;
    CHECK_OK(pool_create(th, &pool));
    pool2d_desc shapes[] = {
        geom(1, 64, 112, 112, 3, 2, 2, 1, 1), geom(2, 17, 9, 9, 3, 2, 2, 1, 1), geom(1, 16, 8, 8, 2, 2, 2, 1, 0),
        geom(1, 15, 7, 7, 3, 1, 1, 1, 1),     geom(1, 70, 6, 11, 3, 1, 2, 1, 1), geom(1, 1, 5, 5, 3, 1, 1, 2, 2),
        geom(1, 32, 3, 3, 3, 2, 2, 1, 2),     /* corner windows wholly in the padding */
    };
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++)
      for (int i = 0; i < 2; i++) one(pool, isas[i], shapes[k]);
    pool_free(pool);
  }
  if (isa_active() < ISA_AVX512) printf("this CPU has no AVX-512: the scalar path only\n");
  printf("channels-last max pool: %ld values checked\n", n_values);
  return test_report("test_pool_cl");
}
