/* Building and normalizing the kernel IR (see kir.h).
 *
 * Complexity: bounded per group (KIR_MAX_EXPRS expressions, KIR_MAX_OPERANDS
 * operands); kir_init clears the header only. */
#include "codegen/kir.h"

#include <string.h>

bool kir_dtype_ok(smelt_dtype t) { return kir_dtype_float(t) || t == SMELT_BOOL || t == SMELT_I64 || t == SMELT_I32; }

bool kir_dtype_float(smelt_dtype t) { return t == SMELT_F32 || t == SMELT_F16 || t == SMELT_BF16; }

/* Only the header is cleared: the arrays (36 KB) are written before they are
 * read, entry by entry, and fusion lowers a candidate group per merge. */
void kir_init(kir_group *g, int rank, int k, const int64_t *I) {
  g->rank = rank;
  g->k = k;
  memset(g->I, 0, sizeof g->I);
  if (rank > 0) memcpy(g->I, I, sizeof(int64_t) * (size_t)rank);
  g->n_ex = g->n_red = g->n_in = g->n_out = g->n_st = g->n_phases = 0;
  for (int i = 0; i < KIR_MAX_OPERANDS; i++) g->inplace[i] = -1;
}

static int add(kir_group *g, kir_expr e) {
  if (g->n_ex >= KIR_MAX_EXPRS) return -1;
  g->ex[g->n_ex] = e;
  return g->n_ex++;
}

int kir_const(kir_group *g, smelt_dtype dt, double v) {
  for (int i = 0; i < g->n_ex; i++) /* constants are shared: fewer locals */
    if (g->ex[i].op == KX_CONST && g->ex[i].dt == dt && g->ex[i].v == v &&
        !memcmp(&g->ex[i].v, &v, sizeof v))
      return i;
  return add(g, (kir_expr){.op = KX_CONST, .dt = dt, .v = v, .a = -1, .b = -1, .c = -1});
}

static bool fn_to_bool(kir_fn fn) {
  return fn == KF_ISNAN || fn == KF_NOT || (fn >= KF_EQ && fn <= KF_XOR);
}

int kir_unary_p(kir_group *g, kir_fn fn, int a, float p0, float p1, int flags) {
  if (a < 0) return -1;
  smelt_dtype dt = fn_to_bool(fn) ? SMELT_BOOL : g->ex[a].dt;
  return add(g, (kir_expr){.op = KX_UNARY, .fn = fn, .dt = dt, .a = a, .b = -1, .c = -1,
                           .p0 = p0, .p1 = p1, .flags = flags});
}

int kir_unary(kir_group *g, kir_fn fn, int a) { return kir_unary_p(g, fn, a, 0, 0, 0); }

int kir_binary(kir_group *g, kir_fn fn, int a, int b) {
  if (a < 0 || b < 0) return -1;
  smelt_dtype dt = fn_to_bool(fn) ? SMELT_BOOL : g->ex[a].dt;
  return add(g, (kir_expr){.op = KX_BINARY, .fn = fn, .dt = dt, .a = a, .b = b, .c = -1});
}

int kir_select(kir_group *g, int cond, int a, int b) {
  if (cond < 0 || a < 0 || b < 0) return -1;
  return add(g, (kir_expr){.op = KX_SELECT, .dt = g->ex[a].dt, .a = cond, .b = a, .c = b});
}

int kir_cast(kir_group *g, int a, smelt_dtype to) {
  if (a < 0) return -1;
  if (g->ex[a].dt == to) return a;
  return add(g, (kir_expr){.op = KX_CAST, .dt = to, .a = a, .b = -1, .c = -1});
}

int kir_reduce(kir_group *g, kir_red_kind kind, int arg) {
  if (arg < 0 || g->n_red >= KIR_MAX_REDS) return -1;
  g->red[g->n_red] = (kir_red){.kind = kind, .arg = arg};
  return add(g, (kir_expr){.op = KX_RED, .dt = g->ex[arg].dt, .a = g->n_red++, .b = -1, .c = -1});
}

static bool reduced_stride(const kir_group *g, const int64_t *stride) {
  for (int d = g->k; d < g->rank; d++)
    if (stride[d] && g->I[d] > 1) return true;
  return false;
}

int kir_load(kir_group *g, int value, smelt_dtype dt, const int64_t *stride) {
  size_t sb = sizeof(int64_t) * (size_t)g->rank;
  int op = -1;
  for (int i = 0; i < g->n_in && op < 0; i++)
    if (g->in[i].value == value && (!sb || !memcmp(g->in[i].stride, stride, sb))) op = i;
  if (op < 0) {
    if (g->n_in >= KIR_MAX_OPERANDS) return -1;
    op = g->n_in++;
    kir_operand *o = &g->in[op];
    memset(o, 0, sizeof *o);
    o->value = value;
    o->dt = dt;
    if (sb) memcpy(o->stride, stride, sb);
    o->row = reduced_stride(g, stride);
  }
  for (int i = 0; i < g->n_ex; i++)
    if (g->ex[i].op == KX_LOAD && g->ex[i].a == op) return i;
  return add(g, (kir_expr){.op = KX_LOAD, .dt = dt, .a = op, .b = -1, .c = -1});
}

int kir_store_out(kir_group *g, int expr, int value, const int64_t *stride) {
  if (expr < 0 || g->n_out >= KIR_MAX_OPERANDS || g->n_st >= KIR_MAX_OPERANDS) return -1;
  int op = g->n_out++;
  kir_operand *o = &g->out[op];
  memset(o, 0, sizeof *o);
  o->value = value;
  o->dt = g->ex[expr].dt;
  if (g->rank) memcpy(o->stride, stride, sizeof(int64_t) * (size_t)g->rank);
  o->row = reduced_stride(g, stride);
  g->st[g->n_st++] = (kir_store){.expr = expr, .operand = op};
  return op;
}

static int max3(int a, int b, int c) {
  int m = a > b ? a : b;
  return m > c ? m : c;
}

bool kir_finish(kir_group *g) {
  g->n_phases = 0;
  for (int i = 0; i < g->n_ex; i++) {
    kir_expr *e = &g->ex[i];
    int la = e->a >= 0 && e->op != KX_LOAD && e->op != KX_RED ? g->ex[e->a].level : 0;
    int lb = e->b >= 0 ? g->ex[e->b].level : 0, lc = e->c >= 0 ? g->ex[e->c].level : 0;
    switch (e->op) {
      case KX_LOAD: e->row = g->in[e->a].row; e->level = 0; break;
      case KX_CONST: e->row = false; e->level = 0; break;
      case KX_RED: {
        kir_red *r = &g->red[e->a];
        r->level = g->ex[r->arg].level;
        e->row = false;
        e->level = r->level + 1;
        if (e->level > g->n_phases) g->n_phases = e->level;
        break;
      }
      default:
        e->row = g->ex[e->a].row || (e->b >= 0 && g->ex[e->b].row) || (e->c >= 0 && g->ex[e->c].row);
        e->level = max3(la, lb, lc);
    }
  }
  /* A per-row output may only hold a per-row value. */
  for (int s = 0; s < g->n_st; s++)
    if (!g->out[g->st[s].operand].row && g->ex[g->st[s].expr].row && g->k < g->rank) return false;
  return true;
}

/* Dims d and d+1 (both of size > 1) merge for an operand if stepping d is
 * the same as stepping d+1 across its whole extent. */
static bool merges(const int64_t *st, int d, int64_t size_next) { return st[d] == st[d + 1] * size_next; }

typedef struct cdims {
  int n;
  int64_t size[SMELT_MAX_RANK];
  int src[SMELT_MAX_RANK][SMELT_MAX_RANK]; /* per collapsed dim: the last source dim */
} cdims;

/* Collapses source dims [lo, hi) of I into c: drops size-1 dims, merges runs. */
static void collapse_range(const kir_group *g, int lo, int hi, int64_t (*st)[SMELT_MAX_RANK],
                           int n_ops, int64_t (*out)[SMELT_MAX_RANK], int *n_out, int64_t *sizes) {
  int n = 0;
  int last = -1;
  for (int d = lo; d < hi; d++) {
    if (g->I[d] == 1) continue;
    bool ok = last >= 0;
    for (int o = 0; ok && o < n_ops; o++) ok = merges(st[o], last, g->I[d]) || false;
    if (ok) {
      /* merge d into the current collapsed dim: its inner stride becomes d's */
      sizes[n - 1] *= g->I[d];
      for (int o = 0; o < n_ops; o++) out[o][n - 1] = st[o][d];
    } else {
      sizes[n] = g->I[d];
      for (int o = 0; o < n_ops; o++) out[o][n] = st[o][d];
      n++;
    }
    last = d;
  }
  *n_out = n;
}

bool kir_collapse(const kir_group *g, kir_loops *lp) {
  memset(lp, 0, sizeof *lp);
  int n_ops = g->n_in + g->n_out;
  int64_t st[2 * KIR_MAX_OPERANDS][SMELT_MAX_RANK], cs[2 * KIR_MAX_OPERANDS][SMELT_MAX_RANK];
  for (int o = 0; o < n_ops; o++)
    memcpy(st[o], o < g->n_in ? g->in[o].stride : g->out[o - g->n_in].stride, sizeof st[o]);
  bool rowgroup = g->n_red > 0 || g->k < g->rank;
  int64_t sizes[SMELT_MAX_RANK];
  int n;
  if (!rowgroup) {
    collapse_range(g, 0, g->rank, st, n_ops, cs, &n, sizes);
    lp->L = n ? sizes[n - 1] : 1;
    lp->nd = n ? n - 1 : 0;
    for (int d = 0; d < lp->nd; d++) lp->od[d] = sizes[d];
    for (int o = 0; o < n_ops; o++) {
      int64_t *os = o < g->n_in ? lp->in_os[o] : lp->out_os[o - g->n_in];
      int64_t *is = o < g->n_in ? &lp->in_is[o] : &lp->out_is[o - g->n_in];
      for (int d = 0; d < lp->nd; d++) os[d] = cs[o][d];
      *is = n ? cs[o][n - 1] : 0;
    }
    return true;
  }
  /* inner: the reduced dims must become one */
  int64_t ci[2 * KIR_MAX_OPERANDS][SMELT_MAX_RANK], isz[SMELT_MAX_RANK];
  int ni;
  collapse_range(g, g->k, g->rank, st, n_ops, ci, &ni, isz);
  if (ni > 1) return false;
  lp->L = ni ? isz[0] : 1;
  collapse_range(g, 0, g->k, st, n_ops, cs, &n, sizes);
  lp->nd = n;
  for (int d = 0; d < n; d++) lp->od[d] = sizes[d];
  for (int o = 0; o < n_ops; o++) {
    int64_t *os = o < g->n_in ? lp->in_os[o] : lp->out_os[o - g->n_in];
    int64_t *is = o < g->n_in ? &lp->in_is[o] : &lp->out_is[o - g->n_in];
    for (int d = 0; d < n; d++) os[d] = cs[o][d];
    *is = ni ? ci[o][0] : 0;
    if (*is != 0 && *is != 1) return false;
  }
  return true;
}

const char *kir_fn_name(kir_fn fn) {
  static const char *const names[KF_COUNT] = {
      "neg", "abs", "sqrt", "recip", "exp", "log", "erf", "tanh", "sigmoid", "relu", "floor",
      "ceil", "round", "sign", "sin", "cos", "softplus", "softsign", "gelu", "gelu_tanh", "mish",
      "leaky", "elu", "selu", "celu", "hardsig", "hardswish", "swish", "threlu", "clip", "isnan",
      "not", "rsqrt", "add", "sub", "mul", "div", "pow", "max", "min", "prelu", "eq", "lt", "gt",
      "le", "ge", "and", "or", "xor"};
  return (unsigned)fn < KF_COUNT ? names[fn] : "?";
}
