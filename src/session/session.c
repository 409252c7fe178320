/* Sessions: create (validate, plan, thread pool) and run. */
#include "session/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "cache/prep_store.h"
#include "session/session_compile.h"
#include "ops/node_run.h"
#include "util/api_struct.h"
#include "runtime/precision.h"
#include "util/bufcache.h"
#include "util/err.h"
#include "util/log.h"
#include "util/quote.h"
#include "util/membudget.h"

smelt_session_options smelt_session_options_default(void) {
  smelt_session_options o = {.struct_size = sizeof o, .threads = 0, .mode = SMELT_MODE_EAGER, .recompile_limit = 8,
                             .log_level = SMELT_LOG_INFO};
  return o;
}

/* The first released layouts (0.2.0): every field up to log_level, and up
 * to prepared_saved.  Fields added later go after them and do not change these. */
#define OPTIONS_V1 (offsetof(smelt_session_options, log_level) + sizeof(smelt_log_level))
#define STATS_V1 (offsetof(smelt_session_stats, prepared_saved) + sizeof(int))

/* Every node, subgraphs included, must have a kernel, the right arity and
 * be supported by the device. */
static smelt_status check_supported(const backend *dev, const ir_graph *g) {
  for (int i = 0; i < g->n_nodes; i++) {
    TRY(node_check_arity(g, i));
    const ir_node *nd = &g->nodes[i];
    smelt_dtype dt = nd->n_outputs > 0 && nd->outputs[0] >= 0 ? g->values[nd->outputs[0]].dtype : SMELT_UNDEFINED;
    if (!dev->supports(g, nd, dt)) {
      char lb[256];
      return err_set(SMELT_ERR_UNSUPPORTED, "%s: device %s does not run it (%s)", ir_node_label(g, i, lb, sizeof lb),
                     q(dev->name), dtype_name(dt));
    }
    for (int a = 0; a < nd->n_attrs; a++) {
      const ir_attr *at = &nd->attrs[a];
      if (at->type == IR_ATTR_GRAPH && at->g) TRY(check_supported(dev, at->g));
      for (int k = 0; at->type == IR_ATTR_GRAPHS && k < at->n; k++)
        if (at->graphs[k]) TRY(check_supported(dev, at->graphs[k]));
    }
  }
  return SMELT_OK;
}

/* opts.dims ("batch=1,seq=128") into vals (one per symbol, -1 = not given). */
static smelt_status parse_dims(const ir_graph *g, const char *text, int64_t *vals) {
  for (int i = 0; i < g->n_syms; i++) vals[i] = -1;
  const char *p = text;
  while (p && *p) {
    const char *eq = strchr(p, '='), *end = strchr(p, ',');
    if (!end) end = p + strlen(p);
    if (!eq || eq > end || eq == p)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "dims: %s is not NAME=SIZE", q_n(p, (size_t)(end - p)));
    int sym = -1;
    for (int i = 0; i < g->n_syms && sym < 0; i++)
      if (strlen(g->syms[i]) == (size_t)(eq - p) && !strncmp(g->syms[i], p, (size_t)(eq - p))) sym = i;
    if (sym < 0)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "dims: %s is not a symbolic dimension of this model", q_n(p, (size_t)(eq - p)));
    char *stop;
    long long v = strtoll(eq + 1, &stop, 10);
    if (stop != end || eq + 1 == end || v < 0)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "dims: %s needs a size >= 0", q_n(p, (size_t)(end - p)));
    vals[sym] = v;
    p = *end ? end + 1 : end;
  }
  return SMELT_OK;
}

/* A model whose inputs all have fixed shapes (declared, or fixed by
 * opts.dims) is compiled, and its weights prepared, when the session is
 * made, not on the first run: the work (or the cache lookup) happens once,
 * where users expect it, and the first run is as fast as every other.
 * Otherwise, and in dynamic and bucketed sessions, plans are made for the
 * shapes runs bring. */
static smelt_status compile_declared_shapes(smelt_session *s) {
  const ir_graph *g = s->model->onnx->graph;
  int64_t *vals = malloc(sizeof(int64_t) * (size_t)(g->n_syms + 1));
  if (!vals) return err_nomem("dims", sizeof(int64_t) * (size_t)g->n_syms);
  smelt_status st = parse_dims(g, s->opts.dims, vals);
  bool fixed = !st && !s->opts.dynamic && !(s->opts.buckets && *s->opts.buckets) && g->n_inputs > 0;
  tensor *shapes = fixed ? calloc((size_t)g->n_inputs, sizeof *shapes) : NULL;
  tensor **ptrs = fixed ? calloc((size_t)g->n_inputs, sizeof *ptrs) : NULL;
  if (fixed && (!shapes || !ptrs)) st = err_nomem("input shapes", sizeof *shapes * (size_t)g->n_inputs);
  for (int k = 0; !st && fixed && k < g->n_inputs; k++) {
    const ir_value *v = &g->values[g->inputs[k]];
    fixed = v->kind == TENSOR_KIND_TENSOR && v->rank >= 0 && dtype_bits(v->dtype) != 0;
    int64_t dims[SMELT_MAX_RANK];
    for (int d = 0; fixed && d < v->rank; d++) {
      dims[d] = v->dims[d] <= DIM_SYM_BASE ? vals[dim_sym_index(v->dims[d])] : v->dims[d];
      fixed = dims[d] >= 0;
    }
    /* zeros: max-autotune times its variants on real buffers */
    if (fixed) st = tensor_alloc(&shapes[k], v->dtype, v->rank, dims);
    ptrs[k] = &shapes[k];
  }
  if (!st && fixed) st = s->dev->compile(s, ptrs, NULL);
  for (int k = 0; shapes && k < g->n_inputs; k++) tensor_release(&shapes[k]);
  free(shapes);
  free(ptrs);
  free(vals);
  return st;
}

smelt_status smelt_session_create(const smelt_model *m, const smelt_session_options *opts,
                                  smelt_session **out) {
  return session_create(m, opts, true, out);
}

smelt_status session_create(const smelt_model *m, const smelt_session_options *opts, bool compile_declared,
                            smelt_session **out) {
  if (!m || !out) return err_set(SMELT_ERR_INVALID_ARGUMENT, "smelt_session_create: model and out must not be NULL");
  *out = NULL;
  smelt_session_options o = smelt_session_options_default();
  if (opts)
    TRY(api_struct_read(opts, OPTIONS_V1, sizeof o, &o, "session options",
                        "start from smelt_session_options_default()"));
  if ((unsigned)o.log_level > SMELT_LOG_DEBUG)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "log_level must be SMELT_LOG_ERROR..SMELT_LOG_DEBUG (0..3), got %d",
                   (int)o.log_level);
  TRY(log_level_from_env(&o.log_level));
  if ((unsigned)o.mode > SMELT_MODE_MAX_AUTOTUNE)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "unknown mode %d", (int)o.mode);
  if (o.recompile_limit < 0)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "recompile_limit must be >= 0, got %d", o.recompile_limit);
  if (o.threads < 0) return err_set(SMELT_ERR_INVALID_ARGUMENT, "threads must be >= 0, got %d", o.threads);
  TRY(precision_check(o.precision));
  const backend *dev;
  TRY(backend_lookup(o.device, &dev));
  o.device = dev->name; /* the caller's string need not outlive the call */
  const ir_graph *g = m->onnx->graph;
  TRY(check_supported(dev, g));
  smelt_session *s = calloc(1, sizeof *s);
  if (!s) return err_nomem("session", sizeof *s);
  s->model = m;
  s->opts = o;
  s->log = (smelt_logger){o.log, o.log_user, o.log_level};
  pthread_mutex_init(&s->stats_lock, NULL);
  smelt_status st = bufcache_create(&s->bufs);
  if (!st) {
    if (!s->opts.max_memory) s->opts.max_memory = membudget_default();
    bufcache_set_budget(s->bufs, s->opts.max_memory);
  }
  if (!st) st = pool_create(o.threads, &s->pool);
  if (!st) st = precision_graph(g, o.precision, NULL, &s->precision_graph);
  if (!st) {
    st = dev->open(s);
    if (!st) s->dev = dev; /* closed by smelt_session_free from here on */
    else dev->close(s);    /* what a failed open made so far */
  }
  if (!st && o.mode != SMELT_MODE_EAGER && compile_declared) { /* what compiling allocates (arenas, prepared weights) counts against the budget */
    bufcache *prev = bufcache_enter(s->bufs);
    st = compile_declared_shapes(s);
    bufcache_enter(prev);
  }
  if (st) {
    smelt_session_free(s);
    return st;
  }
  *out = s;
  return SMELT_OK;
}

void smelt_session_free(smelt_session *s) {
  if (!s) return;
  if (s->dev) s->dev->close(s);
  ir_graph_free(s->precision_graph);
  pool_free(s->pool);
  pthread_mutex_destroy(&s->stats_lock);
  bufcache_free_all(s->bufs);
  bufcache_handback_drain(); /* outputs released after runs: nothing keeps them past a session */
  free(s);
}

static const char *describe_value(const ir_graph *g, const ir_value *v, char *buf, size_t n) {
  char sh[256];
  snprintf(buf, n, "%s %s %s", q(v->name), dtype_name(v->dtype), shape_str(sh, sizeof sh, v->rank, v->dims, g->syms));
  return buf;
}

smelt_status session_check_input(const ir_graph *g, int k, const tensor *t, int64_t *sym_vals) {
  const ir_value *v = &g->values[g->inputs[k]];
  char want[512], got[256];
  describe_value(g, v, want, sizeof want);
  shape_str(got, sizeof got, t->rank, t->dims, NULL);
  if (t->kind != TENSOR_KIND_TENSOR) return SMELT_OK; /* sequences/optionals: checked by ops */
  if (v->dtype != SMELT_UNDEFINED && t->dtype != v->dtype)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %s: got %s %s", want, dtype_name(t->dtype), got);
  if (v->rank >= 0 && t->rank != v->rank)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %s: got rank %d %s", want, t->rank, got);
  for (int d = 0; v->rank >= 0 && d < v->rank; d++) {
    int64_t e = v->dims[d];
    if (dim_known(e) && t->dims[d] != e)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %s: got shape %s (dim %d is %lld, expected %lld)",
                     want, got, d, (long long)t->dims[d], (long long)e);
    if (e <= DIM_SYM_BASE && sym_vals) {
      int si = dim_sym_index(e);
      if (sym_vals[si] >= 0 && sym_vals[si] != t->dims[d])
        return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %s: got shape %s, but %s is %lld in an earlier input",
                       want, got, q(g->syms[si]), (long long)sym_vals[si]);
      sym_vals[si] = t->dims[d];
    }
  }
  int64_t n = tensor_numel(t);
  size_t need = 0; /* packed types: ceil(n * bits / 8) */
  bool sized = n >= 0 && dtype_nbytes(t->dtype, n, &need);
  if (n < 0 || (dtype_bits(t->dtype) && !sized) || (sized && t->nbytes < need) ||
      (n > 0 && !t->data))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %s: the buffer holds %zu bytes, shape %s needs %zu",
                   want, t->nbytes, got, need);
  return SMELT_OK;
}

/* The device's run with its buffers current on this thread, then synchronized. */
static smelt_status session_launch(smelt_session *s, tensor *const *inputs, tensor *outputs, eager_stats *stats) {
  const buffer_fns *prev = tensor_buffers_enter(&s->dev->buffers);
  smelt_status st = s->dev->run(s, inputs, outputs, stats);
  if (!st) st = s->dev->synchronize(s);
  tensor_buffers_enter(prev);
  return st;
}

/* t into a new tensor of the same type and shape in the buffers now
 * current (the device's, or the host's), through the device's copy. */
static smelt_status copy_across(const backend *dev, const tensor *t, tensor *dst, backend_copy_kind kind,
                                const char *what, const char *name) {
  if (t->kind != TENSOR_KIND_TENSOR)
    return err_set(SMELT_ERR_UNSUPPORTED, "device %s: %s %s is a sequence or optional; only tensors cross "
                   "to and from its memory", q(dev->name), what, q(name));
  smelt_status st = tensor_alloc_uninit(dst, t->dtype, t->rank, t->dims);
  if (!st && dst->nbytes) /* dst's size: a caller's input buffer may be larger than its shape */
    st = dev->copy(dst->data, t->data, dst->nbytes, kind);
  if (st) tensor_release(dst);
  return st;
}

/* A device with memory of its own: inputs copied into it, the run, results
 * copied out into host buffers (its own then freed). */
static smelt_status run_through_copies(smelt_session *s, tensor *const *inputs, tensor *outputs,
                                       eager_stats *stats) {
  const ir_graph *g = s->model->onnx->graph;
  const backend *dev = s->dev;
  size_t ni = (size_t)g->n_inputs + 1, no = (size_t)g->n_outputs + 1;
  tensor *din = calloc(ni, sizeof *din), **dptr = calloc(ni, sizeof *dptr), *dout = calloc(no, sizeof *dout);
  smelt_status st = !din || !dptr || !dout ? err_nomem("device tensors", ni * sizeof *din) : SMELT_OK;
  const buffer_fns *prev = tensor_buffers_enter(&dev->buffers);
  for (int k = 0; !st && k < g->n_inputs; k++) {
    st = copy_across(dev, inputs[k], &din[k], BACKEND_COPY_HOST_TO_DEVICE, "input", g->values[g->inputs[k]].name);
    dptr[k] = &din[k];
  }
  tensor_buffers_enter(prev);
  if (!st) st = session_launch(s, dptr, dout, stats);
  for (int k = 0; !st && k < g->n_outputs; k++) /* into host memory */
    st = copy_across(dev, &dout[k], &outputs[k], BACKEND_COPY_DEVICE_TO_HOST, "output", g->values[g->outputs[k]].name);
  if (st)
    for (int k = 0; k < g->n_outputs; k++) tensor_release(&outputs[k]);
  prev = tensor_buffers_enter(&dev->buffers);
  for (int k = 0; din && k < g->n_inputs; k++) tensor_release(&din[k]);
  for (int k = 0; dout && k < g->n_outputs; k++) tensor_release(&dout[k]);
  tensor_buffers_enter(prev);
  free(din);
  free(dptr);
  free(dout);
  return st;
}

/* Results belong to the caller: they no longer count against the budget. */
static void disown_tensor(bufcache *c, const tensor *t) {
  if (t->owns_data) bufcache_disown(c, t->data);
  for (int i = 0; i < t->seq_len; i++) disown_tensor(c, t->seq[i]);
}

smelt_status session_run_tensors(smelt_session *s, tensor *const *inputs, tensor *outputs,
                                 eager_stats *stats) {
  pool_wake(s->pool); /* workers asleep after a pause wake while the inputs are checked */
  const ir_graph *g = s->model->onnx->graph;
  int64_t *sym_vals = malloc(sizeof(int64_t) * (size_t)(g->n_syms + 1));
  if (!sym_vals) return err_nomem("symbol table", sizeof(int64_t) * (size_t)g->n_syms);
  for (int i = 0; i < g->n_syms; i++) sym_vals[i] = -1;
  smelt_status st = SMELT_OK;
  for (int k = 0; !st && k < g->n_inputs; k++) st = session_check_input(g, k, inputs[k], sym_vals);
  free(sym_vals);
  if (st) return st;
  bufcache *prev = bufcache_enter(s->bufs);
  st = s->dev->host_memory ? session_launch(s, inputs, outputs, stats)
                           : run_through_copies(s, inputs, outputs, stats);
  for (int k = 0; k < g->n_outputs; k++) disown_tensor(s->bufs, &outputs[k]);
  bufcache_enter(prev);
  return st;
}

smelt_status smelt_session_get_stats(const smelt_session *s, smelt_session_stats *out) {
  if (!s || !out) return err_set(SMELT_ERR_INVALID_ARGUMENT, "smelt_session_get_stats: NULL argument");
  smelt_session_stats st;
  pthread_mutex_lock((pthread_mutex_t *)&s->stats_lock);
  st = s->stats;
  pthread_mutex_unlock((pthread_mutex_t *)&s->stats_lock);
  if (s->sc && s->sc->prep) prep_store_counts(s->sc->prep, &st.prepared_loaded, &st.prepared_saved);
  return api_struct_write(out, &st, STATS_V1, sizeof st, "session stats",
                          "set it to sizeof(smelt_session_stats) before the call");
}
