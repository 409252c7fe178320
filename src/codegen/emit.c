/* Printing kernels as C (see emit.h).
 *
 * Per task: the row index is decomposed over the outer dims, each operand's
 * row pointer computed; per-row values (loads that do not move along the row,
 * constants, reduction results) are computed once; then one loop over the
 * row per reduction phase (accumulating in `lanes` independent partial sums
 * that the compiler turns into vector registers), and a last loop that
 * stores.  Row expressions are recomputed in each loop that needs them:
 * cheaper than a round trip through memory for rows that fit in cache.
 *
 * Complexity: O(expressions x operands) per kernel, bounded by the kernel IR's
 * limits. */
#include "codegen/emit.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

emit_opts emit_opts_default(void) {
  emit_opts o = {.lanes = 16, .unroll = 0, .grain = 65536, .dynamic = false};
  return o;
}

typedef struct em {
  strbuf *sb;
  const kir_group *g;
  const kir_loops *lp;
  const emit_opts *o;
  bool vary[KIR_MAX_EXPRS];    /* changes along the inner loop */
  bool emitted[KIR_MAX_EXPRS]; /* per-row value already defined in this task */
} em;

/* The C type of a value in registers: f16 and bf16 compute as float. */
static const char *ctype(smelt_dtype t) {
  switch (t) {
    case SMELT_F32: case SMELT_F16: case SMELT_BF16: return "float";
    case SMELT_I64: return "int64_t";
    case SMELT_I32: return "int32_t";
    default: return "unsigned char";
  }
}

/* The C type of an element in memory. */
static const char *stype(smelt_dtype t) {
  return t == SMELT_F16 || t == SMELT_BF16 ? "uint16_t" : ctype(t);
}

/* Conversions between memory and registers: f16/bf16 widen on load and
 * round to nearest even on store (the prelude's sm_h2f, sm_f2h, sm_bf2f,
 * sm_f2bf mirror ir/dtype.c bit for bit); other types are stored as they are. */
static const char *load_fn(smelt_dtype t) { return t == SMELT_F16 ? "sm_h2f" : t == SMELT_BF16 ? "sm_bf2f" : ""; }
static const char *store_fn(smelt_dtype t) { return t == SMELT_F16 ? "sm_f2h" : t == SMELT_BF16 ? "sm_f2bf" : ""; }

/* ---- sizes: literals (static) or parameter slots (dynamic) ---- */

static int p_od(int d) { return d; }
static int p_L(const kir_loops *lp) { return lp->nd; }
static int p_in(const kir_loops *lp, int op, int d) { return lp->nd + 1 + op * lp->nd + d; }
static int p_out(const kir_group *g, const kir_loops *lp, int op, int d) {
  return lp->nd + 1 + (g->n_in + op) * lp->nd + d;
}

int emit_params(const kir_group *g, const kir_loops *lp, int64_t *params) {
  int n = 0;
  for (int d = 0; d < lp->nd; d++) params[n++] = lp->od[d];
  params[n++] = lp->L;
  for (int k = 0; k < g->n_in; k++)
    for (int d = 0; d < lp->nd; d++) params[n++] = lp->in_os[k][d];
  for (int k = 0; k < g->n_out; k++)
    for (int d = 0; d < lp->nd; d++) params[n++] = lp->out_os[k][d];
  return n;
}

static const char *sz(const em *m, char *buf, size_t n, int64_t v, int slot) {
  if (m->o->dynamic) snprintf(buf, n, "P[%d]", slot);
  else snprintf(buf, n, "%" PRId64 "LL", v);
  return buf;
}

/* ---- constants ---- */

static void const_text(char *buf, size_t n, smelt_dtype dt, double v) {
  if (kir_dtype_float(dt)) {
    float f = (float)v;
    if (isnan(f)) snprintf(buf, n, "__builtin_nanf(\"\")");
    else if (isinf(f)) snprintf(buf, n, "(%s__builtin_inff())", f < 0 ? "-" : "");
    else snprintf(buf, n, "(%af)", (double)f);
  } else if (dt == SMELT_BOOL) {
    snprintf(buf, n, "((unsigned char)%d)", v != 0);
  } else {
    int64_t i = (int64_t)v;
    if (i == INT64_MIN) snprintf(buf, n, "((int64_t)(-9223372036854775807LL - 1))");
    else snprintf(buf, n, "((%s)%" PRId64 "LL)", ctype(dt), i);
  }
}

/* ---- expressions ---- */

static const char *unary_fn(kir_fn fn) {
  switch (fn) {
    case KF_EXP: return "sm_exp";
    case KF_LOG: return "sm_log";
    case KF_ERF: return "sm_erf";
    case KF_TANH: return "sm_tanh";
    case KF_SIGMOID: return "sm_sigmoid";
    case KF_RELU: return "sm_relu";
    case KF_SIGN: return "sm_sign";
    case KF_ABS: return "fabsf";
    case KF_SQRT: return "__builtin_sqrtf";
    case KF_FLOOR: return "__builtin_floorf";
    case KF_CEIL: return "__builtin_ceilf";
    case KF_ROUND: return "__builtin_rintf";
    case KF_SIN: return "sinf";
    case KF_COS: return "cosf";
    case KF_SOFTPLUS: return "sm_softplus";
    case KF_SOFTSIGN: return "sm_softsign";
    case KF_GELU: return "sm_gelu";
    case KF_GELU_TANH: return "sm_gelu_tanh";
    case KF_MISH: return "sm_mish";
    default: return NULL;
  }
}

static void unary_text(char *buf, size_t n, const kir_expr *e, int a, smelt_dtype adt) {
  char p0[64], p1[64];
  const_text(p0, sizeof p0, SMELT_F32, e->p0);
  const_text(p1, sizeof p1, SMELT_F32, e->p1);
  const char *f = unary_fn(e->fn);
  if (f) {
    snprintf(buf, n, "%s(e%d)", f, a);
    return;
  }
  switch (e->fn) {
    case KF_NEG: snprintf(buf, n, "(-e%d)", a); break;
    case KF_RECIP: snprintf(buf, n, "(1.0f / e%d)", a); break;
    case KF_RSQRT: snprintf(buf, n, "(1.0f / __builtin_sqrtf(e%d))", a); break;
    case KF_ISNAN: snprintf(buf, n, "((unsigned char)(e%d != e%d))", a, a); break;
    case KF_NOT: snprintf(buf, n, "((unsigned char)!e%d)", a); break;
    case KF_LEAKY: snprintf(buf, n, "sm_leaky(e%d, %s)", a, p0); break;
    case KF_ELU: snprintf(buf, n, "sm_elu(e%d, %s)", a, p0); break;
    case KF_CELU: snprintf(buf, n, "sm_celu(e%d, %s)", a, p0); break;
    case KF_SELU: snprintf(buf, n, "sm_selu(e%d, %s, %s)", a, p0, p1); break;
    case KF_HARDSIG: snprintf(buf, n, "sm_hardsig(e%d, %s, %s)", a, p0, p1); break;
    case KF_HARDSWISH: snprintf(buf, n, "(e%d * sm_hardsig(e%d, %s, %s))", a, a, p0, p1); break;
    case KF_THRELU: snprintf(buf, n, "sm_threlu(e%d, %s)", a, p0); break;
    case KF_CLIP: {
      /* min first, then max, as the reference */
      char lo[160];
      if (e->flags & 1) snprintf(lo, sizeof lo, "(e%d < %s ? %s : e%d)", a, p0, p0, a);
      else snprintf(lo, sizeof lo, "e%d", a);
      if (e->flags & 2) snprintf(buf, n, "(%s > %s ? %s : %s)", lo, p1, p1, lo);
      else snprintf(buf, n, "%s", lo);
      break;
    }
    default: snprintf(buf, n, "e%d", a); break;
  }
  (void)adt;
}

static void binary_text(char *buf, size_t n, kir_fn fn, int a, int b, smelt_dtype adt) {
  static const char *const ops[] = {[KF_ADD] = "+", [KF_SUB] = "-", [KF_MUL] = "*", [KF_DIV] = "/",
                                    [KF_EQ] = "==", [KF_LT] = "<", [KF_GT] = ">", [KF_LE] = "<=",
                                    [KF_GE] = ">="};
  switch (fn) {
    case KF_ADD: case KF_SUB: case KF_MUL: case KF_DIV:
      snprintf(buf, n, "(e%d %s e%d)", a, ops[fn], b);
      break;
    case KF_EQ:
      if (adt == SMELT_BOOL) snprintf(buf, n, "((unsigned char)((e%d != 0) == (e%d != 0)))", a, b);
      else snprintf(buf, n, "((unsigned char)(e%d == e%d))", a, b);
      break;
    case KF_LT: case KF_GT: case KF_LE: case KF_GE:
      snprintf(buf, n, "((unsigned char)(e%d %s e%d))", a, ops[fn], b);
      break;
    case KF_AND: snprintf(buf, n, "((unsigned char)(e%d && e%d))", a, b); break;
    case KF_OR: snprintf(buf, n, "((unsigned char)(e%d || e%d))", a, b); break;
    case KF_XOR: snprintf(buf, n, "((unsigned char)((e%d != 0) != (e%d != 0)))", a, b); break;
    case KF_POW: snprintf(buf, n, "sm_pow(e%d, e%d)", a, b); break;
    case KF_MAX: snprintf(buf, n, "sm_max(e%d, e%d)", a, b); break;
    case KF_MIN: snprintf(buf, n, "sm_min(e%d, e%d)", a, b); break;
    case KF_PRELU: snprintf(buf, n, "sm_prelu(e%d, e%d)", a, b); break;
    default: snprintf(buf, n, "e%d", a); break;
  }
}

/* Conversions as the reference's Cast (src/ops/convert.c).  A value of type
 * f16 or bf16 is a float in registers holding a number of that type: a cast
 * to one rounds through its storage form. */
static void cast_text(char *buf, size_t n, int a, smelt_dtype from, smelt_dtype to) {
  bool ffrom = kir_dtype_float(from);
  if (to == SMELT_F16 || to == SMELT_BF16) {
    char x[64];
    if (from == SMELT_BOOL) snprintf(x, sizeof x, "((float)(e%d != 0))", a);
    else snprintf(x, sizeof x, "((float)e%d)", a);
    snprintf(buf, n, "%s(%s(%s))", load_fn(to), store_fn(to), x);
  } else if (to == SMELT_BOOL) snprintf(buf, n, "((unsigned char)(e%d != 0))", a);
  else if (from == SMELT_BOOL) snprintf(buf, n, "((%s)(e%d != 0))", ctype(to), a);
  else if (ffrom && to == SMELT_I64) snprintf(buf, n, "sm_f2i64(e%d)", a);
  else if (ffrom && to == SMELT_I32) snprintf(buf, n, "sm_f2i32(e%d)", a);
  else if (from == SMELT_I64 && to == SMELT_I32) snprintf(buf, n, "((int32_t)(uint32_t)e%d)", a);
  else snprintf(buf, n, "((%s)e%d)", ctype(to), a);
}

static void expr_rhs(const em *m, int i, const char *idx, char *buf, size_t n) {
  const kir_expr *e = &m->g->ex[i];
  switch (e->op) {
    case KX_LOAD:
      snprintf(buf, n, "%s(x%d[%s])", load_fn(m->g->in[e->a].dt), e->a, m->lp->in_is[e->a] ? idx : "0");
      break;
    case KX_CONST: const_text(buf, n, e->dt, e->v); break;
    case KX_UNARY: unary_text(buf, n, e, e->a, m->g->ex[e->a].dt); break;
    case KX_BINARY: binary_text(buf, n, e->fn, e->a, e->b, m->g->ex[e->a].dt); break;
    case KX_SELECT: snprintf(buf, n, "(e%d ? e%d : e%d)", e->a, e->b, e->c); break;
    case KX_CAST: cast_text(buf, n, e->a, m->g->ex[e->a].dt, e->dt); break;
    case KX_RED: snprintf(buf, n, "rd%d", e->a); break;
  }
}

static void need_mark(const kir_group *g, int e, bool *need) {
  if (need[e]) return;
  need[e] = true;
  const kir_expr *x = &g->ex[e];
  if (x->op == KX_LOAD || x->op == KX_CONST || x->op == KX_RED) return;
  need_mark(g, x->a, need);
  if (x->b >= 0) need_mark(g, x->b, need);
  if (x->c >= 0) need_mark(g, x->c, need);
}

static void emit_hoisted(em *m, const bool *need, const char *ind) {
  char rhs[512];
  for (int i = 0; i < m->g->n_ex; i++) {
    if (!need[i] || m->vary[i] || m->emitted[i]) continue;
    expr_rhs(m, i, "0", rhs, sizeof rhs);
    sb_printf(m->sb, "%sconst %s e%d = %s;\n", ind, ctype(m->g->ex[i].dt), i, rhs);
    m->emitted[i] = true;
  }
}

static void emit_varying(em *m, const bool *need, const char *idx, const char *ind) {
  char rhs[512];
  for (int i = 0; i < m->g->n_ex; i++) {
    if (!need[i] || !m->vary[i]) continue;
    expr_rhs(m, i, idx, rhs, sizeof rhs);
    sb_printf(m->sb, "%sconst %s e%d = %s;\n", ind, ctype(m->g->ex[i].dt), i, rhs);
  }
}

static void emit_unroll(em *m, const char *ind) {
  if (m->o->unroll > 0) sb_printf(m->sb, "%s#pragma GCC unroll %d\n", ind, m->o->unroll);
}

/* ---- the task body ---- */

static void emit_pointers(em *m) {
  const kir_group *g = m->g;
  const kir_loops *lp = m->lp;
  char s[64];
  if (lp->nd > 0) {
    sb_printf(m->sb, "    int64_t q = r;\n");
    for (int d = lp->nd - 1; d >= 1; d--) {
      sz(m, s, sizeof s, lp->od[d], p_od(d));
      sb_printf(m->sb, "    const int64_t i%d = q %% %s;\n    q /= %s;\n", d, s, s);
    }
    sb_printf(m->sb, "    const int64_t i0 = q;\n");
  }
  for (int pass = 0; pass < 2; pass++) { /* outputs first: in-place inputs are based on them */
    int n_ops = pass ? g->n_in : g->n_out;
    for (int k = 0; k < n_ops; k++) {
      const int64_t *os = pass ? lp->in_os[k] : lp->out_os[k];
      const kir_operand *op = pass ? &g->in[k] : &g->out[k];
      int in_place_out = -1;
      for (int o = 0; pass && o < g->n_out; o++)
        if (g->inplace[o] == k) in_place_out = o;
      if (in_place_out >= 0) {
        sb_printf(m->sb, "    const %s *x%d = (const %s *)y%d;\n", stype(op->dt), k, stype(op->dt), in_place_out);
        continue;
      }
      if (pass) sb_printf(m->sb, "    const %s *restrict x%d = (const %s *)c->a[%d]", stype(op->dt), k, stype(op->dt), k);
      else sb_printf(m->sb, "    %s *restrict y%d = (%s *)c->a[%d]", stype(op->dt), k, stype(op->dt), g->n_in + k);
      for (int d = 0; d < lp->nd; d++) {
        if (!os[d]) continue;
        sz(m, s, sizeof s, os[d], pass ? p_in(lp, k, d) : p_out(g, lp, k, d));
        sb_printf(m->sb, " + i%d * %s", d, s);
      }
      sb_printf(m->sb, ";\n");
    }
  }
}

static const char *red_init(kir_red_kind k) {
  return k == KR_SUM ? "0.0f" : k == KR_MAX ? "(-__builtin_inff())" : "__builtin_inff()";
}

static void red_combine(strbuf *sb, kir_red_kind k, const char *acc, int e) {
  if (k == KR_SUM) sb_printf(sb, "%s += e%d;", acc, e);
  else sb_printf(sb, "%s = %s(%s, e%d);", acc, k == KR_MAX ? "sm_max" : "sm_min", acc, e);
}

static void red_combine_acc(strbuf *sb, kir_red_kind k, const char *acc, const char *v) {
  if (k == KR_SUM) sb_printf(sb, "%s += %s;", acc, v);
  else sb_printf(sb, "%s = %s(%s, %s);", acc, k == KR_MAX ? "sm_max" : "sm_min", acc, v);
}

/* One loop over the row folding every reduction of phase p. */
static void emit_phase(em *m, int p, const char *L) {
  const kir_group *g = m->g;
  bool need[KIR_MAX_EXPRS] = {false};
  for (int r = 0; r < g->n_red; r++)
    if (g->red[r].level == p) need_mark(g, g->red[r].arg, need);
  emit_hoisted(m, need, "    ");
  int W = m->o->lanes;
  sb_printf(m->sb, "    {\n");
  for (int r = 0; r < g->n_red; r++)
    if (g->red[r].level == p)
      sb_printf(m->sb, "      float A%d[%d];\n      for (int l = 0; l < %d; l++) A%d[l] = %s;\n", r, W, W, r,
                red_init(g->red[r].kind));
  sb_printf(m->sb, "      int64_t j = 0;\n      for (; j + %d <= %s; j += %d) {\n", W, L, W);
  /* Lane l touches only A[l]: the lanes are independent, so the loop is a
   * SIMD loop whatever the compiler's own analysis concludes (cc.c). */
  sb_printf(m->sb, "        #pragma omp simd\n");
  sb_printf(m->sb, "        for (int l = 0; l < %d; l++) {\n          const int64_t jj = j + l;\n", W);
  emit_varying(m, need, "jj", "          ");
  for (int r = 0; r < g->n_red; r++) {
    if (g->red[r].level != p) continue;
    char acc[32];
    snprintf(acc, sizeof acc, "A%d[l]", r);
    sb_printf(m->sb, "          ");
    red_combine(m->sb, g->red[r].kind, acc, g->red[r].arg);
    sb_printf(m->sb, "\n");
  }
  sb_printf(m->sb, "        }\n      }\n");
  for (int r = 0; r < g->n_red; r++) {
    if (g->red[r].level != p) continue;
    char acc[32], lane[32];
    snprintf(acc, sizeof acc, "rd%d", r);
    snprintf(lane, sizeof lane, "A%d[l]", r);
    sb_printf(m->sb, "      rd%d = %s;\n      for (int l = 0; l < %d; l++) ", r, red_init(g->red[r].kind), W);
    red_combine_acc(m->sb, g->red[r].kind, acc, lane);
    sb_printf(m->sb, "\n");
  }
  sb_printf(m->sb, "      for (; j < %s; j++) {\n", L);
  emit_varying(m, need, "j", "        ");
  for (int r = 0; r < g->n_red; r++) {
    if (g->red[r].level != p) continue;
    char acc[32];
    snprintf(acc, sizeof acc, "rd%d", r);
    sb_printf(m->sb, "        ");
    red_combine(m->sb, g->red[r].kind, acc, g->red[r].arg);
    sb_printf(m->sb, "\n");
  }
  sb_printf(m->sb, "      }\n    }\n");
}

/* Stores: per-row outputs after the phases, row outputs in a last loop. */
static void emit_stores(em *m, const char *j0, const char *j1) {
  const kir_group *g = m->g;
  bool need[KIR_MAX_EXPRS] = {false}, any_row = false;
  for (int s = 0; s < g->n_st; s++) {
    if (m->lp->out_is[g->st[s].operand]) {
      need_mark(g, g->st[s].expr, need);
      any_row = true;
      continue;
    }
    bool one[KIR_MAX_EXPRS] = {false};
    need_mark(g, g->st[s].expr, one);
    emit_hoisted(m, one, "    ");
    int o = g->st[s].operand;
    sb_printf(m->sb, "    y%d[0] = %s(e%d);\n", o, store_fn(g->out[o].dt), g->st[s].expr);
  }
  if (!any_row) return;
  emit_hoisted(m, need, "    ");
  /* Each j reads its own elements and writes y[j] alone (an output shares
   * memory with an input only element for element): a SIMD loop (cc.c).
   * gcc takes no "GCC unroll" between "omp simd" and its loop (nor before
   * it): the unrolled variants (max-autotune) say ivdep instead, which
   * leaves the loop as free to vectorize.  With both pragmas every unit
   * holding such a variant failed to compile, and max-autotune ran all the
   * fused groups on their reference kernels. */
  if (m->o->unroll > 0) {
    emit_unroll(m, "    ");
    sb_printf(m->sb, "    #pragma GCC ivdep\n");
  } else {
    sb_printf(m->sb, "    #pragma omp simd\n");
  }
  sb_printf(m->sb, "    for (int64_t j = %s; j < %s; j++) {\n", j0, j1);
  emit_varying(m, need, "j", "      ");
  for (int s = 0; s < g->n_st; s++)
    if (m->lp->out_is[g->st[s].operand])
      sb_printf(m->sb, "      y%d[j] = %s(e%d);\n", g->st[s].operand, store_fn(g->out[g->st[s].operand].dt),
                g->st[s].expr);
  sb_printf(m->sb, "    }\n");
}

static void compute_vary(em *m) {
  const kir_group *g = m->g;
  for (int i = 0; i < g->n_ex; i++) {
    const kir_expr *e = &g->ex[i];
    switch (e->op) {
      case KX_LOAD: m->vary[i] = m->lp->in_is[e->a] != 0; break;
      case KX_CONST: case KX_RED: m->vary[i] = false; break;
      default:
        m->vary[i] = m->vary[e->a] || (e->b >= 0 && m->vary[e->b]) || (e->c >= 0 && m->vary[e->c]);
    }
  }
}

static void emit_body(em *m, const char *name) {
  const kir_group *g = m->g;
  bool rowgroup = g->n_red > 0;
  char L[64];
  sz(m, L, sizeof L, m->lp->L, p_L(m->lp));
  sb_printf(m->sb, "static void smb_%s(void *vc, int64_t t0, int64_t t1) {\n", name);
  sb_printf(m->sb, "  const smelt_kctx *c = (const smelt_kctx *)vc;\n");
  sb_printf(m->sb, m->o->dynamic ? "  const int64_t *P = c->p;\n" : "  (void)c;\n");
  sb_printf(m->sb, "  for (int64_t t = t0; t < t1; t++) {\n");
  if (rowgroup) {
    sb_printf(m->sb, "    const int64_t r = t;\n");
  } else {
    sb_printf(m->sb, "    const int64_t r = t / c->nch, j0 = (t %% c->nch) * c->chunk;\n");
    sb_printf(m->sb, "    const int64_t j1 = j0 + c->chunk < %s ? j0 + c->chunk : %s;\n", L, L);
  }
  sb_printf(m->sb, "    (void)r;\n");
  emit_pointers(m);
  memset(m->emitted, 0, sizeof m->emitted);
  if (rowgroup) {
    for (int r = 0; r < g->n_red; r++) sb_printf(m->sb, "    float rd%d;\n", r);
    for (int p = 0; p < g->n_phases; p++) emit_phase(m, p, L);
    emit_stores(m, "0", L);
  } else {
    emit_stores(m, "j0", "j1");
  }
  sb_printf(m->sb, "  }\n}\n");
}

/* Cost of one element of g relative to a binary Add (two loads, a store):
 * operands read and written count 1 each, a transcendental function 16 (a
 * vectorized erf/exp/tanh is a few dozen instructions: GELU runs at 0.6
 * Gelem/s on one AVX2 core, an Add at several), a division, square root or
 * reduction 1; other arithmetic hides under the memory traffic. */
static int64_t elem_cost(const kir_group *g) {
  int64_t c = g->n_in + g->n_out + g->n_red;
  for (int i = 0; i < g->n_ex; i++) {
    const kir_expr *e = &g->ex[i];
    if (e->op != KX_UNARY && e->op != KX_BINARY) continue;
    switch (e->fn) {
    case KF_EXP: case KF_LOG: case KF_ERF: case KF_TANH: case KF_SIGMOID: case KF_SIN: case KF_COS:
    case KF_SOFTPLUS: case KF_GELU: case KF_GELU_TANH: case KF_MISH: case KF_ELU: case KF_SELU:
    case KF_CELU: case KF_SWISH: case KF_POW:
      c += 16;
      break;
    case KF_DIV: case KF_SQRT: case KF_RSQRT: case KF_RECIP:
      c += 1;
      break;
    default:
      break;
    }
  }
  return c;
}

/* The grain in elements: o->grain is sized for Add-like kernels; costlier
 * elements earn a thread sooner (a GELU over 32 K elements takes ~50 us on
 * one core: a task of 65536 would keep it there), cheaper ones never later.
 * Per task, so it scales with the core count as before. */
int64_t emit_grain(const kir_group *g, int64_t grain) {
  int64_t c = elem_cost(g), r = c > 3 ? grain * 3 / c : grain;
  return r > 0 ? r : 1; /* the kernel divides by it */
}

static void emit_entry(em *m, const char *name) {
  const kir_loops *lp = m->lp;
  char s[64], L[64];
  sz(m, L, sizeof L, lp->L, p_L(lp));
  sb_printf(m->sb, "void %s(void *const *a, const int64_t *p, const smelt_rt *rt) {\n", name);
  sb_printf(m->sb, "  smelt_kctx c = {a, p, 1, 0};\n");
  if (m->o->dynamic) sb_printf(m->sb, "  const int64_t *P = p;\n");
  sb_printf(m->sb, "  const int64_t L = %s, G = %" PRId64 "LL;\n  int64_t rows = 1;\n", L,
            emit_grain(m->g, m->o->grain));
  for (int d = 0; d < lp->nd; d++) sb_printf(m->sb, "  rows *= %s;\n", sz(m, s, sizeof s, lp->od[d], p_od(d)));
  sb_printf(m->sb, "  if (rows <= 0 || L <= 0) return;\n");
  if (m->g->n_red > 0) {
    sb_printf(m->sb, "  c.chunk = L;\n  int64_t tg = G / (L * %d) + 1;\n", m->g->n_phases + 1);
    sb_printf(m->sb, "  rt->parallel_for(rt->pool, rows, tg, smb_%s, &c);\n}\n", name);
    return;
  }
  sb_printf(m->sb,
            "  int64_t tasks = rows, tg = G / L + 1;\n"
            "  c.chunk = L;\n"
            "  if (L >= 2 * G) {\n"
            "    c.nch = (L + G - 1) / G;\n"
            "    c.chunk = ((L + c.nch - 1) / c.nch + 15) / 16 * 16;\n"
            "    c.nch = (L + c.chunk - 1) / c.chunk;\n"
            "    tasks = rows * c.nch;\n"
            "    tg = 1;\n"
            "  }\n"
            "  rt->parallel_for(rt->pool, tasks, tg, smb_%s, &c);\n}\n",
            name);
}

void emit_kernel(strbuf *sb, const kir_group *g, const kir_loops *lp, const char *name,
                 const emit_opts *o, int64_t *params, int *n_params) {
  em *m = calloc(1, sizeof *m);
  if (!m) {
    sb->oom = true;
    return;
  }
  m->sb = sb;
  m->g = g;
  m->lp = lp;
  m->o = o;
  compute_vary(m);
  emit_body(m, name);
  emit_entry(m, name);
  *n_params = o->dynamic ? emit_params(g, lp, params) : 0;
  free(m);
}
