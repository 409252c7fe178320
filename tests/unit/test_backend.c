/* The device seam (src/backend/): the registry's names and errors, tensor
 * data allocated through a device's buffer functions, the per-thread ISA cap
 * the reference device runs under, and sessions on "cpu" and "cpu-ref" giving
 * the same results, cpu-ref's inputs and results crossing through its copy
 * function and its intermediates through its buffers. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "check.h"
#include "kernels/isa.h"
#include "session/device_cpu.h"
#include "session/session.h"
#include "smelt.h"

#ifndef SMELT_SOURCE_DIR
#define SMELT_SOURCE_DIR "."
#endif

static void test_registry(void) {
  const backend *b = NULL;
  CHECK_OK(backend_lookup(NULL, &b));
  CHECK(b == &backend_cpu);
  CHECK_OK(backend_lookup("", &b));
  CHECK(b == &backend_cpu);
  CHECK_OK(backend_lookup("cpu-ref", &b));
  CHECK(b == &backend_cpu_ref && !b->host_memory && b->buffers.device == b);
  CHECK(backend_at(0) == &backend_cpu && backend_at(1) == &backend_cpu_ref && !backend_at(2));
  for (int i = 0; backend_at(i); i++) CHECK(backend_at(i)->abi_version == BACKEND_ABI_VERSION);
  CHECK(backend_lookup("cuda:0", &b) == SMELT_ERR_UNSUPPORTED && !b);
  CHECK(strstr(smelt_last_error(), "device 'cuda:0': not built into this library") != NULL);
  CHECK(backend_lookup("cuda", &b) == SMELT_ERR_UNSUPPORTED);
  CHECK(backend_lookup("cuda:x", &b) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(backend_lookup("CPU", &b) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(smelt_last_error(), "unknown device 'CPU'; this library has: cpu, cpu-ref") != NULL);
  CHECK(smelt_session_options_default().device == NULL);
}

static void test_buffers(void) {
  int64_t dims[2] = {300, 300}; /* over BUFCACHE_MIN: a block of its own */
  tensor t;
  CHECK_OK(tensor_alloc_uninit(&t, SMELT_F32, 2, dims));
  CHECK(t.device == NULL); /* no device entered: host memory */
  tensor_release(&t);
  size_t a0, c0, a1, c1;
  backend_cpu_ref_counts(&a0, &c0);
  const buffer_fns *prev = tensor_buffers_enter(&backend_cpu_ref.buffers);
  CHECK(prev == NULL);
  CHECK_OK(tensor_alloc_uninit(&t, SMELT_F32, 2, dims));
  CHECK(t.device == &backend_cpu_ref);
  CHECK(t.data && ((unsigned char *)t.data)[t.nbytes - 1] == 0xff); /* poisoned */
  tensor z;
  CHECK_OK(tensor_alloc(&z, SMELT_I64, 1, dims));
  CHECK(z.device == &backend_cpu_ref && ((int64_t *)z.data)[299] == 0); /* zeroed after */
  tensor_release(&z);
  tensor_release(&t);
  CHECK(tensor_buffers_enter(prev) == &backend_cpu_ref.buffers);
  backend_cpu_ref_counts(&a1, &c1);
  CHECK(a1 == a0 + 2 && c1 == c0);
}

static void test_isa_cap(void) {
  isa_level before = isa_active();
  isa_level prev = isa_cap_enter(ISA_SCALAR);
  CHECK(prev == ISA_COUNT);
  CHECK(isa_active() == ISA_SCALAR && isa_choose().active == ISA_SCALAR);
  CHECK(isa_cap_enter(prev) == ISA_SCALAR);
  CHECK(isa_active() == before);
}

/* Runs models/mlp on device dev (eager) into out[n]; returns elements written. */
static size_t run_mlp(const smelt_model *m, const char *dev, float *out, size_t n_out) {
  char name[32]; /* the session must not keep the caller's string */
  snprintf(name, sizeof name, "%s", dev);
  smelt_session_options o = smelt_session_options_default();
  o.threads = 2;
  o.device = name;
  smelt_session *s = NULL;
  CHECK_OK(smelt_session_create(m, &o, &s));
  if (!s) return 0;
  memset(name, 'x', sizeof name - 1);
  CHECK(!strcmp(s->opts.device, dev) && !strcmp(s->dev->name, dev) && s->plan.device == s->dev);
  CHECK(s->plan.plain == (s->dev == &backend_cpu_ref));
  CHECK(pool_threads(s->pool) == (s->dev == &backend_cpu_ref ? 1 : 2));
  smelt_value_info vi;
  CHECK_OK(smelt_model_input(m, 0, &vi));
  smelt_tensor in = {.dtype = SMELT_F32, .rank = vi.rank};
  size_t n = 1;
  for (int i = 0; i < vi.rank; i++) {
    in.dims[i] = vi.dims[i] > 0 ? vi.dims[i] : 3;
    n *= (size_t)in.dims[i];
  }
  float *x = malloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++) x[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
  in.data = x;
  in.nbytes = n * sizeof *x;
  smelt_tensor y = {0};
  CHECK_OK(smelt_session_run(s, &in, 1, &y, 1));
  size_t got = y.nbytes / sizeof(float);
  if (got > n_out) got = n_out;
  if (y.data) memcpy(out, y.data, got * sizeof(float));
  smelt_tensor_release(&y);
  free(x);
  smelt_session_free(s);
  return got;
}

static void test_sessions(void) {
  smelt_model *m = NULL;
  CHECK_OK(smelt_model_load(SMELT_SOURCE_DIR "/models/mlp/model.onnx", &m));
  if (!m) return;
  float a[4096], b[4096];
  size_t a0, c0, a1, c1;
  backend_cpu_ref_counts(&a0, &c0);
  size_t na = run_mlp(m, "cpu", a, 4096);
  backend_cpu_ref_counts(&a1, &c1);
  CHECK(a1 == a0 && c1 == c0); /* the cpu device never touches cpu-ref's buffers */
  size_t nb = run_mlp(m, "cpu-ref", b, 4096);
  backend_cpu_ref_counts(&a1, &c1);
  CHECK(na > 0 && na == nb);
  double worst = 0;
  for (size_t i = 0; i < na && i < nb; i++) {
    double d = fabs((double)a[i] - b[i]);
    if (!(d <= worst)) worst = d; /* NaN counts */
  }
  CHECK(worst <= 1e-4);
  CHECK(c1 == c0 + 2); /* one input copied in, one output copied out */
  CHECK(a1 >= a0 + 3); /* the input's copy, intermediates, the result */

  smelt_session_options o = smelt_session_options_default();
  o.device = "cpu-ref";
  o.mode = SMELT_MODE_DEFAULT;
  smelt_session *s = NULL;
  CHECK(smelt_session_create(m, &o, &s) == SMELT_ERR_UNSUPPORTED && !s);
  CHECK(strstr(smelt_last_error(), "runs the reference kernels eagerly") != NULL);
  o.mode = SMELT_MODE_EAGER;
  o.precision = SMELT_PRECISION_INT8; /* the reference device has no int8 kernels: said, not run at fp32 */
  CHECK(smelt_session_create(m, &o, &s) == SMELT_ERR_UNSUPPORTED && !s);
  CHECK(strstr(smelt_last_error(), "precision 'int8' needs device 'cpu'") != NULL);
  o.precision = SMELT_PRECISION_FP32;
  o.device = "cuda:0";
  o.mode = SMELT_MODE_EAGER;
  CHECK(smelt_session_create(m, &o, &s) == SMELT_ERR_UNSUPPORTED && !s);
  o.device = "npu";
  CHECK(smelt_session_create(m, &o, &s) == SMELT_ERR_INVALID_ARGUMENT && !s);
  /* a caller built before the field: its struct_size ends before device */
  o.struct_size = offsetof(smelt_session_options, device);
  o.device = "cuda:0"; /* past the caller's struct: never read */
  CHECK_OK(smelt_session_create(m, &o, &s));
  CHECK(s && s->dev == &backend_cpu);
  smelt_session_free(s);
  smelt_model_free(m);
}

int main(void) {
  test_registry();
  test_buffers();
  test_isa_cap();
  test_sessions();
  return test_report("test_backend");
}
