/* Optional, OptionalHasElement, OptionalGetElement.
 *
 * smelt represents an optional that holds a value as that value (tensor or
 * sequence) and an empty one as TENSOR_KIND_OPTIONAL_NONE, so wrapping is a
 * copy and unwrapping checks for NONE. */
#include "ops/op.h"
#include "util/err.h"

static smelt_status optional_infer(op_ctx *c) {
  tensor *x = op_in(c, 0);
  if (!x) { /* the element type comes from the `type` attribute: left to the declaration */
    op_set_out(c, 0, SMELT_UNDEFINED, -1, NULL);
    return SMELT_OK;
  }
  op_set_out(c, 0, x->dtype, x->rank, x->dims);
  c->out[0]->kind = x->kind;
  return SMELT_OK;
}

static smelt_status optional_run(op_ctx *c) {
  tensor *x = op_in(c, 0);
  if (x) return tensor_clone(c->out[0], x);
  if (!ir_attr_find(c->node, "type"))
    return err_set(SMELT_ERR_INVALID_MODEL, "an Optional without input needs the attribute type");
  tensor_release(c->out[0]);
  c->out[0]->kind = TENSOR_KIND_OPTIONAL_NONE;
  return SMELT_OK;
}

static smelt_status has_infer(op_ctx *c) {
  op_set_out(c, 0, SMELT_BOOL, 0, NULL);
  return SMELT_OK;
}

static smelt_status has_run(op_ctx *c) {
  tensor *x = op_in(c, 0);
  ((uint8_t *)c->out[0]->data)[0] = x && x->kind != TENSOR_KIND_OPTIONAL_NONE;
  return SMELT_OK;
}

static smelt_status get_infer(op_ctx *c) {
  tensor *x = c->in[0];
  op_set_out(c, 0, x->dtype, x->rank, x->dims);
  c->out[0]->kind = x->kind;
  return SMELT_OK;
}

static smelt_status get_run(op_ctx *c) {
  tensor *x = c->in[0];
  if (x->kind == TENSOR_KIND_OPTIONAL_NONE)
    return err_set(SMELT_ERR_RUNTIME, "input 0 is an optional without a value");
  return tensor_clone(c->out[0], x);
}

const op_def op_family_optional[] = {
    {"Optional", "", 0, 1, 1, 1, optional_infer, optional_run, true},
    {"OptionalHasElement", "", 0, 1, 1, 1, has_infer, has_run, false},
    {"OptionalGetElement", "", 1, 1, 1, 1, get_infer, get_run, true},
    {0}};
