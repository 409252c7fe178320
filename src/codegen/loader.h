/* Loading generated kernels.  The bytes of a shared object (already checked
 * by the cache) are copied into an anonymous memory file and dlopen'ed from
 * there, so what runs is exactly what was verified, whatever happens to the
 * file on disk afterwards. */
#ifndef SMELT_CODEGEN_LOADER_H
#define SMELT_CODEGEN_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "smelt.h"

typedef struct kernel_rt {
  int abi;
  void *pool;
  void (*parallel_for)(void *pool, int64_t n, int64_t grain, void (*fn)(void *, int64_t, int64_t),
                       void *ctx);
} kernel_rt;

typedef void (*kernel_fn)(void *const *args, const int64_t *params, const kernel_rt *rt);

typedef struct kernel_lib {
  void *handle;
  int fd; /* the memory file, open while loaded: dlopen knows a library by its
             path (/proc/self/fd/N), so N must not be reused meanwhile */
  int n;
  kernel_fn const *fns;
} kernel_lib;

/* Loads a library of n_expected kernels from its bytes. */
smelt_status kernel_lib_load(const void *bytes, size_t len, int n_expected, kernel_lib *out);
void kernel_lib_close(kernel_lib *l);

/* The runtime's function table for kernels (pool_parallel_for behind it). */
kernel_rt kernel_rt_make(void *pool);

#endif
