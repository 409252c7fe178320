/* Tensor files for the CLI and tests: .npy, or an ONNX TensorProto (.pb, as in
 * the ONNX test data sets).  Reading looks at the contents, writing at the
 * extension. */
#ifndef SMELT_RUNTIME_TENSOR_FILE_H
#define SMELT_RUNTIME_TENSOR_FILE_H

#include <stddef.h>

#include "ir/tensor.h"

/* Decodes a tensor file held in memory: .npy if it starts with the \x93NUMPY
 * magic, else a serialized TensorProto, or failing that a SequenceProto or
 * OptionalProto (guessed: see tensor_file_load_typed).  *out is owning (tensor_release).
 * name_out (may be NULL) receives a malloc'd copy of the TensorProto's name, or
 * NULL (always NULL for .npy, which has no name). */
smelt_status tensor_decode_bytes(const void *buf, size_t len, tensor *out, char **name_out);

/* Reads the tensor file at path (see tensor_decode_bytes).  Errors start with
 * the path. */
smelt_status tensor_file_load(const char *path, tensor *out);
smelt_status tensor_file_load_named(const char *path, tensor *out, char **name_out);
/* Reads a value file whose type is known (a model input or output): a .pb is
 * read as an OptionalProto when optional, else a SequenceProto for
 * TENSOR_KIND_SEQUENCE, else a TensorProto.  The ONNX test data needs this:
 * a sequence of one tensor and an optional holding it are the same bytes. */
smelt_status tensor_file_load_typed(const char *path, tensor_kind kind, bool optional,
                                    tensor *out);

/* Writes t to path atomically (file_write_atomic), as .npy or TensorProto by
 * the extension (.npy / .pb, any case); another extension is an error.  name
 * (may be NULL) is stored in a TensorProto; .npy has nowhere to keep it. */
smelt_status tensor_file_save(const char *path, const tensor *t);
smelt_status tensor_file_save_named(const char *path, const tensor *t, const char *name);

#endif
