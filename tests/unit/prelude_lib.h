/* Builds the generated kernels' math prelude (codegen/emit.h) followed by a
 * test's own functions with the real compiler and flags, and loads the
 * result: what test_codegen_math and test_codegen_half call into. */
#ifndef SMELT_TESTS_PRELUDE_LIB_H
#define SMELT_TESTS_PRELUDE_LIB_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "codegen/cc.h"
#include "codegen/emit.h"

typedef struct prelude_lib {
  char dir[64], so[320];
  char *src;
  strbuf log;
  void *h; /* NULL when the build or the load failed (a CHECK has failed) */
} prelude_lib;

/* 77 (the test is skipped) when there is no C compiler; else 0, with
 * L->h set when the library was built and loaded. */
static int prelude_lib_open(prelude_lib *L, const char *test, const char *fns) {
  memset(L, 0, sizeof *L);
  cc_toolchain tc;
  if (cc_probe(&tc)) {
    printf("%s: SKIP: no C compiler (%s), nothing tested\n", test, smelt_last_error());
    return 77;
  }
  snprintf(L->dir, sizeof L->dir, "/tmp/smelt-%s-XXXXXX", test);
  if (!mkdtemp(L->dir)) {
    CHECK(!"mkdtemp");
    return 0;
  }
  size_t n = strlen(emit_prelude_text()) + strlen(fns) + 1;
  L->src = malloc(n);
  if (!L->src) return 0;
  snprintf(L->src, n, "%s%s", emit_prelude_text(), fns);
  cc_unit u = {L->src, ""};
  snprintf(L->so, sizeof L->so, "%s/lib.so", L->dir);
  CHECK_OK(cc_build(&tc, &u, 1, L->dir, 1, L->so, &L->log));
  L->h = dlopen(L->so, RTLD_NOW | RTLD_LOCAL);
  CHECK(L->h != NULL);
  return 0;
}

static void prelude_lib_close(prelude_lib *L) {
  if (L->h) dlclose(L->h);
  sb_free(&L->log);
  free(L->src);
  if (L->dir[0]) {
    unlink(L->so);
    rmdir(L->dir);
  }
}

#endif
