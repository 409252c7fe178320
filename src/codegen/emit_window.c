/* Window kernels: 2-D max / average pooling and depthwise convolution over
 * NCHW planes, with the geometry printed as literals.
 *
 * A task is one output row (n, c, oh).  The kernel rows that fall inside the
 * input are found once per task; the output columns whose whole window is
 * inside the input (the interior, known at compile time) are computed in
 * blocks of `lanes` columns whose accumulators stay in vector registers over
 * all the taps, and the few edge columns one by one with bounds checks.
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

/* Columns [lo, lo + nblk*V) whose windows are inside the input, V at a time:
 * the V accumulators stay in registers over all the taps. */
static void interior_block(strbuf *b, const win_geom *w, int64_t lo, int64_t nblk, int64_t V, int unroll) {
  if (nblk <= 0 || V <= 0) return;
  sb_printf(b, "    for (int64_t ob = %" PRId64 "; ob < %" PRId64 "; ob += %" PRId64 ") {\n", lo, lo + nblk * V, V);
  sb_printf(b, "      float acc[%" PRId64 "];\n      for (int i = 0; i < %" PRId64 "; i++) acc[i] = %s;\n", V, V,
            init_of(w->kind));
  sb_printf(b,
            "      for (int64_t kh = kh0; kh < kh1; kh++) {\n"
            "        const float *restrict xk = xp + (ih0 + kh * DH) * IW + ob * %" PRId64 " - %" PRId64 ";\n",
            w->SW, w->PW0);
  if (unroll > 0) sb_printf(b, "#pragma GCC unroll %d\n", unroll);
  sb_printf(b, "        for (int64_t kw = 0; kw < %" PRId64 "; kw++) {\n          const float wv = %s;\n          (void)wv;\n",
            w->KW, w->kind == WK_DWCONV ? "wp[kh * KW + kw]" : "0.0f");
  sb_printf(b, "          for (int i = 0; i < %" PRId64 "; i++) {\n            const float v = xk[i * %" PRId64 " + kw * %" PRId64 "];\n            ",
            V, w->SW, w->DW);
  combine(b, w->kind, "acc[i]", "v", "wv");
  sb_printf(b, "\n          }\n        }\n      }\n");
  sb_printf(b, "      for (int i = 0; i < %" PRId64 "; i++) {\n        const int64_t ow = ob + i;\n        ", V);
  char cnt[128];
  snprintf(cnt, sizeof cnt, "%s * %" PRId64, w->count_pad ? "nhp" : "(kh1 - kh0)", w->KW);
  epilogue(b, w, "ow", "acc[i]", cnt);
  sb_printf(b, "      }\n    }\n");
}

/* Blocks of L columns as explicit vectors (unit or 2-column stride): one
 * vector load per tap, the accumulator in a register. */
static void interior_vec(strbuf *b, const win_geom *w, int64_t lo, int64_t nblk, int L) {
  if (nblk <= 0) return;
  sb_printf(b, "    for (int64_t ob = %" PRId64 "; ob < %" PRId64 "; ob += %d) {\n", lo, lo + nblk * L, L);
  sb_printf(b, "      smv%d acc = (smv%d){0}%s;\n", L, L, w->kind == WK_MAX ? " - __builtin_inff()" : "");
  sb_printf(b,
            "      for (int64_t kh = kh0; kh < kh1; kh++) {\n"
            "        const float *xk = xp + (ih0 + kh * DH) * IW + ob * %" PRId64 " - %" PRId64 ";\n"
            "        const float *wk = wp + kh * KW;\n        (void)wk;\n",
            w->SW, w->PW0);
  for (int64_t kw = 0; kw < w->KW; kw++) {
    if (w->SW == 1) {
      sb_printf(b, "        { const smv%d v = smv_ld%d(xk + %" PRId64 ");\n", L, L, kw * w->DW);
    } else {
      sb_printf(b, "        {\n#ifdef SM_HAVE_SHUFFLE\n          const smv%d v = smv_lds2_%d(xk + %" PRId64 ");\n#else\n",
                L, L, kw * w->DW);
      sb_printf(b, "          float tv[%d];\n          for (int i = 0; i < %d; i++) tv[i] = xk[%" PRId64 " + 2 * i];\n"
                   "          smv%d v;\n          __builtin_memcpy(&v, tv, sizeof v);\n#endif\n",
                L, L, kw * w->DW, L);
    }
    if (w->kind == WK_MAX) sb_printf(b, "          acc = smv_max%d(acc, v); }\n", L);
    else if (w->kind == WK_AVG) sb_printf(b, "          acc += v; }\n");
    else sb_printf(b, "          acc += v * wk[%" PRId64 "]; }\n", kw);
  }
  sb_printf(b, "      }\n      float o[%d];\n      __builtin_memcpy(o, &acc, sizeof o);\n", L);
  sb_printf(b, "      for (int i = 0; i < %d; i++) {\n        const int64_t ow = ob + i;\n        ", L);
  char cnt[128];
  snprintf(cnt, sizeof cnt, "%s * %" PRId64, w->count_pad ? "nhp" : "(kh1 - kh0)", w->KW);
  epilogue(b, w, "ow", "o[i]", cnt);
  sb_printf(b, "      }\n    }\n");
}

static void interior_columns(strbuf *b, const win_geom *w, int64_t lo, int64_t hi, int lanes, int unroll) {
  if (lo >= hi) return;
  int L = lanes == 8 || lanes == 32 ? lanes : 16;
  while (L > 8 && hi - lo < L) L /= 2; /* narrow rows (14, 28 columns) still get vectors */
  int64_t nvec = 0;
  if ((w->SW == 1 || w->SW == 2) && w->KW <= 16) {
    /* whole vectors: every element loaded lies inside the input row */
    int64_t span = w->SW == 1 ? L : 2 * L;
    while (lo + (nvec + 1) * L <= hi && (lo + nvec * L) * w->SW - w->PW0 + (w->KW - 1) * w->DW + span - 1 < w->IW)
      nvec++;
  }
  interior_vec(b, w, lo, nvec, L);
  int64_t start = lo + nvec * L, n = hi - start, V = L;
  interior_block(b, w, start, n / V, V, unroll);
  interior_block(b, w, start + n / V * V, 1, n % V, unroll); /* the rest, at its exact width */
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
  interior_columns(b, w, lo, hi, o->lanes, o->unroll);
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
