/* Sequence ops: SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceAt,
 * SequenceErase, SequenceLength, SplitToSequence, ConcatFromSequence and
 * SequenceMap (a subgraph per element).  Every result is a fresh owning value:
 * elements of input sequences are cloned, never shared. */
#include <stdlib.h>
#include <string.h>

#include "ops/nn_util.h"
#include "ops/seq_util.h"
#include "ops/shape_util.h"
#include "util/err.h"

/* Output i is a sequence of dt (its elements' shapes are not tracked). */
static void seq_out(op_ctx *c, int i, smelt_dtype dt) {
  op_set_out(c, i, dt, -1, NULL);
  c->out[i]->kind = TENSOR_KIND_SEQUENCE;
}

/* Static inference of ops that take a sequence: nothing is known about it. */
static smelt_status seq_out_infer(op_ctx *c) {
  seq_out(c, 0, c->in[0] ? c->in[0]->dtype : SMELT_UNDEFINED);
  return SMELT_OK;
}

/* ---- SequenceEmpty, SequenceConstruct ---- */

static smelt_status empty_dtype(op_ctx *c, smelt_dtype *dt) {
  int64_t d = op_attr_int(c, "dtype", SMELT_F32);
  if (d <= 0 || d >= SMELT_DTYPE_COUNT || !dtype_size((smelt_dtype)d))
    return err_set(SMELT_ERR_UNSUPPORTED, "attribute dtype %lld is not a supported tensor type",
                   (long long)d);
  *dt = (smelt_dtype)d;
  return SMELT_OK;
}

static smelt_status empty_infer(op_ctx *c) {
  smelt_dtype dt = SMELT_F32;
  TRY(empty_dtype(c, &dt));
  seq_out(c, 0, dt);
  return SMELT_OK;
}

static smelt_status empty_run(op_ctx *c) {
  smelt_dtype dt = SMELT_F32;
  TRY(empty_dtype(c, &dt));
  seq_init(c->out[0], dt);
  return SMELT_OK;
}

static smelt_status construct_infer(op_ctx *c) {
  for (int i = 1; i < c->n_in; i++)
    if (c->in[i] && c->in[0] && c->in[i]->dtype != c->in[0]->dtype)
      return err_set(SMELT_ERR_INVALID_MODEL, "input %d is %s, input 0 is %s", i,
                     dtype_name(c->in[i]->dtype), dtype_name(c->in[0]->dtype));
  seq_out(c, 0, c->in[0] ? c->in[0]->dtype : SMELT_UNDEFINED);
  return SMELT_OK;
}

static smelt_status construct_run(op_ctx *c) {
  seq_init(c->out[0], SMELT_UNDEFINED);
  for (int i = 0; i < c->n_in; i++) {
    if (!c->in[i] || c->in[i]->kind != TENSOR_KIND_TENSOR)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %d must be a tensor", i);
    TRY(seq_append_clone(c->out[0], c->in[i]));
  }
  return SMELT_OK;
}

/* ---- SequenceInsert, SequenceErase, SequenceAt, SequenceLength ---- */

/* Clones elements [0, n) of src into dst except skip (-1: none), inserting
 * extra (if set) before index at. */
static smelt_status seq_rebuild(tensor *dst, const tensor *src, int skip, const tensor *extra,
                                int at) {
  seq_init(dst, src->dtype);
  for (int i = 0; i <= src->seq_len; i++) {
    if (extra && i == at) TRY(seq_append_clone(dst, extra));
    if (i < src->seq_len && i != skip) TRY(seq_append_clone(dst, src->seq[i]));
  }
  return SMELT_OK;
}

static smelt_status insert_run(op_ctx *c) {
  const tensor *s = c->in[0], *t = c->in[1];
  TRY(seq_check(s, "input 0 (input_sequence)"));
  if (t->kind != TENSOR_KIND_TENSOR)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 1 (tensor) must be a tensor");
  if (s->dtype != SMELT_UNDEFINED && t->dtype != s->dtype)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "cannot insert a %s tensor into a sequence of %s",
                   dtype_name(t->dtype), dtype_name(s->dtype));
  int at = s->seq_len;
  if (op_in(c, 2)) TRY(seq_position(c->in[2], s->seq_len, true, "input 2 (position)", &at));
  return seq_rebuild(c->out[0], s, -1, t, at);
}

static smelt_status erase_run(op_ctx *c) {
  const tensor *s = c->in[0];
  TRY(seq_check(s, "input 0 (input_sequence)"));
  if (!s->seq_len) return err_set(SMELT_ERR_INVALID_ARGUMENT, "cannot erase from an empty sequence");
  int at = s->seq_len - 1;
  if (op_in(c, 1)) TRY(seq_position(c->in[1], s->seq_len, false, "input 1 (position)", &at));
  return seq_rebuild(c->out[0], s, at, NULL, 0);
}

static smelt_status at_infer(op_ctx *c) {
  op_set_out(c, 0, c->in[0]->dtype, -1, NULL);
  return SMELT_OK;
}

static smelt_status at_run(op_ctx *c) {
  const tensor *s = c->in[0];
  TRY(seq_check(s, "input 0 (input_sequence)"));
  int at;
  TRY(seq_position(c->in[1], s->seq_len, false, "input 1 (position)", &at));
  return tensor_clone(c->out[0], s->seq[at]);
}

static smelt_status length_infer(op_ctx *c) {
  op_set_out(c, 0, SMELT_I64, 0, NULL);
  return SMELT_OK;
}

static smelt_status length_run(op_ctx *c) {
  TRY(seq_check(c->in[0], "input 0 (input_sequence)"));
  ((int64_t *)c->out[0]->data)[0] = c->in[0]->seq_len;
  return SMELT_OK;
}

/* ---- SplitToSequence ---- */

static smelt_status split_infer(op_ctx *c) {
  TRY(su_check_movable(c->in[0], 0));
  seq_out(c, 0, c->in[0]->dtype);
  return SMELT_OK;
}

/* The chunk lengths along an axis of size dim: *n chunks into *lens (malloc'd). */
static smelt_status split_lengths(op_ctx *c, int64_t dim, int64_t **lens, int64_t *n) {
  const tensor *sp = op_in(c, 1);
  *lens = NULL;
  if (sp) TRY(su_check_index_type(sp, "input 1 (split)"));
  if (sp && sp->rank > 1)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (split) has rank %d, expected 0 or 1",
                   sp->rank);
  int64_t chunk = 1;
  if (sp && sp->rank == 0) {
    chunk = su_index_at(sp, 0);
    if (chunk <= 0)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 1 (split) is %lld, expected > 0",
                     (long long)chunk);
  }
  int64_t cnt = sp && sp->rank == 1 ? tensor_numel(sp) : (dim + chunk - 1) / chunk;
  TRY(nn_alloc((void **)lens, cnt > 0 ? cnt : 1, sizeof(int64_t), "split lengths"));
  int64_t sum = 0;
  for (int64_t i = 0; i < cnt; i++) {
    int64_t l = sp && sp->rank == 1 ? su_index_at(sp, i) : (i + 1) * chunk <= dim ? chunk
                                                                                : dim - i * chunk;
    if (l < 0) {
      free(*lens);
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 1 (split) has a negative length %lld",
                     (long long)l);
    }
    (*lens)[i] = l;
    sum += l;
  }
  if (sum != dim) {
    free(*lens);
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 1 (split) sums to %lld, but the axis has "
                   "size %lld", (long long)sum, (long long)dim);
  }
  *n = cnt;
  return SMELT_OK;
}

static smelt_status split_run(op_ctx *c) {
  const tensor *x = c->in[0];
  if (x->kind != TENSOR_KIND_TENSOR) return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 0 must be a tensor");
  TRY(su_check_movable(x, 0));
  if (x->rank == 0) return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 0 is a scalar: nothing to split");
  int axis;
  TRY(op_axis(op_attr_int(c, "axis", 0), x->rank, "attribute axis", &axis));
  /* keepdims only matters when no split is given (chunks of 1) */
  bool squeeze = !op_in(c, 1) && !op_attr_int(c, "keepdims", 1);
  int64_t *lens = NULL, n = 0, dim = x->dims[axis];
  TRY(split_lengths(c, dim, &lens, &n));
  size_t es = dtype_size(x->dtype);
  int64_t outer = shape_numel(axis, x->dims);
  int64_t inner = shape_numel(x->rank - axis - 1, x->dims + axis + 1) * (int64_t)es;
  seq_init(c->out[0], x->dtype);
  smelt_status st = SMELT_OK;
  for (int64_t i = 0, start = 0; !st && i < n; start += lens[i++]) {
    int64_t d[SMELT_MAX_RANK];
    memcpy(d, x->dims, sizeof(int64_t) * (size_t)x->rank);
    d[axis] = lens[i];
    tensor e;
    st = tensor_alloc(&e, x->dtype, x->rank, d);
    if (st) break;
    int64_t run = lens[i] * inner;
    for (int64_t o = 0; run && o < outer; o++)
      memcpy((char *)e.data + o * run, (const char *)x->data + (o * dim + start) * inner, (size_t)run);
    if (squeeze) {
      memmove(e.dims + axis, e.dims + axis + 1, sizeof(int64_t) * (size_t)(x->rank - axis - 1));
      e.rank--;
    }
    st = seq_append_move(c->out[0], &e);
    tensor_release(&e);
  }
  free(lens);
  return st;
}

/* ---- ConcatFromSequence ---- */

static smelt_status concat_infer(op_ctx *c) {
  op_set_out(c, 0, c->in[0]->dtype, -1, NULL);
  return SMELT_OK;
}

/* The output shape: element 0's with the axis summed (or a new axis of the
 * sequence length); every element must match on the other axes. */
static smelt_status concat_shape(const tensor *s, bool new_axis, int axis, int64_t *d) {
  const tensor *e0 = s->seq[0];
  int r = e0->rank;
  for (int i = 0; i < s->seq_len; i++) {
    const tensor *e = s->seq[i];
    if (e->kind != TENSOR_KIND_TENSOR || e->rank != r)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "sequence element %d has rank %d, element 0 has %d",
                     i, e->rank, r);
    for (int k = 0; k < r; k++)
      if (e->dims[k] != e0->dims[k] && (new_axis || k != axis))
        return err_set(SMELT_ERR_INVALID_ARGUMENT, "sequence element %d has size %lld on axis %d, "
                       "element 0 has %lld", i, (long long)e->dims[k], k, (long long)e0->dims[k]);
  }
  int o = 0;
  for (int k = 0; k < r + new_axis; k++) {
    if (k == axis) {
      int64_t sum = 0;
      for (int i = 0; !new_axis && i < s->seq_len; i++) sum += s->seq[i]->dims[axis];
      d[o++] = new_axis ? s->seq_len : sum;
    } else {
      d[o++] = e0->dims[k - (new_axis && k > axis)];
    }
  }
  return SMELT_OK;
}

static smelt_status concat_run(op_ctx *c) {
  const tensor *s = c->in[0];
  TRY(seq_check(s, "input 0 (input_sequence)"));
  if (!s->seq_len) return err_set(SMELT_ERR_INVALID_ARGUMENT, "cannot concatenate an empty sequence");
  bool new_axis = op_attr_int(c, "new_axis", 0) != 0;
  if (!ir_attr_find(c->node, "axis")) return err_set(SMELT_ERR_INVALID_MODEL, "attribute axis is required");
  int r = s->seq[0]->rank, axis;
  if (r + new_axis > SMELT_MAX_RANK) return err_set(SMELT_ERR_UNSUPPORTED, "result rank above %d", SMELT_MAX_RANK);
  TRY(op_axis(op_attr_int(c, "axis", 0), r + new_axis, "attribute axis", &axis));
  TRY(su_check_movable(s->seq[0], 0));
  int64_t d[SMELT_MAX_RANK];
  TRY(concat_shape(s, new_axis, axis, d));
  TRY(tensor_alloc(c->out[0], s->seq[0]->dtype, r + new_axis, d));
  /* each element contributes `len * inner` bytes per outer index */
  size_t es = dtype_size(s->seq[0]->dtype);
  int64_t outer = shape_numel(axis, d), inner = shape_numel(r + new_axis - axis - 1, d + axis + 1) * (int64_t)es;
  int64_t out_run = d[axis] * inner, off = 0;
  for (int i = 0; i < s->seq_len; i++) {
    int64_t run = (new_axis ? 1 : s->seq[i]->dims[axis]) * inner;
    for (int64_t o = 0; run && o < outer; o++)
      memcpy((char *)c->out[0]->data + o * out_run + off, (const char *)s->seq[i]->data + o * run,
             (size_t)run);
    off += run;
  }
  return SMELT_OK;
}

/* ---- SequenceMap ---- */

static smelt_status map_infer(op_ctx *c) {
  const ir_attr *a = ir_attr_find(c->node, "body");
  if (!a || a->type != IR_ATTR_GRAPH || !a->g)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute body (a graph) is required");
  if (a->g->n_outputs != c->n_out)
    return err_set(SMELT_ERR_INVALID_MODEL, "body has %d outputs, the node %d", a->g->n_outputs,
                   c->n_out);
  for (int o = 0; o < c->n_out; o++) seq_out(c, o, a->g->values[a->g->outputs[o]].dtype);
  return SMELT_OK;
}

/* Iteration i's view of input k: element i of a sequence, a tensor whole. */
static smelt_status map_arg(op_ctx *c, int k, int i, int n, tensor **arg) {
  tensor *t = c->in[k];
  if (!t) return err_set(SMELT_ERR_INVALID_MODEL, "input %d is missing", k);
  if (t->kind != TENSOR_KIND_SEQUENCE) {
    *arg = t;
    return SMELT_OK;
  }
  if (t->seq_len != n)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %d is a sequence of %d, input 0 of %d", k,
                   t->seq_len, n);
  *arg = t->seq[i];
  return SMELT_OK;
}

static smelt_status map_run(op_ctx *c) {
  TRY(map_infer(c));
  const ir_graph *body = ir_attr_find(c->node, "body")->g;
  TRY(seq_check(c->in[0], "input 0 (input_sequence)"));
  if (!c->run_subgraph) return err_set(SMELT_ERR_INTERNAL, "no subgraph executor");
  if (c->n_in > 64 || c->n_out > 64) return err_set(SMELT_ERR_UNSUPPORTED, "more than 64 inputs or outputs");
  for (int o = 0; o < c->n_out; o++) seq_init(c->out[o], body->values[body->outputs[o]].dtype);
  int n = c->in[0]->seq_len;
  tensor *args[64], res[64];
  smelt_status st = SMELT_OK;
  for (int i = 0; !st && i < n; i++) {
    for (int k = 0; !st && k < c->n_in; k++) st = map_arg(c, k, i, n, &args[k]);
    if (st) break;
    memset(res, 0, sizeof(tensor) * (size_t)c->n_out);
    st = c->run_subgraph(c->exec, body, c->n_in, args, c->n_out, res);
    for (int o = 0; !st && o < c->n_out; o++) st = seq_append_move(c->out[o], &res[o]);
    for (int o = 0; o < c->n_out; o++) tensor_release(&res[o]);
    if (st) st = err_prefix(st, "element %d: ", i);
  }
  return st;
}

const op_def op_family_sequence[] = {
    {"SequenceEmpty", "", 0, 0, 1, 1, empty_infer, empty_run, true},
    {"SequenceConstruct", "", 1, -1, 1, 1, construct_infer, construct_run, true},
    {"SequenceInsert", "", 2, 3, 1, 1, seq_out_infer, insert_run, true},
    {"SequenceErase", "", 1, 2, 1, 1, seq_out_infer, erase_run, true},
    {"SequenceAt", "", 2, 2, 1, 1, at_infer, at_run, true},
    {"SequenceLength", "", 1, 1, 1, 1, length_infer, length_run, false},
    {"SplitToSequence", "", 1, 2, 1, 1, split_infer, split_run, true},
    {"ConcatFromSequence", "", 1, 1, 1, 1, concat_infer, concat_run, true},
    {"SequenceMap", "", 1, -1, 1, -1, map_infer, map_run, true},
    {0}};
