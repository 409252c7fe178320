/* TypeProto and ValueInfoProto: element type, kind and (symbolic) shape. */
#include <stdlib.h>
#include <string.h>

#include "onnx/import_internal.h"
#include "util/err.h"

static smelt_status check_elem_type(int32_t et) {
  /* Types onnx added after smelt's list; named so the message says what it is. */
  static const char *const newer[] = {"float6e2m3", "float6e3m2"};
  if (et >= SMELT_DTYPE_COUNT && et < SMELT_DTYPE_COUNT + 2)
    return err_set(SMELT_ERR_UNSUPPORTED, "element type %d (%s) is not supported", (int)et,
                   newer[et - SMELT_DTYPE_COUNT]);
  if (et < 0 || et >= SMELT_DTYPE_COUNT)
    return err_set(SMELT_ERR_UNSUPPORTED, "element type %d is not supported", (int)et);
  return SMELT_OK;
}

/* One TensorShapeProto.Dimension → concrete, symbolic or unknown. */
static smelt_status imp_dim(const pb_msg *dm, ir_graph *g, int64_t *dim) {
  pb_msg m = *dm;
  pb_field f;
  bool more;
  *dim = DIM_UNKNOWN;
  for (;;) {
    TRY(pb_next(&m, &f, &more));
    if (!more) return SMELT_OK;
    if (f.num == 1) {
      int64_t v;
      TRY(pb_get_i64(&m, &f, "dim_value", &v));
      if (v < 0)
        return err_set(SMELT_ERR_INVALID_MODEL, "dim_value %lld is negative", (long long)v);
      *dim = v;
    } else if (f.num == 2) {
      pb_str s;
      TRY(imp_name(&m, &f, "dim_param", &s));
      *dim = DIM_UNKNOWN;
      if (!s.n) continue;
      const char *name;
      TRY(imp_strdup(g, s, &name));
      TRY(ir_graph_sym(g, name, dim));
    }
  }
}

static smelt_status imp_shape(const pb_msg *sm, ir_graph *g, imp_type *t) {
  pb_msg m = *sm;
  pb_field f;
  bool more;
  t->rank = 0;
  for (;;) {
    TRY(pb_next(&m, &f, &more));
    if (!more) return SMELT_OK;
    if (f.num != 1) continue;
    TRY(pb_want(&m, &f, PB_LEN, "dim"));
    if (t->rank == SMELT_MAX_RANK)
      return err_set(SMELT_ERR_UNSUPPORTED, "shape has more than %d dims", SMELT_MAX_RANK);
    pb_msg dm = pb_msg_sub(&m, &f, "TensorShapeProto.Dimension");
    TRY(imp_dim(&dm, g, &t->dims[t->rank]));
    t->rank++;
  }
}

static smelt_status imp_tensor_type(const pb_msg *tm, ir_graph *g, imp_type *t) {
  pb_msg m = *tm;
  pb_field f;
  bool more;
  for (;;) {
    TRY(pb_next(&m, &f, &more));
    if (!more) return SMELT_OK;
    if (f.num == 1) {
      int32_t et;
      TRY(pb_get_i32(&m, &f, "elem_type", &et));
      TRY(check_elem_type(et));
      t->dtype = (smelt_dtype)et;
    } else if (f.num == 2) {
      TRY(pb_want(&m, &f, PB_LEN, "shape"));
      pb_msg sm = pb_msg_sub(&m, &f, "TensorShapeProto");
      TRY(imp_shape(&sm, g, t));
    }
  }
}

/* Sequence and Optional both hold their element's TypeProto in field 1. */
static smelt_status imp_elem_type(onnx_imp *c, const pb_msg *wm, ir_graph *g, int depth,
                                  imp_type *e) {
  pb_msg m = *wm;
  pb_field f;
  bool more;
  for (;;) {
    TRY(pb_next(&m, &f, &more));
    if (!more) return SMELT_OK;
    if (f.num != 1) continue;
    TRY(pb_want(&m, &f, PB_LEN, "elem_type"));
    pb_msg em = pb_msg_sub(&m, &f, "TypeProto");
    TRY(imp_type_proto(c, &em, g, depth + 1, e));
  }
}

smelt_status imp_type_proto(onnx_imp *c, const pb_msg *tm, ir_graph *g, int depth, imp_type *t) {
  memset(t, 0, sizeof *t);
  t->rank = -1;
  if (depth > ONNX_MAX_TYPE_DEPTH)
    return err_set(SMELT_ERR_INVALID_MODEL, "types nest deeper than %d", ONNX_MAX_TYPE_DEPTH);
  pb_msg m = *tm;
  pb_field f;
  bool more;
  for (;;) {
    TRY(pb_next(&m, &f, &more));
    if (!more) return SMELT_OK;
    imp_type e;
    switch (f.num) {
      case 1: {
        TRY(pb_want(&m, &f, PB_LEN, "tensor_type"));
        memset(t, 0, sizeof *t);
        t->rank = -1;
        pb_msg tt = pb_msg_sub(&m, &f, "TypeProto.Tensor");
        TRY(imp_tensor_type(&tt, g, t));
        t->present = true;
        break;
      }
      case 4:
      case 9: {
        TRY(pb_want(&m, &f, PB_LEN, f.num == 4 ? "sequence_type" : "optional_type"));
        pb_msg wm = pb_msg_sub(&m, &f, f.num == 4 ? "TypeProto.Sequence" : "TypeProto.Optional");
        memset(&e, 0, sizeof e);
        e.rank = -1;
        TRY(imp_elem_type(c, &wm, g, depth, &e));
        *t = e;
        t->present = true;
        if (f.num == 9) {
          t->optional = true;
        } else {
          t->kind = TENSOR_KIND_SEQUENCE; /* dtype: the (innermost) element type */
          t->optional = false;
          t->rank = -1;
        }
        break;
      }
      case 5: return err_set(SMELT_ERR_UNSUPPORTED, "map types are not supported");
      case 8: return err_set(SMELT_ERR_UNSUPPORTED, "sparse tensor types are not supported");
      default: break;
    }
  }
}

smelt_status imp_value_info(onnx_imp *c, const pb_msg *vm, ir_graph *g, pb_str *name,
                            imp_type *t) {
  pb_msg m = *vm;
  pb_field f;
  bool more;
  memset(t, 0, sizeof *t);
  t->rank = -1;
  name->s = "";
  name->n = 0;
  for (;;) {
    TRY(pb_next(&m, &f, &more));
    if (!more) return SMELT_OK;
    if (f.num == 1) {
      TRY(imp_name(&m, &f, "name", name));
    } else if (f.num == 2) {
      TRY(pb_want(&m, &f, PB_LEN, "type"));
      pb_msg tm = pb_msg_sub(&m, &f, "TypeProto");
      TRY(imp_type_proto(c, &tm, g, 0, t));
    }
  }
}

void imp_apply_type(ir_value *v, const imp_type *t, bool only_unknown) {
  if (!t->present) return;
  if (!only_unknown || v->dtype == SMELT_UNDEFINED) v->dtype = t->dtype;
  if (!only_unknown || v->rank < 0) {
    v->rank = t->rank;
    if (t->rank > 0) memcpy(v->dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
  }
  if (!only_unknown || v->kind == TENSOR_KIND_TENSOR) v->kind = t->kind;
  if (t->optional) v->flags |= IR_VALUE_OPTIONAL;
  else if (!only_unknown) v->flags &= ~(uint32_t)IR_VALUE_OPTIONAL;
}
