/* The compile pipeline (see compile.h) and what it reports.
 *
 * Complexity: the stages' (see each file); the report and the eager-peak
 * estimate here are O(n + v). */
#include "compile/compile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/gemm_step.h"
#include "ops/op_cache.h"
#include "runtime/eager.h"
#include "runtime/plan_run.h"
#include "tune/autotune.h"
#include "util/err.h"
#include "util/file.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Frees the plan's steps and value locations, leaving both NULL. */
static void free_steps(compiled_plan *p) {
  for (int i = 0; i < p->n_steps; i++) {
    free(p->steps[i].args);
    free(p->steps[i].params);
    free(p->steps[i].gemm);
    op_memo_clear(&p->steps[i].memo);
  }
  free(p->steps);
  free(p->loc);
  free(p->out_bytes);
  p->steps = NULL;
  p->loc = NULL;
}

void compiled_plan_free(compiled_plan *p) {
  if (!p) return;
  compiled_plan_instances_free(p);
  free_steps(p);
  if (p->caches) op_cache_free_all(p->caches, p->g->n_nodes);
  free(p->caches);
  if (p->owns_lib) kernel_lib_close(&p->lib);
  if (p->eplan) eager_plan_free(p->eplan);
  free(p->eplan);
  free(p->in_sig);
  ir_graph_free(p->g);
  pthread_mutex_destroy(&p->lock);
  free(p);
}

void compile_report_free(compile_report *r) { sb_free(&r->explain); }

static const char *nname(const ir_graph *g, int n, char *buf, size_t len) {
  return ir_node_label(g, n, buf, len);
}

static smelt_status check_fullgraph(const cgraph *cg) {
  const ir_graph *g = cg->g;
  char lb[256];
  if (cg->whole_eager)
    return err_set(SMELT_ERR_UNSUPPORTED, "fullgraph: %s cannot be compiled: it %s",
                   cg->whole_eager_node >= 0 ? nname(g, cg->whole_eager_node, lb, sizeof lb) : "the graph",
                   cg->whole_eager_why);
  for (int s = 0; s < g->n_nodes; s++) {
    int n = cg->order[s];
    if (cg->info[n].kind == CN_BREAK)
      return err_set(SMELT_ERR_UNSUPPORTED, "fullgraph: %s is a graph break: %s", nname(g, n, lb, sizeof lb),
                     cg->info[n].why);
  }
  return SMELT_OK;
}

/* Peak bytes the eager executor would hold for this graph (every node's
 * outputs allocated when made, freed after their last use).  O(nodes + values). */
static size_t eager_estimate(const cgraph *cg) {
  const ir_graph *g = cg->g;
  size_t nv = (size_t)g->n_values + 1;
  int *last = malloc(sizeof(int) * nv), *start = calloc((size_t)g->n_nodes + 2, sizeof(int));
  int *dies = malloc(sizeof(int) * nv); /* values by the step of their last use, ascending ids */
  if (!last || !start || !dies) {
    free(last);
    free(start);
    free(dies);
    return 0;
  }
  for (int v = 0; v < g->n_values; v++) last[v] = cg->is_output[v] ? g->n_nodes : -1;
  for (int s = 0; s < g->n_nodes; s++) {
    const ir_node *nd = &g->nodes[cg->order[s]];
    for (int i = 0; i < nd->n_inputs; i++)
      if (nd->inputs[i] >= 0 && last[nd->inputs[i]] < s) last[nd->inputs[i]] = s;
  }
  for (int v = 0; v < g->n_values; v++)
    if (last[v] >= 0 && last[v] < g->n_nodes) start[last[v] + 1]++;
  for (int s = 0; s < g->n_nodes; s++) start[s + 1] += start[s];
  for (int v = 0; v < g->n_values; v++)
    if (last[v] >= 0 && last[v] < g->n_nodes) dies[start[last[v]]++] = v;
  for (int s = g->n_nodes; s > 0; s--) start[s] = start[s - 1]; /* back to the first of each step */
  start[0] = 0;
  size_t live = 0, peak = 0;
  for (int s = 0; s < g->n_nodes; s++) {
    const ir_node *nd = &g->nodes[cg->order[s]];
    if (cg->info[cg->order[s]].kind == CN_CONST) continue;
    for (int o = 0; o < nd->n_outputs; o++) {
      const ir_value *v = nd->outputs[o] >= 0 ? &g->values[nd->outputs[o]] : NULL;
      int64_t n = v ? shape_numel(v->rank, v->dims) : -1;
      size_t nb;
      if (n > 0 && dtype_nbytes(v->dtype, n, &nb)) live += nb;
    }
    if (live > peak) peak = live;
    for (int j = start[s]; j < start[s + 1]; j++) {
      const ir_value *v = &g->values[dies[j]];
      if ((v->flags & (IR_VALUE_INPUT | IR_VALUE_INITIALIZER)) || v->constant) continue;
      int64_t n = shape_numel(v->rank, v->dims);
      size_t nb;
      if (n > 0 && dtype_nbytes(v->dtype, n, &nb) && live >= nb) live -= nb;
    }
  }
  free(last);
  free(start);
  free(dies);
  return peak;
}

/* "loads float16,int64 stores float16": the element types a kernel reads and writes
 * (it computes in f32: codegen/kir.h). */
static const char *kernel_dtypes(const kir_group *kg, char *buf, size_t n) {
  size_t len = 0;
  buf[0] = 0;
  for (int side = 0; side < 2; side++) {
    const kir_operand *ops = side ? kg->out : kg->in;
    int n_ops = side ? kg->n_out : kg->n_in;
    bool seen[SMELT_DTYPE_COUNT] = {false};
    len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%s", side ? ", stores " : "loads ");
    bool first = true;
    for (int k = 0; k < n_ops && len < n; k++) {
      int t = (int)ops[k].dt;
      if (t >= 0 && t < SMELT_DTYPE_COUNT) {
        if (seen[t]) continue;
        seen[t] = true;
      }
      len += (size_t)snprintf(buf + len, n - len, "%s%s", first ? "" : ",", dtype_name(ops[k].dt));
      first = false;
    }
    if (first && len < n) len += (size_t)snprintf(buf + len, n - len, "nothing");
  }
  return buf;
}

/* "int8 u8s8 gemm (...), f32 x f32 -> f32, int8 weights, small-M": a GEMM
 * step's element types and the kernel the registry chose for it. */
static void explain_gemm(strbuf *e, const gemm_step *gs) {
  static const char *const shapes[GEMM_SHAPE_COUNT] = {"gemv", "small-M", "large"};
  const gemm_params *p = &gs->tmpl;
  char bt[96];
  ir_quant_describe(&gs->bq, gs->dt_b, bt, sizeof bt); /* B's element type: int8 / int4 with their scales */
  sb_printf(e, " gemm %s x %s -> %s, %s%s, %lldx%lldx%lld (%s): %s", dtype_name(gs->dt_a), bt, dtype_name(gs->dt_y),
            gs->w == GEMM_W_F32 ? "weights as stored" : gemm_wform_name(gs->w), gs->w == GEMM_W_F32 ? "" : " weights",
            (long long)p->M, (long long)p->N, (long long)p->K, shapes[gemm_shape_of(p->M, p->N, p->K)],
            gs->kern->name);
}

static void explain_groups(const cgraph *cg, const fusion *fu, strbuf *e) {
  char lb[256], sh[256];
  for (int i = 0; i < fu->n_groups; i++) {
    const fgroup *fg = &fu->groups[i];
    if (fg->win) {
      static const char *const kinds[] = {"max pool", "average pool", "depthwise conv"};
      sb_printf(e, "  kernel %d: %s window %lldx%lld over %s: %s\n", i, kinds[fg->win->kind],
                (long long)fg->win->KH, (long long)fg->win->KW, shape_str(sh, sizeof sh, fg->r, fg->I, NULL),
                nname(cg->g, fg->nodes[0], lb, sizeof lb));
      continue;
    }
    char dts[96];
    sb_printf(e, "  kernel %d over %s%s, %d node%s, %zu bytes kept in registers (%s):", i,
              shape_str(sh, sizeof sh, fg->r, fg->I, NULL), fg->kir->n_red ? " (row reduction)" : "", fg->n,
              fg->n == 1 ? "" : "s", fg->bytes_saved, kernel_dtypes(fg->kir, dts, sizeof dts));
    for (int k = 0; k < fg->n; k++) sb_printf(e, " %s", nname(cg->g, fg->nodes[k], lb, sizeof lb));
    sb_printf(e, "\n");
  }
}

static void explain_plan(const compiled_plan *p, const cgraph *cg, const fusion *fu, compile_report *r) {
  strbuf *e = &r->explain;
  char lb[256];
  sb_printf(e, "graph breaks: %d\n", r->graph_breaks);
  for (int s = 0; s < cg->g->n_nodes; s++) {
    int n = cg->order[s];
    if (cg->info[n].kind == CN_BREAK)
      sb_printf(e, "  %s: %s\n", nname(cg->g, n, lb, sizeof lb), cg->info[n].why);
  }
  sb_printf(e, "fusions: %d\n", fu->n_log);
  for (int i = 0; i < fu->n_log; i++) sb_printf(e, "  %s\n", fu->log[i]);
  sb_printf(e, "fused groups: %d -> %d generated kernels%s; library steps: %d\n", r->groups, r->kernels,
            r->no_codegen ? " (none: no C compiler, groups run their reference kernels)" : "",
            p->n_library);
  if (!r->no_codegen) explain_groups(cg, fu, e);
  for (int i = 0; i < p->n_steps; i++) {
    const pstep *st = &p->steps[i];
    if (st->kind != PS_LIBRARY) continue;
    const ir_node *nd = &cg->g->nodes[st->node];
    sb_printf(e, "  library: %s", nname(cg->g, st->node, lb, sizeof lb));
    char how[512];
    if (st->gemm) explain_gemm(e, st->gemm);
    else if (plan_step_describe(p, i, how, sizeof how)) sb_printf(e, " %s", how);
    else if (nd->n_outputs > 0 && nd->outputs[0] >= 0)
      sb_printf(e, " -> %s, the op's kernel", dtype_name(cg->g->values[nd->outputs[0]].dtype));
    sb_printf(e, "\n");
  }
  sb_printf(e, "arena: %.3f MB (eager would peak at %.3f MB)\n", (double)p->arena_bytes / 1e6,
            (double)r->eager_bytes / 1e6);
}

static void debug_plan(const compile_options *o, const compiled_plan *p) {
  if (!o->debug_dir) return;
  strbuf b = {0};
  char lb[256], sh[256];
  sb_printf(&b, "steps: %d, arena %zu bytes\n", p->n_steps, p->arena_bytes);
  for (int i = 0; i < p->n_steps; i++) {
    const pstep *st = &p->steps[i];
    const char *k = st->kind == PS_KERNEL ? "kernel" : st->kind == PS_LIBRARY ? "library" : "break";
    sb_printf(&b, "%3d %-7s %s", i, k, nname(p->g, st->node, lb, sizeof lb));
    if (st->kind == PS_KERNEL) sb_printf(&b, st->use_lib ? " library op (tuned)" : " fn %d", st->fn);
    if (st->seconds > 0) sb_printf(&b, " %.3f ms", st->seconds * 1e3);
    if (st->gemm) sb_printf(&b, " gemm %s", gemm_step_variant_name(st->variant));
    else if (st->kind != PS_KERNEL) sb_printf(&b, " variant %d", st->variant);
    sb_printf(&b, "\n");
  }
  sb_printf(&b, "values:\n");
  for (int v = 0; v < p->g->n_values; v++) {
    const vloc *l = &p->loc[v];
    const ir_value *val = &p->g->values[v];
    if (l->kind == VL_NONE) continue;
    static const char *const kinds[] = {"none", "arena", "input", "const", "dynamic", "output"};
    sb_printf(&b, "  v%d %s %s %s", v, dtype_name(val->dtype), shape_str(sh, sizeof sh, val->rank, val->dims, NULL),
              kinds[l->kind]);
    if (l->kind == VL_ARENA) sb_printf(&b, " +%zu", l->off);
    if (l->kind == VL_OUTPUT) sb_printf(&b, " %d +%zu", l->input, l->off);
    sb_printf(&b, "\n");
  }
  char path[2048];
  snprintf(path, sizeof path, "%s/plan.txt", o->debug_dir);
  if (!b.oom) file_write_atomic(path, b.s, b.len);
  sb_free(&b);
}

static smelt_status save_signature(compiled_plan *p, const ir_graph *mg, tensor *const *inputs) {
  p->n_inputs = mg->n_inputs;
  p->in_sig = calloc((size_t)mg->n_inputs + 1, sizeof(tensor));
  if (!p->in_sig) return err_nomem("input signature", sizeof(tensor) * (size_t)mg->n_inputs);
  for (int k = 0; k < mg->n_inputs; k++) {
    p->in_sig[k].dtype = inputs[k]->dtype;
    p->in_sig[k].rank = inputs[k]->rank;
    memcpy(p->in_sig[k].dims, inputs[k]->dims, sizeof p->in_sig[k].dims);
  }
  return SMELT_OK;
}

/* Fusion, schedule, kernels; without a usable compiler the plan is remade
 * with every group on its reference kernels. */
static smelt_status build_steps(compiled_plan *p, const cgraph *cg, const compile_options *o, compile_report *r) {
  fusion fu;
  double t0 = now_s();
  TRY(fuse_graph(cg, true, &fu));
  double t1 = now_s();
  smelt_status s = schedule_plan(cg, &fu, true, p);
  double t2 = now_s();
  r->t_fuse += t1 - t0;
  r->t_plan += t2 - t1;
  r->groups = fu.n_groups;
  r->fusions = fu.n_log;
  if (!s) s = kernels_build(p, &fu, o, r);
  if (s && s != SMELT_ERR_NOMEM && !o->fullgraph) {
    snprintf(r->warning, sizeof r->warning, "%s; running the fused groups with their reference kernels",
             smelt_last_error());
    r->no_codegen = true;
    r->kernels = 0;
    free_steps(p);
    p->n_steps = p->n_kernels = p->n_breaks = p->n_library = 0;
    s = schedule_plan(cg, &fu, false, p);
  } else if (s && o->fullgraph) {
    s = err_prefix(s, "fullgraph: ");
  }
  if (!s) {
    r->graph_breaks = p->n_breaks;
    r->library_steps = p->n_library;
    r->arena_bytes = p->arena_bytes;
    r->eager_bytes = eager_estimate(cg);
    explain_plan(p, cg, &fu, r);
  }
  fusion_free(&fu);
  return s;
}

smelt_status compile_model(const ir_graph *mg, tensor *const *inputs, const compile_options *o,
                           compiled_plan **out, compile_report *rep) {
  compile_report local;
  memset(&local, 0, sizeof local);
  compile_report *r = rep ? rep : &local;
  double t0 = now_s();
  *out = NULL;
  compiled_plan *p = calloc(1, sizeof *p);
  if (!p) return err_nomem("compiled plan", sizeof *p);
  pthread_mutex_init(&p->lock, NULL);
  p->mode = o->mode;
  p->pool = o->pool;
  smelt_status s = save_signature(p, mg, inputs);
  if (!s) s = specialize_graph(mg, inputs, o, &p->g, r);
  cgraph cg;
  memset(&cg, 0, sizeof cg);
  if (!s) s = cgraph_build(p->g, o->dynamic, o->mode == SMELT_MODE_MAX_AUTOTUNE, &cg);
  if (!s && o->fullgraph) s = check_fullgraph(&cg);
  if (!s && cg.whole_eager) {
    char lb[256];
    p->whole_eager = true;
    r->graph_breaks = mg->n_nodes;
    sb_printf(&r->explain, "whole graph runs eagerly: %s %s\n",
              cg.whole_eager_node >= 0 ? nname(p->g, cg.whole_eager_node, lb, sizeof lb) : "the graph",
              cg.whole_eager_why);
    if (!(p->eplan = calloc(1, sizeof *p->eplan))) s = err_nomem("eager plan", sizeof *p->eplan);
    else s = eager_plan_build(mg, p->eplan);
  } else if (!s) {
    /* prepared weights are keyed by what they were made from (weights,
     * algorithm, geometry): one session-wide cache serves every plan.  Set
     * before the steps: weights may be prepared while the kernels compile */
    p->shared_cache = o->op_cache;
    if (!p->shared_cache && !(p->caches = calloc((size_t)p->g->n_nodes + 1, sizeof(op_cache))))
      s = err_nomem("op caches", sizeof(op_cache) * (size_t)p->g->n_nodes);
    if (!s) s = build_steps(p, &cg, o, r);
  }
  cgraph_free(&cg);
  double tt = now_s();
  if (!s && o->mode == SMELT_MODE_MAX_AUTOTUNE && !p->whole_eager) s = autotune_plan(p, inputs, o->cache, &r->explain, &r->tune_cache_hit, o->log);
  r->t_tune += now_s() - tt;
  if (!s) debug_plan(o, p);
  r->seconds += now_s() - t0;
  if (!rep) compile_report_free(&local);
  if (s) {
    compiled_plan_free(p);
    return s;
  }
  *out = p;
  return SMELT_OK;
}
