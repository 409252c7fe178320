/* The C API in 40 lines: load a model, run it on a zero image, print the top class.
 *   smelt_example MODEL.onnx   (an image model with input [batch,3,H,W]) */
#include <smelt.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc != 2) return fprintf(stderr, "usage: %s MODEL.onnx\n", argv[0]), 2;
  smelt_model *model = NULL;
  smelt_session *session = NULL;
  if (smelt_model_load(argv[1], &model)) goto fail;
  smelt_value_info in;
  if (smelt_model_input(model, 0, &in)) goto fail;
  smelt_tensor x = {.name = in.name, .dtype = SMELT_F32, .rank = in.rank};
  size_t n = 1;
  for (int i = 0; i < in.rank; i++) n *= (size_t)(x.dims[i] = in.dims[i] < 0 ? 1 : in.dims[i]);
  x.nbytes = n * sizeof(float);
  x.data = calloc(n, sizeof(float));
  smelt_session_options opts = smelt_session_options_default();
  opts.threads = 2;
  if (!x.data || smelt_session_create(model, &opts, &session)) goto fail;
  smelt_tensor y = {0}; /* data NULL: smelt allocates the output */
  if (smelt_session_run(session, &x, 1, &y, 1)) goto fail;
  const float *p = y.data;
  size_t classes = y.nbytes / sizeof(float), best = 0;
  for (size_t i = 1; i < classes; i++) best = p[i] > p[best] ? i : best;
  printf("top class %zu of %zu (score %.4f)\n", best, classes, classes ? p[best] : 0.f);
  smelt_tensor_release(&y);
  free(x.data);
  smelt_session_free(session);
  smelt_model_free(model);
  return 0;
fail:
  fprintf(stderr, "error: %s\n", smelt_last_error());
  smelt_session_free(session);
  smelt_model_free(model);
  return 1;
}
