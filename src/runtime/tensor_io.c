/* The public tensor file API (include/smelt.h) over runtime/tensor_file. */
#include <stdlib.h>
#include <string.h>

#include "runtime/tensor_convert.h"
#include "runtime/tensor_file.h"
#include "util/err.h"
#include "util/file.h"
#include "ir/npy.h"

smelt_status smelt_tensor_load(const char *path, smelt_tensor *out) {
  if (!out) return err_set(SMELT_ERR_INVALID_ARGUMENT, "smelt_tensor_load: out is NULL");
  memset(out, 0, sizeof *out);
  tensor t;
  TRY(tensor_file_load(path, &t));
  smelt_status s = tensor_to_public(&t, out);
  if (s) {
    tensor_release(&t);
    return err_prefix(s, "%s: ", path);
  }
  return SMELT_OK;
}

smelt_status smelt_tensor_save_npy(const char *path, const smelt_tensor *t) {
  if (!path) return err_set(SMELT_ERR_INVALID_ARGUMENT, "smelt_tensor_save_npy: path is NULL");
  tensor v;
  uint8_t *buf;
  size_t len;
  smelt_status s = tensor_from_public(t, &v);
  if (!s) s = npy_encode(&v, &buf, &len);
  if (s) return err_prefix(s, "%s: ", path);
  s = file_write_atomic(path, buf, len); /* its errors name the path */
  free(buf);
  return s;
}

void smelt_tensor_release(smelt_tensor *t) {
  if (!t) return;
  if (t->owner == SMELT_OWNER_SMELT) tensor_data_free(t->data);
  memset(t, 0, sizeof *t);
}
