/* AMX driver of the bf16 convolution (kernels/conv_bf16.h): items of 32
 * output channels x 32 flat positions on four accumulator tiles, stored by
 * cb_store_avx512 (x86/conv_bf16_avx512.c, which also converts the input).
 *
 * Per item and per tap, per 16 channel pairs: two A tiles (16 output
 * channels each, rows Cq pairs apart in the prepared weights), two B tiles
 * (16 flat positions each, rows a channel pair's P*L words apart in the
 * converted input), four TDPBF16PS: 32 x 32 x 32 products for 4 KiB loaded.
 * TDPBF16PS sums in an order of its own with denormals flushed, so results
 * agree with the scalar block kernel to fp32 rounding of the sums.
 *
 * Compiles everywhere (per-function target attributes); runs only where
 * bf16dp_amx_hw (kernels/bf16dp.h). */
#include "kernels/conv_bf16_impl.h"

#include "kernels/bf16dp.h"
#include "kernels/gemm_kernels.h" /* SMELT_X86 */

#if defined(SMELT_X86) && defined(__linux__) && defined(__x86_64__)
#include <immintrin.h>
#include "kernels/x86/amx.h"
#include "kernels/x86/avx512_tile.h"

#define CB_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

CB_TARGET void cb_items_amx(void *ctx, int64_t it0, int64_t it1) {
  const cb_job *j = ctx;
  amx_load_config();
  float acc[CB_BLOCK * CB_BLOCK] __attribute__((aligned(64)));
  const int64_t PL = j->P * j->L;
  const long a_stride = 4 * (long)j->Cq, b_stride = 4 * (long)PL;
  for (int64_t it = it0; it < it1; it++) {
    int64_t mb, fb;
    cb_item(j, it, j->nmb, &mb, &fb);
    amx_block_zero();
    for (int64_t t = 0; t < j->taps; t++) {
      const uint32_t *A0 = j->w + (t * j->Mp + mb * CB_BLOCK) * j->Cq, *A1 = A0 + 16 * j->Cq;
      const uint32_t *B0 = j->xp + j->toff[t] + fb * CB_BLOCK;
      for (int64_t g = 0; g < j->Cq; g += 16) amx_block_step(A0 + g, A1 + g, a_stride, B0 + g * PL, b_stride);
    }
    amx_block_store(acc, CB_BLOCK);
    cb_store_avx512(j, acc, CB_BLOCK, mb * CB_BLOCK, CB_BLOCK, fb);
  }
  AMX_RELEASE();
}

#else

/* Not built for this platform: bf16dp_amx_hw is false, so this is only the
 * scalar path under the AMX name. */
void cb_items_amx(void *ctx, int64_t it0, int64_t it1) { cb_items_scalar(ctx, it0, it1); }

#endif
