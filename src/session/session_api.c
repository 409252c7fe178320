/* smelt_session_run(_with): public tensor descriptors in and out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/run_ctl.h"
#include "session/session.h"
#include "util/bufcache.h"
#include "util/err.h"
#include "util/quote.h"

/* Index of the graph input/output a descriptor refers to: by name, or by position. */
static smelt_status match_slot(const ir_graph *g, const int *ids, int n, const smelt_tensor *t,
                               size_t pos, const char *what, int *slot) {
  if (!t->name) {
    if (pos >= (size_t)n)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "%s %zu given, but the model has %d %ss", what, pos, n, what);
    *slot = (int)pos;
    return SMELT_OK;
  }
  for (int k = 0; k < n; k++)
    if (!strcmp(g->values[ids[k]].name, t->name)) {
      *slot = k;
      return SMELT_OK;
    }
  char list[512] = "";
  size_t o = 0;
  for (int k = 0; k < n && o < sizeof list; k++)
    o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", k ? ", " : "", q(g->values[ids[k]].name));
  return err_set(SMELT_ERR_INVALID_ARGUMENT, "the model has no %s named %s; its %ss are: %s", what,
                 q(t->name), what, list);
}

static smelt_status bind_inputs(const ir_graph *g, const smelt_tensor *inputs, size_t n_inputs,
                                tensor *views, tensor **ptrs) {
  if (n_inputs != (size_t)g->n_inputs)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "%zu inputs given, the model takes %d", n_inputs, g->n_inputs);
  for (int k = 0; k < g->n_inputs; k++) ptrs[k] = NULL;
  for (size_t i = 0; i < n_inputs; i++) {
    const smelt_tensor *t = &inputs[i];
    int slot = -1;
    TRY(match_slot(g, g->inputs, g->n_inputs, t, i, "input", &slot));
    if (ptrs[slot])
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %s is given twice", q(g->values[g->inputs[slot]].name));
    if (t->rank < 0 || t->rank > SMELT_MAX_RANK)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %s: rank %d is outside 0..%d",
                     q(g->values[g->inputs[slot]].name), t->rank, SMELT_MAX_RANK);
    tensor_view(&views[slot], t->dtype, t->rank, t->dims, t->data);
    views[slot].nbytes = t->nbytes;
    ptrs[slot] = &views[slot];
  }
  return SMELT_OK;
}

/* Hands result r to the caller's descriptor d: moves it, or copies into d's
 * buffer.  On failure d is as it was. */
static smelt_status deliver(const ir_graph *g, int slot, tensor *r, smelt_tensor *d) {
  const char *name = g->values[g->outputs[slot]].name;
  if (r->kind != TENSOR_KIND_TENSOR)
    return err_set(SMELT_ERR_UNSUPPORTED, "output %s is a sequence or optional; the C API returns tensors only", q(name));
  if (d->data) {
    if (d->dtype != r->dtype || d->nbytes < r->nbytes)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "output %s is %s of %zu bytes; the buffer given is %s of %zu bytes",
                     q(name), dtype_name(r->dtype), r->nbytes, dtype_name(d->dtype), d->nbytes);
    if (r->nbytes) memcpy(d->data, r->data, r->nbytes);
  } else if (r->owns_data) {
    d->data = r->data; /* moved: r keeps a non-owning pointer for a repeated request */
    r->owns_data = false;
    d->owner = SMELT_OWNER_SMELT;
  } else {
    d->data = tensor_data_alloc(r->nbytes);
    if (!d->data) return err_nomem("output", r->nbytes);
    if (r->nbytes) memcpy(d->data, r->data, r->nbytes);
    d->owner = SMELT_OWNER_SMELT;
  }
  d->dtype = r->dtype;
  d->rank = r->rank;
  memcpy(d->dims, r->dims, sizeof d->dims);
  d->nbytes = r->nbytes;
  return SMELT_OK;
}

/* All outputs or none: hands every result over, or, when one cannot be
 * handed over, frees what was allocated for the ones before it and puts
 * their descriptors back as the caller gave them. */
static smelt_status deliver_all(const ir_graph *g, const int *slots, tensor *res, smelt_tensor *outputs,
                                size_t n_outputs) {
  smelt_tensor *given = malloc(sizeof *given * (n_outputs + 1));
  if (!given) return err_nomem("output descriptors", sizeof *given * n_outputs);
  if (n_outputs) memcpy(given, outputs, sizeof *given * n_outputs);
  smelt_status st = SMELT_OK;
  size_t done = 0;
  for (; !st && done < n_outputs; done++) st = deliver(g, slots[done], &res[slots[done]], &outputs[done]);
  if (st) /* the failed one (done - 1) is unchanged */
    for (size_t i = 0; i + 1 < done; i++) {
      if (!given[i].data) tensor_data_free(outputs[i].data); /* smelt's: moved or copied */
      outputs[i] = given[i];
    }
  free(given);
  return st;
}

smelt_status smelt_session_run(smelt_session *s, const smelt_tensor *inputs, size_t n_inputs,
                               smelt_tensor *outputs, size_t n_outputs) {
  return smelt_session_run_with(s, inputs, n_inputs, outputs, n_outputs, NULL);
}

smelt_status smelt_session_run_with(smelt_session *s, const smelt_tensor *inputs, size_t n_inputs,
                                    smelt_tensor *outputs, size_t n_outputs,
                                    const smelt_run_options *options) {
  if (!s || (n_inputs && !inputs) || (n_outputs && !outputs))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "smelt_session_run: NULL session, inputs or outputs");
  run_ctl ctl; /* the deadline starts here */
  bool active = false;
  TRY(run_ctl_init(&ctl, options, &active));
  const ir_graph *g = s->model->onnx->graph;
  if (n_outputs > (size_t)g->n_outputs)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "%zu outputs asked for, the model has %d", n_outputs, g->n_outputs);
  size_t ni = (size_t)g->n_inputs + 1, no = (size_t)g->n_outputs + 1;
  tensor *views = calloc(ni, sizeof *views), **ptrs = calloc(ni, sizeof *ptrs);
  tensor *res = calloc(no, sizeof *res);
  int *slots = calloc(n_outputs + 1, sizeof *slots);
  smelt_status st = (!views || !ptrs || !res || !slots) ? err_nomem("run", ni * sizeof *views) : SMELT_OK;
  if (!st) st = bind_inputs(g, inputs, n_inputs, views, ptrs);
  for (size_t i = 0; !st && i < n_outputs; i++)
    st = match_slot(g, g->outputs, g->n_outputs, &outputs[i], i, "output", &slots[i]);
  if (!st) {
    run_ctl *prev = run_ctl_enter(active ? &ctl : NULL);
    st = session_run_tensors(s, ptrs, res, NULL);
    run_ctl_enter(prev);
  }
  if (!st) st = deliver_all(g, slots, res, outputs, n_outputs);
  /* results not handed over (copied into the caller's buffers, or not
   * asked for) go back to the session's cache for the next run */
  bufcache *prev = bufcache_enter(s->bufs);
  for (int k = 0; res && k < g->n_outputs; k++) tensor_release(&res[k]);
  bufcache_enter(prev);
  free(views);
  free(ptrs);
  free(res);
  free(slots);
  return st;
}
