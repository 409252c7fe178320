/* Executing compiled plans (see plan_run.h). */
#include "runtime/plan_run.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/eager.h"
#include "runtime/gemm_step.h"
#include "ops/node_run.h"
#include "ops/op_cache.h"
#include "parallel/run_ctl.h"
#include "util/err.h"
#include "util/membudget.h"

#define MAX_ARGS 128

typedef struct run_ctx {
  compiled_plan *p;
  uint8_t *arena;
  tensor *const *inputs;
  tensor *dyn; /* per value, for VL_DYN values (NULL if the plan has none) */
  void **outs; /* per graph output, its VL_OUTPUT buffer during a run (NULL if the plan has none) */
  kernel_rt rt;
} run_ctx;

typedef struct ro_call {
  smelt_status (*fn)(void *arg);
  void *arg;
} ro_call;

struct plan_instance {
  uint8_t *arena;
  plan_instance *next_free, *next_all;
  run_ctx rc;
  ro_call *calls; /* reduce-overhead: one per step */
  void **bound;   /* per step: its bound argument block */
};

/* ---- value access ---- */

static void *vptr(const run_ctx *r, int v) {
  const vloc *l = &r->p->loc[v];
  switch (l->kind) {
    case VL_ARENA: return r->arena + l->off;
    case VL_INPUT: return r->inputs[l->input]->data;
    case VL_CONST: return l->cst->data;
    case VL_DYN: return r->dyn[v].data;
    case VL_OUTPUT: return r->outs[l->input] ? (uint8_t *)r->outs[l->input] + l->off : NULL;
    default: return NULL;
  }
}

static void vtensor(const run_ctx *r, int v, tensor *t) {
  const vloc *l = &r->p->loc[v];
  if (l->kind == VL_DYN) {
    *t = r->dyn[v];
  } else { /* the value's own shape: views share their root's bytes */
    const ir_value *val = &r->p->g->values[v];
    tensor_view(t, val->dtype, val->rank, val->dims, vptr(r, v));
  }
  t->owns_data = false;
}

/* ---- steps ---- */

static op_cache *node_cache(const compiled_plan *p, int node) {
  return p->shared_cache ? p->shared_cache : &p->caches[node];
}

/* Points in[i] at a view (in inb[i]) of node input i, NULL where absent. */
static void bind_inputs(run_ctx *r, const ir_node *nd, tensor *inb, tensor **in) {
  for (int i = 0; i < nd->n_inputs; i++) {
    in[i] = NULL;
    if (nd->inputs[i] >= 0) {
      vtensor(r, nd->inputs[i], &inb[i]);
      in[i] = &inb[i];
    }
  }
}

static smelt_status run_kernel(run_ctx *r, const pstep *st) {
  void *a[MAX_ARGS];
  for (int i = 0; i < st->n_args; i++) a[i] = vptr(r, st->args[i]);
  r->p->lib.fns[st->fn](a, st->params, &r->rt);
  return SMELT_OK;
}

/* A GEMM the plan runs itself: inputs A, B, bias?, residual?; output Y. */
static smelt_status run_gemm(run_ctx *r, const pstep *st) {
  const ir_graph *g = r->p->g;
  const ir_node *nd = &g->nodes[st->node];
  const void *in[4] = {NULL, NULL, NULL, NULL};
  for (int i = 0; i < nd->n_inputs && i < 4; i++)
    if (nd->inputs[i] >= 0) in[i] = vptr(r, nd->inputs[i]);
  gemm_io io = {g, st->node, node_cache(r->p, st->node), in[0], in[1], in[2], in[3], vptr(r, nd->outputs[0])};
  smelt_status s = gemm_step_run(st->gemm, &io, r->p->pool, st->variant);
  if (s) {
    char lb[256];
    return err_prefix(s, "%s: ", ir_node_label(g, st->node, lb, sizeof lb));
  }
  return SMELT_OK;
}

static smelt_status run_library(run_ctx *r, const pstep *st) {
  if (st->gemm) return run_gemm(r, st);
  const ir_graph *g = r->p->g;
  const ir_node *nd = &g->nodes[st->node];
  tensor inb[MAX_ARGS], outb[MAX_ARGS], *in[MAX_ARGS], *out[MAX_ARGS];
  bool scratch = false;
  bind_inputs(r, nd, inb, in);
  for (int o = 0; o < nd->n_outputs; o++) {
    out[o] = &outb[o];
    memset(&outb[o], 0, sizeof outb[o]);
    if (nd->outputs[o] < 0) {
      scratch = true;
      outb[o].rank = -1;
      continue;
    }
    vtensor(r, nd->outputs[o], &outb[o]);
    if (st->zero_out && outb[o].nbytes) memset(outb[o].data, 0, outb[o].nbytes);
  }
  op_ctx c = {.graph = g, .node = nd, .opset = nd->opset, .n_in = nd->n_inputs, .n_out = nd->n_outputs,
              .in = in, .out = out, .pool = st->variant == LV_SERIAL ? NULL : r->p->pool,
              .cache = node_cache(r->p, st->node), .memo = (op_memo *)&st->memo};
  smelt_status s = SMELT_OK;
  if (scratch) { /* outputs the graph does not want still need room */
    s = nd->op->infer(&c);
    for (int o = 0; !s && o < nd->n_outputs; o++)
      if (nd->outputs[o] < 0) {
        tensor sh = outb[o];
        s = sh.rank < 0 || tensor_numel(&sh) < 0
                ? err_set(SMELT_ERR_INTERNAL, "output %d has no concrete shape", o)
                : tensor_alloc(&outb[o], sh.dtype, sh.rank, sh.dims);
      }
  }
  if (!s) s = nd->op->run(&c);
  for (int o = 0; scratch && o < nd->n_outputs; o++)
    if (nd->outputs[o] < 0) tensor_release(&outb[o]);
  if (s) {
    char lb[256];
    return err_prefix(s, "%s: ", ir_node_label(g, st->node, lb, sizeof lb));
  }
  return SMELT_OK;
}

/* ---- preparation ---- */

/* A shape-only view of value v: constants keep their data, the rest NULL. */
static bool prep_view(const compiled_plan *p, int v, tensor *t) {
  const vloc *l = &p->loc[v];
  if (l->kind == VL_DYN) return false;
  const ir_value *val = &p->g->values[v];
  tensor_view(t, val->dtype, val->rank, val->dims, l->kind == VL_CONST ? l->cst->data : NULL);
  return true;
}

typedef struct prep_args {
  tensor inb[MAX_ARGS], outb[MAX_ARGS], *in[MAX_ARGS], *out[MAX_ARGS];
} prep_args;

/* A shape-only context for library step st (prep_view's tensors in a);
 * false when a shape is known only when it runs. */
static bool prep_ctx(const compiled_plan *p, const pstep *st, prep_args *a, op_ctx *c) {
  const ir_node *nd = &p->g->nodes[st->node];
  if (nd->n_inputs > MAX_ARGS || nd->n_outputs > MAX_ARGS) return false;
  bool ok = true;
  for (int k = 0; ok && k < nd->n_inputs; k++) {
    a->in[k] = nd->inputs[k] >= 0 ? &a->inb[k] : NULL;
    if (a->in[k]) ok = prep_view(p, nd->inputs[k], &a->inb[k]);
  }
  for (int o = 0; ok && o < nd->n_outputs; o++) {
    a->out[o] = &a->outb[o];
    memset(&a->outb[o], 0, sizeof a->outb[o]);
    a->outb[o].rank = -1;
    if (nd->outputs[o] >= 0) ok = prep_view(p, nd->outputs[o], &a->outb[o]);
  }
  *c = (op_ctx){.graph = p->g, .node = nd, .opset = nd->opset, .n_in = nd->n_inputs, .n_out = nd->n_outputs,
                .in = a->in, .out = a->out, .pool = st->variant == LV_SERIAL ? NULL : p->pool,
                .cache = node_cache(p, st->node)};
  return ok;
}

bool plan_step_describe(const compiled_plan *p, int step, char *buf, size_t n) {
  const pstep *st = &p->steps[step];
  op_describe_fn describe = ops_describe_fn(p->g->nodes[st->node].op);
  prep_args a;
  op_ctx c;
  if (!describe || !prep_ctx(p, st, &a, &c)) return false;
  if (describe(&c, buf, n)) {
    snprintf(buf, n, "(no description: %.200s)", smelt_last_error());
    err_clear();
  }
  return true;
}

smelt_status plan_prepare(compiled_plan *p) {
  const ir_graph *g = p->g;
  for (int i = 0; i < p->n_steps; i++) {
    const pstep *st = &p->steps[i];
    if (!(st->kind == PS_LIBRARY || (st->kind == PS_KERNEL && st->use_lib))) continue;
    const ir_node *nd = &g->nodes[st->node];
    if (st->gemm) { /* the plan's own GEMM: a constant B is packed once */
      if (nd->n_inputs > 1 && nd->inputs[1] >= 0 && p->loc[nd->inputs[1]].kind == VL_CONST) {
        gemm_io io = {.g = g, .node = st->node, .cache = node_cache(p, st->node), .B = p->loc[nd->inputs[1]].cst->data};
        gemm_step_prepare(st->gemm, &io, p->pool);
      }
      continue;
    }
    op_prepare_fn prepare = ops_prepare_fn(nd->op);
    prep_args a;
    op_ctx c;
    if (!prepare || !prep_ctx(p, st, &a, &c)) continue; /* shapes known only when it runs */
    smelt_status s = prepare(&c);
    if (s) {
      char lb[256];
      return err_prefix(s, "%s: preparing: ", ir_node_label(g, st->node, lb, sizeof lb));
    }
  }
  return SMELT_OK;
}

/* A graph break: the eager path, results copied into the plan's buffers
 * (or kept in the dynamic table when their shape is only known now). */
static smelt_status run_break(run_ctx *r, const pstep *st) {
  const ir_graph *g = r->p->g;
  const ir_node *nd = &g->nodes[st->node];
  tensor inb[MAX_ARGS], outb[MAX_ARGS], *in[MAX_ARGS], *out[MAX_ARGS];
  bind_inputs(r, nd, inb, in);
  for (int o = 0; o < nd->n_outputs; o++) {
    memset(&outb[o], 0, sizeof outb[o]);
    out[o] = &outb[o];
  }
  smelt_status s = node_run_cached(g, st->node, in, out, st->variant == LV_SERIAL ? NULL : r->p->pool, NULL, NULL,
                                  node_cache(r->p, st->node));
  for (int o = 0; o < nd->n_outputs; o++) {
    int v = nd->outputs[o];
    const vloc *l = v >= 0 ? &r->p->loc[v] : NULL;
    if (!s && l && l->kind == VL_DYN) {
      tensor_release(&r->dyn[v]);
      r->dyn[v] = outb[o];
      continue;
    }
    if (!s && l && (l->kind == VL_ARENA || l->kind == VL_OUTPUT)) {
      const ir_value *val = &g->values[v];
      if (outb[o].dtype != val->dtype || outb[o].rank != val->rank ||
          (val->rank > 0 && memcmp(outb[o].dims, val->dims, sizeof(int64_t) * (size_t)val->rank))) {
        char lb[256], a[160], b[160];
        s = err_set(SMELT_ERR_RUNTIME, "%s: produced %s %s, the compiled plan expected %s %s",
                    ir_node_label(g, st->node, lb, sizeof lb), dtype_name(outb[o].dtype),
                    shape_str(a, sizeof a, outb[o].rank, outb[o].dims, NULL), dtype_name(val->dtype),
                    shape_str(b, sizeof b, val->rank, val->dims, NULL));
      } else if (outb[o].nbytes) {
        memcpy(vptr(r, v), outb[o].data, outb[o].nbytes);
      }
    }
    tensor_release(&outb[o]);
  }
  return s;
}

static smelt_status run_step(run_ctx *r, int i) {
  const pstep *st = &r->p->steps[i];
  switch (st->kind) {
    case PS_KERNEL: return st->use_lib ? run_library(r, st) : run_kernel(r, st);
    case PS_LIBRARY: return run_library(r, st);
    default: return run_break(r, st);
  }
}

/* ---- reduce-overhead: calls bound to an arena ---- */

typedef struct bound_kernel {
  kernel_fn fn;
  const int64_t *params;
  const kernel_rt *rt;
  void *args[];
} bound_kernel;

typedef struct bound_step {
  run_ctx *r;
  int step;
} bound_step;

static smelt_status call_kernel(void *arg) {
  bound_kernel *b = arg;
  b->fn(b->args, b->params, b->rt);
  return SMELT_OK;
}

static smelt_status call_step(void *arg) {
  bound_step *b = arg;
  return run_step(b->r, b->step);
}

static smelt_status bind_calls(compiled_plan *p, plan_instance *in) {
  in->calls = calloc((size_t)p->n_steps + 1, sizeof *in->calls);
  in->bound = calloc((size_t)p->n_steps + 1, sizeof *in->bound);
  if (!in->calls || !in->bound) return err_nomem("bound calls", sizeof(ro_call) * (size_t)p->n_steps);
  for (int i = 0; i < p->n_steps; i++) {
    const pstep *st = &p->steps[i];
    if (st->kind == PS_KERNEL && !st->use_lib) {
      bound_kernel *b = malloc(sizeof *b + sizeof(void *) * (size_t)st->n_args);
      if (!b) return err_nomem("bound call", sizeof *b);
      b->fn = p->lib.fns[st->fn];
      b->params = st->params;
      b->rt = &in->rc.rt;
      for (int k = 0; k < st->n_args; k++) b->args[k] = vptr(&in->rc, st->args[k]);
      in->bound[i] = b;
      in->calls[i] = (ro_call){call_kernel, b};
    } else {
      bound_step *b = malloc(sizeof *b);
      if (!b) return err_nomem("bound call", sizeof *b);
      *b = (bound_step){&in->rc, i};
      in->bound[i] = b;
      in->calls[i] = (ro_call){call_step, b};
    }
  }
  return SMELT_OK;
}

/* ---- instances ---- */

static void instance_free(compiled_plan *p, plan_instance *in) {
  if (!in) return;
  for (int i = 0; in->bound && i < p->n_steps; i++) free(in->bound[i]);
  free(in->bound);
  free(in->calls);
  free(in->rc.dyn);
  free(in->rc.outs);
  tensor_data_free(in->arena);
  free(in);
}

/* The arena was refused: the message also names the node whose output is
 * the largest value placed in it, the usual culprit. */
static smelt_status arena_refused(const compiled_plan *p) {
  smelt_status s = err_nomem("the compiled plan's arena", p->arena_bytes);
  int big = -1;
  size_t big_bytes = 0;
  for (int v = 0; v < p->g->n_values; v++) {
    const ir_value *val = &p->g->values[v];
    int64_t n = shape_numel(val->rank, val->dims);
    size_t nb;
    if (p->loc[v].kind == VL_ARENA && val->producer >= 0 && n > 0 && dtype_nbytes(val->dtype, n, &nb) &&
        nb > big_bytes)
      big = v, big_bytes = nb;
  }
  if (big < 0) return s;
  char msg[SMELT_ERR_MSG_MAX], lb[256], sz[32];
  snprintf(msg, sizeof msg, "%s", err_message());
  return err_set(s, "%s: %s; its largest value is output '%s' (%s)",
                 ir_node_label(p->g, p->g->values[big].producer, lb, sizeof lb), msg, p->g->values[big].name,
                 membudget_fmt(sz, sizeof sz, big_bytes));
}

static smelt_status instance_new(compiled_plan *p, plan_instance **out) {
  plan_instance *in = calloc(1, sizeof *in);
  if (!in) return err_nomem("plan instance", sizeof *in);
  in->arena = tensor_data_alloc(p->arena_bytes ? p->arena_bytes : 64);
  bool has_dyn = false;
  for (int v = 0; v < p->g->n_values; v++) has_dyn |= p->loc[v].kind == VL_DYN;
  if (has_dyn) in->rc.dyn = calloc((size_t)p->g->n_values, sizeof(tensor));
  if (p->out_bytes) in->rc.outs = calloc((size_t)p->g->n_outputs, sizeof(void *));
  smelt_status s = !in->arena ? arena_refused(p)
                   : has_dyn && !in->rc.dyn ? err_nomem("value table", sizeof(tensor) * (size_t)p->g->n_values)
                   : p->out_bytes && !in->rc.outs ? err_nomem("output table", sizeof(void *) * (size_t)p->g->n_outputs)
                   : SMELT_OK;
  in->rc.p = p;
  in->rc.arena = in->arena;
  in->rc.rt = kernel_rt_make(p->pool);
  if (!s && p->mode == SMELT_MODE_REDUCE_OVERHEAD) s = bind_calls(p, in);
  if (s) {
    instance_free(p, in);
    return s;
  }
  *out = in;
  return SMELT_OK;
}

static smelt_status acquire(compiled_plan *p, plan_instance **out) {
  pthread_mutex_lock(&p->lock);
  plan_instance *in = p->free_list;
  if (in) p->free_list = in->next_free;
  pthread_mutex_unlock(&p->lock);
  if (!in) {
    TRY(instance_new(p, &in));
    pthread_mutex_lock(&p->lock);
    in->next_all = p->all;
    p->all = in;
    pthread_mutex_unlock(&p->lock);
  }
  *out = in;
  return SMELT_OK;
}

static void release(compiled_plan *p, plan_instance *in) {
  if (in->rc.dyn)
    for (int v = 0; v < p->g->n_values; v++) tensor_release(&in->rc.dyn[v]);
  pthread_mutex_lock(&p->lock);
  in->next_free = p->free_list;
  p->free_list = in;
  pthread_mutex_unlock(&p->lock);
}

/* ---- whole run ---- */

/* The outputs: a VL_OUTPUT buffer is handed over as it is (the run wrote
 * the output there), the rest are copied out of the arena, the inputs or
 * the constants. */
static smelt_status deliver_outputs(run_ctx *r, tensor *outputs) {
  const ir_graph *g = r->p->g;
  for (int k = 0; k < g->n_outputs; k++) {
    int v = g->outputs[k];
    const vloc *l = &r->p->loc[v];
    tensor src;
    vtensor(r, v, &src);
    tensor *o = &outputs[k];
    memset(o, 0, sizeof *o);
    o->dtype = src.dtype;
    o->rank = src.rank;
    memcpy(o->dims, src.dims, sizeof o->dims);
    o->nbytes = src.nbytes;
    o->owns_data = true;
    if (l->kind == VL_OUTPUT && l->input == k && l->off == 0) {
      o->data = r->outs[k];
      r->outs[k] = NULL;
      continue;
    }
    o->data = tensor_data_alloc(src.nbytes);
    if (!o->data) return err_nomem("output", src.nbytes);
    if (src.nbytes) memcpy(o->data, src.data, src.nbytes);
  }
  return SMELT_OK;
}

/* The run's VL_OUTPUT buffers (a failure frees those already made). */
static smelt_status alloc_outputs(run_ctx *r) {
  const compiled_plan *p = r->p;
  for (int k = 0; p->out_bytes && k < p->g->n_outputs; k++) {
    if (!p->out_bytes[k]) continue;
    r->outs[k] = tensor_data_alloc(p->out_bytes[k]);
    if (!r->outs[k]) {
      char lb[256], msg[SMELT_ERR_MSG_MAX];
      const ir_value *val = &p->g->values[p->g->outputs[k]];
      smelt_status s = err_nomem("output", p->out_bytes[k]);
      snprintf(msg, sizeof msg, "%s", err_message());
      return err_set(s, "%s: output '%s': %s",
                     val->producer >= 0 ? ir_node_label(p->g, val->producer, lb, sizeof lb) : "graph", val->name, msg);
    }
  }
  return SMELT_OK;
}

/* Frees what deliver_outputs did not hand over (a failed run, or a run
 * without outputs). */
static void free_outputs(run_ctx *r) {
  for (int k = 0; r->outs && k < r->p->g->n_outputs; k++) {
    tensor_data_free(r->outs[k]);
    r->outs[k] = NULL;
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static smelt_status run_all(compiled_plan *p, plan_instance *in, tensor *const *inputs,
                            tensor *outputs, double *step_seconds, const run_hook *hook) {
  run_ctx *r = &in->rc;
  r->inputs = inputs;
  smelt_status s = SMELT_OK;
  for (int k = 0; k < p->g->n_inputs; k++) { /* inputs that live in the arena are copied in */
    const vloc *l = &p->loc[p->g->inputs[k]];
    if (l->kind == VL_ARENA && inputs[k]->nbytes) memcpy(r->arena + l->off, inputs[k]->data, inputs[k]->nbytes);
  }
  s = alloc_outputs(r);
  run_ctl *ctl = run_ctl_current(); /* checked before the first step and after each */
  if (ctl) s = run_ctl_check(ctl, s);
  if (in->calls && !step_seconds && !hook && !ctl) {
    for (int i = 0; !s && i < p->n_steps; i++) s = in->calls[i].fn(in->calls[i].arg);
  } else if (in->calls && !step_seconds && !hook) {
    for (int i = 0; !s && i < p->n_steps; i++) s = run_ctl_check(ctl, in->calls[i].fn(in->calls[i].arg));
  } else {
    for (int i = 0; !s && i < p->n_steps; i++) {
      double t0 = step_seconds ? now_s() : 0;
      if (hook) hook->begin(hook->ctx, p->steps[i].kind_label, p->g->nodes[p->steps[i].node].name);
      s = in->calls ? in->calls[i].fn(in->calls[i].arg) : run_step(r, i);
      if (hook) hook->end(hook->ctx);
      if (step_seconds) step_seconds[i] += now_s() - t0;
      if (ctl) s = run_ctl_check(ctl, s);
    }
  }
  if (!s && outputs) s = deliver_outputs(r, outputs);
  free_outputs(r);
  return s;
}

static smelt_status run_once(compiled_plan *p, tensor *const *inputs, tensor *outputs, double *step_seconds,
                             const run_hook *hook) {
  plan_instance *in;
  TRY(acquire(p, &in));
  smelt_status s = run_all(p, in, inputs, outputs, step_seconds, hook);
  if (s && outputs)
    for (int k = 0; k < p->g->n_outputs; k++) tensor_release(&outputs[k]);
  release(p, in);
  return s;
}

smelt_status plan_run_timed(compiled_plan *p, tensor *const *inputs, tensor *outputs, double *step_seconds) {
  return run_once(p, inputs, outputs, step_seconds, NULL);
}

smelt_status plan_run_hooked(compiled_plan *p, tensor *const *inputs, tensor *outputs, const run_hook *hook) {
  if (p->whole_eager) {
    eager_stats es = {.hook = hook};
    return eager_run(p->eplan, p->pool, NULL, inputs, outputs, &es);
  }
  return run_once(p, inputs, outputs, NULL, hook);
}

smelt_status plan_run(compiled_plan *p, tensor *const *inputs, tensor *outputs) {
  return plan_run_hooked(p, inputs, outputs, NULL);
}

void compiled_plan_instances_free(compiled_plan *p) {
  plan_instance *in = p->all;
  while (in) {
    plan_instance *next = in->next_all;
    instance_free(p, in);
    in = next;
  }
  p->all = p->free_list = NULL;
}
