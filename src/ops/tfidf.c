/* TfIdfVectorizer over integer tokens (int32/int64 input with pool_int64s;
 * string pools need string tensors, which smelt does not have).
 *
 * Each row of X is scanned for the pool's n-grams: for every skip distance
 * 1..max_skip_count+1 and start position, the tokens start, start+skip, ...
 * form candidate n-grams of the sizes [min_gram_length, max_gram_length];
 * unigrams are counted once, not per skip distance.  The pool's n-grams of
 * each size are sorted and found by binary search; when the pool lists an
 * n-gram twice, the later entry's output column wins (as in ONNX Runtime). */
#include <stdlib.h>
#include <string.h>

#include "ops/nn_util.h"
#include "ops/shape_util.h"
#include "util/err.h"
#include "util/quote.h"

#define TF_MAX_N 64

/* The n-grams of one size: pool offsets, output columns, sorted order. */
typedef struct tf_size {
  int64_t count;
  int64_t *off, *col, *sorted;
} tf_size;

typedef struct tf_model {
  int64_t min_n, max_n, max_skip, out_size;
  int mode; /* 1 TF, 2 IDF, 3 TFIDF */
  const int64_t *pool;
  tf_size sz[TF_MAX_N + 1];
  const float *weights;
  int n_weights;
} tf_model;

typedef struct tf_sort_ctx {
  const int64_t *pool, *off;
  int64_t n;
} tf_sort_ctx;

static int tf_cmp_tok(const int64_t *a, const int64_t *b, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
  return 0;
}

/* By tokens, then by pool position (so the last of equal ones is the later). */
static int tf_cmp(const void *vctx, int64_t a, int64_t b) {
  const tf_sort_ctx *x = vctx;
  int r = tf_cmp_tok(x->pool + x->off[a], x->pool + x->off[b], x->n);
  return r ? r : a < b ? -1 : a > b;
}

static void tf_free(tf_model *m) {
  for (int n = 0; n <= TF_MAX_N; n++) free(m->sz[n].off), free(m->sz[n].col), free(m->sz[n].sorted);
}

static smelt_status tf_attrs(op_ctx *c, tf_model *m, const int64_t **counts, int *nc, const int64_t **idx,
                             int *ni, int *np) {
  const char *mode = ir_attr_string(c->node, "mode", "");
  m->mode = !strcmp(mode, "TF") ? 1 : !strcmp(mode, "IDF") ? 2 : !strcmp(mode, "TFIDF") ? 3 : 0;
  if (!m->mode) return err_set(SMELT_ERR_INVALID_MODEL, "attribute mode %s is not TF, IDF or TFIDF", q(mode));
  m->min_n = op_attr_int(c, "min_gram_length", 0);
  m->max_n = op_attr_int(c, "max_gram_length", 0);
  m->max_skip = op_attr_int(c, "max_skip_count", 0);
  if (m->min_n < 1 || m->max_n < m->min_n || m->max_n > TF_MAX_N || m->max_skip < 0)
    return err_set(SMELT_ERR_INVALID_MODEL, "gram lengths %lld..%lld or max_skip_count %lld are invalid",
                   (long long)m->min_n, (long long)m->max_n, (long long)m->max_skip);
  if (ir_attr_find(c->node, "pool_strings"))
    return err_set(SMELT_ERR_UNSUPPORTED, "string pools are not supported (smelt has no string tensors)");
  m->pool = ir_attr_ints(c->node, "pool_int64s", np);
  *counts = ir_attr_ints(c->node, "ngram_counts", nc);
  *idx = ir_attr_ints(c->node, "ngram_indexes", ni);
  m->weights = ir_attr_floats(c->node, "weights", &m->n_weights);
  if (!m->pool || !*counts || !*idx) return err_set(SMELT_ERR_INVALID_MODEL, "pool_int64s, ngram_counts and ngram_indexes are required");
  m->out_size = 0;
  for (int i = 0; i < *ni; i++) {
    if ((*idx)[i] < 0) return err_set(SMELT_ERR_INVALID_MODEL, "ngram_indexes has a negative value");
    if ((*idx)[i] + 1 > m->out_size) m->out_size = (*idx)[i] + 1;
  }
  if (m->n_weights && m->n_weights < m->out_size)
    return err_set(SMELT_ERR_INVALID_MODEL, "weights has %d values for %lld outputs", m->n_weights, (long long)m->out_size);
  return SMELT_OK;
}

/* Splits the pool into n-grams of each size (ngram_counts gives where each
 * size starts) and sorts those of the sizes in use. */
static smelt_status tf_load(op_ctx *c, tf_model *m) {
  memset(m, 0, sizeof *m);
  const int64_t *counts, *idx;
  int nc, ni, np;
  TRY(tf_attrs(c, m, &counts, &nc, &idx, &ni, &np));
  int64_t id = 0, tmp_n = 0;
  for (int i = 0; i < nc; i++) {
    int64_t n = i + 1, start = counts[i], end = i + 1 < nc ? counts[i + 1] : np;
    if (start < 0 || end < start || end > np)
      return err_set(SMELT_ERR_INVALID_MODEL, "ngram_counts[%d] = %lld is outside the pool", i, (long long)start);
    int64_t k = (end - start) / n;
    if (n >= m->min_n && n <= m->max_n) {
      tf_size *s = &m->sz[n];
      if (id + k > ni) return err_set(SMELT_ERR_INVALID_MODEL, "ngram_indexes has fewer entries than the pool's n-grams");
      s->count = k;
      TRY(nn_alloc((void **)&s->off, k + 1, sizeof(int64_t), "n-grams"));
      TRY(nn_alloc((void **)&s->col, k + 1, sizeof(int64_t), "n-grams"));
      TRY(nn_alloc((void **)&s->sorted, k + 1, sizeof(int64_t), "n-grams"));
      for (int64_t j = 0; j < k; j++) s->off[j] = start + j * n, s->col[j] = idx[id + j], s->sorted[j] = j;
      if (k > tmp_n) tmp_n = k;
    }
    id += k;
  }
  int64_t *tmp = NULL;
  TRY(nn_alloc((void **)&tmp, tmp_n + 1, sizeof(int64_t), "sort scratch"));
  for (int64_t n = m->min_n; n <= m->max_n; n++) {
    tf_sort_ctx ctx = {m->pool, m->sz[n].off, n};
    su_sort_idx(m->sz[n].sorted, tmp, m->sz[n].count, tf_cmp, &ctx);
  }
  free(tmp);
  return SMELT_OK;
}

/* The output column of the n-gram tok[0..n) (the last equal entry), or -1. */
static int64_t tf_find(const tf_model *m, int64_t n, const int64_t *tok) {
  const tf_size *s = &m->sz[n];
  int64_t lo = 0, hi = s->count; /* first entry greater than tok */
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (tf_cmp_tok(m->pool + s->off[s->sorted[mid]], tok, n) <= 0) lo = mid + 1;
    else hi = mid;
  }
  if (!lo || tf_cmp_tok(m->pool + s->off[s->sorted[lo - 1]], tok, n)) return -1;
  return s->col[s->sorted[lo - 1]];
}

static void tf_row(const tf_model *m, const int64_t *x, int64_t C, double *freq) {
  int64_t tok[TF_MAX_N];
  for (int64_t skip = 1; skip <= m->max_skip + 1; skip++)
    for (int64_t st = 0; st < C; st++)
      for (int64_t n = m->min_n > 1 || skip == 1 ? m->min_n : 2; n <= m->max_n; n++) {
        if (st + (n - 1) * skip >= C) break;
        for (int64_t j = 0; j < n; j++) tok[j] = x[st + j * skip];
        int64_t col = m->sz[n].count ? tf_find(m, n, tok) : -1;
        if (col >= 0) freq[col] += 1;
      }
}

static smelt_status tf_infer(op_ctx *c) {
  tf_model m;
  const int64_t *counts, *idx;
  int nc, ni, np;
  memset(&m, 0, sizeof m);
  TRY(tf_attrs(c, &m, &counts, &nc, &idx, &ni, &np));
  const tensor *x = c->in[0];
  if (x->dtype != SMELT_I32 && x->dtype != SMELT_I64 && x->dtype != SMELT_UNDEFINED)
    return err_set(SMELT_ERR_UNSUPPORTED, "input of type %s is not supported (int32 or int64)", dtype_name(x->dtype));
  if (x->rank > 2) return err_set(SMELT_ERR_INVALID_ARGUMENT, "input must be [C] or [B, C]");
  if (x->rank == 2) op_set_out(c, 0, SMELT_F32, 2, (int64_t[]){x->dims[0], m.out_size});
  else op_set_out(c, 0, SMELT_F32, 1, &m.out_size);
  return SMELT_OK;
}

static void tf_weigh(const tf_model *m, double *f) {
  for (int64_t i = 0; i < m->out_size; i++) {
    double w = m->n_weights ? m->weights[i] : 1.0;
    if (m->mode == 2) f[i] = f[i] > 0 ? w : 0;
    else if (m->mode == 3) f[i] *= w;
  }
}

static smelt_status tf_run(op_ctx *c) {
  tf_model m;
  smelt_status s = tf_load(c, &m);
  const tensor *x = c->in[0];
  int64_t rows = x->rank == 2 ? x->dims[0] : 1, C = x->rank == 0 ? 1 : x->dims[x->rank - 1];
  int64_t *xv = NULL;
  double *f = NULL;
  if (!s) s = nn_alloc((void **)&xv, C + 1, sizeof(int64_t), "row");
  if (!s) s = nn_alloc((void **)&f, m.out_size + 1, sizeof(double), "frequencies");
  for (int64_t r = 0; !s && r < rows; r++) {
    nn_load_i64(x->dtype, x->data, r * C, 1, C, xv);
    for (int64_t i = 0; i < m.out_size; i++) f[i] = 0;
    tf_row(&m, xv, C, f);
    tf_weigh(&m, f);
    nn_store_f64(SMELT_F32, c->out[0]->data, r * m.out_size, 1, m.out_size, f);
  }
  free(xv);
  free(f);
  tf_free(&m);
  return s;
}

const op_def op_family_tfidf[] = {
    {"TfIdfVectorizer", "", 1, 1, 1, 1, tf_infer, tf_run, false},
    {0}};
