/* ModelProto → onnx_model, and loading model files (mmap). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/image.h"
#include "onnx/import_internal.h"
#include "util/err.h"
#include "util/quote.h"
#include "util/ro_map.h"

enum { M_IR_VERSION = 1, M_PRODUCER_NAME = 2, M_PRODUCER_VERSION = 3, M_DOMAIN = 4,
       M_MODEL_VERSION = 5, M_GRAPH = 7, M_OPSET = 8 };

typedef struct mscan {
  int64_t ir_version;
  bool has_ir_version, has_graph;
  pb_str producer_name, producer_version, domain;
  int64_t model_version;
  pb_field graph;
  size_t n_opsets;
} mscan;

static smelt_status scan_model(const pb_msg *mm, mscan *s) {
  pb_msg m = *mm;
  pb_field f;
  bool more;
  memset(s, 0, sizeof *s);
  s->producer_name.s = s->producer_version.s = s->domain.s = "";
  for (;;) {
    TRY(pb_next(&m, &f, &more));
    if (!more) return SMELT_OK;
    switch (f.num) {
      case M_IR_VERSION:
        TRY(pb_get_i64(&m, &f, "ir_version", &s->ir_version));
        s->has_ir_version = true;
        break;
      case M_PRODUCER_NAME: TRY(imp_name(&m, &f, "producer_name", &s->producer_name)); break;
      case M_PRODUCER_VERSION:
        TRY(imp_name(&m, &f, "producer_version", &s->producer_version));
        break;
      case M_DOMAIN: TRY(imp_name(&m, &f, "domain", &s->domain)); break;
      case M_MODEL_VERSION: TRY(pb_get_i64(&m, &f, "model_version", &s->model_version)); break;
      case M_GRAPH:
        TRY(pb_want(&m, &f, PB_LEN, "graph"));
        if (s->has_graph)
          return err_set(SMELT_ERR_INVALID_MODEL, "ModelProto has more than one graph");
        s->graph = f;
        s->has_graph = true;
        break;
      case M_OPSET:
        TRY(pb_want(&m, &f, PB_LEN, "opset_import"));
        s->n_opsets++;
        break;
      default: break; /* doc_string, metadata_props, training_info, functions, ... */
    }
  }
}

static smelt_status check_header(const mscan *s) {
  if (!s->has_ir_version && !s->has_graph)
    return err_set(SMELT_ERR_INVALID_MODEL,
                   "not an ONNX model (no ir_version and no graph in the ModelProto)");
  if (!s->has_ir_version)
    return err_set(SMELT_ERR_INVALID_MODEL, "model has no ir_version");
  if (s->ir_version < ONNX_MIN_IR_VERSION)
    return err_set(SMELT_ERR_UNSUPPORTED,
                   "ir_version %lld is too old: smelt reads ONNX IR versions %d to %d (models "
                   "before IR 3 have no opset imports; re-export the model)",
                   (long long)s->ir_version, ONNX_MIN_IR_VERSION, ONNX_MAX_IR_VERSION);
  if (s->ir_version > ONNX_MAX_IR_VERSION)
    return err_set(SMELT_ERR_UNSUPPORTED,
                   "ir_version %lld is newer than this reader knows: smelt reads ONNX IR "
                   "versions %d to %d", (long long)s->ir_version, ONNX_MIN_IR_VERSION,
                   ONNX_MAX_IR_VERSION);
  if (!s->has_graph) return err_set(SMELT_ERR_INVALID_MODEL, "model has no graph");
  if (!s->n_opsets) return err_set(SMELT_ERR_INVALID_MODEL, "model has no opset_import");
  if (s->n_opsets > 4096)
    return err_set(SMELT_ERR_UNSUPPORTED, "model imports %zu opsets", s->n_opsets);
  return SMELT_OK;
}

static smelt_status imp_opset(const pb_msg *om, ir_graph *g, ir_opset *o) {
  pb_msg m = *om;
  pb_field f;
  bool more;
  pb_str domain = {"", 0};
  o->version = 0;
  for (;;) {
    TRY(pb_next(&m, &f, &more));
    if (!more) break;
    if (f.num == 1) TRY(imp_name(&m, &f, "domain", &domain));
    if (f.num == 2) TRY(pb_get_i64(&m, &f, "version", &o->version));
  }
  TRY(imp_strdup(g, domain, &o->domain));
  if (o->version < 1 || o->version > 1000000)
    return err_set(SMELT_ERR_INVALID_MODEL, "opset_import: domain %s has version %lld",
                   q(o->domain), (long long)o->version);
  return SMELT_OK;
}

static smelt_status imp_opsets(const pb_msg *mm, ir_graph *g, size_t n) {
  g->opsets = arena_alloc(&g->arena, sizeof(ir_opset) * n);
  if (!g->opsets) return err_nomem("opsets", sizeof(ir_opset) * n);
  pb_msg m = *mm;
  pb_field f;
  bool more;
  for (;;) {
    TRY(pb_next(&m, &f, &more));
    if (!more) break;
    if (f.num != M_OPSET) continue;
    pb_msg om = pb_msg_sub(&m, &f, "OperatorSetIdProto");
    ir_opset *o = &g->opsets[g->n_opsets];
    TRY(imp_opset(&om, g, o));
    int64_t prev = ir_graph_opset(g, o->domain);
    if (prev >= 0 && prev != o->version)
      return err_set(SMELT_ERR_INVALID_MODEL,
                     "opset_import lists domain %s twice (versions %lld and %lld)", q(o->domain),
                     (long long)prev, (long long)o->version);
    g->n_opsets++;
  }
  return SMELT_OK;
}

static smelt_status model_strings(const mscan *s, ir_graph *g, onnx_model *m) {
  TRY(imp_strdup(g, s->producer_name, &m->producer_name));
  TRY(imp_strdup(g, s->producer_version, &m->producer_version));
  return imp_strdup(g, s->domain, &m->domain);
}

smelt_status imp_model(onnx_imp *c, const uint8_t *buf, size_t len) {
  onnx_model *m = c->m;
  pb_msg mm = pb_msg_make(buf, buf, len, "ModelProto");
  mscan s;
  smelt_status st = scan_model(&mm, &s);
  if (st) return imp_prefix(st, "not a valid ONNX model: ");
  TRY(check_header(&s));
  m->ir_version = s.ir_version;
  m->model_version = s.model_version;
  m->graph = ir_graph_new(NULL);
  if (!m->graph) return err_nomem("graph", sizeof(ir_graph));
  TRY(model_strings(&s, m->graph, m));
  TRY(imp_opsets(&mm, m->graph, s.n_opsets));
  pb_msg gm = pb_msg_sub(&mm, &s.graph, "GraphProto");
  return imp_graph(c, &gm, m->graph);
}

/* ---- loading ---- */

/* The model file's mapping goes: first out of the table of mappings whose
 * pages may be dropped (util/ro_map.h), then away. */
static void unmap_model(void *map, size_t len) {
  ro_map_remove(map);
  munmap(map, len);
}

static smelt_status load(const void *buf, size_t len, const char *base_dir, void *map, uint64_t file_id,
                         const onnx_image_source *src, const smelt_tensor *bound, size_t n_bound,
                         onnx_model **out) {
  onnx_model *m = calloc(1, sizeof *m);
  if (!m) {
    if (map) unmap_model(map, len);
    return err_nomem("model", sizeof *m);
  }
  m->producer_name = m->producer_version = m->domain = "";
  m->map = map;
  m->map_len = map ? len : 0;
  m->file_id = file_id; /* external files mix theirs in as they are mapped */
  if (src && file_id && src->find(src->self, file_id, &m->image, &m->image_len)) {
    m->image_release = src->release;
    if (!onnx_image_valid(m->image, m->image_len, file_id)) { /* not ours after all: copy */
      m->image_release(m->image, m->image_len);
      m->image = NULL;
      m->image_len = 0;
    }
  }
  onnx_imp c = {0};
  c.m = m;
  c.origin = buf;
  c.base_dir = base_dir;
  c.bound = bound;
  c.n_bound = n_bound;
  smelt_status s = imp_bound_check(&c);
  if (!s && n_bound && !(c.bound_used = calloc(n_bound, 1))) s = err_nomem("bound constants", n_bound);
  if (!s) s = imp_model(&c, buf, len);
  if (!s) s = imp_bound_all_used(&c);
  free(c.bound_used);
  free(c.base_real);
  imp_scratch_free(&c);
  if (s) {
    onnx_model_free(m);
    return s;
  }
  *out = m;
  return SMELT_OK;
}

smelt_status onnx_model_load_buffer(const void *buf, size_t len, const char *base_dir,
                                    onnx_model **out) {
  *out = NULL;
  if (!buf && len) return err_set(SMELT_ERR_INVALID_ARGUMENT, "model buffer is NULL");
  if (!len) return err_set(SMELT_ERR_INVALID_MODEL, "empty buffer, not an ONNX model");
  return load(buf, len, base_dir, NULL, 0, NULL, NULL, 0, out);
}

smelt_status onnx_model_load_buffer_bound(const void *buf, size_t len, const smelt_tensor *bound, size_t n_bound,
                                          onnx_model **out) {
  *out = NULL;
  if (!buf && len) return err_set(SMELT_ERR_INVALID_ARGUMENT, "model buffer is NULL");
  if (!len) return err_set(SMELT_ERR_INVALID_MODEL, "empty buffer, not an ONNX model");
  if (n_bound && !bound) return err_set(SMELT_ERR_INVALID_ARGUMENT, "bound constants: NULL array of %zu", n_bound);
  return load(buf, len, NULL, NULL, 0, NULL, bound, n_bound, out);
}

/* The folder of path ("." when it has none), malloc'd. */
static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return strdup(".");
  size_t n = slash == path ? 1 : (size_t)(slash - path);
  char *d = malloc(n + 1);
  if (d) {
    memcpy(d, path, n);
    d[n] = 0;
  }
  return d;
}

static smelt_status map_model(const char *path, void **map, size_t *len, uint64_t *file_id) {
  /* O_NONBLOCK: opening a FIFO must not hang; it is rejected below. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return err_set(SMELT_ERR_IO, "cannot open: %s", strerror(errno));
  struct stat st;
  smelt_status s = SMELT_OK;
  if (fstat(fd, &st) != 0)
    s = err_set(SMELT_ERR_IO, "cannot stat: %s", strerror(errno));
  else if (S_ISDIR(st.st_mode))
    s = err_set(SMELT_ERR_IO, "is a directory, not an ONNX model file");
  else if (!S_ISREG(st.st_mode))
    s = err_set(SMELT_ERR_IO, "is not a regular file");
  else if (st.st_size == 0)
    s = err_set(SMELT_ERR_INVALID_MODEL, "empty file, not an ONNX model");
  else if ((uint64_t)st.st_size > SIZE_MAX / 2)
    s = err_set(SMELT_ERR_NOMEM, "file is too large to map");
  if (!s) {
    *len = (size_t)st.st_size;
    *file_id = imp_file_id_mix(0, &st);
    *map = mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (*map == MAP_FAILED) s = err_set(SMELT_ERR_IO, "cannot map: %s", strerror(errno));
    else ro_map_add(*map, *len); /* weights viewed in it may be dropped once packed */
  }
  close(fd);
  return s;
}

smelt_status onnx_model_load(const char *path, onnx_model **out) {
  return onnx_model_load_imaged(path, NULL, out);
}

smelt_status onnx_model_load_imaged(const char *path, const onnx_image_source *src, onnx_model **out) {
  *out = NULL;
  if (!path) return err_set(SMELT_ERR_INVALID_ARGUMENT, "model path is NULL");
  void *map = NULL;
  size_t len = 0;
  uint64_t file_id = 0;
  smelt_status s = map_model(path, &map, &len, &file_id);
  if (s) return imp_prefix(s, "%s: ", path);
  char *dir = dir_of(path);
  if (!dir) {
    unmap_model(map, len);
    return err_nomem("path", strlen(path));
  }
  s = load(map, len, dir, map, file_id, src, NULL, 0, out);
  free(dir);
  return s ? imp_prefix(s, "%s: ", path) : SMELT_OK;
}

void onnx_model_free(onnx_model *m) {
  if (!m) return;
  ir_graph_free(m->graph);
  imp_unmap_all(m->ext);
  if (m->map) unmap_model(m->map, m->map_len);
  if (m->image) m->image_release(m->image, m->image_len);
  free(m->copies);
  free(m);
}
