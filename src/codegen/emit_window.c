/* Window kernels: 2-D max / average pooling and depthwise convolution over
 * NCHW planes, with the geometry printed as literals.
 *
 * A task is one output row (n, c, oh).  The kernel rows that fall inside the
 * input are found once per task; the output columns whose whole window is
 * inside the input (the interior, known at compile time) are computed tap by
 * tap into a row accumulator — a unit-stride loop over columns the C compiler
 * vectorizes — and the few edge columns one by one with bounds checks.
 * Semantics follow src/ops/pool.c and conv: padding is ignored by max, counted
 * by average only with count_include_pad, and contributes 0 to convolution;
 * the convolution epilogue is act(acc + bias + residual). */
#include <inttypes.h>
#include <stdio.h>

#include "codegen/emit.h"

static const char *init_of(win_kind k) { return k == WK_MAX ? "(-__builtin_inff())" : "0.0f"; }

/* acc <- combine(acc, tap value v, weight wv) */
static void combine(strbuf *b, win_kind k, const char *acc, const char *v, const char *wv) {
  if (k == WK_MAX) sb_printf(b, "%s = %s > %s ? %s : %s;", acc, v, acc, v, acc);
  else if (k == WK_AVG) sb_printf(b, "%s += %s;", acc, v);
  else sb_printf(b, "%s += %s * %s;", acc, v, wv);
}

static void act_text(strbuf *b, const win_geom *w, const char *v) {
  switch (w->act) {
    case 1: sb_printf(b, "sm_relu(%s)", v); break;
    case 2: sb_printf(b, "(%s < %af ? %af : %s > %af ? %af : %s)", v, (double)w->lo, (double)w->lo, v,
                      (double)w->hi, (double)w->hi, v);
      break;
    case 3: sb_printf(b, "sm_sigmoid(%s)", v); break;
    case 4: sb_printf(b, "sm_tanh(%s)", v); break;
    case 5: sb_printf(b, "sm_gelu(%s)", v); break;
    default: sb_printf(b, "%s", v);
  }
}

/* The value stored for column `col` from its accumulator; cnt is the
 * divisor expression of average pooling. */
static void epilogue(strbuf *b, const win_geom *w, const char *col, const char *acc, const char *cnt) {
  sb_printf(b, "yp[%s] = ", col);
  if (w->kind == WK_MAX) {
    sb_printf(b, "%s;\n", acc);
  } else if (w->kind == WK_AVG) {
    sb_printf(b, "%s / (float)(%s);\n", acc, cnt);
  } else {
    char v[160];
    snprintf(v, sizeof v, "(%s%s%s%s%s)", acc, w->has_bias ? " + bias" : "", w->has_res ? " + rp[" : "",
             w->has_res ? col : "", w->has_res ? "]" : "");
    act_text(b, w, v);
    sb_printf(b, ";\n");
  }
}

/* Columns [lo, hi) whose windows may cross the input's edge. */
static void edge_columns(strbuf *b, const win_geom *w, int64_t lo, int64_t hi) {
  if (lo >= hi) return;
  sb_printf(b,
            "    for (int64_t ow = %" PRId64 "; ow < %" PRId64 "; ow++) {\n"
            "      const int64_t iw0 = ow * %" PRId64 " - %" PRId64 ";\n"
            "      float acc = %s;\n"
            "      int64_t nw = 0, nwp = 0;\n"
            "      for (int64_t kw = 0; kw < %" PRId64 "; kw++) {\n"
            "        const int64_t iw = iw0 + kw * %" PRId64 ";\n"
            "        nwp += iw >= -%" PRId64 " && iw < %" PRId64 ";\n"
            "        if (iw < 0 || iw >= %" PRId64 ") continue;\n"
            "        nw++;\n"
            "        for (int64_t kh = kh0; kh < kh1; kh++) {\n"
            "          ",
            lo, hi, w->SW, w->PW0, init_of(w->kind), w->KW, w->DW, w->PW0, w->IW + w->PW1, w->IW);
  combine(b, w->kind, "acc", "xp[(ih0 + kh * DH) * IW + iw]", "wp[kh * KW + kw]");
  sb_printf(b, "\n        }\n      }\n      (void)nw; (void)nwp;\n      ");
  epilogue(b, w, "ow", "acc", w->count_pad ? "nhp * nwp" : "(kh1 - kh0) * nw");
  sb_printf(b, "    }\n");
}

/* Columns [lo, hi) whose windows are inside the input: tap-major. */
static void interior_columns(strbuf *b, const win_geom *w, int64_t lo, int64_t hi, int unroll) {
  if (lo >= hi) return;
  int64_t n = hi - lo;
  sb_printf(b, "    {\n      float acc[%" PRId64 "];\n      for (int64_t i = 0; i < %" PRId64 "; i++) acc[i] = %s;\n", n,
            n, init_of(w->kind));
  sb_printf(b,
            "      for (int64_t kh = kh0; kh < kh1; kh++)\n"
            "        for (int64_t kw = 0; kw < %" PRId64 "; kw++) {\n"
            "          const float *restrict xr = xp + (ih0 + kh * DH) * IW + kw * %" PRId64 " + %" PRId64
            " * %" PRId64 " - %" PRId64 ";\n"
            "          const float wv = %s;\n          (void)wv;\n",
            w->KW, w->DW, lo, w->SW, w->PW0, w->kind == WK_DWCONV ? "wp[kh * KW + kw]" : "0.0f");
  if (unroll > 0) sb_printf(b, "#pragma GCC unroll %d\n", unroll);
  sb_printf(b, "          for (int64_t i = 0; i < %" PRId64 "; i++) {\n            const float v = xr[i * %" PRId64 "];\n            ",
            n, w->SW);
  combine(b, w->kind, "acc[i]", "v", "wv");
  sb_printf(b, "\n          }\n        }\n");
  sb_printf(b, "      for (int64_t i = 0; i < %" PRId64 "; i++) {\n        const int64_t ow = %" PRId64 " + i;\n        ", n, lo);
  char cnt[128];
  snprintf(cnt, sizeof cnt, "%s * %" PRId64, w->count_pad ? "nhp" : "(kh1 - kh0)", w->KW);
  epilogue(b, w, "ow", "acc[i]", cnt);
  sb_printf(b, "      }\n    }\n");
}

void emit_window(strbuf *b, const win_geom *w, const char *name, const emit_opts *o) {
  /* the interior: columns whose first and last taps are inside [0, IW) */
  int64_t lo = w->PW0 > 0 ? (w->PW0 + w->SW - 1) / w->SW : 0;
  int64_t last = w->IW - 1 - (w->KW - 1) * w->DW + w->PW0; /* ow * SW <= last */
  int64_t hi = last >= 0 ? last / w->SW + 1 : 0;
  if (hi > w->OW) hi = w->OW;
  if (lo > hi) lo = hi;
  int a = 1; /* argument slots: x, [w, bias, residual], y */
  int aw = w->kind == WK_DWCONV ? a++ : -1, ab = w->has_bias ? a++ : -1, ar = w->has_res ? a++ : -1, ay = a;
  sb_printf(b, "static void smb_%s(void *vc, int64_t t0, int64_t t1) {\n", name);
  sb_printf(b, "  const smelt_kctx *c = (const smelt_kctx *)vc;\n");
  sb_printf(b, "  const int64_t IW = %" PRId64 ", DH = %" PRId64 ", KW = %" PRId64 ";\n  (void)KW;\n", w->IW, w->DH, w->KW);
  sb_printf(b, "  for (int64_t t = t0; t < t1; t++) {\n");
  sb_printf(b, "    const int64_t nc = t / %" PRId64 ", oh = t %% %" PRId64 ", ch = nc %% %" PRId64 ";\n    (void)ch;\n",
            w->OH, w->OH, w->C);
  sb_printf(b, "    const float *restrict xp = (const float *)c->a[0] + nc * %" PRId64 ";\n", w->IH * w->IW);
  sb_printf(b, "    float *restrict yp = (float *)c->a[%d] + nc * %" PRId64 " + oh * %" PRId64 ";\n", ay,
            w->OH * w->OW, w->OW);
  if (aw >= 0) sb_printf(b, "    const float *restrict wp = (const float *)c->a[%d] + ch * %" PRId64 ";\n", aw, w->KH * w->KW);
  else sb_printf(b, "    const float *wp = 0;\n    (void)wp;\n");
  if (ab >= 0) sb_printf(b, "    const float bias = ((const float *)c->a[%d])[ch];\n", ab);
  if (ar >= 0) sb_printf(b, "    const float *restrict rp = (const float *)c->a[%d] + nc * %" PRId64 " + oh * %" PRId64 ";\n",
                         ar, w->OH * w->OW, w->OW);
  sb_printf(b,
            "    const int64_t ih0 = oh * %" PRId64 " - %" PRId64 ";\n"
            "    int64_t kh0 = 0, kh1 = %" PRId64 ", nhp = 0;\n"
            "    while (kh0 < kh1 && ih0 + kh0 * DH < 0) kh0++;\n"
            "    while (kh1 > kh0 && ih0 + (kh1 - 1) * DH >= %" PRId64 ") kh1--;\n"
            "    for (int64_t kh = 0; kh < %" PRId64 "; kh++) nhp += ih0 + kh * DH >= -%" PRId64
            " && ih0 + kh * DH < %" PRId64 ";\n    (void)nhp;\n",
            w->SH, w->PH0, w->KH, w->IH, w->KH, w->PH0, w->IH + w->PH1);
  edge_columns(b, w, 0, lo);
  interior_columns(b, w, lo, hi, o->unroll);
  edge_columns(b, w, hi, w->OW);
  sb_printf(b, "  }\n}\n");
  int64_t rows = w->N * w->C * w->OH, work = w->OW * w->KH * w->KW;
  int64_t tg = o->grain / (work > 0 ? work : 1) + 1;
  sb_printf(b,
            "void %s(void *const *a, const int64_t *p, const smelt_rt *rt) {\n"
            "  smelt_kctx c = {a, p, 1, 0};\n"
            "  rt->parallel_for(rt->pool, %" PRId64 ", %" PRId64 ", smb_%s, &c);\n}\n",
            name, rows, tg, name);
}
