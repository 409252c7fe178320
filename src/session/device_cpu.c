/* The "cpu" device: the eager runtime and the compiled plans as they were
 * before the seam, reached through the table (backend/backend.h).  Its
 * buffers are the session's buffer cache; its plans live in the session
 * (s->plan: the eager plan; s->sc: the compiled specializations). */
#include <string.h>

#include "session/device_cpu.h"
#include "session/session_compile.h"
#include "session/session.h"
#include "util/bufcache.h"
#include "util/err.h"

static smelt_status host_copy(void *dst, const void *src, size_t n, backend_copy_kind kind) {
  (void)kind;
  if (n) memcpy(dst, src, n);
  return SMELT_OK;
}

static bool cpu_supports(const ir_graph *g, const ir_node *node, smelt_dtype dtype) {
  (void)g, (void)dtype;
  return node->op != NULL; /* every op with a reference kernel; ops check their dtypes */
}

static smelt_status cpu_open(smelt_session *s) {
  /* at a precision other than fp32 the eager plan runs the autocast copy of the graph */
  TRY(eager_plan_build(s->precision_graph ? s->precision_graph : s->model->onnx->graph, &s->plan));
  s->plan.device = &backend_cpu;
  if (s->opts.mode != SMELT_MODE_EAGER) TRY(session_compiler_create(s, &s->sc));
  return SMELT_OK;
}

/* Also after a failed open: what it made so far. */
static void cpu_close(smelt_session *s) {
  session_compiler_free(s->sc);
  s->sc = NULL;
  if (s->plan.graph) eager_plan_free(&s->plan);
}

static smelt_status cpu_compile(smelt_session *s, tensor *const *inputs, struct compile_report *rep) {
  return s->sc ? session_compile(s, inputs, rep) : SMELT_OK;
}

smelt_status backend_eager_run(smelt_session *s, smelt_pool *pool, tensor *const *inputs, tensor *outputs,
                               eager_stats *stats) {
  eager_stats local = {0};
  smelt_status st = eager_run(&s->plan, pool, NULL, inputs, outputs, stats ? stats : &local);
  pthread_mutex_lock(&s->stats_lock);
  s->stats.eager_peak_bytes = (stats ? stats : &local)->peak_bytes;
  pthread_mutex_unlock(&s->stats_lock);
  return st;
}

static smelt_status cpu_run(smelt_session *s, tensor *const *inputs, tensor *outputs, eager_stats *stats) {
  if (s->sc) return session_compiled_run(s, inputs, outputs, stats ? stats->hook : NULL);
  return backend_eager_run(s, s->pool, inputs, outputs, stats);
}

static smelt_status cpu_synchronize(smelt_session *s) {
  (void)s;
  return SMELT_OK; /* runs return when their work is done */
}

const backend backend_cpu = {
    .abi_version = BACKEND_ABI_VERSION,
    .name = "cpu",
    .about = "the CPU: eager reference runtime and compiled plans, fast kernels per ISA (default)",
    .buffers = {.device = &backend_cpu, .alloc = bufcache_alloc, .free = bufcache_release},
    .host_memory = true,
    .copy = host_copy,
    .supports = cpu_supports,
    .open = cpu_open,
    .close = cpu_close,
    .compile = cpu_compile,
    .run = cpu_run,
    .synchronize = cpu_synchronize,
};
