/* ops/conv_memo.h: a compiled plan's later runs of a convolution go
 * straight to the kernel its first run chose, and must compute exactly what
 * the full path computes.  For zoo convnets (mobilenet_v2: 1x1 and
 * depthwise layers, residual adds, clamps; squeezenet: 1x1, 3x3, concat
 * branches) in fp32 and bf16 (bf16 activations channels-last, the
 * depthwise channels-last kernel), default and reduce-overhead modes, 2
 * threads: run 1 on input A, run 2 on input B, run 3 on A again.  Run 3
 * (from the memo) must equal run 1 (the full path) bit for bit, and run 2
 * must equal a fresh session's first run on B; the memo must have been used. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ops/conv_memo.h"
#include "smelt.h"

enum { IN = 3 * 224 * 224, OUT = 1000 };
static float in_a[IN], in_b[IN];

static smelt_status run_on(smelt_session *s, const float *x, float *y) {
  smelt_tensor in = {.dtype = SMELT_F32, .rank = 4, .dims = {1, 3, 224, 224}, .data = (void *)x, .nbytes = sizeof in_a};
  smelt_tensor out = {.dtype = SMELT_F32, .rank = 2, .dims = {1, OUT}, .data = y, .nbytes = sizeof(float) * OUT};
  return smelt_session_run(s, &in, 1, &out, 1);
}

static smelt_status session(smelt_model *m, smelt_mode mode, smelt_precision p, smelt_session **s) {
  smelt_session_options o = smelt_session_options_default();
  o.mode = mode, o.precision = p, o.threads = 2;
  return smelt_session_create(m, &o, s);
}

static void model(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/../shared/models/%s/model.onnx", SMELT_SOURCE_DIR, name);
  smelt_model *m = NULL;
  if (smelt_model_load(path, &m)) {
    test_skip("test_conv_memo", "a zoo model is missing (../shared/models)");
    return;
  }
  const smelt_mode modes[] = {SMELT_MODE_DEFAULT, SMELT_MODE_REDUCE_OVERHEAD};
  const smelt_precision precs[] = {SMELT_PRECISION_FP32, SMELT_PRECISION_BF16};
  static float y1[OUT], y2[OUT], y3[OUT], fresh[OUT];
  for (int mi = 0; mi < 2; mi++)
    for (int pi = 0; pi < 2; pi++) {
      smelt_session *s = NULL, *s2 = NULL;
      CHECK_OK(session(m, modes[mi], precs[pi], &s));
      CHECK_OK(session(m, modes[mi], precs[pi], &s2));
      if (!s || !s2) continue;
      size_t h0 = conv_memo_hits();
      CHECK_OK(run_on(s, in_a, y1));
      CHECK_OK(run_on(s, in_b, y2));
      CHECK_OK(run_on(s, in_a, y3));
      size_t used = conv_memo_hits() - h0;
      CHECK_OK(run_on(s2, in_b, fresh));
      bool same13 = !memcmp(y1, y3, sizeof y1), same2 = !memcmp(y2, fresh, sizeof y2), differ = memcmp(y1, y2, sizeof y1);
      printf("%s, mode %d, precision %d: %zu convolutions from the memo; run 3 %s run 1, run 2 %s a fresh run\n",
             name, (int)modes[mi], (int)precs[pi], used, same13 ? "equals" : "DIFFERS from",
             same2 ? "equals" : "DIFFERS from");
      CHECK(used > 0 && same13 && same2 && differ);
      smelt_session_free(s);
      smelt_session_free(s2);
    }
  smelt_model_free(m);
}

int main(void) {
  setenv("SMELT_CACHE", "off", 1);
  for (int i = 0; i < IN; i++) in_a[i] = sinf(0.013f * (float)i), in_b[i] = cosf(0.007f * (float)i) * 0.8f;
  model("mobilenet_v2");
  model("squeezenet");
  return test_report("test_conv_memo");
}
