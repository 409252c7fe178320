/* Who owns a smelt_tensor's data (smelt_tensor.owner), and runs that hand
 * over all their outputs or none:
 * - smelt sets SMELT_OWNER_SMELT on what it allocates (outputs,
 *   smelt_tensor_load); smelt_tensor_release frees only that, and clears the
 *   descriptor either way;
 * - a run that fails while handing outputs over leaves every descriptor as the
 *   caller gave it (nothing allocated is left behind: the sanitizer and
 *   valgrind runs of this test would report a leak). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "onnx_test_util.h"
#include "smelt.h"

#ifndef SMELT_SOURCE_DIR
#define SMELT_SOURCE_DIR "."
#endif

static const char *const MLP = SMELT_SOURCE_DIR "/models/mlp/model.onnx";

static int all_zero(const smelt_tensor *t) {
  static const smelt_tensor zero;
  return !memcmp(t, &zero, sizeof zero);
}

static void release_rules(void) {
  /* the caller's memory (here on the stack: freeing it would crash) */
  float mine[4] = {1, 2, 3, 4};
  smelt_tensor t = {.name = "x", .dtype = SMELT_F32, .rank = 1, .dims = {4}, .data = mine, .nbytes = sizeof mine};
  smelt_tensor_release(&t);
  CHECK(all_zero(&t) && mine[3] == 4);
  smelt_tensor_release(NULL);
  /* smelt's memory: a loaded file */
  char path[] = "/tmp/smelt_test_api_tensorXXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0) return;
  close(fd);
  smelt_tensor w = {.dtype = SMELT_F32, .rank = 2, .dims = {2, 2}, .data = mine, .nbytes = sizeof mine};
  CHECK_OK(smelt_tensor_save_npy(path, &w));
  smelt_tensor r = {0};
  CHECK_OK(smelt_tensor_load(path, &r));
  CHECK(r.owner == SMELT_OWNER_SMELT && r.data && r.data != (void *)mine && r.nbytes == sizeof mine);
  smelt_tensor_release(&r);
  CHECK(all_zero(&r));
  unlink(path);
}

static void run_outputs(smelt_session *s) {
  float x[2 * 64];
  for (int i = 0; i < 2 * 64; i++) x[i] = (float)(i % 7) * 0.25f - 0.5f;
  smelt_tensor in = {.name = "x", .dtype = SMELT_F32, .rank = 2, .dims = {2, 64}, .data = x, .nbytes = sizeof x};
  /* allocated by smelt */
  smelt_tensor y = {0};
  CHECK_OK(smelt_session_run(s, &in, 1, &y, 1));
  CHECK(y.owner == SMELT_OWNER_SMELT && y.data && y.rank == 2 && y.dims[1] == 10);
  float want[20];
  if (y.data) memcpy(want, y.data, sizeof want);
  smelt_tensor_release(&y);
  CHECK(all_zero(&y));
  /* into the caller's buffer: stays the caller's */
  float buf[20];
  smelt_tensor yc = {.dtype = SMELT_F32, .data = buf, .nbytes = sizeof buf};
  CHECK_OK(smelt_session_run(s, &in, 1, &yc, 1));
  CHECK(yc.owner == SMELT_OWNER_CALLER && yc.data == (void *)buf && !memcmp(buf, want, sizeof want));
  smelt_tensor_release(&yc); /* must not free the stack buffer */
  CHECK(all_zero(&yc));
}

/* A model with two outputs: a = Relu(x), b = Neg(x), x float [4]. */
static smelt_model *two_outputs(void) {
  pb_buf g = {0}, model = {0};
  b_input(&g, "x", 1, "4");
  b_node(&g, "relu", "Relu", NULL, "x", "a", NULL);
  b_node(&g, "neg", "Neg", NULL, "x", "b", NULL);
  b_output(&g, "a", 1, "4");
  b_output(&g, "b", 1, "4");
  b_model(&model, 8, 17, &g);
  uint8_t *bytes = NULL;
  size_t len = 0;
  smelt_model *m = NULL;
  CHECK_OK(pb_buf_finish(&model, &bytes, &len));
  if (bytes) CHECK_OK(smelt_model_load_bytes(bytes, len, &m));
  free(bytes);
  return m;
}

/* All or none: when handing over one output fails, the ones handed over
 * before it are taken back (their memory freed, descriptors as given). */
static void all_or_none(smelt_session *s) {
  float x[4] = {-1, 2, -3, 4}, small[3];
  smelt_tensor in = {.dtype = SMELT_F32, .rank = 1, .dims = {4}, .data = x, .nbytes = sizeof x};
  smelt_tensor out[2] = {{.name = "a"}, {.name = "b", .dtype = SMELT_F32, .data = small, .nbytes = sizeof small}};
  smelt_tensor given[2];
  memcpy(given, out, sizeof out);
  CHECK(smelt_session_run(s, &in, 1, out, 2) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(smelt_last_error(), "output 'b'") != NULL);
  CHECK(!memcmp(out, given, sizeof out)); /* a was moved to the caller, then taken back */
  /* a caller buffer for the first, the failing one second: restored too */
  float abuf[4] = {9, 9, 9, 9};
  smelt_tensor out2[2] = {{.name = "a", .dtype = SMELT_F32, .data = abuf, .nbytes = sizeof abuf},
                          {.name = "b", .dtype = SMELT_I64, .data = small, .nbytes = sizeof small}};
  memcpy(given, out2, sizeof out2);
  CHECK(smelt_session_run(s, &in, 1, out2, 2) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(!memcmp(out2, given, sizeof out2));
  /* the failing one first: nothing filled */
  smelt_tensor out3[2] = {{.name = "b", .dtype = SMELT_F32, .data = small, .nbytes = sizeof small}, {.name = "a"}};
  memcpy(given, out3, sizeof out3);
  CHECK(smelt_session_run(s, &in, 1, out3, 2) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(!memcmp(out3, given, sizeof out3));
  /* both good: both filled, each smelt's */
  smelt_tensor ok[2] = {{.name = "b"}, {.name = "a"}};
  CHECK_OK(smelt_session_run(s, &in, 1, ok, 2));
  CHECK(ok[0].owner == SMELT_OWNER_SMELT && ok[1].owner == SMELT_OWNER_SMELT);
  const float wb[4] = {1, -2, 3, -4}, wa[4] = {0, 2, 0, 4};
  CHECK(ok[0].data && !memcmp(ok[0].data, wb, sizeof wb) && ok[1].data && !memcmp(ok[1].data, wa, sizeof wa));
  smelt_tensor_release(&ok[0]);
  smelt_tensor_release(&ok[1]);
}

int main(void) {
  release_rules();
  smelt_model *m = NULL;
  smelt_session *s = NULL;
  CHECK_OK(smelt_model_load(MLP, &m));
  if (m) CHECK_OK(smelt_session_create(m, NULL, &s));
  if (s) run_outputs(s);
  smelt_session_free(s);
  smelt_model_free(m);
  smelt_model *m2 = two_outputs();
  smelt_session *s2 = NULL;
  if (m2) CHECK_OK(smelt_session_create(m2, NULL, &s2));
  if (s2) all_or_none(s2);
  smelt_session_free(s2);
  smelt_model_free(m2);
  return test_report("test_api_tensor");
}
