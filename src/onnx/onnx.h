/* ONNX in: the model file reader and ONNX → IR import.
 *
 * The file is mmapped read-only; initializer data (raw_data) is viewed in place
 * when suitably aligned, else copied.  External data (location/offset/length)
 * is resolved only inside the model's own folder and mmapped too.  Everything
 * read from the file is bounds-checked; errors name the field and the node. */
#ifndef SMELT_ONNX_ONNX_H
#define SMELT_ONNX_ONNX_H

#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"

/* A weight copied at load because it was misaligned in the model file
 * (onnx/image.h): where its bytes sat and the aligned copy. */
typedef struct onnx_copy {
  uint64_t file_off;
  size_t nbytes;
  const void *data; /* the initializer's data, owned by the graph */
} onnx_copy;

/* Where a load may find an image of the file's misaligned weights (a seam:
 * session/model_image.c implements it over the cache).  find: the image
 * for file_id, mapped read-only, or false; release unmaps it (with the
 * model). */
typedef struct onnx_image_source {
  void *self;
  bool (*find)(void *self, uint64_t file_id, const void **img, size_t *len);
  void (*release)(const void *img, size_t len);
} onnx_image_source;

typedef struct onnx_model {
  ir_graph *graph;          /* the main graph; node->op resolved via ops_find (NULL if unknown) */
  int64_t ir_version;
  const char *producer_name;    /* from graph->arena; "" if absent */
  const char *producer_version;
  const char *domain;
  int64_t model_version;
  size_t weight_bytes;       /* bytes of initializer data */
  int64_t weight_count;      /* number of initializer elements */
  int n_viewed, n_copied;    /* initializers viewed in place vs copied */
  void *map;                 /* private: the mapping of the file */
  size_t map_len;
  struct onnx_mapping *ext;  /* private: external data mappings */
  /* The identity of the files the weights came from (onnx_model_load: the
   * model file's and every external data file's device, inode, size,
   * modification and change times, hashed); 0 when loaded from memory.
   * Same id, same weights: any write to a file changes its change time. */
  uint64_t file_id;
  /* With an image source: the image used (NULL: none) and the initializers
   * viewed in it; else the copies an image would hold (file_id != 0, at
   * least ONNX_IMAGE_MIN_BYTES each, in import order; owned array). */
  const void *image;
  size_t image_len;
  void (*image_release)(const void *img, size_t len);
  int n_imaged;
  onnx_copy *copies;
  int n_copies, cap_copies;
} onnx_model;

/* Loads and imports a model file.  *out is owned by the caller (onnx_model_free). */
smelt_status onnx_model_load(const char *path, onnx_model **out);
/* Same, viewing misaligned weights in an image when src (NULL: none) has
 * one for the file, and otherwise listing the copies (onnx_model.copies). */
smelt_status onnx_model_load_imaged(const char *path, const onnx_image_source *src, onnx_model **out);
/* Same from memory (for fuzzing and embedding): buf must outlive the model.
 * base_dir resolves external data; NULL forbids external data. */
smelt_status onnx_model_load_buffer(const void *buf, size_t len, const char *base_dir,
                                    onnx_model **out);
/* Same, with graph inputs given values (smelt_model_load_bytes_with): each of
 * bound[0..n_bound) names a main-graph input, which becomes an initializer
 * viewing bound[i].data (borrowed: it must outlive the model).  No external
 * data. */
smelt_status onnx_model_load_buffer_bound(const void *buf, size_t len, const smelt_tensor *bound, size_t n_bound,
                                          onnx_model **out);
void onnx_model_free(onnx_model *m);

/* Decodes a serialized TensorProto (a .pb test file) into an owning tensor.
 * *name_out (may be NULL) receives a malloc'd copy of the tensor's name. */
smelt_status onnx_tensor_decode(const void *buf, size_t len, tensor *out, char **name_out);
/* What a serialized value (.pb test file) holds: the model's declared type of
 * the value it belongs to, or ANY to guess (see src/onnx/import_value.c). */
typedef enum onnx_value_hint {
  ONNX_VALUE_ANY = 0,
  ONNX_VALUE_TENSOR,   /* TensorProto */
  ONNX_VALUE_SEQUENCE, /* SequenceProto: a TENSOR_KIND_SEQUENCE tensor */
  ONNX_VALUE_OPTIONAL  /* OptionalProto: the held value, or TENSOR_KIND_OPTIONAL_NONE */
} onnx_value_hint;
/* Decodes a TensorProto, SequenceProto or OptionalProto into an owning tensor
 * (sequences own their elements).  *name_out as for onnx_tensor_decode. */
smelt_status onnx_value_decode_as(const void *buf, size_t len, onnx_value_hint hint, tensor *out,
                                  char **name_out);
smelt_status onnx_value_decode(const void *buf, size_t len, tensor *out, char **name_out);
/* Encodes a tensor as a TensorProto with raw_data; *buf is malloc'd. */
smelt_status onnx_tensor_encode(const tensor *t, const char *name, uint8_t **buf, size_t *len);

#endif
