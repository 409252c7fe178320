/* Compiled modes inside a session: the specializations made so far (one per
 * set of input shapes, each guarded by its inputs' shapes), the recompile
 * limit and the fall back to eager past it, bucketing, the cache, the C
 * compiler, and SMELT_DEBUG. */
#ifndef SMELT_SESSION_SESSION_COMPILE_H
#define SMELT_SESSION_SESSION_COMPILE_H

#include "compile/compile.h"
#include "ops/op_cache.h"
#include "runtime/run_hook.h"

struct smelt_session;

typedef struct bucket_spec {
  int input, axis;
  int64_t *sizes; /* ascending */
  int n;
} bucket_spec;

typedef struct spec_entry {
  tensor *sig; /* per input: dtype, rank, dims */
  compiled_plan *plan;
} spec_entry;

typedef struct true_shape_entry {
  tensor *in_sig, *out_sig;
} true_shape_entry;

typedef struct session_compiler {
  pthread_mutex_t lock;         /* specs, counters, bucket memo */
  pthread_mutex_t compile_lock; /* one compile at a time */
  spec_entry *specs;
  int n_specs, cap_specs;
  int counted;       /* compiles counted against recompile_limit */
  bool fell_back;    /* past the limit: new shapes run eagerly (warned once) */
  smelt_cache cache;
  bool tc_probed;
  cc_toolchain tc;
  char tc_error[600];
  bool warned_nocc;
  kernel_memo memo;
  op_cache *op_cache; /* prepared weights shared by all plans (ops/op_cache.h) */
  struct prep_store *prep; /* their copies on disk (cache/prep_store.h); NULL: cache off */
  op_prep_store prep_if;   /* prep as ops reach it (runtime/weight_store.h): op_cache->store */
  bucket_spec *buckets;
  int n_buckets;
  true_shape_entry *truth;
  int n_truth, cap_truth;
  char debug_root[1024]; /* SMELT_DEBUG ("" off) */
  int debug_seq;
} session_compiler;

/* Parses the options' buckets against the model's inputs, opens the cache. */
smelt_status session_compiler_create(struct smelt_session *s, session_compiler **out);
void session_compiler_free(session_compiler *sc);

/* A run in a compiled mode (inputs already checked against the model). */
smelt_status session_compiled_run(struct smelt_session *s, tensor *const *inputs, tensor *outputs,
                                  const run_hook *hook);

/* Compiles for these input shapes now (ahead of time) unless a plan exists;
 * rep (may be NULL) receives the account of the compile. */
smelt_status session_compile(struct smelt_session *s, tensor *const *inputs, compile_report *rep);

#endif
