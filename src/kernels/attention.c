/* Flash-style attention on the CPU (see attention.h).
 *
 * One task = one (batch, head, block of up to ATTN_BQ queries: fewer when
 * batch x heads alone would leave threads idle, see attn_query_block).  Each
 * query row keeps its running max m and sum l over blocks of ATTN_BK keys;
 * when the max grows, what was accumulated is rescaled by exp(m_old - m_new).
 * Under a causal mask the key blocks past a query block's last visible key
 * are skipped.  Two paths:
 *
 *   - tiled (attn_task_tiled; kernels/attention_tile.h), from as many queries
 *     as a vector has lanes: the query block transposed once (Q^T, scaled by
 *     scale * log2 e), then per key block Q.K^T, the masks, a lane-wise
 *     online softmax in log2 units and P.V, all with vectors along queries,
 *     K and V read in place;
 *   - row (attn_row), for one query per head (a decode step): a task takes a
 *     group of heads (all of them, up to ATTN_BQ) and a range of keys, a key
 *     at a time across its heads (attn_tile_kernels' qk_row / pv_row), so
 *     the static KV cache's time-major rows are read front to back; when
 *     batch x groups leaves threads idle the keys split, each split's online
 *     softmax state combined at the end (flash decoding);
 *   - GEMM (attn_task), for other query blocks under a vector's lanes: S =
 *     Q_blk K_blk^T and acc += P V_blk on the GEMM (single-threaded, inside
 *     the task), the softmax between them row by row (kernels/vmath.h).
 *
 * Operands whose rows are unit-stride are read in place; others are
 * gathered into contiguous blocks. */
#include "kernels/attention.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attention_bf16.h"
#include "kernels/attention_tile.h"
#include "kernels/bf16dp.h"
#include "kernels/gemm.h"
#include "kernels/gemm_kernels.h" /* SMELT_X86 */
#include "kernels/vmath.h"
#include "util/err.h"

#define ATTN_BQ 64
#define ATTN_BK 128
#define ATTN_ROW_MIN_KEYS 64 /* keys per split of the row path, at least */

typedef struct attn_scratch {
  float *qb;  /* [BQ][D], when Q's rows are not unit-stride */
  float *kb;  /* [BK][D] */
  float *vb;  /* [BK][Dv] */
  float *s;   /* [BQ][BK] scores, then probabilities */
  float *acc; /* [BQ][Dv] */
  float *m, *l, *corr; /* [BQ] */
  uint32_t *qtp, *kw, *ptp, *vp; /* bf16 pairs (attention_bf16.h), when the products run in bf16 */
  const vmath_kernels *vm; /* NULL: libm (the portable path) */
} attn_scratch;

typedef struct attn_job {
  const attn_params *p;
  const vmath_kernels *vm;
  const attn_tile_kernels *tk; /* the tiled path; NULL: the GEMM path */
  bool bf16;                   /* the tiled path's products in bf16 (attention_bf16.h) */
  /* the row path: heads per task, head groups, key
   * splits (each of ksplit_len keys) per (batch, group), and with more than
   * one split the partial results [B][H][splits] of m, l and acc[Dv] */
  const attn_tile_kernels *rk;  /* the row path's kernels (NULL: not taken) */
  int64_t hg, ngroups, nsplit, ksplit_len;
  float *part;
  int64_t bq, nqb; /* query rows per task (<= ATTN_BQ), blocks per (batch, head) */
  atomic_bool failed;
} attn_job;

static bool scratch_alloc(const attn_params *p, bool bf16, attn_scratch *s) {
  size_t d = (size_t)p->D, dv = (size_t)p->Dv, dp = (d + 1) / 2, kp = ATTN_BK / 2;
  s->qtp = s->kw = s->ptp = s->vp = NULL;
  s->qb = malloc(sizeof(float) * (d * ATTN_BQ + 1));
  s->kb = malloc(sizeof(float) * (d * ATTN_BK + 1));
  s->vb = malloc(sizeof(float) * (dv * ATTN_BK + 1));
  s->s = malloc(sizeof(float) * ATTN_BQ * ATTN_BK);
  s->acc = malloc(sizeof(float) * (dv * ATTN_BQ + 1));
  s->m = malloc(sizeof(float) * ATTN_BQ);
  s->l = malloc(sizeof(float) * ATTN_BQ);
  s->corr = malloc(sizeof(float) * ATTN_BQ);
  if (bf16) {
    s->qtp = malloc(sizeof(uint32_t) * (dp * ATTN_BQ + 1));
    s->kw = malloc(sizeof(uint32_t) * (dp * ATTN_BK + 1));
    s->ptp = malloc(sizeof(uint32_t) * kp * ATTN_BQ);
    s->vp = malloc(sizeof(uint32_t) * (kp * dv + 1));
    if (!s->qtp || !s->kw || !s->ptp || !s->vp) return false;
  }
  return s->qb && s->kb && s->vb && s->s && s->acc && s->m && s->l && s->corr;
}

static void scratch_free(attn_scratch *s) {
  free(s->qb);
  free(s->kb);
  free(s->vb);
  free(s->s);
  free(s->acc);
  free(s->m);
  free(s->l);
  free(s->corr);
  free(s->qtp);
  free(s->kw);
  free(s->ptp);
  free(s->vp);
}

/* Rows [0, n) of a strided [rows][cols] view (row stride rs, column stride
 * cs): in place when columns are unit-stride, else copied into buf. */
static const float *rows_view(const float *base, int64_t n, int64_t cols, int64_t rs, int64_t cs,
                              float *buf, int64_t *ld) {
  if (cs == 1 && (rs >= cols || n <= 1)) {
    *ld = rs >= cols ? rs : cols;
    return base;
  }
  for (int64_t r = 0; r < n; r++)
    for (int64_t c = 0; c < cols; c++) buf[r * cols + c] = base[r * rs + c * cs];
  *ld = cols;
  return buf;
}

/* Masks one row of scores (query i, keys [j0, j0 + n)). */
static void mask_row(const attn_params *p, int64_t b, int64_t h, int64_t i, int64_t j0, int64_t n,
                     float *sc) {
  if (p->mask_kind != ATTN_MASK_NONE) {
    int64_t off = b * p->mask_str[0] + h * p->mask_str[1] + i * p->mask_str[2];
    if (p->mask_kind == ATTN_MASK_ADD) {
      const float *mk = (const float *)p->mask + off;
      for (int64_t j = 0; j < n; j++) sc[j] += mk[(j0 + j) * p->mask_str[3]];
    } else {
      const uint8_t *mk = (const uint8_t *)p->mask + off;
      for (int64_t j = 0; j < n; j++)
        if (!mk[(j0 + j) * p->mask_str[3]]) sc[j] = p->mask_fill;
    }
  }
  if (p->causal) {
    int64_t last = i + p->Sk - p->Sq; /* last visible key */
    for (int64_t j = 0; j < n; j++)
      if (j0 + j > last) sc[j] = -INFINITY;
  }
}

/* Turns one row's scores into probabilities against its running max, and
 * rescales what the row accumulated so far. */
static void row_softmax(const attn_params *p, int64_t n, float *sc, attn_scratch *s, int64_t r) {
  float mx = -INFINITY;
  if (s->vm) mx = s->vm->row_max(sc, n);
  else
    for (int64_t j = 0; j < n; j++) mx = sc[j] > mx ? sc[j] : mx;
  float m_new = mx > s->m[r] ? mx : s->m[r];
  if (m_new == -INFINITY) { /* every key so far masked out */
    memset(sc, 0, sizeof(float) * (size_t)n);
    return;
  }
  if (s->m[r] != m_new) {
    float corr = expf(s->m[r] - m_new); /* 0 on the first block: m was -inf */
    float *acc = s->acc + r * p->Dv;
    s->l[r] *= corr;
    for (int64_t e = 0; e < p->Dv; e++) acc[e] *= corr;
    s->m[r] = m_new;
  }
  if (s->vm) {
    s->l[r] += s->vm->exp_shift_sum(sc, n, m_new);
    return;
  }
  float sum = 0.f;
  for (int64_t j = 0; j < n; j++) sum += sc[j] = expf(sc[j] - m_new);
  s->l[r] += sum;
}

/* One output row o from what its query accumulated and its softmax sum l. */
static void store_row(const attn_params *p, float *o, const float *acc, float l) {
  /* softmax over nothing but -inf is NaN in the unfused graph too */
  float inv = l > 0 ? 1.f / l : p->zero_empty_rows ? 0.f : NAN;
  for (int64_t e = 0; e < p->Dv; e++) o[e * p->o_str[3]] = p->Sk == 0 ? 0.f : acc[e] * inv;
}

static void store_rows(const attn_params *p, int64_t b, int64_t h, int64_t i0, int64_t nq,
                       const attn_scratch *s) {
  for (int64_t r = 0; r < nq; r++)
    store_row(p, p->o + b * p->o_str[0] + h * p->o_str[1] + (i0 + r) * p->o_str[2], s->acc + r * p->Dv, s->l[r]);
}

/* One key block against the task's query block: false if the GEMM refused. */
static bool key_block(const attn_params *p, int64_t b, int64_t h, int64_t i0, int64_t nq,
                      const float *q, int64_t ldq, int64_t j0, int64_t n, attn_scratch *s) {
  int64_t ldk, ldv;
  int64_t hk = p->kv_group > 1 ? h / p->kv_group : h;
  const float *k = rows_view(p->k + b * p->k_str[0] + hk * p->k_str[1] + j0 * p->k_str[2], n, p->D,
                             p->k_str[2], p->k_str[3], s->kb, &ldk);
  const float *v = rows_view(p->v + b * p->v_str[0] + hk * p->v_str[1] + j0 * p->v_str[2], n, p->Dv,
                             p->v_str[2], p->v_str[3], s->vb, &ldv);
  gemm_params g = gemm_params_default();
  g.trans_b = true;
  g.M = nq;
  g.N = n;
  g.K = p->D;
  g.alpha = p->scale;
  g.A = q;
  g.lda = ldq;
  g.B = k;
  g.ldb = ldk;
  g.C = s->s;
  g.ldc = ATTN_BK;
  if (gemm_f32_ex(NULL, &g)) return false;
  for (int64_t r = 0; r < nq; r++) {
    float *sc = s->s + r * ATTN_BK;
    mask_row(p, b, h, i0 + r, j0, n, sc);
    row_softmax(p, n, sc, s, r);
  }
  g = gemm_params_default();
  g.M = nq;
  g.N = p->Dv;
  g.K = n;
  g.beta = 1.f;
  g.A = s->s;
  g.lda = ATTN_BK;
  g.B = v;
  g.ldb = ldv;
  g.C = s->acc;
  g.ldc = p->Dv;
  return !gemm_f32_ex(NULL, &g);
}

static bool attn_task(const attn_params *p, int64_t t, int64_t bq, int64_t nqb, attn_scratch *s) {
  int64_t qb = t % nqb, bh = t / nqb, h = bh % p->H, b = bh / p->H;
  int64_t i0 = qb * bq, nq = p->Sq - i0 < bq ? p->Sq - i0 : bq;
  for (int64_t r = 0; r < nq; r++) {
    s->m[r] = -INFINITY;
    s->l[r] = 0.f;
  }
  memset(s->acc, 0, sizeof(float) * (size_t)(nq * p->Dv));
  int64_t kend = p->Sk;
  if (p->causal) { /* keys after the block's last visible one never count */
    int64_t last = i0 + nq - 1 + p->Sk - p->Sq + 1;
    kend = last < 0 ? 0 : last < kend ? last : kend;
  }
  int64_t ldq;
  const float *q = rows_view(p->q + b * p->q_str[0] + h * p->q_str[1] + i0 * p->q_str[2], nq, p->D,
                             p->q_str[2], p->q_str[3], s->qb, &ldq);
  for (int64_t j0 = 0; j0 < kend; j0 += ATTN_BK) {
    int64_t n = kend - j0 < ATTN_BK ? kend - j0 : ATTN_BK;
    if (!key_block(p, b, h, i0, nq, q, ldq, j0, n, s)) return false;
  }
  store_rows(p, b, h, i0, nq, s);
  return true;
}

/* ---- the row path: one query per head (a decode step) ---- */

/* Floats of one partial result of a key split: m, l, acc[Dv]. */
static int64_t part_floats(const attn_params *p) { return p->Dv + 2; }

/* Heads [h0, h0 + nh) of batch b over keys [k0, k1), a key at a time across
 * the heads: with the static KV cache's time-major rows ([len, batch,
 * heads, D]) the heads of a key lie side by side, so K and V are read front
 * to back instead of in D-float pieces heads x D apart (which the GEMM path,
 * one head at a time, read at a third of the memory's rate).  The online
 * softmax per head runs between the two products of each key block, as in
 * attn_task.  part NULL: the output is written; else the split's m, l and
 * acc per head (part_floats each, heads nsplit apart). */
static void attn_row(const attn_params *p, const attn_tile_kernels *tk, int64_t b, int64_t h0, int64_t nh,
                     int64_t k0, int64_t k1, attn_scratch *s, float *part, int64_t nsplit) {
  int64_t group = p->kv_group > 1 ? p->kv_group : 1;
  for (int64_t h = 0; h < nh; h++) { /* Q scaled, one row per head */
    const float *q = p->q + b * p->q_str[0] + (h0 + h) * p->q_str[1];
    for (int64_t d = 0; d < p->D; d++) s->qb[h * p->D + d] = q[d * p->q_str[3]] * p->scale;
    s->m[h] = -INFINITY;
    s->l[h] = 0.f;
  }
  memset(s->acc, 0, sizeof(float) * (size_t)(nh * p->Dv));
  const float *kb = p->k + b * p->k_str[0], *vb = p->v + b * p->v_str[0];
  for (int64_t j0 = k0; j0 < k1; j0 += ATTN_BK) {
    int64_t n = k1 - j0 < ATTN_BK ? k1 - j0 : ATTN_BK;
    for (int64_t j = 0; j < n; j++)
      tk->qk_row(s->qb, p->D, kb + (j0 + j) * p->k_str[2], p->k_str[1], h0, nh, group, p->D, s->s + j, ATTN_BK);
    for (int64_t h = 0; h < nh; h++) {
      mask_row(p, b, h0 + h, 0, j0, n, s->s + h * ATTN_BK);
      row_softmax(p, n, s->s + h * ATTN_BK, s, h);
    }
    for (int64_t j = 0; j < n; j++)
      tk->pv_row(s->s + j, ATTN_BK, vb + (j0 + j) * p->v_str[2], p->v_str[1], h0, nh, group, p->Dv, s->acc);
  }
  for (int64_t h = 0; h < nh; h++) {
    const float *acc = s->acc + h * p->Dv;
    if (part) {
      float *r = part + (h0 + h) * nsplit * part_floats(p);
      r[0] = s->m[h];
      r[1] = s->l[h];
      memcpy(r + 2, acc, sizeof(float) * (size_t)p->Dv);
      continue;
    }
    store_row(p, p->o + b * p->o_str[0] + (h0 + h) * p->o_str[1], acc, s->l[h]);
  }
}

/* Task t of the row path: (batch, head group, key split). */
static void attn_task_row(const attn_job *j, const attn_tile_kernels *tk, int64_t t, attn_scratch *s) {
  const attn_params *p = j->p;
  int64_t split = t % j->nsplit, g = (t / j->nsplit) % j->ngroups, b = t / j->nsplit / j->ngroups;
  int64_t h0 = g * j->hg, nh = p->H - h0 < j->hg ? p->H - h0 : j->hg;
  int64_t k0 = split * j->ksplit_len, k1 = k0 + j->ksplit_len < p->Sk ? k0 + j->ksplit_len : p->Sk;
  float *part = j->nsplit > 1 ? j->part + (b * p->H * j->nsplit + split) * part_floats(p) : NULL;
  attn_row(p, tk, b, h0, nh, k0, k1, s, part, j->nsplit);
}

/* The key splits' partial results into the output: per (batch, head), m =
 * the splits' max, l = sum l_i e^(m_i - m), o = sum acc_i e^(m_i - m) / l
 * (the sum gathered in the first split's acc). */
static void attn_row_combine(const attn_job *j) {
  const attn_params *p = j->p;
  int64_t pf = part_floats(p);
  for (int64_t b = 0; b < p->B; b++)
    for (int64_t h = 0; h < p->H; h++) {
      float *r = j->part + (b * p->H + h) * j->nsplit * pf, *sum = r + 2;
      float m = -INFINITY, l = 0.f;
      for (int64_t i = 0; i < j->nsplit; i++) m = r[i * pf] > m ? r[i * pf] : m;
      for (int64_t i = 0; i < j->nsplit; i++) {
        const float *ri = r + i * pf;
        bool masked = ri[0] == -INFINITY; /* a split whose keys were all masked counts for nothing */
        float w = masked ? 0.f : expf(ri[0] - m);
        l += masked ? 0.f : ri[1] * w;
        if (i == 0)
          for (int64_t e = 0; e < p->Dv; e++) sum[e] = masked ? 0.f : ri[2 + e] * w;
        else if (!masked)
          for (int64_t e = 0; e < p->Dv; e++) sum[e] += ri[2 + e] * w;
      }
      store_row(p, p->o + b * p->o_str[0] + h * p->o_str[1], sum, l);
    }
}

/* ---- the tiled path (kernels/attention_tile.h): the query block transposed ---- */

#define ATTN_LOG2E 1.44269504088896341f

/* Masks a block of transposed scores st (kernels/attention_tile.h: [n keys]
 * [nqp] in panels of 2 vl; queries i0.., keys j0..), which are in log2
 * units: masks are scaled by log2 e. */
static void mask_block_t(const attn_params *p, int64_t b, int64_t h, int64_t i0, int64_t nq,
                         int64_t j0, int64_t n, float *st, int vl, int64_t nqp) {
  const int64_t *ms = p->mask_str;
  int64_t off = b * ms[0] + h * ms[1] + i0 * ms[2] + j0 * ms[3], skew = j0 - (p->Sk - p->Sq) - i0;
  if (p->mask_kind == ATTN_MASK_NONE && (!p->causal || skew + n - 1 <= 0)) return; /* all visible */
  float fill = ATTN_LOG2E * p->mask_fill;
  for (int64_t p0 = 0; p0 < nq; p0 += 2 * vl) { /* panel by panel: queries [p0, r1) */
    int64_t pw = nqp - p0 < 2 * vl ? nqp - p0 : 2 * vl, r1 = nq - p0 < pw ? nq : p0 + pw;
    float *pan = st + p0 * n;
    if (p->mask_kind != ATTN_MASK_NONE && ms[2] == 0) /* one value per key: [B,1,1,Sk] padding */
      for (int64_t j = 0; j < n; j++) {
        float *row = pan + j * pw - p0; /* row[r], r in [p0, r1) */
        if (p->mask_kind == ATTN_MASK_ADD) {
          float add = ATTN_LOG2E * ((const float *)p->mask)[off + j * ms[3]];
          for (int64_t r = p0; r < r1; r++) row[r] += add;
        } else if (!((const uint8_t *)p->mask)[off + j * ms[3]])
          for (int64_t r = p0; r < r1; r++) row[r] = fill;
      }
    else if (p->mask_kind != ATTN_MASK_NONE) /* query by query: the mask's rows read along */
      for (int64_t r = p0; r < r1; r++) {
        float *col = pan + (r - p0); /* col[j pw] */
        int64_t mo = off + r * ms[2];
        if (p->mask_kind == ATTN_MASK_ADD) {
          const float *mk = (const float *)p->mask + mo;
          for (int64_t j = 0; j < n; j++) col[j * pw] += ATTN_LOG2E * mk[j * ms[3]];
        } else {
          const uint8_t *mk = (const uint8_t *)p->mask + mo;
          for (int64_t j = 0; j < n; j++)
            if (!mk[j * ms[3]]) col[j * pw] = fill;
        }
      }
    if (p->causal) /* key j0 + j is visible to queries i >= j0 + j - (Sk - Sq) */
      for (int64_t j = p0 - skew + 1 > 0 ? p0 - skew + 1 : 0; j < n; j++) {
        float *row = pan + j * pw - p0;
        for (int64_t r = p0; r < r1 && r < skew + j; r++) row[r] = -INFINITY;
      }
  }
}

#ifdef SMELT_X86
/* One key block's products in bf16 (attention_bf16.h): K's rows and V's
 * key pairs converted, Q.K^T, the fp32 masks and softmax, P^T's key pairs,
 * P.V.  s->qtp holds the query block's Q^T pairs. */
static void key_block_bf16(const attn_params *p, const attn_tile_kernels *tk, int64_t b, int64_t h, int64_t i0,
                           int64_t nq, int64_t nqp, int64_t j0, int64_t n, const float *k, int64_t ldk,
                           const float *v, int64_t ldv, attn_scratch *s) {
  int64_t dpn = (p->D + 1) / 2, njp = (n + 1) / 2;
  for (int64_t r = 0; r < n; r++) attn_bf16_pairs_seq(k + r * ldk, p->D, s->kw + r * dpn);
  attn_bf16_qk(s->qtp, nqp, dpn, s->kw, dpn, n, s->s);
  mask_block_t(p, b, h, i0, nq, j0, n, s->s, tk->vl, nqp);
  tk->softmax(s->s, nqp, n, s->m, s->l, s->corr);
  for (int64_t p0 = 0; p0 < nqp; p0 += 2 * tk->vl) { /* each panel's key pairs */
    int64_t pw = nqp - p0 < 2 * tk->vl ? nqp - p0 : 2 * tk->vl;
    const float *pan = s->s + p0 * n;
    for (int64_t jp = 0; jp < njp; jp++)
      attn_bf16_pairs_rows(pan + 2 * jp * pw, 2 * jp + 1 < n ? pan + (2 * jp + 1) * pw : NULL, pw,
                           s->ptp + p0 * njp + jp * pw);
  }
  for (int64_t jp = 0; jp < njp; jp++)
    attn_bf16_pairs_rows(v + 2 * jp * ldv, 2 * jp + 1 < n ? v + (2 * jp + 1) * ldv : NULL, p->Dv, s->vp + jp * p->Dv);
  attn_bf16_pv(s->ptp, nqp, njp, s->vp, p->Dv, p->Dv, s->corr, s->acc);
}
#endif

static bool attn_task_tiled(const attn_params *p, const attn_tile_kernels *tk, bool bf16, int64_t t, int64_t bq,
                            int64_t nqb, attn_scratch *s) {
  int64_t qb = t % nqb, bh = t / nqb, h = bh % p->H, b = bh / p->H;
  int64_t i0 = qb * bq, nq = p->Sq - i0 < bq ? p->Sq - i0 : bq;
  int64_t nqp = (nq + tk->vl - 1) / tk->vl * tk->vl, D = p->D, Dv = p->Dv;
  const float *q = p->q + b * p->q_str[0] + h * p->q_str[1] + i0 * p->q_str[2];
  float qscale = p->scale * ATTN_LOG2E; /* scores in log2 units */
  for (int64_t d = 0; d < D; d++) { /* Q^T, scaled; padding columns are zero */
    float *qt = s->qb + d * nqp;
    for (int64_t r = 0; r < nq; r++) qt[r] = qscale * q[r * p->q_str[2] + d * p->q_str[3]];
    for (int64_t r = nq; r < nqp; r++) qt[r] = 0.f;
  }
#ifdef SMELT_X86
  if (bf16) /* Q^T's rows in pairs */
    for (int64_t d = 0; d < D; d += 2)
      attn_bf16_pairs_rows(s->qb + d * nqp, d + 1 < D ? s->qb + (d + 1) * nqp : NULL, nqp, s->qtp + d / 2 * nqp);
#endif
  for (int64_t r = 0; r < nqp; r++) {
    s->m[r] = -INFINITY;
    s->l[r] = 0.f;
  }
  memset(s->acc, 0, sizeof(float) * (size_t)(nqp * Dv));
  int64_t kend = p->Sk;
  if (p->causal) { /* keys after the block's last visible one never count */
    int64_t last = i0 + nq - 1 + p->Sk - p->Sq + 1;
    kend = last < 0 ? 0 : last < kend ? last : kend;
  }
  int64_t hk = p->kv_group > 1 ? h / p->kv_group : h;
  for (int64_t j0 = 0; j0 < kend; j0 += ATTN_BK) {
    int64_t n = kend - j0 < ATTN_BK ? kend - j0 : ATTN_BK, ldk, ldv;
    const float *k = rows_view(p->k + b * p->k_str[0] + hk * p->k_str[1] + j0 * p->k_str[2], n, D,
                               p->k_str[2], p->k_str[3], s->kb, &ldk);
    const float *v = rows_view(p->v + b * p->v_str[0] + hk * p->v_str[1] + j0 * p->v_str[2], n, Dv,
                               p->v_str[2], p->v_str[3], s->vb, &ldv);
#ifdef SMELT_X86
    if (bf16) {
      key_block_bf16(p, tk, b, h, i0, nq, nqp, j0, n, k, ldk, v, ldv, s);
      continue;
    }
#endif
    tk->qk(s->qb, nqp, D, k, ldk, n, s->s);
    mask_block_t(p, b, h, i0, nq, j0, n, s->s, tk->vl, nqp);
    tk->softmax(s->s, nqp, n, s->m, s->l, s->corr);
    tk->pv(s->s, nqp, n, v, ldv, Dv, s->corr, s->acc);
  }
  for (int64_t r = 0; r < nq; r++) {
    float *o = p->o + b * p->o_str[0] + h * p->o_str[1] + (i0 + r) * p->o_str[2];
    /* softmax over nothing but -inf is NaN in the unfused graph too */
    float inv = s->l[r] > 0 ? 1.f / s->l[r] : p->zero_empty_rows ? 0.f : NAN;
    for (int64_t e = 0; e < Dv; e++) o[e * p->o_str[3]] = p->Sk == 0 ? 0.f : s->acc[e * nqp + r] * inv;
  }
  return true;
}

static void attn_tasks(void *ctx, int64_t t0, int64_t t1) {
  attn_job *j = ctx;
  attn_scratch s;
  s.vm = j->vm;
  if (!scratch_alloc(j->p, j->bf16, &s)) {
    scratch_free(&s);
    atomic_store(&j->failed, true);
    return;
  }
  for (int64_t t = t0; t < t1; t++) {
    if (j->rk) {
      attn_task_row(j, j->rk, t, &s);
      continue;
    }
    if (!(j->tk ? attn_task_tiled(j->p, j->tk, j->bf16, t, j->bq, j->nqb, &s)
                : attn_task(j->p, t, j->bq, j->nqb, &s)))
      atomic_store(&j->failed, true);
  }
  scratch_free(&s);
}

/* Query rows per task: ATTN_BQ, halved (down to ATTN_BQ_MIN) while
 * batch x heads x query blocks gives fewer than 4 tasks per thread -- batch
 * 1 with a few heads would otherwise leave threads idle on 8+ cores.  Each
 * halving costs another pass over K and V per block, so it stops at 16 rows,
 * where the QK^T product still fills the GEMM's row tiles. */
#define ATTN_BQ_MIN 16
int64_t attn_query_block(int64_t bh, int64_t sq, int threads) {
  int64_t bq = ATTN_BQ;
  while (bq > ATTN_BQ_MIN && (bq / 2 >= sq || bh * ((sq + bq - 1) / bq) < 4 * (int64_t)threads)) bq /= 2;
  return bq;
}

smelt_status attention_f32(smelt_pool *pool, const attn_params *p) {
  if (p->B < 0 || p->H < 0 || p->Sq < 0 || p->Sk < 0 || p->D < 0 || p->Dv < 0)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "attention: negative size");
  if (p->D > ((int64_t)1 << 24) || p->Dv > ((int64_t)1 << 24))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "attention: head size %lld is implausible",
                   (long long)(p->D > p->Dv ? p->D : p->Dv));
  /* The plan hands attention the pool from 0.5 MFLOP (compile/schedule.c);
   * while workers lack cores, below 0.5 MFLOP x the pool's thread cost it
   * runs here. */
  double flops = 4.0 * (double)p->B * (double)p->H * (double)p->Sq * (double)p->Sk * (double)p->D;
  if (pool_thread_cost(pool) > 1 && flops < 5e5 * pool_thread_cost(pool)) pool = NULL;
  attn_job j = {.p = p, .vm = vmath_for_ops()};
  /* The tiled path pads a query block to whole vectors: with fewer queries
   * than lanes (a decode step) the GEMM path wastes less. */
  const attn_tile_kernels *tk = attn_tile_get(isa_active());
  if (p->Sq >= tk->vl) j.tk = tk;
  /* bf16 products: the AVX-512 tiled path on a CPU with AVX512_BF16 */
  j.bf16 = p->bf16 && j.tk && bf16dp_hw(isa_active()); /* AVX-512 active: tk is its table */
  j.bq = attn_query_block(p->B * p->H, p->Sq, pool_threads(pool));
  j.nqb = (p->Sq + j.bq - 1) / j.bq;
  int64_t ntasks = p->B * p->H * j.nqb;
  /* One query per head with unit-stride K and V rows: the row path.  Heads
   * in groups of up to ATTN_BQ; when batch x groups leaves threads idle,
   * the keys split too (at least ATTN_ROW_MIN_KEYS each), each split's
   * partial softmax combined after (flash decoding). */
  if (p->Sq == 1 && p->k_str[3] == 1 && p->v_str[3] == 1 && p->H > 0 && p->B > 0 && p->Sk > 0 && p->Dv > 0) {
    int64_t threads = pool_threads(pool);
    j.rk = tk;
    j.hg = p->H < ATTN_BQ ? p->H : ATTN_BQ;
    j.ngroups = (p->H + j.hg - 1) / j.hg;
    int64_t per = (threads + p->B * j.ngroups - 1) / (p->B * j.ngroups), most = p->Sk / ATTN_ROW_MIN_KEYS;
    j.nsplit = per < most ? per : most > 1 ? most : 1;
    j.ksplit_len = (p->Sk + j.nsplit - 1) / j.nsplit;
    j.nsplit = (p->Sk + j.ksplit_len - 1) / j.ksplit_len;
    ntasks = p->B * j.ngroups * j.nsplit;
    if (j.nsplit > 1) {
      size_t bytes = sizeof(float) * (size_t)(p->B * p->H * j.nsplit * part_floats(p));
      if (!(j.part = malloc(bytes))) return err_nomem("attention partial results", bytes);
    }
  }
  if (ntasks == 0 || p->Dv == 0) return SMELT_OK;
  pool_parallel_for(pool, ntasks, 1, attn_tasks, &j);
  if (j.part && !atomic_load(&j.failed)) attn_row_combine(&j);
  free(j.part);
  if (atomic_load(&j.failed)) /* scratch, or the GEMM refusing a block (a bug) */
    return err_nomem("attention scratch", sizeof(float) * (size_t)(p->D + p->Dv) * ATTN_BK);
  return SMELT_OK;
}
