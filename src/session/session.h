/* Session internals shared by the C API and the CLI's measurements. */
#ifndef SMELT_SESSION_SESSION_H
#define SMELT_SESSION_SESSION_H

#include "onnx/model_internal.h"
#include <pthread.h>

#include "runtime/eager.h"
#include "util/log.h"

struct smelt_session {
  const smelt_model *model;
  smelt_session_options opts;
  smelt_logger log; /* opts.log, log_user and the effective log_level ($SMELT_LOG_LEVEL) */
  smelt_pool *pool;
  eager_plan plan;
  smelt_session_stats stats; /* guarded by stats_lock */
  pthread_mutex_t stats_lock;
  struct bufcache *bufs; /* large blocks kept between runs (util/bufcache.h) */
  struct session_compiler *sc; /* compiled modes (session/session_compile.h); NULL in eager */
};

/* smelt_session_create; compile_declared false: a model whose input shapes
 * are all fixed is not compiled at creation either, but by the first run or
 * session_compile (smelt compile: so that its report has the compile). */
smelt_status session_create(const smelt_model *m, const smelt_session_options *opts, bool compile_declared,
                            smelt_session **out);
/* Runs with internal tensors: inputs[k] for graph input k (checked against the
 * declared types), outputs[k] zeroed, receive owning results for every graph
 * output.  stats may be NULL. */
smelt_status session_run_tensors(smelt_session *s, tensor *const *inputs, tensor *outputs,
                                 eager_stats *stats);
/* Checks a tensor against the declared type of graph input k, and that
 * symbolic dims agree across inputs (sym_vals: one slot per symbol, -1 = unset). */
smelt_status session_check_input(const ir_graph *g, int k, const tensor *t, int64_t *sym_vals);

#endif
