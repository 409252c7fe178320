/* max-autotune over a compiled plan's steps (autotune.c): every step's
 * variants timed on the real inputs, the fastest kept; the choices are
 * stored in (and on a warm start read from) cache, which may be NULL or off.
 * Called by the compiler (compile/compile.c), which passes what it needs
 * filled in: explain gets one line, *cache_hit whether the choices came
 * from the cache; log (may be NULL) gets the progress of the timing. */
#ifndef SMELT_TUNE_AUTOTUNE_H
#define SMELT_TUNE_AUTOTUNE_H

#include <stdbool.h>

#include "cache/cache.h"
#include "plan/plan.h"
#include "util/log.h"
#include "util/strbuf.h"

smelt_status autotune_plan(compiled_plan *p, tensor *const *inputs, const smelt_cache *cache, strbuf *explain,
                           bool *cache_hit, const smelt_logger *log);

#endif
