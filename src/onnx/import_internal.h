/* Private to src/onnx/: the state of one import and the pieces of the
 * ModelProto → IR translation (model, graph, type, attribute, tensor,
 * external data). */
#ifndef SMELT_ONNX_IMPORT_INTERNAL_H
#define SMELT_ONNX_IMPORT_INTERNAL_H

#include "onnx/onnx.h"
#include "onnx/pb.h"

/* The newest ONNX IR version this reader knows (onnx 1.23 writes 14). */
#define ONNX_MIN_IR_VERSION 3
#define ONNX_MAX_IR_VERSION 14
/* Nesting of subgraphs (If inside Loop inside ...) and of TypeProtos. */
#define ONNX_MAX_GRAPH_DEPTH 64
#define ONNX_MAX_TYPE_DEPTH 32
/* Every graph costs an arena block; this bounds what a hostile file can make
 * us allocate while still far above what real models use. */
#define ONNX_MAX_SUBGRAPHS 10000

/* One mmapped external data file, shared by all tensors that live in it. */
typedef struct onnx_mapping {
  struct onnx_mapping *next;
  char *path; /* realpath, malloc'd */
  void *addr; /* NULL for an empty file */
  size_t len;
} onnx_mapping;

typedef struct onnx_imp {
  onnx_model *m;           /* NULL when decoding a standalone TensorProto */
  const uint8_t *origin;   /* the whole buffer: offsets in messages count from here */
  const char *base_dir;    /* folder of the model; NULL forbids external data */
  char *base_real;         /* realpath(base_dir), computed on first use (malloc'd) */
  bool copy_data;          /* never view the buffer (tensors must own their data) */
  bool discard_copied;     /* importing a graph initializer, read once: the source of
                              a copy may be discarded (util/ro_map.h ro_map_discard) */
  const smelt_tensor *bound; /* graph inputs given values by the caller (import_bound.c) */
  size_t n_bound;
  unsigned char *bound_used; /* n_bound flags: that input was found */
  int depth;               /* current subgraph nesting */
  int n_graphs;            /* subgraphs made so far */
  char *scratch[2];        /* NUL-terminated copies of names for lookups (imp_cstr) */
  size_t scratch_cap[2];
} onnx_imp;

/* A protobuf string, not NUL-terminated. */
typedef struct pb_str {
  const char *s;
  size_t n;
} pb_str;

/* Reads a string field; names ("what") may not contain NUL bytes. */
smelt_status imp_name(const pb_msg *m, const pb_field *f, const char *what, pb_str *out);
/* Reads a bytes field (any content). */
smelt_status imp_bytes(const pb_msg *m, const pb_field *f, const char *what, pb_str *out);
/* A NUL-terminated arena copy of s; error if allocation fails. */
smelt_status imp_strdup(ir_graph *g, pb_str s, const char **out);
/* A NUL-terminated copy of s in scratch slot 0 or 1, valid until the next
 * imp_cstr on that slot. */
smelt_status imp_cstr(onnx_imp *c, pb_str s, int slot, const char **out);
void imp_scratch_free(onnx_imp *c);
/* err_prefix for import errors: when the message would overflow, drops the
 * middle of the context path rather than the cause at its end. */
smelt_status imp_prefix(smelt_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Model strings in messages: q_n(s.s, s.n) (util/quote.h). */

/* ---- model ---- */
smelt_status imp_model(onnx_imp *c, const uint8_t *buf, size_t len);

/* ---- graph (import_graph.c) ---- */
/* Fills the empty graph g (parent already set) from a GraphProto. */
smelt_status imp_graph(onnx_imp *c, const pb_msg *gm, ir_graph *g);
/* A new subgraph of parent from a GraphProto; *out receives it even on failure
 * (NULL only if it could not be allocated) so the caller can attach and free it. */
smelt_status imp_subgraph(onnx_imp *c, const pb_msg *gm, ir_graph *parent, ir_graph **out);

/* ---- types (import_type.c) ---- */
typedef struct imp_type {
  bool present;     /* the ValueInfoProto had a type we understood */
  tensor_kind kind; /* TENSOR or SEQUENCE */
  bool optional;    /* an optional_type around the element */
  smelt_dtype dtype;
  int rank;         /* -1: unknown */
  int64_t dims[SMELT_MAX_RANK];
} imp_type;

/* Parses a TypeProto; symbolic dims are interned in g. */
smelt_status imp_type_proto(onnx_imp *c, const pb_msg *tm, ir_graph *g, int depth, imp_type *t);
/* Parses a ValueInfoProto: its name and type. */
smelt_status imp_value_info(onnx_imp *c, const pb_msg *vm, ir_graph *g, pb_str *name,
                            imp_type *t);
/* Sets v's kind, dtype and shape from t; with only_unknown, keeps what v has. */
void imp_apply_type(ir_value *v, const imp_type *t, bool only_unknown);

/* Adds value `name` to g as an initializer holding t (taken). */
smelt_status imp_constant_value(ir_graph *g, const char *name, tensor *t);

/* ---- bound inputs (import_bound.c) ---- */
/* Checks the caller's bound tensors themselves (names, sizes, alignment). */
smelt_status imp_bound_check(const onnx_imp *c);
/* Graph input `name` of g, declared with type t: when the caller bound it
 * (main graph only), adds it to g as an initializer viewing the caller's
 * data, after checking it against t, and sets *bound. */
smelt_status imp_bound_input(onnx_imp *c, ir_graph *g, const char *name, const imp_type *t, bool *bound);
/* An error naming a bound tensor that matched no graph input. */
smelt_status imp_bound_all_used(const onnx_imp *c);

/* ---- attributes (import_attr.c) ---- */
/* Fills a (zeroed) attribute of node node_id in g from an AttributeProto. */
smelt_status imp_attr(onnx_imp *c, const pb_msg *am, ir_graph *g, int node_id, ir_attr *a);

/* ---- tensors (import_tensor.c) ---- */
/* Decodes a TensorProto into *t (a zeroed header).  Views the buffer when
 * allowed and aligned (*viewed true), else copies.  *name may be NULL. */
smelt_status imp_tensor(onnx_imp *c, const pb_msg *tm, tensor *t, pb_str *name, bool *viewed);
/* Same, with a malloc'd header (free with tensor_free). */
smelt_status imp_tensor_new(onnx_imp *c, const pb_msg *tm, tensor **out, pb_str *name,
                            bool *viewed);

/* ---- external data (external.c) ---- */
/* Resolves location inside c->base_dir and returns a pointer to [offset,
 * offset+nbytes) of the mmapped file.  length < 0: not given. */
smelt_status imp_external(onnx_imp *c, pb_str location, uint64_t offset, int64_t length,
                          size_t nbytes, const uint8_t **data);
void imp_unmap_all(onnx_mapping *list);
/* id with file st's identity (device, inode, size, modification and change
 * times) mixed in: onnx_model.file_id; never 0. */
struct stat;
uint64_t imp_file_id_mix(uint64_t id, const struct stat *st);

#endif
