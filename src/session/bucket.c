/* Shape bucketing: an input axis is padded (with zeros) up to the next
 * bucket size so that many lengths share one compiled plan; the outputs are
 * then cut back to the shapes the real inputs give (found by shape inference
 * on the real shapes, remembered per shape).  Opt-in: padding changes what a
 * model computes unless it masks the padding (an attention mask of zeros
 * does), so it is the user's call. */
#include "session/bucket.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/infer.h"
#include "session/session_compile.h"
#include "session/session.h"
#include "util/err.h"
#include "util/quote.h"

void bucket_free(bucket_spec *b, int n) {
  for (int i = 0; i < n; i++) free(b[i].sizes);
  free(b);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* One "NAME:AXIS=S1,S2,..." item. */
static smelt_status parse_one(const ir_graph *g, char *item, bucket_spec *b) {
  char *eq = strchr(item, '=');
  char *colon = eq ? memrchr(item, ':', (size_t)(eq - item)) : NULL;
  if (!eq || !colon || colon == item)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "bucket %s: expected NAME:AXIS=SIZE,SIZE,...", q(item));
  *colon = 0;
  *eq = 0;
  b->input = -1;
  for (int k = 0; k < g->n_inputs; k++)
    if (!strcmp(g->values[g->inputs[k]].name, item)) b->input = k;
  if (b->input < 0) return err_set(SMELT_ERR_INVALID_ARGUMENT, "bucket: the model has no input named %s", q(item));
  char *end;
  long axis = strtol(colon + 1, &end, 10);
  int rank = g->values[g->inputs[b->input]].rank;
  if (end == colon + 1 || *end || axis < 0 || (rank >= 0 && axis >= rank))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "bucket %s: axis %s is not an axis of the input (rank %d)",
                   q(item), q(colon + 1), rank);
  b->axis = (int)axis;
  int cap = 1;
  for (const char *p = eq + 1; *p; p++) cap += *p == ',';
  b->sizes = malloc(sizeof(int64_t) * (size_t)cap);
  if (!b->sizes) return err_nomem("bucket sizes", sizeof(int64_t) * (size_t)cap);
  char *save = NULL;
  for (char *t = strtok_r(eq + 1, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    long long v = strtoll(t, &end, 10);
    if (end == t || *end || v < 1 || v > (1LL << 40))
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "bucket %s: size %s is not a positive integer", q(item), q(t));
    b->sizes[b->n++] = v;
  }
  if (!b->n) return err_set(SMELT_ERR_INVALID_ARGUMENT, "bucket %s: no sizes given", q(item));
  qsort(b->sizes, (size_t)b->n, sizeof(int64_t), cmp_i64);
  return SMELT_OK;
}

smelt_status bucket_parse(const ir_graph *g, const char *spec, bucket_spec **out, int *n_out) {
  *out = NULL;
  *n_out = 0;
  if (!spec || !*spec) return SMELT_OK;
  char *copy = strdup(spec);
  int cap = 1;
  for (const char *p = spec; *p; p++) cap += *p == ';';
  bucket_spec *b = calloc((size_t)cap, sizeof *b);
  if (!copy || !b) {
    free(copy);
    free(b);
    return err_nomem("buckets", strlen(spec));
  }
  int n = 0;
  smelt_status st = SMELT_OK;
  char *save = NULL;
  for (char *it = strtok_r(copy, ";", &save); it && !st; it = strtok_r(NULL, ";", &save)) st = parse_one(g, it, &b[n++]);
  free(copy);
  if (st) {
    bucket_free(b, n);
    return st;
  }
  *out = b;
  *n_out = n;
  return SMELT_OK;
}

/* Copies a block of cnt[] elements per axis from the start of src (dense,
 * dims sd) to the start of dst (dense, dims dd). */
static void copy_block(uint8_t *dst, const int64_t *dd, const uint8_t *src, const int64_t *sd,
                       const int64_t *cnt, int rank, size_t es) {
  if (rank == 0) {
    memcpy(dst, src, es);
    return;
  }
  if (rank == 1) {
    memcpy(dst, src, (size_t)cnt[0] * es);
    return;
  }
  size_t dstride = es, sstride = es;
  for (int d = 1; d < rank; d++) {
    dstride *= (size_t)dd[d];
    sstride *= (size_t)sd[d];
  }
  for (int64_t i = 0; i < cnt[0]; i++)
    copy_block(dst + (size_t)i * dstride, dd + 1, src + (size_t)i * sstride, sd + 1, cnt + 1, rank - 1, es);
}

smelt_status bucket_pad(const bucket_spec *b, int n, const ir_graph *g, tensor *const *inputs,
                        tensor **padded, tensor ***pp) {
  *padded = NULL;
  *pp = NULL;
  int ni = g->n_inputs;
  for (int i = 0; i < n; i++) {
    const tensor *t = inputs[b[i].input];
    if (t->kind != TENSOR_KIND_TENSOR || t->rank <= b[i].axis) continue;
    int64_t d = t->dims[b[i].axis], target = d;
    for (int k = 0; k < b[i].n; k++)
      if (b[i].sizes[k] >= d) {
        target = b[i].sizes[k];
        break;
      }
    if (target == d) continue;
    if (!*pp) {
      *padded = calloc((size_t)ni + 1, sizeof(tensor));
      *pp = calloc((size_t)ni + 1, sizeof(tensor *));
      if (!*padded || !*pp) return err_nomem("padded inputs", sizeof(tensor) * (size_t)ni); /* caller frees */
      for (int k = 0; k < ni; k++) (*pp)[k] = inputs[k];
    }
    const tensor *src = (*pp)[b[i].input];
    if (dtype_is_subbyte(src->dtype)) /* copy_block moves whole bytes */
      return err_set(SMELT_ERR_UNSUPPORTED, "bucketing: input %d is %s; packed sub-byte inputs "
                     "cannot be padded", b[i].input, dtype_name(src->dtype));
    int64_t dims[SMELT_MAX_RANK];
    memcpy(dims, src->dims, sizeof dims);
    dims[b[i].axis] = target;
    tensor nt;
    TRY(tensor_alloc(&nt, src->dtype, src->rank, dims));
    size_t es = dtype_size(src->dtype);
    if (es && tensor_numel(src) > 0) copy_block(nt.data, nt.dims, src->data, src->dims, src->dims, src->rank, es);
    tensor_release(&(*padded)[b[i].input]);
    (*padded)[b[i].input] = nt;
    (*pp)[b[i].input] = &(*padded)[b[i].input];
  }
  return SMELT_OK;
}

void bucket_pad_free(tensor *padded, tensor **pp, int n) {
  for (int k = 0; padded && k < n; k++) tensor_release(&padded[k]);
  free(padded);
  free(pp);
}

/* The output shapes of the model for these input shapes (static inference). */
static smelt_status true_shapes(const ir_graph *mg, tensor *const *inputs, tensor *out) {
  ir_graph *g = NULL;
  TRY(ir_graph_clone(mg, &g));
  for (int v = 0; v < g->n_values; v++)
    if (!g->values[v].constant && !(g->values[v].flags & (IR_VALUE_INPUT | IR_VALUE_INITIALIZER))) g->values[v].rank = -1;
  for (int k = 0; k < g->n_inputs; k++) {
    ir_value *v = &g->values[g->inputs[k]];
    v->rank = inputs[k]->rank;
    memcpy(v->dims, inputs[k]->dims, sizeof v->dims);
  }
  smelt_status st = ir_graph_infer(g);
  for (int k = 0; !st && k < g->n_outputs; k++) {
    const ir_value *v = &g->values[g->outputs[k]];
    bool ok = v->rank >= 0;
    for (int d = 0; ok && d < v->rank; d++) ok = dim_known(v->dims[d]);
    if (!ok)
      st = err_set(SMELT_ERR_UNSUPPORTED, "bucketing: the shape of output %s cannot be inferred for the real "
                   "input shapes, so the padded result cannot be cut back", q(v->name));
    out[k].dtype = v->dtype;
    out[k].rank = v->rank;
    memcpy(out[k].dims, v->dims, sizeof out[k].dims);
  }
  ir_graph_free(g);
  return st;
}

static smelt_status lookup_truth(smelt_session *s, tensor *const *inputs, tensor *out) {
  session_compiler *sc = s->sc;
  const ir_graph *mg = s->model->onnx->graph;
  int ni = mg->n_inputs, no = mg->n_outputs;
  pthread_mutex_lock(&sc->lock);
  for (int i = 0; i < sc->n_truth; i++) {
    bool same = true;
    for (int k = 0; k < ni && same; k++)
      same = sc->truth[i].in_sig[k].rank == inputs[k]->rank &&
             !memcmp(sc->truth[i].in_sig[k].dims, inputs[k]->dims, sizeof(int64_t) * (size_t)inputs[k]->rank);
    if (same) {
      memcpy(out, sc->truth[i].out_sig, sizeof(tensor) * (size_t)no);
      pthread_mutex_unlock(&sc->lock);
      return SMELT_OK;
    }
  }
  pthread_mutex_unlock(&sc->lock);
  TRY(true_shapes(mg, inputs, out));
  tensor *in_sig = calloc((size_t)ni + 1, sizeof(tensor)), *out_sig = calloc((size_t)no + 1, sizeof(tensor));
  if (!in_sig || !out_sig) {
    free(in_sig);
    free(out_sig);
    return SMELT_OK; /* not remembered: computed again next time */
  }
  for (int k = 0; k < ni; k++) {
    in_sig[k].rank = inputs[k]->rank;
    memcpy(in_sig[k].dims, inputs[k]->dims, sizeof in_sig[k].dims);
  }
  memcpy(out_sig, out, sizeof(tensor) * (size_t)no);
  pthread_mutex_lock(&sc->lock);
  if (sc->n_truth == sc->cap_truth && sc->cap_truth < 256) {
    int nc = sc->cap_truth ? sc->cap_truth * 2 : 8;
    true_shape_entry *ne = realloc(sc->truth, sizeof *ne * (size_t)nc);
    if (ne) {
      sc->truth = ne;
      sc->cap_truth = nc;
    }
  }
  if (sc->n_truth < sc->cap_truth) {
    sc->truth[sc->n_truth++] = (true_shape_entry){in_sig, out_sig};
    in_sig = out_sig = NULL;
  }
  pthread_mutex_unlock(&sc->lock);
  free(in_sig);
  free(out_sig);
  return SMELT_OK;
}

smelt_status bucket_trim(smelt_session *s, tensor *const *real_inputs, tensor *outputs) {
  const ir_graph *mg = s->model->onnx->graph;
  int no = mg->n_outputs;
  tensor *want = calloc((size_t)no + 1, sizeof(tensor));
  if (!want) return err_nomem("output shapes", sizeof(tensor) * (size_t)no);
  smelt_status st = lookup_truth(s, real_inputs, want);
  for (int k = 0; !st && k < no; k++) {
    tensor *o = &outputs[k];
    if (o->rank != want[k].rank) {
      st = err_set(SMELT_ERR_INTERNAL, "bucketing: output %d has rank %d, expected %d", k, o->rank, want[k].rank);
      break;
    }
    bool same = !o->rank || !memcmp(o->dims, want[k].dims, sizeof(int64_t) * (size_t)o->rank);
    for (int d = 0; d < o->rank; d++)
      if (want[k].dims[d] > o->dims[d])
        st = err_set(SMELT_ERR_INTERNAL, "bucketing: output %d is smaller than its unpadded shape", k);
    if (same || st) continue;
    if (dtype_is_subbyte(o->dtype)) { /* copy_block moves whole bytes */
      st = err_set(SMELT_ERR_UNSUPPORTED, "bucketing: output %d is %s; packed sub-byte outputs "
                   "cannot be trimmed", k, dtype_name(o->dtype));
      break;
    }
    tensor nt;
    st = tensor_alloc(&nt, o->dtype, want[k].rank, want[k].dims);
    if (st) break;
    size_t es = dtype_size(o->dtype);
    if (es && tensor_numel(&nt) > 0) copy_block(nt.data, nt.dims, o->data, o->dims, nt.dims, o->rank, es);
    tensor_release(o);
    *o = nt;
  }
  free(want);
  return st;
}
