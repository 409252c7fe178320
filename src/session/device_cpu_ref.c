/* "cpu-ref": a test-only second device.  The CPU through the table with the
 * reference kernels alone: eager only (no compiled plans), ops without a
 * cache (no packed or Winograd-transformed weights), the scalar ISA path
 * (as SMELT_ISA=scalar) and one thread (its session's pool is replaced by
 * one of a single thread, whatever the threads option says).  Its buffers are its own as far as
 * the session can tell: inputs are copied in and results copied out
 * (host_memory false), and every block it hands out is filled with 0xff
 * bytes first (as SMELT_POISON=1), so a kernel that leaves part of an output
 * unwritten shows.  Running the zoo on it (ctest zoo.cpu-ref) checks that
 * the seam carries a whole model and not only the "cpu" device. */
#include <stdatomic.h>
#include <string.h>

#include "session/device_cpu.h"
#include "kernels/isa.h"
#include "session/session.h"
#include "util/bufcache.h"
#include "util/err.h"
#include "util/quote.h"

static atomic_size_t n_allocs, n_copies;

void backend_cpu_ref_counts(size_t *allocs, size_t *copies) {
  if (allocs) *allocs = atomic_load(&n_allocs);
  if (copies) *copies = atomic_load(&n_copies);
}

static void *ref_alloc(size_t n) {
  void *p = bufcache_alloc(n);
  if (p) {
    memset(p, 0xff, n);
    atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
  }
  return p;
}

static smelt_status ref_copy(void *dst, const void *src, size_t n, backend_copy_kind kind) {
  (void)kind;
  if (n) memcpy(dst, src, n);
  atomic_fetch_add_explicit(&n_copies, 1, memory_order_relaxed);
  return SMELT_OK;
}

static bool ref_supports(const ir_graph *g, const ir_node *node, smelt_dtype dtype) {
  (void)g, (void)dtype;
  return node->op != NULL; /* every op has its reference kernel */
}

static smelt_status ref_open(smelt_session *s) {
  if (s->opts.mode != SMELT_MODE_EAGER)
    return err_set(SMELT_ERR_UNSUPPORTED, "device 'cpu-ref' runs the reference kernels eagerly; mode %s "
                   "needs device 'cpu'", q(smelt_mode_name(s->opts.mode)));
  if (s->opts.precision != SMELT_PRECISION_FP32)
    return err_set(SMELT_ERR_UNSUPPORTED, "device 'cpu-ref' runs the fp32 reference kernels; precision %s needs "
                   "device 'cpu'", q(smelt_precision_name(s->opts.precision)));
  /* one thread, the caller: the ISA cap and the buffers entered on it hold
   * for every kernel (pool workers would not inherit them) */
  pool_free(s->pool);
  s->pool = NULL;
  TRY(pool_create(1, &s->pool));
  TRY(eager_plan_build(s->model->onnx->graph, &s->plan));
  s->plan.plain = true;
  s->plan.device = &backend_cpu_ref;
  return SMELT_OK;
}

static void ref_close(smelt_session *s) {
  if (s->plan.graph) eager_plan_free(&s->plan);
}

static smelt_status ref_compile(smelt_session *s, tensor *const *inputs, struct compile_report *rep) {
  (void)s, (void)inputs, (void)rep;
  return SMELT_OK; /* eager: no plan per shape */
}

static smelt_status ref_run(smelt_session *s, tensor *const *inputs, tensor *outputs, eager_stats *stats) {
  isa_level prev = isa_cap_enter(ISA_SCALAR);
  smelt_status st = backend_eager_run(s, s->pool, inputs, outputs, stats); /* a pool of one: the caller */
  isa_cap_enter(prev);
  return st;
}

static smelt_status ref_synchronize(smelt_session *s) {
  (void)s;
  return SMELT_OK;
}

const backend backend_cpu_ref = {
    .abi_version = BACKEND_ABI_VERSION,
    .name = "cpu-ref",
    .about = "test-only: reference kernels (eager, scalar, one thread) in buffers of its own",
    .buffers = {.device = &backend_cpu_ref, .alloc = ref_alloc, .free = bufcache_release},
    .host_memory = false,
    .copy = ref_copy,
    .supports = ref_supports,
    .open = ref_open,
    .close = ref_close,
    .compile = ref_compile,
    .run = ref_run,
    .synchronize = ref_synchronize,
};
