/* Dispatch and the portable loop of kernels/transpose.h. */
#include "kernels/transpose.h"

#include <string.h>

/* The block [r0, rows) x [0, cols) and [0, r0) x [c0, cols), element by
 * element (memcpy: the bits as they are). */
static void edges(char *d, int64_t ldd, const char *s, int64_t lds, int64_t rows, int64_t cols, int64_t r0,
                  int64_t c0) {
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = i < r0 ? c0 : 0; j < cols; j++) memcpy(d + (j * ldd + i) * 4, s + (i * lds + j) * 4, 4);
}

void transpose32(isa_level isa, void *d, int64_t ldd, const void *s, int64_t lds, int64_t rows, int64_t cols) {
  int64_t r0 = 0, c0 = 0;
#if defined(__x86_64__) || defined(__i386__)
  if (isa >= ISA_AVX2 && rows >= 8 && cols >= 8) {
    r0 = rows - rows % 8, c0 = cols - cols % 8;
    transpose32_avx2(d, ldd, s, lds, r0, c0);
  }
#else
  (void)isa;
#endif
  edges(d, ldd, s, lds, rows, cols, r0, c0);
}
