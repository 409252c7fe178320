/* Public model API (include/smelt.h) over the ONNX reader.  Model inputs are
 * the main graph's inputs; inputs that have an initializer are not listed
 * (the importer keeps those as constants). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "onnx/model_internal.h"
#include "ops/infer.h"
#include "onnx/image.h"
#include "util/err.h"
#include "util/hash_memo.h"
#include "util/ro_map.h"

/* The model's copy of caller's bytes.  A large one is mapped, so that the
 * importer can discard the pages a weight was copied out of (a misaligned
 * weight is copied: the copy is what every reader sees) instead of keeping
 * the weight twice; *mapped_len is its size then, else 0 (malloc'd). */
enum { BYTES_MAP_MIN = 64 << 10 };

static void *bytes_alloc(size_t len, size_t *mapped_len) {
  *mapped_len = 0;
  if (len >= BYTES_MAP_MIN) {
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
      *mapped_len = len;
      return p;
    }
  }
  return malloc(len);
}

static void bytes_free(void *p, size_t mapped_len) {
  if (!p) return;
  if (!mapped_len) {
    free(p);
    return;
  }
  ro_map_remove(p);
  munmap(p, mapped_len);
}

bool model_hash_listed(const tensor *t) { return t && t->data && t->nbytes >= MODEL_MEMO_MIN_BYTES; }

bool model_image_hashes(const ir_value *v) {
  return model_hash_listed(v->constant) && (v->flags & IR_VALUE_INITIALIZER) && v->name;
}

/* Lists the constants; with an image (onnx/image.h), the initializers'
 * hashes it keeps are remembered at once: a session keys their prepared
 * forms without reading them. */
static hash_memo *list_constants(const onnx_model *onnx) {
  const ir_graph *g = onnx->graph;
  hash_memo *m = hash_memo_new();
  for (int v = 0; m && v < g->n_values; v++)
    if (model_hash_listed(g->values[v].constant))
      hash_memo_add(m, g->values[v].constant->data, g->values[v].constant->nbytes);
  hash_memo_seal(m);
  for (int v = 0; m && onnx->image && v < g->n_values; v++) {
    const ir_value *val = &g->values[v];
    uint64_t h;
    if (model_image_hashes(val) && onnx_image_hash(onnx->image, val->name, val->constant->nbytes, &h))
      hash_memo_set(m, val->constant->data, val->constant->nbytes, HASH_MEMO_CONTENT, h);
  }
  return m;
}

/* Validates and infers the imported graph, then wraps it in a smelt_model.
 * Takes onnx (freed on failure) and bytes (a buffer the model owns, or NULL;
 * bytes_len: its size when it is mapped, see bytes_alloc); where names the
 * source in messages. */
static smelt_status finish_load(onnx_model *onnx, void *bytes, size_t bytes_len, const char *where,
                                smelt_model **out) {
  /* structure and types are checked once, at load: a malformed graph never
   * reaches a session */
  smelt_status s = ir_graph_validate(onnx->graph);
  if (!s) s = ir_graph_infer(onnx->graph);
  smelt_model *m = NULL;
  if (!s && !(m = calloc(1, sizeof *m))) s = err_nomem("model", sizeof *m);
  if (s) {
    onnx_model_free(onnx);
    bytes_free(bytes, bytes_len);
    return err_prefix(s, "%s: ", where);
  }
  m->onnx = onnx;
  m->bytes = bytes;
  m->bytes_len = bytes_len;
  m->weight_hashes = list_constants(onnx);
  *out = m;
  return SMELT_OK;
}

smelt_status model_load_path(const char *path, const onnx_image_source *src, smelt_model **out) {
  if (!out) return err_set(SMELT_ERR_INVALID_ARGUMENT, "smelt_model_load: out is NULL");
  *out = NULL;
  onnx_model *onnx = NULL;
  smelt_status s = onnx_model_load_imaged(path, src, &onnx);
  if (s) return s;
  return finish_load(onnx, NULL, 0, path, out);
}

static smelt_status load_bytes(const void *data, size_t len, const smelt_tensor *consts, size_t n_consts,
                               smelt_model **out);

smelt_status smelt_model_load_bytes(const void *data, size_t len, smelt_model **out) {
  if (!out) return err_set(SMELT_ERR_INVALID_ARGUMENT, "smelt_model_load_bytes: out is NULL");
  return load_bytes(data, len, NULL, 0, out);
}

smelt_status smelt_model_load_bytes_with(const void *data, size_t len, const smelt_tensor *consts, size_t n_consts,
                                         smelt_model **out) {
  if (!out) return err_set(SMELT_ERR_INVALID_ARGUMENT, "smelt_model_load_bytes_with: out is NULL");
  if (n_consts && !consts) {
    *out = NULL;
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "smelt_model_load_bytes_with: consts is NULL");
  }
  return load_bytes(data, len, consts, n_consts, out);
}

static smelt_status load_bytes(const void *data, size_t len, const smelt_tensor *consts, size_t n_consts,
                               smelt_model **out) {
  *out = NULL;
  if (!data && len) return err_set(SMELT_ERR_INVALID_ARGUMENT, "smelt_model_load_bytes: data is NULL");
  if (!len) return err_set(SMELT_ERR_INVALID_MODEL, "model bytes: empty buffer, not an ONNX model");
  /* the model views weights in place: it keeps its own copy, so the caller's
   * buffer may go away after this call */
  size_t mapped;
  void *copy = bytes_alloc(len, &mapped);
  if (!copy) return err_nomem("model bytes", len);
  memcpy(copy, data, len);
  if (mapped) ro_map_add_scratch(copy, mapped);
  onnx_model *onnx = NULL;
  smelt_status s = n_consts ? onnx_model_load_buffer_bound(copy, len, consts, n_consts, &onnx)
                            : onnx_model_load_buffer(copy, len, NULL, &onnx);
  if (s) {
    bytes_free(copy, mapped);
    return err_prefix(s, "model bytes: ");
  }
  return finish_load(onnx, copy, mapped, "model bytes", out);
}

void smelt_model_free(smelt_model *m) {
  if (!m) return;
  if (m->on_free) m->on_free(m->on_free_ctx);
  hash_memo_free(m->weight_hashes);
  onnx_model_free(m->onnx);
  bytes_free(m->bytes, m->bytes_len);
  free(m);
}

int smelt_model_num_inputs(const smelt_model *m) {
  return m && m->onnx ? m->onnx->graph->n_inputs : 0;
}

int smelt_model_num_outputs(const smelt_model *m) {
  return m && m->onnx ? m->onnx->graph->n_outputs : 0;
}

static void fill_info(const ir_graph *g, int vid, smelt_value_info *info) {
  const ir_value *v = &g->values[vid];
  memset(info, 0, sizeof *info);
  info->name = v->name;
  info->dtype = v->dtype;
  info->rank = v->rank;
  for (int i = 0; i < v->rank; i++) {
    int64_t d = v->dims[i];
    info->dims[i] = dim_known(d) ? d : -1;
    if (d <= DIM_SYM_BASE && dim_sym_index(d) < g->n_syms)
      info->dim_names[i] = g->syms[dim_sym_index(d)];
  }
}

static smelt_status value_info(const smelt_model *m, int i, bool input, smelt_value_info *info) {
  const char *what = input ? "input" : "output";
  if (!m || !m->onnx || !info)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "smelt_model_%s: NULL argument", what);
  const ir_graph *g = m->onnx->graph;
  int n = input ? g->n_inputs : g->n_outputs;
  if (i < 0 || i >= n)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "model %s %d does not exist (the model has %d)",
                   what, i, n);
  fill_info(g, input ? g->inputs[i] : g->outputs[i], info);
  return SMELT_OK;
}

smelt_status smelt_model_input(const smelt_model *m, int i, smelt_value_info *info) {
  return value_info(m, i, true, info);
}

smelt_status smelt_model_output(const smelt_model *m, int i, smelt_value_info *info) {
  return value_info(m, i, false, info);
}
