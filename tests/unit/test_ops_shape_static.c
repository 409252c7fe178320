/* Static inference of every shape/data-movement op on inputs whose values are
 * unknown (data NULL) and whose dims are symbolic: it must never read data,
 * never crash, and when it succeeds leave each output with a dtype and a rank
 * that is -1 or within bounds.  Run under ASan to catch stray reads. */
#include "shape_test_util.h"

static const char *const ops[] = {
    "Identity", "Dropout", "Shape", "Size", "Reshape", "Flatten", "Squeeze", "Unsqueeze",
    "ConstantOfShape", "Range", "EyeLike", "Transpose", "DepthToSpace", "SpaceToDepth", "Concat",
    "Split", "Slice", "ReverseSequence", "Gather", "GatherElements", "GatherND",
    "ScatterElements", "Scatter", "ScatterND", "TensorScatter", "Pad", "CenterCropPad", "Tile",
    "Expand", "NonZero", "Compress", "Unique", "TopK", "OneHot", "CumSum", "CumProd", "Trilu",
    "Resize", "Upsample"};

static int64_t B, S;

/* Input i of a node: data-like inputs are float [B,S,4,4]; later inputs are
 * small 1-D int64 (or float for Resize's roi/scales) shapes without values. */
static tensor input_for(const char *op, int i) {
  bool floats = (!strcmp(op, "Resize") && (i == 1 || i == 2)) || (!strcmp(op, "Upsample") && i == 1) ||
                (!strcmp(op, "Dropout") && i == 1);
  if (!strcmp(op, "Dropout") && i == 2) return mk_shape(SMELT_BOOL, 0, NULL);
  if (!strcmp(op, "Compress") && i == 1) return mk_shape(SMELT_BOOL, 1, DIMS(S));
  if (i == 0 || (i == 2 && strstr(op, "Scatter")) || (i == 1 && !strcmp(op, "TensorScatter")))
    return mk_shape(SMELT_F32, 4, DIMS(B, S, 4, 4));
  if (floats) return mk_shape(SMELT_F32, 1, DIMS(4));
  if (!strcmp(op, "GatherElements") || !strcmp(op, "ScatterElements") || !strcmp(op, "Scatter"))
    return mk_shape(SMELT_I64, 4, DIMS(B, S, 4, 4));
  return mk_shape(SMELT_I64, 1, DIMS(i == 1 && !strcmp(op, "Range") ? 1 : 2));
}

static void check_op(const char *name, int opset) {
  const op_def *d = ops_find("", name);
  CHECK(d != NULL);
  if (!d) return;
  int max_in = d->max_inputs < 0 ? 3 : d->max_inputs;
  for (int n = d->min_inputs; n <= max_in; n++) {
    tensor ins[8], outs[4], *in[8], *out[4];
    for (int i = 0; i < n; i++) {
      ins[i] = input_for(name, i);
      in[i] = &ins[i];
    }
    if (!strcmp(name, "Range"))
      for (int i = 0; i < n; i++) ins[i] = mk_shape(SMELT_F32, 0, NULL);
    int n_out = d->min_outputs > 2 ? d->min_outputs : 2;
    if (d->max_outputs >= 0 && n_out > d->max_outputs) n_out = d->max_outputs;
    for (int o = 0; o < n_out; o++) out[o] = &outs[o];
    ir_attr a[] = {attr_ints("perm", 4, DIMS(0, 2, 1, 3)), attr_i("blocksize", 2),
                   attr_i("axis", 1), attr_s("mode", "nearest"), attr_i("k", 1)};
    smelt_status s = infer_static(name, opset, a, 5, in, n, out, n_out);
    if (s == SMELT_OK)
      for (int o = 0; o < n_out; o++) {
        CHECK(outs[o].rank >= -1 && outs[o].rank <= SMELT_MAX_RANK);
        if (outs[o].rank < -1 || outs[o].rank > SMELT_MAX_RANK)
          fprintf(stderr, "  %s output %d rank %d\n", name, o, outs[o].rank);
      }
    else
      CHECK(*smelt_last_error() != 0); /* errors always say something */
  }
}

int main(void) {
  B = dim_sym(0);
  S = dim_sym(1);
  int opsets[] = {7, 11, 13, 18, 19, 24};
  for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
    for (int j = 0; j < 6; j++) check_op(ops[k], opsets[j]);
  return test_report("ops_shape_static");
}
