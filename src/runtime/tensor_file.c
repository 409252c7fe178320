#include "runtime/tensor_file.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "onnx/onnx.h"
#include "util/err.h"
#include "util/file.h"
#include "ir/npy.h"

static bool has_ext(const char *path, const char *ext) {
  size_t n = strlen(path), e = strlen(ext);
  return n > e && !strcasecmp(path + n - e, ext);
}

static smelt_status decode_hinted(const void *buf, size_t len, onnx_value_hint hint, tensor *out,
                                  char **name_out) {
  memset(out, 0, sizeof *out);
  if (name_out) *name_out = NULL;
  if (len >= NPY_MAGIC_LEN && !memcmp(buf, NPY_MAGIC, NPY_MAGIC_LEN)) return npy_decode(buf, len, out);
  return onnx_value_decode_as(buf, len, hint, out, name_out);
}

smelt_status tensor_decode_bytes(const void *buf, size_t len, tensor *out, char **name_out) {
  return decode_hinted(buf, len, ONNX_VALUE_ANY, out, name_out);
}

static smelt_status load_hinted(const char *path, onnx_value_hint hint, tensor *out,
                                char **name_out) {
  memset(out, 0, sizeof *out);
  if (name_out) *name_out = NULL;
  if (!path) return err_set(SMELT_ERR_INVALID_ARGUMENT, "tensor_file_load: NULL path");
  uint8_t *buf;
  size_t len;
  TRY(file_read_all(path, &buf, &len, 0));
  bool is_npy = len >= NPY_MAGIC_LEN && !memcmp(buf, NPY_MAGIC, NPY_MAGIC_LEN);
  smelt_status s = decode_hinted(buf, len, hint, out, name_out);
  free(buf);
  if (s && !is_npy && !has_ext(path, ".pb")) /* say why a .npy-named file was parsed as protobuf */
    return err_prefix(s, "%s: no .npy magic, so read as an ONNX TensorProto: ", path);
  if (s) return err_prefix(s, "%s: ", path);
  return SMELT_OK;
}

smelt_status tensor_file_load_named(const char *path, tensor *out, char **name_out) {
  return load_hinted(path, ONNX_VALUE_ANY, out, name_out);
}

smelt_status tensor_file_load_typed(const char *path, tensor_kind kind, bool optional,
                                    tensor *out) {
  onnx_value_hint h = optional                        ? ONNX_VALUE_OPTIONAL
                      : kind == TENSOR_KIND_SEQUENCE  ? ONNX_VALUE_SEQUENCE
                                                      : ONNX_VALUE_TENSOR;
  return load_hinted(path, h, out, NULL);
}

smelt_status tensor_file_load(const char *path, tensor *out) {
  return tensor_file_load_named(path, out, NULL);
}

smelt_status tensor_file_save_named(const char *path, const tensor *t, const char *name) {
  if (!path || !t) return err_set(SMELT_ERR_INVALID_ARGUMENT, "tensor_file_save: NULL argument");
  uint8_t *buf = NULL;
  size_t len = 0;
  smelt_status s;
  if (has_ext(path, ".npy")) {
    s = npy_encode(t, &buf, &len);
  } else if (has_ext(path, ".pb")) {
    s = onnx_tensor_encode(t, name, &buf, &len);
  } else {
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "%s: unknown tensor file extension (use .npy or .pb)",
                   path);
  }
  if (s) {
    free(buf);
    return err_prefix(s, "%s: ", path);
  }
  s = file_write_atomic(path, buf, len); /* its errors name the path */
  free(buf);
  return s;
}

smelt_status tensor_file_save(const char *path, const tensor *t) {
  return tensor_file_save_named(path, t, NULL);
}
