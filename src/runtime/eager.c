/* Eager execution of a graph (see eager.h).
 * Complexity: plan O(n + v + e) (last uses bucketed per step); a run O(n)
 * plus the kernels, each value freed at its last use. */
#include "runtime/eager.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/node_run.h"
#include "ops/op_cache.h"
#include "parallel/run_ctl.h"
#include "util/err.h"
#include "util/quote.h"

typedef struct eager_frame {
  const eager_plan *plan;
  tensor *vals;            /* one per value of plan->graph */
  struct eager_frame *parent;
  smelt_pool *pool;
  eager_stats *stats;
} eager_frame;

smelt_status eager_plan_build(const ir_graph *g, eager_plan *p) {
  memset(p, 0, sizeof *p);
  p->graph = g;
  TRY(ir_graph_toposort(g, &p->order));
  p->last_use = malloc(sizeof(int) * (size_t)(g->n_values + 1));
  if (!p->last_use) {
    eager_plan_free(p);
    return err_nomem("eager plan", sizeof(int) * (size_t)g->n_values);
  }
  for (int v = 0; v < g->n_values; v++) p->last_use[v] = -1;
  for (int step = 0; step < g->n_nodes; step++) {
    const ir_node *nd = &g->nodes[p->order[step]];
    int *deps = NULL, n = 0;
    smelt_status s = ir_node_deps(g, nd, &deps, &n);
    if (s) {
      eager_plan_free(p);
      return s;
    }
    for (int k = 0; k < n; k++) p->last_use[deps[k]] = step;
    free(deps);
    /* an output nobody reads is freed right after its producer */
    for (int o = 0; o < nd->n_outputs; o++)
      if (nd->outputs[o] >= 0 && p->last_use[nd->outputs[o]] < step) p->last_use[nd->outputs[o]] = step;
  }
  for (int k = 0; k < g->n_outputs; k++) p->last_use[g->outputs[k]] = INT32_MAX;
  /* bucket values by the step after which they die */
  p->free_start = calloc((size_t)g->n_nodes + 2, sizeof(int));
  p->free_list = malloc(sizeof(int) * (size_t)(g->n_values + 1));
  if (!p->free_start || !p->free_list) {
    eager_plan_free(p);
    return err_nomem("eager plan", sizeof(int) * (size_t)g->n_values);
  }
  for (int v = 0; v < g->n_values; v++)
    if (p->last_use[v] >= 0 && p->last_use[v] < g->n_nodes) p->free_start[p->last_use[v] + 1]++;
  for (int k = 0; k < g->n_nodes; k++) p->free_start[k + 1] += p->free_start[k];
  int *fill = calloc((size_t)g->n_nodes + 1, sizeof(int));
  if (!fill) {
    eager_plan_free(p);
    return err_nomem("eager plan", sizeof(int) * (size_t)g->n_nodes);
  }
  for (int v = 0; v < g->n_values; v++) {
    int k = p->last_use[v];
    if (k >= 0 && k < g->n_nodes) p->free_list[p->free_start[k] + fill[k]++] = v;
  }
  free(fill);
  p->caches = calloc((size_t)g->n_nodes + 1, sizeof(op_cache));
  if (!p->caches) {
    eager_plan_free(p);
    return err_nomem("eager plan", sizeof(op_cache) * (size_t)g->n_nodes);
  }
  return SMELT_OK;
}

void eager_plan_free(eager_plan *p) {
  if (p->caches) op_cache_free_all(p->caches, p->graph->n_nodes);
  free(p->caches);
  free(p->order);
  free(p->last_use);
  free(p->free_start);
  free(p->free_list);
  memset(p, 0, sizeof *p);
}

static size_t owned_bytes(const tensor *t) {
  size_t n = t->owns_data ? t->nbytes : 0;
  for (int i = 0; i < t->seq_len; i++) n += owned_bytes(t->seq[i]);
  return n;
}

static void frame_release(eager_frame *f, int v) {
  tensor *t = &f->vals[v];
  if (f->plan->graph->values[v].flags & (IR_VALUE_INPUT | IR_VALUE_INITIALIZER | IR_VALUE_OUTER)) {
    memset(t, 0, sizeof *t); /* a view: what it points at belongs to someone else */
    return;
  }
  if (f->stats) f->stats->live_bytes -= owned_bytes(t);
  tensor_release(t);
}

static smelt_status run_subgraph(void *exec, const ir_graph *body, int n_in, tensor *const *ins,
                                 int n_out, tensor *outs) {
  eager_frame *f = exec;
  if (n_in != body->n_inputs || n_out != body->n_outputs)
    return err_set(SMELT_ERR_INVALID_MODEL, "subgraph %s takes %d inputs and gives %d outputs, "
                   "but was called with %d and %d", q(body->name), body->n_inputs, body->n_outputs,
                   n_in, n_out);
  /* every If branch, Loop/Scan iteration and SequenceMap element comes
   * through here: a loop stops even when its body has no nodes */
  TRY(run_ctl_check(run_ctl_current(), SMELT_OK));
  eager_plan p;
  TRY(eager_plan_build(body, &p));
  p.plain = f->plan->plain;
  p.device = f->plan->device;
  smelt_status s = eager_run(&p, f->pool, f, ins, outs, f->stats);
  eager_plan_free(&p);
  return s;
}

/* Binds inputs, initializers and captured outer values as views. */
static smelt_status frame_bind(eager_frame *f, tensor *const *inputs) {
  const ir_graph *g = f->plan->graph;
  for (int k = 0; k < g->n_inputs; k++) {
    const tensor *src = inputs[k];
    tensor *dst = &f->vals[g->inputs[k]];
    *dst = *src;
    dst->owns_data = false;
  }
  for (int v = 0; v < g->n_values; v++) {
    const ir_value *val = &g->values[v];
    if ((val->flags & IR_VALUE_INITIALIZER) && !(val->flags & IR_VALUE_INPUT)) {
      f->vals[v] = *val->constant;
      f->vals[v].owns_data = false;
    } else if (val->flags & IR_VALUE_OUTER) {
      if (!f->parent || val->outer_id < 0)
        return err_set(SMELT_ERR_INVALID_MODEL, "value %s refers to an enclosing graph that is not running",
                       q(val->name));
      f->vals[v] = f->parent->vals[val->outer_id];
      f->vals[v].owns_data = false;
      f->vals[v].seq = NULL; /* sequences are read through the parent's copy */
      f->vals[v].seq_len = 0;
      if (f->parent->vals[val->outer_id].kind == TENSOR_KIND_SEQUENCE) {
        f->vals[v].seq = f->parent->vals[val->outer_id].seq;
        f->vals[v].seq_len = f->parent->vals[val->outer_id].seq_len;
      }
    }
  }
  return SMELT_OK;
}

/* A view must never free what it points at, sequences included. */
static void frame_unbind_views(eager_frame *f) {
  const ir_graph *g = f->plan->graph;
  for (int v = 0; v < g->n_values; v++)
    if (g->values[v].flags & (IR_VALUE_INPUT | IR_VALUE_INITIALIZER | IR_VALUE_OUTER))
      memset(&f->vals[v], 0, sizeof(tensor));
}

/* A view op (Reshape, Flatten, Squeeze, Unsqueeze, Identity) may take over
 * input 0's buffer when this frame owns it and nothing reads it after this
 * step (nor this node through another input): no copy, no allocation. */
static bool donates(const eager_frame *f, int step, const ir_node *nd) {
  if (!op_is_view(nd->op) || nd->n_inputs < 1 || nd->n_outputs != 1 || nd->outputs[0] < 0) return false;
  int v = nd->inputs[0];
  if (v < 0 || f->plan->last_use[v] != step || !f->vals[v].owns_data) return false;
  if (f->plan->graph->values[v].flags & (IR_VALUE_INPUT | IR_VALUE_INITIALIZER | IR_VALUE_OUTER)) return false;
  for (int k = 1; k < nd->n_inputs; k++)
    if (nd->inputs[k] == v) return false;
  return true;
}

static smelt_status run_step(eager_frame *f, int step) {
  const eager_plan *p = f->plan;
  const ir_graph *g = p->graph;
  int id = p->order[step];
  const ir_node *nd = &g->nodes[id];
  tensor *in[64], *out[64], scratch[64];
  if (nd->n_inputs > 64 || nd->n_outputs > 64)
    return err_set(SMELT_ERR_UNSUPPORTED, "node with more than 64 inputs or outputs");
  for (int i = 0; i < nd->n_inputs; i++) in[i] = nd->inputs[i] >= 0 ? &f->vals[nd->inputs[i]] : NULL;
  for (int o = 0; o < nd->n_outputs; o++) {
    memset(&scratch[o], 0, sizeof scratch[o]);
    out[o] = nd->outputs[o] >= 0 ? &f->vals[nd->outputs[o]] : &scratch[o];
  }
  const run_hook *hook = f->stats ? f->stats->hook : NULL;
  if (hook) hook->begin(hook->ctx, nd->op_type, nd->name);
  bool aliased = false;
  smelt_status s = SMELT_OK;
  if (donates(f, step, nd)) {
    size_t moved = owned_bytes(in[0]);
    s = node_run_alias(g, id, in, out, &aliased);
    if (aliased && f->stats) f->stats->live_bytes -= moved; /* counted again as the output's below */
  }
  if (!s && !aliased)
    s = node_run_cached(g, id, in, out, f->pool, run_subgraph, f, p->plain ? NULL : &p->caches[id]);
  if (hook) hook->end(hook->ctx);
  for (int o = 0; o < nd->n_outputs; o++) {
    if (nd->outputs[o] < 0) tensor_release(&scratch[o]);
    else if (f->stats) f->stats->live_bytes += owned_bytes(out[o]);
  }
  if (f->stats) {
    if (f->stats->live_bytes > f->stats->peak_bytes) f->stats->peak_bytes = f->stats->live_bytes;
    f->stats->nodes_run++;
  }
  return s;
}

static smelt_status collect_outputs(eager_frame *f, tensor *outputs) {
  const ir_graph *g = f->plan->graph;
  for (int k = 0; k < g->n_outputs; k++) {
    int v = g->outputs[k], prev = -1;
    for (int j = 0; j < k; j++)
      if (g->outputs[j] == v) prev = j;
    const ir_value *val = &g->values[v];
    bool view = val->flags & (IR_VALUE_INPUT | IR_VALUE_INITIALIZER | IR_VALUE_OUTER);
    if (prev >= 0) TRY(tensor_clone(&outputs[k], &outputs[prev]));
    else if (view) TRY(tensor_clone(&outputs[k], &f->vals[v]));
    else {
      if (f->stats) f->stats->live_bytes -= owned_bytes(&f->vals[v]);
      outputs[k] = f->vals[v];
      memset(&f->vals[v], 0, sizeof(tensor));
    }
  }
  return SMELT_OK;
}

smelt_status eager_run(const eager_plan *p, smelt_pool *pool, eager_frame *parent,
                       tensor *const *inputs, tensor *outputs, eager_stats *stats) {
  const ir_graph *g = p->graph;
  eager_frame f = {p, calloc((size_t)g->n_values + 1, sizeof(tensor)), parent, pool, stats};
  if (!f.vals) return err_nomem("value table", sizeof(tensor) * (size_t)g->n_values);
  run_ctl *ctl = run_ctl_current();
  smelt_status s = frame_bind(&f, inputs);
  if (ctl) s = run_ctl_check(ctl, s);
  for (int step = 0; !s && step < g->n_nodes; step++) {
    s = run_step(&f, step);
    if (ctl) s = run_ctl_check(ctl, s); /* a kernel stopped mid-way left garbage: never read it */
    for (int k = p->free_start[step]; !s && k < p->free_start[step + 1]; k++)
      frame_release(&f, p->free_list[k]);
  }
  if (!s) s = collect_outputs(&f, outputs);
  frame_unbind_views(&f);
  for (int v = 0; v < g->n_values; v++) frame_release(&f, v);
  free(f.vals);
  return s;
}
