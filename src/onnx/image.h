/* Images of a model file's weights: what a later load of the same file
 * need not do again.
 *
 * An exporter writes small models' weights inline (TensorProto.raw_data),
 * wherever the protobuf puts them: most start at an address no float may
 * be read from, so the importer copies them (import_tensor.c) -- 245 of
 * bert_base's 417 MB, 540 of gpt2_small's 621 MB, at every load.  And a
 * session keys the prepared forms of weights by a hash of their bytes
 * (cache/prep_store.h), which reads all of them once per loaded model.  An
 * image holds both: the copies, each 64-byte aligned, and the hashes of
 * the initializers, keyed by the file's identity (onnx_model.file_id:
 * device, inode, size, modification and change times of the model's
 * files).  A load of the same file views its misaligned weights in the
 * image and remembers their hashes instead.  Keeping images (the on-disk
 * cache, a writer thread) is the caller's part (session/model_image.c);
 * this file defines the format.
 *
 * Format (native byte order; the cache checksums the whole):
 *   head: magic, file_id, n_copies, n_hashes              4 x uint64
 *   n_copies records, ascending file_off:
 *     file_off (of the bytes in the model file), nbytes, image_off
 *   n_hashes records, ascending name_hash:
 *     name_hash (hash_str of the initializer's name), nbytes, hash
 *       (cache_checksum_pool of its bytes: util/hash_memo.h's
 *       HASH_MEMO_CONTENT)
 *   data: each copy's bytes at image_off (a multiple of 64). */
#ifndef SMELT_ONNX_IMAGE_H
#define SMELT_ONNX_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onnx/onnx.h"

/* Copies worth an image: at least this many bytes (smaller ones cost
 * nothing to copy). */
#define ONNX_IMAGE_MIN_BYTES ((size_t)64 << 10)

/* Whether [img, img+len) is a well-formed image of file_id. */
bool onnx_image_valid(const void *img, size_t len, uint64_t file_id);
/* In a valid image: the nbytes bytes that sat at file_off, or NULL. */
const void *onnx_image_lookup(const void *img, uint64_t file_off, size_t nbytes);
/* In a valid image: the hash kept for the initializer name of nbytes bytes. */
bool onnx_image_hash(const void *img, const char *name, size_t nbytes, uint64_t *hash);

/* An initializer's hash, for onnx_image_fill. */
typedef struct onnx_image_hash_rec {
  uint64_t name_hash, nbytes, hash;
} onnx_image_hash_rec;
void onnx_image_hash_rec_set(onnx_image_hash_rec *r, const char *name, size_t nbytes, uint64_t hash);

/* The image of m's copies (onnx_model.copies; none when they could not all
 * be listed) and n_hashes hashes (sorted here), as pieces to write one
 * after another -- the head and records, then each copy where it is, with
 * zeros between -- so that writing it maps nothing: a malloc'd array of
 * *n_parts (NULL without memory), freed with onnx_image_parts_free. */
typedef struct onnx_image_part {
  const void *data;
  size_t len;
} onnx_image_part;
onnx_image_part *onnx_image_parts(const onnx_model *m, onnx_image_hash_rec *hashes, size_t n_hashes, int *n_parts);
void onnx_image_parts_free(onnx_image_part *parts);

#endif
