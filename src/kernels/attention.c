/* Flash-style attention on the CPU (see attention.h).
 *
 * One task = one (batch, head, block of ATTN_BQ queries).  For each block of
 * ATTN_BK keys it copies K transposed ([D][BK]) and V ([BK][Dv]) into
 * contiguous scratch, so the two inner loops (scores: a row of Q times K^T;
 * output: p * V rows) are unit-stride axpys a compiler vectorizes.  Each query
 * row keeps its running max m and sum l; when the max grows, what was
 * accumulated is rescaled by exp(m_old - m_new).  Under a causal mask the key
 * blocks past a query block's last visible key are skipped. */
#include "kernels/attention.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

#define ATTN_BQ 32
#define ATTN_BK 64

typedef struct attn_scratch {
  float *kt;  /* [D][BK] */
  float *vb;  /* [BK][Dv] */
  float *s;   /* [BK] scores of one row */
  float *acc; /* [BQ][Dv] */
  float *m, *l; /* [BQ] */
} attn_scratch;

typedef struct attn_job {
  const attn_params *p;
  int64_t nqb;
  atomic_bool failed;
} attn_job;

static bool scratch_alloc(const attn_params *p, attn_scratch *s) {
  size_t d = (size_t)p->D, dv = (size_t)p->Dv;
  s->kt = malloc(sizeof(float) * (d * ATTN_BK + 1));
  s->vb = malloc(sizeof(float) * (dv * ATTN_BK + 1));
  s->s = malloc(sizeof(float) * ATTN_BK);
  s->acc = malloc(sizeof(float) * (dv * ATTN_BQ + 1));
  s->m = malloc(sizeof(float) * ATTN_BQ);
  s->l = malloc(sizeof(float) * ATTN_BQ);
  return s->kt && s->vb && s->s && s->acc && s->m && s->l;
}

static void scratch_free(attn_scratch *s) {
  free(s->kt);
  free(s->vb);
  free(s->s);
  free(s->acc);
  free(s->m);
  free(s->l);
}

/* Keys [j0, j0 + n) of (b, h): K transposed into kt, V rows into vb. */
static void load_kv(const attn_params *p, int64_t b, int64_t h, int64_t j0, int64_t n,
                    attn_scratch *s) {
  const float *k = p->k + b * p->k_str[0] + h * p->k_str[1] + j0 * p->k_str[2];
  const float *v = p->v + b * p->v_str[0] + h * p->v_str[1] + j0 * p->v_str[2];
  for (int64_t j = 0; j < n; j++)
    for (int64_t d = 0; d < p->D; d++) s->kt[d * ATTN_BK + j] = k[j * p->k_str[2] + d * p->k_str[3]];
  for (int64_t j = 0; j < n; j++) {
    float *dst = s->vb + j * p->Dv;
    const float *src = v + j * p->v_str[2];
    if (p->v_str[3] == 1) memcpy(dst, src, sizeof(float) * (size_t)p->Dv);
    else
      for (int64_t e = 0; e < p->Dv; e++) dst[e] = src[e * p->v_str[3]];
  }
}

/* Scaled, masked scores of query i (absolute index) against keys [j0, j0+n). */
static void row_scores(const attn_params *p, int64_t b, int64_t h, int64_t i, int64_t j0,
                       int64_t n, const float *q, attn_scratch *s) {
  float *sc = s->s;
  for (int64_t j = 0; j < n; j++) sc[j] = 0.f;
  for (int64_t d = 0; d < p->D; d++) {
    float qd = q[d * p->q_str[3]];
    const float *kt = s->kt + d * ATTN_BK;
    for (int64_t j = 0; j < n; j++) sc[j] += qd * kt[j];
  }
  for (int64_t j = 0; j < n; j++) sc[j] *= p->scale;
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

/* Folds one row's scores into its running max, sum and output accumulator. */
static void row_update(const attn_params *p, int64_t n, attn_scratch *s, int64_t r) {
  const float *sc = s->s;
  float mx = -INFINITY;
  for (int64_t j = 0; j < n; j++) mx = sc[j] > mx ? sc[j] : mx;
  float m_new = mx > s->m[r] ? mx : s->m[r];
  if (m_new == -INFINITY) return; /* every key so far masked out */
  float *acc = s->acc + r * p->Dv;
  if (s->m[r] != m_new) {
    float corr = expf(s->m[r] - m_new); /* 0 on the first block: m was -inf */
    s->l[r] *= corr;
    for (int64_t e = 0; e < p->Dv; e++) acc[e] *= corr;
    s->m[r] = m_new;
  }
  for (int64_t j = 0; j < n; j++) {
    float pj = expf(sc[j] - m_new);
    if (pj == 0.f) continue;
    s->l[r] += pj;
    const float *vr = s->vb + j * p->Dv;
    for (int64_t e = 0; e < p->Dv; e++) acc[e] += pj * vr[e];
  }
}

static void store_rows(const attn_params *p, int64_t b, int64_t h, int64_t i0, int64_t nq,
                       const attn_scratch *s) {
  for (int64_t r = 0; r < nq; r++) {
    float *o = p->o + b * p->o_str[0] + h * p->o_str[1] + (i0 + r) * p->o_str[2];
    const float *acc = s->acc + r * p->Dv;
    /* softmax over nothing but -inf is NaN in the unfused graph too */
    float inv = s->l[r] > 0 ? 1.f / s->l[r] : NAN;
    for (int64_t e = 0; e < p->Dv; e++) o[e * p->o_str[3]] = p->Sk == 0 ? 0.f : acc[e] * inv;
  }
}

static void attn_task(const attn_params *p, int64_t t, int64_t nqb, attn_scratch *s) {
  int64_t qb = t % nqb, bh = t / nqb, h = bh % p->H, b = bh / p->H;
  int64_t i0 = qb * ATTN_BQ, nq = p->Sq - i0 < ATTN_BQ ? p->Sq - i0 : ATTN_BQ;
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
  const float *qbase = p->q + b * p->q_str[0] + h * p->q_str[1];
  for (int64_t j0 = 0; j0 < kend; j0 += ATTN_BK) {
    int64_t n = kend - j0 < ATTN_BK ? kend - j0 : ATTN_BK;
    load_kv(p, b, h, j0, n, s);
    for (int64_t r = 0; r < nq; r++) {
      row_scores(p, b, h, i0 + r, j0, n, qbase + (i0 + r) * p->q_str[2], s);
      row_update(p, n, s, r);
    }
  }
  store_rows(p, b, h, i0, nq, s);
}

static void attn_tasks(void *ctx, int64_t t0, int64_t t1) {
  attn_job *j = ctx;
  attn_scratch s;
  if (!scratch_alloc(j->p, &s)) {
    scratch_free(&s);
    atomic_store(&j->failed, true);
    return;
  }
  for (int64_t t = t0; t < t1; t++) attn_task(j->p, t, j->nqb, &s);
  scratch_free(&s);
}

smelt_status attention_f32(smelt_pool *pool, const attn_params *p) {
  if (p->B < 0 || p->H < 0 || p->Sq < 0 || p->Sk < 0 || p->D < 0 || p->Dv < 0)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "attention: negative size");
  if (p->D > ((int64_t)1 << 24) || p->Dv > ((int64_t)1 << 24))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "attention: head size %lld is implausible",
                   (long long)(p->D > p->Dv ? p->D : p->Dv));
  attn_job j = {.p = p, .nqb = (p->Sq + ATTN_BQ - 1) / ATTN_BQ};
  int64_t ntasks = p->B * p->H * j.nqb;
  if (ntasks == 0 || p->Dv == 0) return SMELT_OK;
  pool_parallel_for(pool, ntasks, 1, attn_tasks, &j);
  if (atomic_load(&j.failed))
    return err_nomem("attention scratch", sizeof(float) * (size_t)(p->D + p->Dv) * ATTN_BK);
  return SMELT_OK;
}
