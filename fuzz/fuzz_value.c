/* libFuzzer target: TensorProto / SequenceProto / OptionalProto value files
 * (the ONNX test data's .pb files) must decode or fail with an error under
 * every hint, never crash, hang or over-allocate.  The first byte picks the
 * hint. */
#include <stdint.h>
#include <stdlib.h>

#include "onnx/onnx.h"

/* Checks the decoded value's structure holds together. */
static void walk(const tensor *t, int depth) {
  if (depth > 64) abort();
  if (t->kind == TENSOR_KIND_SEQUENCE) {
    if (t->seq_len < 0 || (t->seq_len && !t->seq)) abort();
    for (int i = 0; i < t->seq_len; i++) walk(t->seq[i], depth + 1);
  } else if (t->kind == TENSOR_KIND_TENSOR) {
    int64_t n = tensor_numel(t);
    size_t nb; /* packed sub-byte types: ceil(n * bits / 8) bytes */
    if (n < 0 || !dtype_nbytes(t->dtype, n, &nb) || nb != t->nbytes || (n && !t->data)) abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!size) return 0;
  onnx_value_hint hint = (onnx_value_hint)(data[0] % 4);
  tensor t;
  char *name = NULL;
  if (onnx_value_decode_as(data + 1, size - 1, hint, &t, &name) == SMELT_OK) {
    walk(&t, 0);
    if (!name) abort();
    free(name);
    tensor_release(&t);
  }
  return 0;
}
