/* Elementwise machinery shared by every elementwise op family: broadcast
 * shape inference and a strided walk over an output shape.
 *
 * A kernel is a row function: it computes out[0..n) (dense) from inputs whose
 * k-th operand starts at in[k] and advances st[k] elements per output element.
 * After collapsing, st[k] is 1 (contiguous) or 0 (broadcast along the row), so
 * a row function tests those two cases and stays simple.  The walk splits the
 * output into rows, runs large tensors on the pool, and can lift an f32 row
 * function to f16/bf16 operands (computed in f32, rounded back). */
#ifndef SMELT_OPS_BROADCAST_H
#define SMELT_OPS_BROADCAST_H

#include "ops/op.h"

#define EW_MAX_IN 4

typedef void (*ew_row_fn)(const void *params, int64_t n, void *out, const void *const *in,
                          const int64_t *st);

/* ---- inference ---- */
/* Numpy broadcast of the shapes of inputs [first, first + n) that are present;
 * rank -1 if any has unknown rank. */
smelt_status ew_broadcast_inputs(op_ctx *c, int first, int n, int *rank, int64_t *dims);
/* Checks input i's dtype against allowed (ended by SMELT_UNDEFINED), naming the
 * op's input; an unknown dtype during static inference passes. */
smelt_status ew_check_dtype(op_ctx *c, int i, const smelt_dtype *allowed);
/* Checks inputs [first, first + n) share input first's dtype. */
smelt_status ew_check_same_dtype(op_ctx *c, int first, int n);

/* ---- execution ---- */
/* out (allocated, shape = broadcast of the inputs) from in[0..n_in) with fn.
 * Operand element sizes come from the tensors' dtypes. */
smelt_status ew_apply(op_ctx *c, tensor *out, int n_in, const tensor *const *in, ew_row_fn fn,
                      const void *params);
/* Same, but fn_f32 sees every f16/bf16 operand (inputs and output) as f32. */
smelt_status ew_apply_f32(op_ctx *c, tensor *out, int n_in, const tensor *const *in,
                          ew_row_fn fn_f32, const void *params);

/* True for f16 and bf16, the types computed through f32. */
static inline bool ew_is_half(smelt_dtype t) { return t == SMELT_F16 || t == SMELT_BF16; }

/* ---- dtype lists for the families' allowed-type checks ---- */
#define EW_FLOATS SMELT_F16, SMELT_BF16, SMELT_F32, SMELT_F64
#define EW_SINTS SMELT_I8, SMELT_I16, SMELT_I32, SMELT_I64
#define EW_UINTS SMELT_U8, SMELT_U16, SMELT_U32, SMELT_U64
#define EW_NUMERIC EW_FLOATS, EW_SINTS, EW_UINTS

/* X(suffix, storage type, unsigned computation type) for the integer types.
 * Integer arithmetic goes through the unsigned type, at least as wide as int,
 * so that overflow wraps instead of being undefined. */
#define EW_FOR_SINTS(X)                                                                  \
  X(i8, int8_t, uint32_t) X(i16, int16_t, uint32_t) X(i32, int32_t, uint32_t)            \
  X(i64, int64_t, uint64_t)
#define EW_FOR_UINTS(X)                                                                  \
  X(u8, uint8_t, uint32_t) X(u16, uint16_t, uint32_t) X(u32, uint32_t, uint32_t)         \
  X(u64, uint64_t, uint64_t)
#define EW_FOR_INTS(X) EW_FOR_SINTS(X) EW_FOR_UINTS(X)

/* Designated initializers of a dtype-indexed kernel table from functions
 * named OP_<suffix>.  f16/bf16 use the f32 function through ew_apply_f32. */
#define EW_TABLE_FLOATS(OP)                                                              \
  [SMELT_F32] = OP##_f32, [SMELT_F64] = OP##_f64, [SMELT_F16] = OP##_f32,                \
  [SMELT_BF16] = OP##_f32
#define EW_TABLE_SINTS(OP)                                                               \
  [SMELT_I8] = OP##_i8, [SMELT_I16] = OP##_i16, [SMELT_I32] = OP##_i32, [SMELT_I64] = OP##_i64
#define EW_TABLE_UINTS(OP)                                                               \
  [SMELT_U8] = OP##_u8, [SMELT_U16] = OP##_u16, [SMELT_U32] = OP##_u32, [SMELT_U64] = OP##_u64
#define EW_TABLE_INTS(OP) EW_TABLE_SINTS(OP), EW_TABLE_UINTS(OP)

/* A kernel table: the row function per dtype (of the operand that selects
 * it), NULL where the op does not support the type. */
typedef ew_row_fn ew_table[SMELT_DTYPE_COUNT];

/* Checks input i's dtype has a kernel in tab (unknown passes statically). */
smelt_status ew_check_table(op_ctx *c, int i, const ew_row_fn *tab);
/* Infers an op over inputs [0, n_in) of one type with a kernel in tab:
 * output 0 gets their broadcast shape, and type out (SMELT_UNDEFINED: the
 * inputs' type). */
smelt_status ew_table_infer(op_ctx *c, const ew_row_fn *tab, smelt_dtype out);

/* A row function over one operand: out[i] = EXPR with x = the input element.
 * TI/TO are the input/output element types; P *p points at the op's typed
 * parameter block. */
#define EW_ROW1P(NAME, P, TI, TO, EXPR)                                                     \
  static void NAME(const void *params, int64_t n, void *out_, const void *const *in,       \
                   const int64_t *st) {                                                    \
    TO *o = out_;                                                                          \
    const TI *a = in[0];                                                                   \
    const P *p = params;                                                                   \
    (void)p;                                                                               \
    if (st[0] == 1) {                                                                      \
      for (int64_t i = 0; i < n; i++) {                                                    \
        TI x = a[i];                                                                       \
        o[i] = (EXPR);                                                                     \
      }                                                                                    \
    } else {                                                                               \
      for (int64_t i = 0; i < n; i++) {                                                    \
        TI x = a[i * st[0]];                                                               \
        o[i] = (EXPR);                                                                     \
      }                                                                                    \
    }                                                                                      \
  }

/* The same for ops without parameters. */
#define EW_ROW1(NAME, TI, TO, EXPR) EW_ROW1P(NAME, char, TI, TO, EXPR)

/* An f32 row function that hands contiguous rows to a vectorized kernel: VK
 * (an expression of `params`) is a vmath_kernels table (kernels/vmath.h) or
 * NULL, OP the kernel's index in it; strided rows, or no table, compute
 * EXPR of x element by element. */
#define EW_ROW1_VMATH(NAME, OP, VK, EXPR)                                                   \
  static void NAME(const void *params, int64_t n, void *out_, const void *const *in,       \
                   const int64_t *st) {                                                    \
    const vmath_kernels *vk = (VK);                                                        \
    const float *a = in[0];                                                                \
    float *o = out_;                                                                       \
    if (st[0] == 1 && vk) {                                                                \
      vk->op[OP](a, o, n);                                                                 \
      return;                                                                              \
    }                                                                                      \
    for (int64_t i = 0; i < n; i++) {                                                      \
      float x = a[i * st[0]];                                                              \
      o[i] = (EXPR);                                                                       \
    }                                                                                      \
  }

/* A row function over two operands: out[i] = EXPR with x, y the elements.
 * The contiguous/broadcast cases are separate loops so each vectorizes. */
#define EW_ROW2(NAME, TA, TB, TO, EXPR)                                                     \
  static void NAME(const void *params, int64_t n, void *out_, const void *const *in,       \
                   const int64_t *st) {                                                    \
    TO *o = out_;                                                                          \
    const TA *a = in[0];                                                                   \
    const TB *b = in[1];                                                                   \
    (void)params;                                                                          \
    if (st[0] == 1 && st[1] == 1) {                                                        \
      for (int64_t i = 0; i < n; i++) {                                                    \
        TA x = a[i];                                                                       \
        TB y = b[i];                                                                       \
        o[i] = (EXPR);                                                                     \
      }                                                                                    \
    } else if (st[0] == 0 && st[1] == 1) {                                                 \
      TA x = a[0];                                                                         \
      for (int64_t i = 0; i < n; i++) {                                                    \
        TB y = b[i];                                                                       \
        o[i] = (EXPR);                                                                     \
      }                                                                                    \
    } else if (st[0] == 1 && st[1] == 0) {                                                 \
      TB y = b[0];                                                                         \
      for (int64_t i = 0; i < n; i++) {                                                    \
        TA x = a[i];                                                                       \
        o[i] = (EXPR);                                                                     \
      }                                                                                    \
    } else {                                                                               \
      for (int64_t i = 0; i < n; i++) {                                                    \
        TA x = a[i * st[0]];                                                               \
        TB y = b[i * st[1]];                                                               \
        o[i] = (EXPR);                                                                     \
      }                                                                                    \
    }                                                                                      \
  }

#endif
