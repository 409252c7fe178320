/* Control flow: If, Loop and Scan (opset 8 and 9+), running their body graphs
 * through the executor's run_subgraph.
 *
 * Loop-carried values go from one iteration's outputs to the next one's
 * inputs without copies: iteration k owns what iteration k-1 produced and
 * frees it after running.  Per-iteration scan outputs are kept until the end
 * and stacked along their axis once, so every element is copied exactly once. */
#include <stdlib.h>
#include <string.h>

#include "ops/shape_util.h"
#include "util/err.h"

#define CF_MAX_VALUES 64

static smelt_status body_attr(op_ctx *c, const char *name, const ir_graph **g) {
  const ir_attr *a = ir_attr_find(c->node, name);
  if (!a || a->type != IR_ATTR_GRAPH || !a->g)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute %s (a graph) is required", name);
  *g = a->g;
  return SMELT_OK;
}

/* Output i takes the kind and dtype declared for body output j; the shape is
 * left unknown (it may change from one run to the next). */
static void out_from_body(op_ctx *c, int i, const ir_graph *body, int j) {
  const ir_value *v = &body->values[body->outputs[j]];
  op_set_out(c, i, v->dtype, -1, NULL);
  c->out[i]->kind = v->kind;
}

static void release_all(tensor *t, int n) {
  for (int i = 0; i < n; i++) tensor_release(&t[i]);
}

/* ---- stacking per-iteration outputs ---- */

/* out = the n parts (equal shapes) stacked along a new axis `axis`, in
 * reverse order when reverse.  With no parts the shape is [0] + the body's
 * declared shape when that is concrete, else [0]. */
static smelt_status stack_parts(tensor *const *parts, int64_t n, int axis, bool reverse,
                                const ir_value *decl, tensor *out) {
  if (!n) {
    int64_t d[SMELT_MAX_RANK] = {0};
    int r = 1;
    if (decl->rank >= 0 && decl->rank < SMELT_MAX_RANK && shape_numel(decl->rank, decl->dims) >= 0) {
      memcpy(d + 1, decl->dims, sizeof(int64_t) * (size_t)decl->rank);
      r += decl->rank;
    }
    smelt_dtype dt = decl->dtype != SMELT_UNDEFINED ? decl->dtype : SMELT_F32;
    return tensor_alloc(out, dt, r, d);
  }
  const tensor *p0 = parts[0];
  for (int64_t i = 0; i < n; i++) {
    const tensor *p = parts[i];
    if (p->kind != TENSOR_KIND_TENSOR || p->dtype != p0->dtype || p->rank != p0->rank ||
        (p->rank && memcmp(p->dims, p0->dims, sizeof(int64_t) * (size_t)p->rank)))
      return err_set(SMELT_ERR_RUNTIME, "scan output of iteration %lld differs in type or shape "
                     "from iteration 0", (long long)i);
  }
  if (p0->rank + 1 > SMELT_MAX_RANK)
    return err_set(SMELT_ERR_UNSUPPORTED, "scan output rank above %d", SMELT_MAX_RANK);
  TRY(su_check_movable(p0, 0));
  if (axis < 0 || axis > p0->rank)
    return err_set(SMELT_ERR_INVALID_MODEL, "scan output axis %d is out of range for rank %d", axis,
                   p0->rank + 1);
  int64_t d[SMELT_MAX_RANK];
  for (int k = 0, o = 0; k <= p0->rank; k++) d[k] = k == axis ? n : p0->dims[o++];
  TRY(tensor_alloc(out, p0->dtype, p0->rank + 1, d));
  int64_t outer = shape_numel(axis, p0->dims);
  size_t run = (size_t)shape_numel(p0->rank - axis, p0->dims + axis) * dtype_size(p0->dtype);
  for (int64_t i = 0; i < n; i++) {
    const char *src = parts[reverse ? n - 1 - i : i]->data;
    for (int64_t o = 0; run && o < outer; o++)
      memcpy((char *)out->data + ((size_t)(o * n + i)) * run, src + (size_t)o * run, run);
  }
  return SMELT_OK;
}

/* A growable list of owned per-iteration tensors. */
typedef struct part_list {
  tensor **v;
  int64_t n, cap;
} part_list;

static smelt_status parts_push(part_list *l, tensor *t) {
  if (l->n == l->cap) {
    int64_t cap = l->cap ? 2 * l->cap : 16;
    tensor **p = realloc(l->v, sizeof *p * (size_t)cap);
    if (!p) return err_nomem("scan outputs", sizeof *p * (size_t)cap);
    l->v = p;
    l->cap = cap;
  }
  tensor *h = malloc(sizeof *h);
  if (!h) return err_nomem("scan output", sizeof *h);
  *h = *t;
  memset(t, 0, sizeof *t);
  l->v[l->n++] = h;
  return SMELT_OK;
}

static void parts_free(part_list *l) {
  for (int64_t i = 0; i < l->n; i++) tensor_free(l->v[i]);
  free(l->v);
  memset(l, 0, sizeof *l);
}

/* ---- If ---- */

static smelt_status if_infer(op_ctx *c) {
  const ir_graph *g = NULL;
  TRY(body_attr(c, "then_branch", &g));
  if (g->n_outputs != c->n_out)
    return err_set(SMELT_ERR_INVALID_MODEL, "then_branch has %d outputs, the node %d", g->n_outputs,
                   c->n_out);
  for (int o = 0; o < c->n_out; o++) out_from_body(c, o, g, o);
  return SMELT_OK;
}

static smelt_status if_run(op_ctx *c) {
  const tensor *cond = c->in[0];
  if (cond->kind != TENSOR_KIND_TENSOR || cond->dtype != SMELT_BOOL || tensor_numel(cond) != 1)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 0 (cond) must be a bool tensor with one element");
  bool take = ((const uint8_t *)cond->data)[0] != 0;
  const ir_graph *g = NULL;
  TRY(body_attr(c, take ? "then_branch" : "else_branch", &g));
  if (g->n_outputs != c->n_out)
    return err_set(SMELT_ERR_INVALID_MODEL, "%s has %d outputs, the node %d",
                   take ? "then_branch" : "else_branch", g->n_outputs, c->n_out);
  if (c->n_out > CF_MAX_VALUES) return err_set(SMELT_ERR_UNSUPPORTED, "more than %d outputs", CF_MAX_VALUES);
  tensor res[CF_MAX_VALUES];
  memset(res, 0, sizeof(tensor) * (size_t)c->n_out);
  smelt_status s = c->run_subgraph(c->exec, g, 0, NULL, c->n_out, res);
  if (s) {
    release_all(res, c->n_out);
    return err_prefix(s, "%s: ", take ? "then_branch" : "else_branch");
  }
  for (int o = 0; o < c->n_out; o++) {
    tensor_release(c->out[o]);
    *c->out[o] = res[o];
  }
  return SMELT_OK;
}

/* ---- Loop ---- */

typedef struct loop_state {
  int n_carried, n_scan;
  tensor *carried;  /* n_carried current values (owned after iteration 0) */
  bool owned;       /* carried[] are owned (else views of the node's inputs) */
  part_list *scans; /* n_scan lists */
} loop_state;

static smelt_status loop_infer(op_ctx *c) {
  const ir_graph *body = NULL;
  TRY(body_attr(c, "body", &body));
  int n_carried = c->n_in - 2;
  if (n_carried < 0) return err_set(SMELT_ERR_INVALID_MODEL, "Loop needs the M and cond input slots");
  if (body->n_inputs != n_carried + 2 || body->n_outputs != c->n_out + 1 || c->n_out < n_carried)
    return err_set(SMELT_ERR_INVALID_MODEL, "body takes %d inputs and gives %d outputs; the node "
                   "has %d loop-carried values and %d outputs", body->n_inputs, body->n_outputs,
                   n_carried, c->n_out);
  for (int o = 0; o < c->n_out; o++) {
    out_from_body(c, o, body, o + 1);
    if (o >= n_carried) c->out[o]->kind = TENSOR_KIND_TENSOR;
  }
  return SMELT_OK;
}

static smelt_status scalar_arg(const tensor *t, smelt_dtype want, const char *what) {
  if (t->kind != TENSOR_KIND_TENSOR || t->dtype != want || tensor_numel(t) != 1)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "%s must be a %s tensor with one element", what,
                   dtype_name(want));
  return SMELT_OK;
}

/* One iteration: runs the body on (i, cond, carried...), then takes the new
 * carried values and appends the scan outputs.  *cond receives the body's. */
static smelt_status loop_step(op_ctx *c, const ir_graph *body, loop_state *st, int64_t i,
                              bool *cond) {
  int n_in = st->n_carried + 2, n_out = body->n_outputs;
  tensor it, cv, res[CF_MAX_VALUES], *args[CF_MAX_VALUES];
  TRY(tensor_alloc(&it, SMELT_I64, 0, NULL));
  smelt_status s = tensor_alloc(&cv, SMELT_BOOL, 0, NULL);
  if (s) {
    tensor_release(&it);
    return s;
  }
  ((int64_t *)it.data)[0] = i;
  ((uint8_t *)cv.data)[0] = *cond;
  args[0] = &it;
  args[1] = &cv;
  for (int k = 0; k < st->n_carried; k++) args[k + 2] = &st->carried[k];
  memset(res, 0, sizeof(tensor) * (size_t)n_out);
  s = c->run_subgraph(c->exec, body, n_in, args, n_out, res);
  tensor_release(&it);
  tensor_release(&cv);
  if (!s) s = scalar_arg(&res[0], SMELT_BOOL, "the body's condition output");
  if (!s) {
    *cond = ((const uint8_t *)res[0].data)[0] != 0;
    if (st->owned) release_all(st->carried, st->n_carried);
    memcpy(st->carried, res + 1, sizeof(tensor) * (size_t)st->n_carried);
    memset(res + 1, 0, sizeof(tensor) * (size_t)st->n_carried);
    st->owned = true;
  }
  for (int k = 0; !s && k < st->n_scan; k++) s = parts_push(&st->scans[k], &res[1 + st->n_carried + k]);
  release_all(res, n_out);
  return s;
}

static smelt_status loop_finish(op_ctx *c, const ir_graph *body, loop_state *st) {
  for (int k = 0; k < st->n_carried; k++) {
    tensor_release(c->out[k]);
    if (st->owned) {
      *c->out[k] = st->carried[k];
      memset(&st->carried[k], 0, sizeof(tensor));
    } else {
      TRY(tensor_clone(c->out[k], &st->carried[k]));
    }
  }
  for (int k = 0; k < st->n_scan; k++) {
    int o = st->n_carried + k;
    tensor_release(c->out[o]);
    const ir_value *decl = &body->values[body->outputs[o + 1]];
    smelt_status s = stack_parts(st->scans[k].v, st->scans[k].n, 0, false, decl, c->out[o]);
    if (s) return err_prefix(s, "scan output %d: ", k);
  }
  return SMELT_OK;
}

static smelt_status loop_bounds(op_ctx *c, int64_t *max_trip, bool *cond) {
  const tensor *m = op_in(c, 0), *cv = op_in(c, 1);
  *max_trip = INT64_MAX;
  *cond = true;
  if (m) {
    TRY(scalar_arg(m, SMELT_I64, "input 0 (M)"));
    *max_trip = ((const int64_t *)m->data)[0];
  }
  if (cv) {
    TRY(scalar_arg(cv, SMELT_BOOL, "input 1 (cond)"));
    *cond = ((const uint8_t *)cv->data)[0] != 0;
  }
  if (!m && !cv)
    return err_set(SMELT_ERR_UNSUPPORTED, "a Loop without trip count and condition never ends");
  return SMELT_OK;
}

static smelt_status loop_run(op_ctx *c) {
  TRY(loop_infer(c));
  const ir_graph *body = NULL;
  TRY(body_attr(c, "body", &body));
  if (c->n_in > CF_MAX_VALUES || body->n_outputs > CF_MAX_VALUES)
    return err_set(SMELT_ERR_UNSUPPORTED, "more than %d loop values", CF_MAX_VALUES);
  int64_t max_trip = 0;
  bool cond = false;
  TRY(loop_bounds(c, &max_trip, &cond));
  tensor carried[CF_MAX_VALUES];
  part_list scans[CF_MAX_VALUES];
  loop_state st = {c->n_in - 2, c->n_out - (c->n_in - 2), carried, false, scans};
  memset(scans, 0, sizeof scans);
  for (int k = 0; k < st.n_carried; k++) {
    if (!c->in[k + 2]) return err_set(SMELT_ERR_INVALID_MODEL, "loop-carried input %d is missing", k + 2);
    carried[k] = *c->in[k + 2];
  }
  smelt_status s = SMELT_OK;
  for (int64_t i = 0; !s && i < max_trip && cond; i++) {
    s = loop_step(c, body, &st, i, &cond);
    if (s) s = err_prefix(s, "iteration %lld: ", (long long)i);
  }
  if (!s) s = loop_finish(c, body, &st);
  if (st.owned) release_all(carried, st.n_carried);
  for (int k = 0; k < st.n_scan; k++) parts_free(&scans[k]);
  return s;
}

/* ---- Scan ---- */

typedef struct scan_cfg {
  const ir_graph *body;
  int n_state, n_scan_in, n_scan_out;
  int in_axis[CF_MAX_VALUES], out_axis[CF_MAX_VALUES];
  bool in_rev[CF_MAX_VALUES], out_rev[CF_MAX_VALUES];
} scan_cfg;

/* Reads a per-input ints attribute (axes or directions); absent means 0. */
static smelt_status scan_ints(op_ctx *c, const char *name, int n, int64_t *out) {
  int cnt;
  const int64_t *v = ir_attr_ints(c->node, name, &cnt);
  for (int i = 0; i < n; i++) out[i] = 0;
  if (!v) return SMELT_OK;
  if (cnt != n)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute %s has %d values, expected %d", name, cnt, n);
  for (int i = 0; i < n; i++) out[i] = v[i];
  return SMELT_OK;
}

/* Scan cuts its inputs by byte offsets: packed elements have none. */
static smelt_status scan_check_bytes(const tensor *x) {
  if (dtype_is_subbyte(x->dtype))
    return err_set(SMELT_ERR_UNSUPPORTED, "Scan over a %s tensor is not supported (packed "
                   "sub-byte type)", dtype_name(x->dtype));
  return SMELT_OK;
}

/* scan_out[t] = the slice of x at position t along axis (a dense copy). */
static smelt_status slice_at(const tensor *x, int axis, int64_t t, tensor *out) {
  TRY(scan_check_bytes(x));
  int64_t d[SMELT_MAX_RANK];
  for (int k = 0, o = 0; k < x->rank; k++)
    if (k != axis) d[o++] = x->dims[k];
  TRY(tensor_alloc(out, x->dtype, x->rank - 1, d));
  int64_t outer = shape_numel(axis, x->dims), T = x->dims[axis];
  size_t run = (size_t)shape_numel(x->rank - axis - 1, x->dims + axis + 1) * dtype_size(x->dtype);
  for (int64_t o = 0; run && o < outer; o++)
    memcpy((char *)out->data + (size_t)o * run, (const char *)x->data + (size_t)(o * T + t) * run,
           run);
  return SMELT_OK;
}

static smelt_status scan_config(op_ctx *c, int first_state, scan_cfg *cfg) {
  TRY(body_attr(c, "body", &cfg->body));
  int64_t m = op_attr_int(c, "num_scan_inputs", -1);
  int n_vals = c->n_in - first_state;
  if (m < 1 || m > n_vals)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute num_scan_inputs is %lld, expected 1..%d",
                   (long long)m, n_vals);
  cfg->n_scan_in = (int)m;
  cfg->n_state = n_vals - (int)m;
  cfg->n_scan_out = c->n_out - cfg->n_state;
  const ir_graph *b = cfg->body;
  if (cfg->n_scan_out < 0 || b->n_inputs != n_vals || b->n_outputs != c->n_out)
    return err_set(SMELT_ERR_INVALID_MODEL, "body takes %d inputs and gives %d outputs; the node "
                   "has %d inputs and %d outputs", b->n_inputs, b->n_outputs, n_vals, c->n_out);
  if (n_vals > CF_MAX_VALUES || c->n_out > CF_MAX_VALUES)
    return err_set(SMELT_ERR_UNSUPPORTED, "more than %d scan values", CF_MAX_VALUES);
  int64_t v[CF_MAX_VALUES];
  bool v8 = c->opset < 9;
  TRY(scan_ints(c, v8 ? "directions" : "scan_input_directions", cfg->n_scan_in, v));
  for (int i = 0; i < cfg->n_scan_in; i++) cfg->in_rev[i] = v[i] != 0;
  TRY(scan_ints(c, "scan_input_axes", v8 ? 0 : cfg->n_scan_in, v));
  for (int i = 0; i < cfg->n_scan_in; i++) cfg->in_axis[i] = v8 ? 0 : (int)v[i];
  TRY(scan_ints(c, "scan_output_directions", v8 ? 0 : cfg->n_scan_out, v));
  for (int i = 0; i < cfg->n_scan_out; i++) cfg->out_rev[i] = !v8 && v[i] != 0;
  TRY(scan_ints(c, "scan_output_axes", v8 ? 0 : cfg->n_scan_out, v));
  for (int i = 0; i < cfg->n_scan_out; i++) cfg->out_axis[i] = v8 ? 0 : (int)v[i];
  return SMELT_OK;
}

static smelt_status scan_infer(op_ctx *c) {
  scan_cfg cfg;
  TRY(scan_config(c, c->opset < 9 ? 1 : 0, &cfg));
  for (int o = 0; o < c->n_out; o++) out_from_body(c, o, cfg.body, o);
  return SMELT_OK;
}

/* Normalizes the scan input axes for these inputs and finds the common
 * sequence length. */
static smelt_status scan_length(scan_cfg *cfg, tensor *const *scans, int *axes, int64_t *T) {
  for (int i = 0; i < cfg->n_scan_in; i++) {
    const tensor *x = scans[i];
    if (x->kind != TENSOR_KIND_TENSOR || x->rank < 1)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "scan input %d must be a tensor of rank >= 1", i);
    TRY(op_axis(cfg->in_axis[i], x->rank, "scan_input_axes", &axes[i]));
    if (i && x->dims[axes[i]] != *T)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "scan input %d has %lld steps, scan input 0 %lld", i,
                     (long long)x->dims[axes[i]], (long long)*T);
    *T = x->dims[axes[i]];
  }
  return SMELT_OK;
}

/* One scan over T steps: states (views) in, final states and the
 * per-step scan outputs (owned, in `parts`) out. */
static smelt_status scan_loop(op_ctx *c, scan_cfg *cfg, tensor *const *states, tensor *const *scans,
                              int64_t T, tensor *final, part_list *parts) {
  int ns = cfg->n_state, nb = cfg->body->n_outputs, axes[CF_MAX_VALUES];
  int64_t T0 = 0;
  TRY(scan_length(cfg, scans, axes, &T0));
  if (T < 0 || T > T0) T = T0;
  bool owned = false;
  tensor slices[CF_MAX_VALUES], res[CF_MAX_VALUES], *args[CF_MAX_VALUES];
  for (int k = 0; k < ns; k++) final[k] = *states[k];
  memset(slices, 0, sizeof slices);
  smelt_status s = SMELT_OK;
  for (int64_t t = 0; !s && t < T; t++) {
    for (int i = 0; !s && i < cfg->n_scan_in; i++)
      s = slice_at(scans[i], axes[i], cfg->in_rev[i] ? T - 1 - t : t, &slices[i]);
    for (int k = 0; k < ns; k++) args[k] = &final[k];
    for (int i = 0; i < cfg->n_scan_in; i++) args[ns + i] = &slices[i];
    memset(res, 0, sizeof(tensor) * (size_t)nb);
    if (!s) s = c->run_subgraph(c->exec, cfg->body, ns + cfg->n_scan_in, args, nb, res);
    release_all(slices, cfg->n_scan_in);
    if (!s) {
      if (owned) release_all(final, ns);
      memcpy(final, res, sizeof(tensor) * (size_t)ns);
      memset(res, 0, sizeof(tensor) * (size_t)ns);
      owned = true;
    }
    for (int k = 0; !s && k < cfg->n_scan_out; k++) s = parts_push(&parts[k], &res[ns + k]);
    release_all(res, nb);
    if (s) s = err_prefix(s, "step %lld: ", (long long)t);
  }
  if (s) {
    if (owned) release_all(final, ns);
    memset(final, 0, sizeof(tensor) * (size_t)ns);
    return s;
  }
  for (int k = 0; !owned && k < ns; k++) { /* no steps: the states pass through */
    s = tensor_clone(&final[k], states[k]);
    if (s) {
      release_all(final, k);
      memset(final + k, 0, sizeof(tensor) * (size_t)(ns - k));
      return s;
    }
  }
  return SMELT_OK;
}

/* Scan-9+: one scan over the whole inputs. */
static smelt_status scan9_run(op_ctx *c, scan_cfg *cfg) {
  part_list parts[CF_MAX_VALUES];
  tensor final[CF_MAX_VALUES];
  memset(parts, 0, sizeof parts);
  smelt_status s = scan_loop(c, cfg, c->in, c->in + cfg->n_state, -1, final, parts);
  for (int k = 0; !s && k < cfg->n_state; k++) {
    tensor_release(c->out[k]);
    *c->out[k] = final[k];
    memset(&final[k], 0, sizeof(tensor));
  }
  for (int k = 0; !s && k < cfg->n_scan_out; k++) {
    int o = cfg->n_state + k, axis = 0;
    const tensor *p0 = parts[k].n ? parts[k].v[0] : NULL;
    int r = p0 ? p0->rank + 1 : 1;
    s = op_axis(cfg->out_axis[k], r, "scan_output_axes", &axis);
    tensor_release(c->out[o]);
    if (!s) s = stack_parts(parts[k].v, parts[k].n, axis, cfg->out_rev[k],
                            &cfg->body->values[cfg->body->outputs[o]], c->out[o]);
    if (s) s = err_prefix(s, "scan output %d: ", k);
  }
  if (s) release_all(final, cfg->n_state);
  for (int k = 0; k < cfg->n_scan_out; k++) parts_free(&parts[k]);
  return s;
}

/* A view of batch entry b of x (the leading axis removed). */
static void batch_view(const tensor *x, int64_t b, tensor *v) {
  size_t row = (size_t)shape_numel(x->rank - 1, x->dims + 1) * dtype_size(x->dtype);
  tensor_view(v, x->dtype, x->rank - 1, x->dims + 1, (char *)x->data + (size_t)b * row);
}

/* Scan-8 output k of batch entry b: the steps stacked into [T, ...], zero
 * padded past this entry's length; *out is allocated at the first entry. */
static smelt_status scan8_place(part_list *parts, int64_t B, int64_t T, int64_t b,
                                const ir_value *decl, tensor *out) {
  tensor steps;
  TRY(stack_parts(parts->v, parts->n, 0, false, decl, &steps));
  smelt_status s = SMELT_OK;
  if (!out->data) {
    int64_t d[SMELT_MAX_RANK];
    d[0] = B;
    d[1] = T;
    if (steps.rank + 1 > SMELT_MAX_RANK) s = err_set(SMELT_ERR_UNSUPPORTED, "rank above %d", SMELT_MAX_RANK);
    else memcpy(d + 2, steps.dims + 1, sizeof(int64_t) * (size_t)(steps.rank - 1));
    if (!s) s = tensor_alloc(out, steps.dtype, steps.rank + 1, d);
  }
  if (!s && (out->dtype != steps.dtype || out->rank != steps.rank + 1 ||
             memcmp(out->dims + 2, steps.dims + 1, sizeof(int64_t) * (size_t)(steps.rank - 1))))
    s = err_set(SMELT_ERR_RUNTIME, "batch entry %lld gives a scan output of another shape", (long long)b);
  if (!s) memcpy((char *)out->data + (size_t)b * (out->nbytes / (size_t)(B ? B : 1)), steps.data, steps.nbytes);
  tensor_release(&steps);
  return s;
}

static smelt_status scan8_batch(op_ctx *c, scan_cfg *cfg, int64_t B, int64_t T, int64_t b,
                                tensor *state_parts) {
  tensor sv[CF_MAX_VALUES], xv[CF_MAX_VALUES], final[CF_MAX_VALUES], *sp[CF_MAX_VALUES], *xp[CF_MAX_VALUES];
  part_list parts[CF_MAX_VALUES];
  memset(parts, 0, sizeof parts);
  for (int k = 0; k < cfg->n_state + cfg->n_scan_in; k++) TRY(scan_check_bytes(c->in[1 + k]));
  for (int k = 0; k < cfg->n_state; k++) {
    batch_view(c->in[1 + k], b, &sv[k]);
    sp[k] = &sv[k];
  }
  for (int i = 0; i < cfg->n_scan_in; i++) {
    batch_view(c->in[1 + cfg->n_state + i], b, &xv[i]);
    xp[i] = &xv[i];
  }
  int64_t len = T;
  const tensor *lens = op_in(c, 0);
  if (lens) len = tensor_get_i64(lens, b);
  if (len < 0 || len > T)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "sequence_lens[%lld] is %lld, outside 0..%lld",
                   (long long)b, (long long)len, (long long)T);
  smelt_status s = scan_loop(c, cfg, sp, xp, len, final, parts);
  for (int k = 0; !s && k < cfg->n_state; k++) {
    state_parts[k * B + b] = final[k];
    memset(&final[k], 0, sizeof(tensor));
  }
  for (int k = 0; !s && k < cfg->n_scan_out; k++) {
    int o = cfg->n_state + k;
    s = scan8_place(&parts[k], B, T, b, &cfg->body->values[cfg->body->outputs[o]], c->out[o]);
  }
  release_all(final, cfg->n_state);
  for (int k = 0; k < cfg->n_scan_out; k++) parts_free(&parts[k]);
  return s;
}

static smelt_status scan8_check(op_ctx *c, scan_cfg *cfg, int64_t *B, int64_t *T) {
  const tensor *lens = op_in(c, 0);
  for (int k = 1; k < c->n_in; k++) {
    const tensor *x = c->in[k];
    bool scan = k > cfg->n_state;
    if (!x || x->kind != TENSOR_KIND_TENSOR || x->rank < (scan ? 2 : 1))
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %d must be a tensor with a batch axis%s", k,
                     scan ? " and a sequence axis" : "");
    if (k > 1 && x->dims[0] != *B)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %d has batch size %lld, input 1 %lld", k,
                     (long long)x->dims[0], (long long)*B);
    *B = x->dims[0];
    if (scan) *T = x->dims[1];
  }
  if (lens && (lens->kind != TENSOR_KIND_TENSOR || !dtype_is_int(lens->dtype) || tensor_numel(lens) != *B))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 0 (sequence_lens) must hold %lld integers",
                   (long long)*B);
  return SMELT_OK;
}

/* Scan-8: a batch axis in front; the body runs per batch entry. */
static smelt_status scan8_run(op_ctx *c, scan_cfg *cfg) {
  int64_t B = 0, T = 0;
  TRY(scan8_check(c, cfg, &B, &T));
  tensor *state_parts = calloc((size_t)(cfg->n_state * B) + 1, sizeof(tensor));
  tensor **ptrs = calloc((size_t)B + 1, sizeof(tensor *));
  smelt_status s = state_parts && ptrs ? SMELT_OK : err_nomem("scan states", sizeof(tensor) * (size_t)B);
  for (int k = cfg->n_state; k < c->n_out; k++) tensor_release(c->out[k]);
  for (int64_t b = 0; !s && b < B; b++) {
    s = scan8_batch(c, cfg, B, T, b, state_parts);
    if (s) s = err_prefix(s, "batch entry %lld: ", (long long)b);
  }
  for (int k = 0; !s && k < cfg->n_state; k++) {
    for (int64_t b = 0; b < B; b++) ptrs[b] = &state_parts[k * B + b];
    tensor_release(c->out[k]);
    s = stack_parts(ptrs, B, 0, false, &cfg->body->values[cfg->body->outputs[k]], c->out[k]);
  }
  for (int k = cfg->n_state; !s && B == 0 && k < c->n_out; k++) /* no batch: nothing was placed */
    s = stack_parts(NULL, 0, 0, false, &cfg->body->values[cfg->body->outputs[k]], c->out[k]);
  for (int64_t i = 0; state_parts && i < cfg->n_state * B; i++) tensor_release(&state_parts[i]);
  free(state_parts);
  free(ptrs);
  return s;
}

static smelt_status scan_run(op_ctx *c) {
  scan_cfg cfg;
  bool v8 = c->opset < 9;
  TRY(scan_config(c, v8 ? 1 : 0, &cfg));
  for (int i = v8 ? 1 : 0; i < c->n_in; i++)
    if (!c->in[i]) return err_set(SMELT_ERR_INVALID_MODEL, "input %d is missing", i);
  return v8 ? scan8_run(c, &cfg) : scan9_run(c, &cfg);
}

const op_def op_family_control_flow[] = {
    {"If", "", 1, 1, 0, -1, if_infer, if_run, true},
    {"Loop", "", 0, -1, 0, -1, loop_infer, loop_run, true}, /* M and cond may both be absent */
    {"Scan", "", 0, -1, 0, -1, scan_infer, scan_run, true}, /* Scan-8: input 0 may be absent */
    {0}};
