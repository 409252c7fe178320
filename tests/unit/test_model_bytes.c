/* smelt_model_load_bytes: a model loaded from memory runs like the same file,
 * the caller's buffer may be freed right after loading, and bad bytes fail
 * with a message. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "onnx_test_util.h"
#include "smelt.h"

#ifndef SMELT_SOURCE_DIR
#define SMELT_SOURCE_DIR "."
#endif

static void run_mlp(smelt_model *m, float *out, size_t n_out) {
  smelt_session *s = NULL;
  CHECK_OK(smelt_session_create(m, NULL, &s));
  if (!s) return;
  smelt_value_info vi;
  CHECK_OK(smelt_model_input(m, 0, &vi));
  smelt_tensor in = {.dtype = SMELT_F32, .rank = vi.rank};
  size_t n = 1;
  for (int i = 0; i < vi.rank; i++) {
    in.dims[i] = vi.dims[i] > 0 ? vi.dims[i] : 1;
    n *= (size_t)in.dims[i];
  }
  float *x = malloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++) x[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
  in.data = x;
  in.nbytes = n * sizeof *x;
  smelt_tensor o = {0};
  CHECK_OK(smelt_session_run(s, &in, 1, &o, 1));
  size_t got = o.nbytes / sizeof(float);
  memcpy(out, o.data, (got < n_out ? got : n_out) * sizeof(float));
  smelt_tensor_release(&o);
  free(x);
  smelt_session_free(s);
}

int main(void) {
  const char *path = SMELT_SOURCE_DIR "/models/mlp/model.onnx";
  size_t len = 0;
  uint8_t *buf = test_read_file(path, &len);
  CHECK(buf != NULL);
  if (!buf) return test_report("test_model_bytes");

  smelt_model *from_file = NULL, *from_bytes = NULL;
  CHECK_OK(smelt_model_load(path, &from_file));
  CHECK_OK(smelt_model_load_bytes(buf, len, &from_bytes));
  memset(buf, 0, len); /* the model holds its own copy */
  free(buf);
  if (from_file && from_bytes) {
    CHECK(smelt_model_num_inputs(from_bytes) == smelt_model_num_inputs(from_file));
    CHECK(smelt_model_num_outputs(from_bytes) == smelt_model_num_outputs(from_file));
    float a[64] = {0}, b[64] = {1};
    run_mlp(from_file, a, 64);
    run_mlp(from_bytes, b, 64);
    CHECK(!memcmp(a, b, sizeof a));
  }
  smelt_model_free(from_file);
  smelt_model_free(from_bytes);

  smelt_model *m = (smelt_model *)1;
  CHECK(smelt_model_load_bytes("", 0, &m) == SMELT_ERR_INVALID_MODEL && m == NULL);
  CHECK(strstr(smelt_last_error(), "model bytes") != NULL);
  CHECK(smelt_model_load_bytes(NULL, 5, &m) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(smelt_model_load_bytes("abc", 3, NULL) == SMELT_ERR_INVALID_ARGUMENT);
  const char junk[] = "\x0a\xff\xff\xff\xff\x0f junk";
  CHECK(smelt_model_load_bytes(junk, sizeof junk, &m) != SMELT_OK && m == NULL);
  CHECK(strstr(smelt_last_error(), "model bytes: ") == smelt_last_error());
  return test_report("test_model_bytes");
}
