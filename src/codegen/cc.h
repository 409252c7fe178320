/* Driving the system C compiler: $CC (default "cc", split on spaces so
 * "ccache gcc" works), one process per translation unit, several at once,
 * then one link into a shared object. */
#ifndef SMELT_CODEGEN_CC_H
#define SMELT_CODEGEN_CC_H

#include <stdbool.h>
#include <stddef.h>

#include "codegen/emit.h"

#define CC_MAX_ARGS 16

typedef struct cc_toolchain {
  char cmd[512];            /* $CC as given */
  char *argv[CC_MAX_ARGS];  /* cmd split into words (pointing into words) */
  int argc;
  char words[512];
  char identity[512];       /* first line of `$CC --version` */
  const char *flags;        /* the base flags every unit is compiled with */
} cc_toolchain;

/* Finds the compiler and asks it for its identity.  SMELT_ERR_UNSUPPORTED
 * with a message naming $CC when it cannot be run. */
smelt_status cc_probe(cc_toolchain *tc);

typedef struct cc_unit {
  const char *src;   /* full translation unit text */
  const char *flags; /* extra flags ("" for none) */
} cc_unit;

/* Compiles the units (up to `jobs` compilers at once) in workdir and links
 * them into so_path.  Every command line and the compiler's output are
 * appended to log (may be NULL).  On failure the error names the unit and
 * quotes the first lines of the compiler's messages. */
smelt_status cc_build(const cc_toolchain *tc, const cc_unit *units, int n, const char *workdir,
                      int jobs, const char *so_path, strbuf *log);

#endif
