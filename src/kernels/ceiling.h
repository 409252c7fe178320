/* The machine's measured ceilings, to state a kernel's speed against:
 *  - peak: GFLOP/s of register-only multiply-add chains on one ISA path
 *    (independent FMA chains, enough to cover latency times pipes);
 *  - stream: GB/s of an f32 triad a[i] = b[i] + s * c[i] over arrays much
 *    larger than the caches (12 bytes per element: two reads, one write;
 *    the write-allocate read is not counted, as STREAM does not).
 * Both run `threads` copies at once on the pool and keep the best of
 * several short trials: on a shared machine interference only ever lowers
 * a sample. */
#ifndef SMELT_KERNELS_CEILING_H
#define SMELT_KERNELS_CEILING_H

#include "kernels/isa.h"
#include "parallel/pool.h"

double ceiling_peak_gflops(smelt_pool *pool, isa_level isa, int threads);
/* 0 when the arrays cannot be allocated. */
double ceiling_stream_gbs(smelt_pool *pool, int threads);

#endif
