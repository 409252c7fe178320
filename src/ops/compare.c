/* Comparisons (Equal Less Greater LessOrEqual GreaterOrEqual), logic on bool
 * (And Or Xor Not) and selection (Where), all with numpy broadcasting.
 * Comparisons with NaN are false, except that NaN is never Equal to itself. */
#include "ops/broadcast.h"
#include "util/err.h"

/* ---- kernels ---- */

#define CMP_ROWS(sfx, T, U)                          \
  EW_ROW2(Eq_##sfx, T, T, uint8_t, x == y)          \
  EW_ROW2(Lt_##sfx, T, T, uint8_t, x < y)           \
  EW_ROW2(Gt_##sfx, T, T, uint8_t, x > y)           \
  EW_ROW2(Le_##sfx, T, T, uint8_t, x <= y)          \
  EW_ROW2(Ge_##sfx, T, T, uint8_t, x >= y)
CMP_ROWS(f32, float, )
CMP_ROWS(f64, double, )
EW_FOR_INTS(CMP_ROWS)

/* bool is one byte, and any nonzero byte reads as true. */
EW_ROW2(Eq_bool, uint8_t, uint8_t, uint8_t, (x != 0) == (y != 0))
EW_ROW2(And_bool, uint8_t, uint8_t, uint8_t, x && y)
EW_ROW2(Or_bool, uint8_t, uint8_t, uint8_t, x || y)
EW_ROW2(Xor_bool, uint8_t, uint8_t, uint8_t, (x != 0) != (y != 0))
EW_ROW1(Not_bool, uint8_t, uint8_t, !x)

#define CMP_TABLE(OP) {EW_TABLE_FLOATS(OP), EW_TABLE_INTS(OP)}
static const ew_table eq_tab = {EW_TABLE_FLOATS(Eq), EW_TABLE_INTS(Eq), [SMELT_BOOL] = Eq_bool},
                      lt_tab = CMP_TABLE(Lt), gt_tab = CMP_TABLE(Gt), le_tab = CMP_TABLE(Le),
                      ge_tab = CMP_TABLE(Ge), and_tab = {[SMELT_BOOL] = And_bool},
                      or_tab = {[SMELT_BOOL] = Or_bool}, xor_tab = {[SMELT_BOOL] = Xor_bool},
                      not_tab = {[SMELT_BOOL] = Not_bool};

/* ---- infer/run: same-typed inputs, bool output ---- */

static smelt_status to_bool_infer(op_ctx *c, const ew_row_fn *tab) {
  return ew_table_infer(c, tab, SMELT_BOOL);
}

static smelt_status to_bool_run(op_ctx *c, const ew_row_fn *tab) {
  const tensor *ops[2] = {c->in[0], c->n_in > 1 ? c->in[1] : NULL};
  return ew_apply_f32(c, c->out[0], c->n_in, ops, tab[ops[0]->dtype], NULL);
}

#define TO_BOOL_OP(NAME, TAB)                                                   \
  static smelt_status infer_##NAME(op_ctx *c) { return to_bool_infer(c, TAB); } \
  static smelt_status run_##NAME(op_ctx *c) { return to_bool_run(c, TAB); }
TO_BOOL_OP(eq, eq_tab)
TO_BOOL_OP(lt, lt_tab)
TO_BOOL_OP(gt, gt_tab)
TO_BOOL_OP(le, le_tab)
TO_BOOL_OP(ge, ge_tab)
TO_BOOL_OP(and, and_tab)
TO_BOOL_OP(or, or_tab)
TO_BOOL_OP(xor, xor_tab)
TO_BOOL_OP(not, not_tab)

/* ---- Where: copies elements by size, so every fixed-size type works ---- */

#define WHERE_ROW(sfx, T)                                                                \
  static void Where_##sfx(const void *params, int64_t n, void *out_, const void *const *in, \
                          const int64_t *st) {                                          \
    T *o = out_;                                                                         \
    const uint8_t *cnd = in[0];                                                          \
    const T *a = in[1], *b = in[2];                                                      \
    (void)params;                                                                        \
    for (int64_t i = 0; i < n; i++) o[i] = cnd[i * st[0]] ? a[i * st[1]] : b[i * st[2]]; \
  }
WHERE_ROW(8, uint8_t)
WHERE_ROW(16, uint16_t)
WHERE_ROW(32, uint32_t)
WHERE_ROW(64, uint64_t)

static ew_row_fn where_row(size_t es) {
  switch (es) {
    case 1: return Where_8;
    case 2: return Where_16;
    case 4: return Where_32;
    case 8: return Where_64;
    default: return NULL;
  }
}

static smelt_status infer_where(op_ctx *c) {
  static const smelt_dtype cond_types[] = {SMELT_BOOL, SMELT_UNDEFINED};
  TRY(ew_check_dtype(c, 0, cond_types));
  TRY(ew_check_same_dtype(c, 1, 2));
  smelt_dtype t = c->in[1]->dtype;
  if (!where_row(dtype_size(t)) && !(c->static_infer && t == SMELT_UNDEFINED))
    return err_set(SMELT_ERR_UNSUPPORTED, "input 1 has type %s, which Where does not support",
                   dtype_name(t));
  int r;
  int64_t d[SMELT_MAX_RANK];
  TRY(ew_broadcast_inputs(c, 0, 3, &r, d));
  op_set_out(c, 0, t, r, d);
  return SMELT_OK;
}

static smelt_status run_where(op_ctx *c) {
  const tensor *ops[3] = {c->in[0], c->in[1], c->in[2]};
  return ew_apply(c, c->out[0], 3, ops, where_row(dtype_size(ops[1]->dtype)), NULL);
}

const op_def op_family_compare[] = {
    {"Equal", "", 2, 2, 1, 1, infer_eq, run_eq, false},
    {"Less", "", 2, 2, 1, 1, infer_lt, run_lt, false},
    {"Greater", "", 2, 2, 1, 1, infer_gt, run_gt, false},
    {"LessOrEqual", "", 2, 2, 1, 1, infer_le, run_le, false},
    {"GreaterOrEqual", "", 2, 2, 1, 1, infer_ge, run_ge, false},
    {"And", "", 2, 2, 1, 1, infer_and, run_and, false},
    {"Or", "", 2, 2, 1, 1, infer_or, run_or, false},
    {"Xor", "", 2, 2, 1, 1, infer_xor, run_xor, false},
    {"Not", "", 1, 1, 1, 1, infer_not, run_not, false},
    {"Where", "", 3, 3, 1, 1, infer_where, run_where, false},
    {0}};
