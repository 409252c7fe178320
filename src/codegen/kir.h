/* The kernel IR: what one fused group computes, in a form the C emitter can
 * print without looking at the ONNX graph again.
 *
 * A group iterates over an iteration shape I (rank r).  Its first k dims are
 * the "outer" dims; dims [k, r) are reduced (row groups) — for a pointwise
 * group k == r.  Every operand (a tensor read or written) is described by one
 * element stride per dim of I (0 where it is broadcast).  Before emission the
 * dims are collapsed (kir_collapse): adjacent dims merge where every operand
 * allows it, so a loop nest has as few levels as possible and the innermost
 * level is unit-stride or broadcast for every operand.
 *
 * Expressions form a DAG in topological order (operands before users).  An
 * expression is "row" when it varies along the inner (reduced) extent; the
 * others are computed once per row.  Reductions fold a row expression over the
 * inner extent into a per-row scalar; a reduction may depend on another's
 * result, which makes phases: phase p loops over the row once for every
 * reduction at level p, and a final loop stores the row outputs. */
#ifndef SMELT_CODEGEN_KIR_H
#define SMELT_CODEGEN_KIR_H

#include <stdbool.h>
#include <stdint.h>

#include "smelt.h"

#define KIR_MAX_EXPRS 512
#define KIR_MAX_OPERANDS 32
#define KIR_MAX_REDS 8

typedef enum kir_op {
  KX_LOAD,   /* a: operand index */
  KX_CONST,  /* v */
  KX_UNARY,  /* fn(a) */
  KX_BINARY, /* fn(a, b) */
  KX_SELECT, /* a ? b : c (a is bool) */
  KX_CAST,   /* a converted to dt */
  KX_RED     /* a: reduction index; per-row scalar */
} kir_op;

typedef enum kir_fn {
  /* unary, f32 */
  KF_NEG, KF_ABS, KF_SQRT, KF_RECIP, KF_EXP, KF_LOG, KF_ERF, KF_TANH, KF_SIGMOID, KF_RELU,
  KF_FLOOR, KF_CEIL, KF_ROUND, KF_SIGN, KF_SIN, KF_COS, KF_SOFTPLUS, KF_SOFTSIGN,
  KF_GELU, KF_GELU_TANH, KF_MISH,
  KF_LEAKY,      /* p0: alpha */
  KF_ELU,        /* p0: alpha */
  KF_SELU,       /* p0 alpha, p1 gamma */
  KF_CELU,       /* p0 alpha */
  KF_HARDSIG,    /* p0 alpha, p1 beta */
  KF_HARDSWISH,  /* p0 alpha, p1 beta */
  KF_SWISH,      /* p0 alpha */
  KF_THRELU,     /* p0 alpha */
  KF_CLIP,       /* p0 lo, p1 hi, flags: bit0 has lo, bit1 has hi */
  KF_ISNAN,      /* -> bool */
  KF_NOT,        /* bool -> bool */
  KF_RSQRT,      /* 1 / sqrt(x) */
  /* binary */
  KF_ADD, KF_SUB, KF_MUL, KF_DIV, KF_POW, KF_MAX, KF_MIN, KF_PRELU,
  KF_EQ, KF_LT, KF_GT, KF_LE, KF_GE, /* -> bool */
  KF_AND, KF_OR, KF_XOR,             /* bool */
  KF_COUNT
} kir_fn;

typedef enum kir_red_kind { KR_SUM, KR_MAX, KR_MIN } kir_red_kind;

typedef struct kir_expr {
  kir_op op;
  kir_fn fn;
  smelt_dtype dt; /* result type: F32, F16, BF16, BOOL, I64 or I32 (f16/bf16: a float in
                   * registers holding a number of that type) */
  int a, b, c;
  double v;       /* KX_CONST */
  float p0, p1;   /* function parameters */
  int flags;
  bool row;       /* varies along the inner extent (set by kir_finish) */
  int level;      /* reductions this depends on, transitively: 1 + max level (0: none) */
} kir_expr;

typedef struct kir_red {
  kir_red_kind kind;
  int arg;   /* row expression folded */
  int level; /* phase: 0 = depends on no other reduction */
} kir_red;

/* A tensor the group reads or writes, dense row-major in memory. */
typedef struct kir_operand {
  int value;        /* graph value id */
  smelt_dtype dt;   /* element type in memory, the graph value's (kir_dtype_ok) */
  int64_t stride[SMELT_MAX_RANK]; /* elements per step of each dim of I; 0 = broadcast */
  bool row;         /* some reduced-dim stride is nonzero (row groups) */
} kir_operand;

typedef struct kir_store {
  int expr;
  int operand; /* index into outs */
} kir_store;

typedef struct kir_group {
  int rank, k;
  int64_t I[SMELT_MAX_RANK];
  kir_expr ex[KIR_MAX_EXPRS];
  int n_ex;
  kir_red red[KIR_MAX_REDS];
  int n_red;
  kir_operand in[KIR_MAX_OPERANDS];
  int n_in;
  kir_operand out[KIR_MAX_OPERANDS];
  int n_out;
  kir_store st[KIR_MAX_OPERANDS];
  int n_st;
  int n_phases; /* reduction levels (0 for pointwise groups) */
  int inplace[KIR_MAX_OPERANDS]; /* per output: input operand it overwrites, -1 none (set by the planner) */
} kir_group;

/* The loop nest after collapsing: outer dims od[0..nd) (row index decomposed
 * over them), inner extent L; per operand its outer strides and inner stride. */
typedef struct kir_loops {
  int nd;
  int64_t od[SMELT_MAX_RANK];
  int64_t L;
  int64_t in_os[KIR_MAX_OPERANDS][SMELT_MAX_RANK], in_is[KIR_MAX_OPERANDS];
  int64_t out_os[KIR_MAX_OPERANDS][SMELT_MAX_RANK], out_is[KIR_MAX_OPERANDS];
} kir_loops;

/* A sliding-window kernel over NCHW planes (2-D pools and depthwise
 * convolution), geometry fixed at compile time: one task per output row. */
typedef enum win_kind { WK_MAX, WK_AVG, WK_DWCONV } win_kind;

typedef struct win_geom {
  win_kind kind;
  int64_t N, C, IH, IW, OH, OW, KH, KW, SH, SW, DH, DW, PH0, PW0, PH1, PW1;
  bool count_pad;   /* WK_AVG: count_include_pad */
  int act;          /* WK_DWCONV epilogue: fused_act_kind (none relu clip sigmoid tanh gelu) */
  float lo, hi;     /* clip bounds */
  bool has_bias, has_res;
} win_geom;

/* ---- building (kir.c) ---- */
void kir_init(kir_group *g, int rank, int k, const int64_t *I);
/* Each returns the new expression's id, or -1 when the group is full. */
int kir_const(kir_group *g, smelt_dtype dt, double v);
int kir_unary(kir_group *g, kir_fn fn, int a);
int kir_unary_p(kir_group *g, kir_fn fn, int a, float p0, float p1, int flags);
int kir_binary(kir_group *g, kir_fn fn, int a, int b);
int kir_select(kir_group *g, int cond, int a, int b);
int kir_cast(kir_group *g, int a, smelt_dtype to);
/* Reduction of row expression arg; returns the KX_RED expression. */
int kir_reduce(kir_group *g, kir_red_kind kind, int arg);
/* A load of value (dtype dt) with the given strides over I; deduplicated. */
int kir_load(kir_group *g, int value, smelt_dtype dt, const int64_t *stride);
/* Adds a store of expr into a new output operand; returns the operand index or -1. */
int kir_store_out(kir_group *g, int expr, int value, const int64_t *stride);
/* Computes row flags and levels; false if the group is malformed (a
 * reduction of a non-row expression is fine; a row expression feeding only
 * per-row outputs without reduction is not). */
bool kir_finish(kir_group *g);
/* Collapses dims.  false if the reduced dims of a row group do not merge into
 * one inner extent for every operand. */
bool kir_collapse(const kir_group *g, kir_loops *lp);
/* Stable text form (for hashing and SMELT_DEBUG). */
const char *kir_fn_name(kir_fn fn);
/* Element types a group may load and store: f32, f16, bf16 (computed in
 * f32: widened on load, rounded to nearest even on store), bool, i64, i32. */
bool kir_dtype_ok(smelt_dtype t);
/* f32, f16 or bf16: the types float arithmetic applies to. */
bool kir_dtype_float(smelt_dtype t);

#endif
