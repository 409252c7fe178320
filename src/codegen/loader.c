/* dlopen of verified bytes through a memory file (see loader.h). */
#include "codegen/loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "codegen/emit.h"
#include "parallel/pool.h"
#include "util/err.h"

static smelt_status write_all(int fd, const void *bytes, size_t len) {
  const char *p = bytes;
  while (len) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return err_set(SMELT_ERR_IO, "cannot stage generated kernels in memory: %s", strerror(errno));
    p += w;
    len -= (size_t)w;
  }
  return SMELT_OK;
}

smelt_status kernel_lib_load(const void *bytes, size_t len, int n_expected, kernel_lib *out) {
  memset(out, 0, sizeof *out);
  int fd = memfd_create("smelt-kernels", MFD_CLOEXEC);
  if (fd < 0) return err_set(SMELT_ERR_IO, "memfd_create failed: %s", strerror(errno));
  smelt_status s = write_all(fd, bytes, len);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  void *h = s ? NULL : dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    close(fd);
    if (s) return s;
    const char *e = dlerror();
    return err_set(SMELT_ERR_IO, "cannot load generated kernels: %s", e ? e : "dlopen failed");
  }
  const int *abi = dlsym(h, "smelt_kabi"), *count = dlsym(h, "smelt_kcount");
  kernel_fn const *tab = dlsym(h, "smelt_ktab");
  if (!abi || !count || !tab || *abi != EMIT_ABI || *count != n_expected) {
    dlclose(h);
    close(fd);
    return err_set(SMELT_ERR_IO, "generated kernel library does not match: abi %d, %d kernels, expected abi %d, %d",
                   abi ? *abi : -1, count ? *count : -1, EMIT_ABI, n_expected);
  }
  out->handle = h;
  out->fd = fd;
  out->n = *count;
  out->fns = tab;
  return SMELT_OK;
}

void kernel_lib_close(kernel_lib *l) {
  if (l->handle) {
    dlclose(l->handle);
    close(l->fd);
  }
  memset(l, 0, sizeof *l);
}

/* Generated kernels pass the grain they were built with; while the pool's
 * workers lack cores (pool_thread_cost) tasks must be that much larger. */
static void rt_parallel_for(void *pool, int64_t n, int64_t grain, void (*fn)(void *, int64_t, int64_t),
                            void *ctx) {
  int cost = pool_thread_cost(pool);
  pool_parallel_for(pool, n, grain > INT64_MAX / cost ? INT64_MAX : grain * cost, fn, ctx);
}

kernel_rt kernel_rt_make(void *pool) {
  kernel_rt rt = {EMIT_ABI, pool, rt_parallel_for};
  return rt;
}
