/* The public smelt_model handle: an imported ONNX model.  Shared by the model
 * API (src/onnx/model_api.c) and the session code. */
#ifndef SMELT_ONNX_MODEL_INTERNAL_H
#define SMELT_ONNX_MODEL_INTERNAL_H

#include "onnx/onnx.h"

struct smelt_model {
  onnx_model *onnx; /* owned */
  void *bytes;       /* owned: the buffer onnx views (smelt_model_load_bytes), else NULL */
  size_t bytes_len;  /* its size: mapped (anonymous, registered as util/ro_map.h scratch), not malloc'd */
  /* owned, NULL without memory: the main graph's constants (initializers and
   * what inference folded), immutable while the model lives, listed so that
   * their hashes (the prepared-weight store's source keys) are computed once
   * per model, not once per session (util/hash_memo.h) */
  struct hash_memo *weight_hashes;
  /* called first by smelt_model_free when set (session/model_image.c: the
   * image writer, which reads the weights, ends before they go) */
  void (*on_free)(void *ctx);
  void *on_free_ctx;
};

/* The constants worth remembering a hash for (util/hash_memo.h): 4 KiB or
 * more (what the prepared-weight store keys packed weights by). */
#define MODEL_MEMO_MIN_BYTES ((size_t)4 << 10)
bool model_hash_listed(const tensor *t);
/* Whether v is an initializer whose hash a model file's image keeps (by
 * name): what the image's writer stores and a load looks up. */
bool model_image_hashes(const ir_value *v);

/* smelt_model_load with an image source (NULL: none; onnx/image.h).
 * smelt_model_load itself is session/model_image.c's: it brings the
 * cache. */
smelt_status model_load_path(const char *path, const onnx_image_source *src, smelt_model **out);

#endif
