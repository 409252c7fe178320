/* Bit operations on integers with numpy broadcasting: BitShift (unsigned
 * types; a shift by the type's width or more gives 0 rather than C's
 * undefined behaviour), BitwiseAnd Or Xor Not. */
#include <string.h>

#include "ops/broadcast.h"
#include "util/err.h"
#include "util/quote.h"

#define BITWISE_ROWS(sfx, T, U)                                 \
  EW_ROW2(And_##sfx, T, T, T, (T)(x & y))                      \
  EW_ROW2(Or_##sfx, T, T, T, (T)(x | y))                       \
  EW_ROW2(Xor_##sfx, T, T, T, (T)(x ^ y))                      \
  EW_ROW1(Not_##sfx, T, T, (T)~(U)x)
EW_FOR_INTS(BITWISE_ROWS)

#define SHIFT_ROWS(sfx, T, U)                                                      \
  EW_ROW2(Shl_##sfx, T, T, T, y >= sizeof(T) * 8 ? (T)0 : (T)((U)x << y))         \
  EW_ROW2(Shr_##sfx, T, T, T, y >= sizeof(T) * 8 ? (T)0 : (T)(x >> y))
EW_FOR_UINTS(SHIFT_ROWS)

static const ew_table and_tab = {EW_TABLE_INTS(And)}, or_tab = {EW_TABLE_INTS(Or)},
                      xor_tab = {EW_TABLE_INTS(Xor)}, not_tab = {EW_TABLE_INTS(Not)},
                      shl_tab = {EW_TABLE_UINTS(Shl)}, shr_tab = {EW_TABLE_UINTS(Shr)};

static smelt_status bitwise_infer(op_ctx *c, const ew_row_fn *tab) {
  return ew_table_infer(c, tab, SMELT_UNDEFINED);
}

static smelt_status bitwise_run(op_ctx *c, const ew_row_fn *tab) {
  const tensor *ops[2] = {c->in[0], c->n_in > 1 ? c->in[1] : NULL};
  return ew_apply(c, c->out[0], c->n_in, ops, tab[ops[0]->dtype], NULL);
}

#define BITWISE_OP(NAME)                                                               \
  static smelt_status infer_##NAME(op_ctx *c) { return bitwise_infer(c, NAME##_tab); } \
  static smelt_status run_##NAME(op_ctx *c) { return bitwise_run(c, NAME##_tab); }
BITWISE_OP(and)
BITWISE_OP(or)
BITWISE_OP(xor)
BITWISE_OP(not)

static smelt_status shift_tab(op_ctx *c, const ew_row_fn **tab) {
  const char *dir = ir_attr_string(c->node, "direction", "");
  if (!strcmp(dir, "LEFT")) *tab = shl_tab;
  else if (!strcmp(dir, "RIGHT")) *tab = shr_tab;
  else
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute direction is %s, expected LEFT or RIGHT",
                   q_path(dir));
  return SMELT_OK;
}
static smelt_status infer_bitshift(op_ctx *c) {
  const ew_row_fn *tab = NULL;
  TRY(shift_tab(c, &tab));
  return bitwise_infer(c, tab);
}
static smelt_status run_bitshift(op_ctx *c) {
  const ew_row_fn *tab = NULL;
  TRY(shift_tab(c, &tab));
  return bitwise_run(c, tab);
}

const op_def op_family_bitwise[] = {
    {"BitwiseAnd", "", 2, 2, 1, 1, infer_and, run_and, false},
    {"BitwiseOr", "", 2, 2, 1, 1, infer_or, run_or, false},
    {"BitwiseXor", "", 2, 2, 1, 1, infer_xor, run_xor, false},
    {"BitwiseNot", "", 1, 1, 1, 1, infer_not, run_not, false},
    {"BitShift", "", 2, 2, 1, 1, infer_bitshift, run_bitshift, false},
    {0}};
