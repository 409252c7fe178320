/* Einsum: any equation numpy accepts -- explicit or implicit output,
 * ellipsis (broadcast, right-aligned), repeated labels within an operand
 * (diagonals), labels summed out of a single operand.
 *
 * Labels are numbered: letters 0..51, ellipsis dims 52..  Each operand gets a
 * stride per label (strides of repeated labels add up; a broadcast size-1
 * ellipsis dim gets 0).  The reference loop walks every output element and
 * sums the product of the operands over the contracted labels, in double
 * (or wrapping int64 for integers).  Two f32 operands that form a plain
 * batched contraction (every label in the output or in both operands, none
 * repeated) are gathered into [batch, M, K] x [batch, K, N] and run on
 * gemm_f32. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm.h"
#include "ops/nn_util.h"
#include "util/err.h"
#include "util/quote.h"

#define EIN_LETTERS 52
#define EIN_LABELS (EIN_LETTERS + SMELT_MAX_RANK)
#define EIN_MAX_IN 16

typedef struct ein_plan {
  int n_in, n_ell;                         /* operands; ellipsis dims of the broadcast */
  int in_rank[EIN_MAX_IN];
  int in_lab[EIN_MAX_IN][SMELT_MAX_RANK];  /* label of each operand dim */
  int out_rank, out_lab[SMELT_MAX_RANK];
  bool used[EIN_LABELS];
  int64_t size[EIN_LABELS];                /* DIM_UNKNOWN where not known */
} ein_plan;

static int letter_id(char ch) {
  if (ch >= 'a' && ch <= 'z') return ch - 'a';
  if (ch >= 'A' && ch <= 'Z') return 26 + ch - 'A';
  return -1;
}

/* One operand term "ab...c" (spaces ignored) into labels for a rank-`rank`
 * operand; ellipsis dims take ids EIN_LETTERS + n_ell - k .. (right-aligned). */
static smelt_status parse_term(const char *s, const char *e, int rank, int n_ell, int *lab,
                               int *n_lab, int *ell_dims, const char *what) {
  int letters = 0;
  bool ell = false;
  for (const char *p = s; p < e; p++) {
    if (*p == ' ') continue;
    if (*p == '.') {
      if (ell || e - p < 3 || p[1] != '.' || p[2] != '.')
        return err_set(SMELT_ERR_INVALID_MODEL, "equation: bad ellipsis in %s", what);
      ell = true;
      p += 2;
    } else if (letter_id(*p) >= 0) {
      letters++;
    } else {
      return err_set(SMELT_ERR_INVALID_MODEL, "equation: unexpected character '%c' in %s", *p, what);
    }
  }
  int k = ell ? (rank >= 0 ? rank - letters : n_ell) : 0;
  if (rank >= 0 && (k < 0 || (!ell && letters != rank)))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "equation: %s has %d labels for rank %d", what,
                   letters, rank);
  if (letters + k > SMELT_MAX_RANK)
    return err_set(SMELT_ERR_INVALID_MODEL, "equation: %s has too many dims", what);
  int n = 0;
  for (const char *p = s; p < e; p++) {
    if (*p == ' ') continue;
    if (*p == '.') {
      for (int t = 0; t < k; t++) lab[n++] = EIN_LETTERS + n_ell - k + t;
      p += 2;
    } else {
      lab[n++] = letter_id(*p);
    }
  }
  *n_lab = n;
  *ell_dims = ell ? k : -1;
  return SMELT_OK;
}

/* Merges one operand dim into its label's size: letters must agree;
 * ellipsis dims broadcast (1 takes the other size). */
static smelt_status merge_size(ein_plan *p, int l, int64_t d, int in, int dim) {
  bool ell = l >= EIN_LETTERS;
  int64_t s = p->size[l];
  if (!p->used[l] || (ell && s == 1) || (!dim_known(s) && dim_known(d))) {
    p->used[l] = true;
    p->size[l] = d;
    return SMELT_OK;
  }
  if ((ell && d == 1) || !dim_known(d) || d == s) return SMELT_OK;
  return err_set(SMELT_ERR_INVALID_ARGUMENT,
                 "equation: input %d dim %d has size %lld, but its label has size %lld elsewhere",
                 in, dim, (long long)d, (long long)s);
}

/* Operand terms; pass 0 only finds the ellipsis rank (the largest over the
 * operands), pass 1 labels every dim and merges the sizes. */
static smelt_status ein_parse_operands(op_ctx *c, ein_plan *p, const char *eq, const char *lhs_end,
                                       int pass) {
  const char *s = eq;
  for (int i = 0; i < p->n_in; i++) {
    const char *e = memchr(s, ',', (size_t)(lhs_end - s));
    if (!e) e = lhs_end;
    if ((i == p->n_in - 1) != (e == lhs_end))
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "equation %s does not have %d operand terms", q(eq),
                     p->n_in);
    int lab[SMELT_MAX_RANK], nl, ell;
    char what[32];
    snprintf(what, sizeof what, "operand %d", i);
    if (pass == 0) {
      TRY(parse_term(s, e, c->in[i]->rank, 0, lab, &nl, &ell, what));
      if (ell > p->n_ell) p->n_ell = ell;
    } else {
      TRY(parse_term(s, e, c->in[i]->rank, p->n_ell, p->in_lab[i], &p->in_rank[i], &ell, what));
      for (int d = 0; d < p->in_rank[i]; d++)
        TRY(merge_size(p, p->in_lab[i][d], c->in[i]->dims[d], i, d));
    }
    s = e + 1;
  }
  return SMELT_OK;
}

static smelt_status ein_explicit_output(ein_plan *p, const char *rhs) {
  int ell;
  TRY(parse_term(rhs, rhs + strlen(rhs), -1, p->n_ell, p->out_lab, &p->out_rank, &ell, "the output"));
  bool seen[EIN_LABELS] = {0};
  for (int d = 0; d < p->out_rank; d++) {
    int l = p->out_lab[d];
    if (seen[l] || !p->used[l])
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "equation: output label %d is %s", d,
                     seen[l] ? "repeated" : "not in any operand");
    seen[l] = true;
  }
  if (ell < 0 && p->n_ell > 0)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "equation: the output must keep the ellipsis dims");
  return SMELT_OK;
}

/* numpy's implicit output: ellipsis dims, then the letters used once, in
 * ASCII order (upper case first). */
static void ein_implicit_output(ein_plan *p) {
  int count[EIN_LABELS] = {0};
  for (int i = 0; i < p->n_in; i++)
    for (int d = 0; d < p->in_rank[i]; d++) count[p->in_lab[i][d]]++;
  for (int t = 0; t < p->n_ell; t++) p->out_lab[p->out_rank++] = EIN_LETTERS + t;
  for (int l = 26; l < 52; l++)
    if (count[l] == 1) p->out_lab[p->out_rank++] = l;
  for (int l = 0; l < 26; l++)
    if (count[l] == 1) p->out_lab[p->out_rank++] = l;
}

static smelt_status ein_parse(op_ctx *c, ein_plan *p) {
  memset(p, 0, sizeof *p);
  const char *eq = ir_attr_string(c->node, "equation", NULL);
  if (!eq) return err_set(SMELT_ERR_INVALID_MODEL, "attribute equation is required");
  if (c->n_in > EIN_MAX_IN)
    return err_set(SMELT_ERR_UNSUPPORTED, "%d operands; at most %d are supported", c->n_in, EIN_MAX_IN);
  p->n_in = c->n_in;
  const char *arrow = strstr(eq, "->"), *lhs_end = arrow ? arrow : eq + strlen(eq);
  TRY(ein_parse_operands(c, p, eq, lhs_end, 0));
  TRY(ein_parse_operands(c, p, eq, lhs_end, 1));
  if (arrow) return ein_explicit_output(p, arrow + 2);
  ein_implicit_output(p);
  return SMELT_OK;
}

static const smelt_dtype ein_types[] = {SMELT_F32, SMELT_F16, SMELT_BF16, SMELT_F64, SMELT_I8,
                                        SMELT_U8,  SMELT_I16, SMELT_U16,  SMELT_I32, SMELT_I64,
                                        SMELT_U32, SMELT_U64, SMELT_UNDEFINED};

static smelt_status ein_infer(op_ctx *c) {
  for (int i = 0; i < c->n_in; i++) {
    TRY(op_check_dtype(c, i, ein_types));
    TRY(nn_check_same_dtype(c, i, "operand", 0, "operand 0"));
    if (c->in[i]->rank < 0) {
      nn_out_unknown(c, 0, c->in[0]->dtype);
      return SMELT_OK;
    }
  }
  ein_plan p;
  TRY(ein_parse(c, &p));
  int64_t dims[SMELT_MAX_RANK];
  for (int d = 0; d < p.out_rank; d++) dims[d] = p.size[p.out_lab[d]];
  op_set_out(c, 0, c->in[0]->dtype, p.out_rank, dims);
  return SMELT_OK;
}

/* ---- strides per label ---- */

static void label_strides(const ein_plan *p, int i, const tensor *t, int64_t *st) {
  memset(st, 0, sizeof(int64_t) * EIN_LABELS);
  int64_t s = 1;
  for (int d = t->rank - 1; d >= 0; d--) {
    if (t->dims[d] != 1 || p->size[p->in_lab[i][d]] == 1) st[p->in_lab[i][d]] += s;
    s *= t->dims[d];
  }
}

/* ---- reference loop ---- */

typedef struct ein_job {
  const ein_plan *p;
  int nl;                            /* labels walked: output ones, then contracted ones */
  int lab[EIN_LABELS];
  int64_t stride[EIN_MAX_IN][EIN_LABELS];
  const void *src[EIN_MAX_IN];       /* double* or int64_t* per operand */
  void *dst;
  bool is_int;
} ein_job;

static void ein_outputs(void *vctx, int64_t o0, int64_t o1) {
  const ein_job *j = vctx;
  const ein_plan *p = j->p;
  int n_out = p->out_rank, n_in = p->n_in;
  for (int64_t o = o0; o < o1; o++) {
    int64_t base[EIN_MAX_IN] = {0}, rem = o;
    for (int d = n_out - 1; d >= 0; d--) {
      int64_t cidx = rem % p->size[j->lab[d]];
      rem /= p->size[j->lab[d]];
      for (int i = 0; i < n_in; i++) base[i] += cidx * j->stride[i][j->lab[d]];
    }
    int64_t kc[EIN_LABELS] = {0}, off[EIN_MAX_IN];
    double accf = 0;
    uint64_t acci = 0;
    bool more = true;
    for (int d = n_out; d < j->nl; d++) more &= p->size[j->lab[d]] > 0;
    while (more) {
      for (int i = 0; i < n_in; i++) {
        off[i] = base[i];
        for (int d = n_out; d < j->nl; d++) off[i] += kc[d] * j->stride[i][j->lab[d]];
      }
      if (j->is_int) {
        uint64_t prod = 1;
        for (int i = 0; i < n_in; i++) prod *= (uint64_t)((const int64_t *)j->src[i])[off[i]];
        acci += prod;
      } else {
        double prod = 1;
        for (int i = 0; i < n_in; i++) prod *= ((const double *)j->src[i])[off[i]];
        accf += prod;
      }
      int d = j->nl - 1;
      while (d >= n_out && ++kc[d] == p->size[j->lab[d]]) kc[d--] = 0;
      more = d >= n_out;
    }
    if (j->is_int) ((int64_t *)j->dst)[o] = (int64_t)acci;
    else ((double *)j->dst)[o] = accf;
  }
}

static void ein_job_labels(const ein_plan *p, ein_job *j) {
  bool in_out[EIN_LABELS] = {0};
  j->nl = 0;
  for (int d = 0; d < p->out_rank; d++) {
    j->lab[j->nl++] = p->out_lab[d];
    in_out[p->out_lab[d]] = true;
  }
  for (int l = 0; l < EIN_LABELS; l++)
    if (p->used[l] && !in_out[l]) j->lab[j->nl++] = l;
}

static smelt_status ein_reference(op_ctx *c, const ein_plan *p) {
  tensor *y = c->out[0];
  ein_job j = {.p = p, .is_int = dtype_is_int(y->dtype)};
  ein_job_labels(p, &j);
  void *bufs[EIN_MAX_IN] = {0}, *out = NULL;
  int64_t ny = tensor_numel(y);
  smelt_status st = nn_alloc(&out, ny, 8, "Einsum output");
  for (int i = 0; i < p->n_in && !st; i++) {
    const tensor *t = c->in[i];
    int64_t n = tensor_numel(t);
    st = nn_alloc(&bufs[i], n, 8, "Einsum operand");
    if (st) break;
    if (j.is_int) nn_load_i64(t->dtype, t->data, 0, 1, n, bufs[i]);
    else nn_load_f64(t->dtype, t->data, 0, 1, n, bufs[i]);
    label_strides(p, i, t, j.stride[i]);
    j.src[i] = bufs[i];
  }
  if (!st) {
    j.dst = out;
    pool_parallel_for(c->pool, ny, 64, ein_outputs, &j);
    if (j.is_int) nn_store_i64(y->dtype, y->data, 0, 1, ny, out);
    else nn_store_f64(y->dtype, y->data, 0, 1, ny, out);
  }
  for (int i = 0; i < p->n_in; i++) free(bufs[i]);
  free(out);
  return st;
}

/* ---- two-operand contraction on gemm_f32 ---- */

/* Copies the elements of src addressed by labels lab[0..n) (sizes from the
 * plan, strides st) into dst in that order (dense). */
static void gather(const ein_plan *p, const float *src, const int64_t *st, const int *lab, int n,
                   float *dst) {
  int64_t total = 1, idx[EIN_LABELS] = {0};
  for (int d = 0; d < n; d++) total *= p->size[lab[d]];
  int64_t off = 0;
  for (int64_t i = 0; i < total; i++) {
    dst[i] = src[off];
    for (int d = n - 1; d >= 0; d--) {
      off += st[lab[d]];
      if (++idx[d] < p->size[lab[d]]) break;
      off -= idx[d] * st[lab[d]];
      idx[d] = 0;
    }
  }
}

/* Inverse of gather: dense src in label order lab into dst with strides st. */
static void scatter(const ein_plan *p, const float *src, const int64_t *st, const int *lab, int n,
                    float *dst) {
  int64_t total = 1, idx[EIN_LABELS] = {0};
  for (int d = 0; d < n; d++) total *= p->size[lab[d]];
  int64_t off = 0;
  for (int64_t i = 0; i < total; i++) {
    dst[off] = src[i];
    for (int d = n - 1; d >= 0; d--) {
      off += st[lab[d]];
      if (++idx[d] < p->size[lab[d]]) break;
      off -= idx[d] * st[lab[d]];
      idx[d] = 0;
    }
  }
}

/* Classifies labels as batch / m / n / k; false if the equation is not a
 * plain two-operand contraction. */
static bool ein_gemm_split(const ein_plan *p, int *bl, int *nb, int *ml, int *nm, int *nl_, int *nn,
                           int *kl, int *nk) {
  int where[EIN_LABELS] = {0}; /* bit 0: A, bit 1: B, bit 2: out */
  for (int w = 0; w < 2; w++)
    for (int d = 0; d < p->in_rank[w]; d++) {
      int l = p->in_lab[w][d];
      if (where[l] & (1 << w)) return false; /* repeated: a diagonal */
      where[l] |= 1 << w;
    }
  for (int d = 0; d < p->out_rank; d++) where[p->out_lab[d]] |= 4;
  *nb = *nm = *nn = *nk = 0;
  for (int d = 0; d < p->out_rank; d++) {
    int l = p->out_lab[d];
    if (where[l] == 7) bl[(*nb)++] = l;
    else if (where[l] == 5) ml[(*nm)++] = l;
    else if (where[l] == 6) nl_[(*nn)++] = l;
  }
  for (int l = 0; l < EIN_LABELS; l++) {
    if (!p->used[l]) continue;
    if (where[l] == 3) kl[(*nk)++] = l;
    else if (where[l] == 1 || where[l] == 2) return false; /* summed out of one operand */
  }
  return true;
}

static smelt_status ein_gemm(op_ctx *c, const ein_plan *p, bool *done) {
  int bl[EIN_LABELS], ml[EIN_LABELS], nl[EIN_LABELS], kl[EIN_LABELS], nb, nm, nn, nk;
  *done = false;
  if (p->n_in != 2 || c->out[0]->dtype != SMELT_F32 ||
      !ein_gemm_split(p, bl, &nb, ml, &nm, nl, &nn, kl, &nk))
    return SMELT_OK;
  int64_t Bt = 1, M = 1, N = 1, K = 1;
  for (int i = 0; i < nb; i++) Bt *= p->size[bl[i]];
  for (int i = 0; i < nm; i++) M *= p->size[ml[i]];
  for (int i = 0; i < nn; i++) N *= p->size[nl[i]];
  for (int i = 0; i < nk; i++) K *= p->size[kl[i]];
  int la[EIN_LABELS], lb[EIN_LABELS], lc[EIN_LABELS], na = 0, nb2 = 0, nc = 0;
  for (int i = 0; i < nb; i++) la[na++] = lb[nb2++] = lc[nc++] = bl[i];
  for (int i = 0; i < nm; i++) la[na++] = lc[nc++] = ml[i];
  for (int i = 0; i < nk; i++) la[na++] = lb[nb2++] = kl[i];
  for (int i = 0; i < nn; i++) lb[nb2++] = lc[nc++] = nl[i];
  int64_t sa[EIN_LABELS], sb[EIN_LABELS], sc[EIN_LABELS];
  label_strides(p, 0, c->in[0], sa);
  label_strides(p, 1, c->in[1], sb);
  /* the output's own strides, in its label order */
  memset(sc, 0, sizeof sc);
  int64_t so = 1;
  for (int d = p->out_rank - 1; d >= 0; d--) {
    sc[p->out_lab[d]] = so;
    so *= p->size[p->out_lab[d]];
  }
  float *A = NULL, *B = NULL, *C = NULL;
  smelt_status st = nn_alloc((void **)&A, Bt * M * K, sizeof(float), "Einsum A");
  if (!st) st = nn_alloc((void **)&B, Bt * K * N, sizeof(float), "Einsum B");
  if (!st) st = nn_alloc((void **)&C, Bt * M * N, sizeof(float), "Einsum C");
  if (!st) {
    gather(p, c->in[0]->data, sa, la, na, A);
    gather(p, c->in[1]->data, sb, lb, nb2, B);
    for (int64_t b = 0; !st && b < Bt; b++) {
      if (K == 0) memset(C + b * M * N, 0, sizeof(float) * (size_t)(M * N));
      else st = gemm_f32(c->pool, false, false, M, N, K, 1.f, A + b * M * K, K, B + b * K * N, N, 0.f,
                         C + b * M * N, N);
    }
    if (!st) scatter(p, C, sc, lc, nc, c->out[0]->data);
    *done = !st;
  }
  free(A);
  free(B);
  free(C);
  return st;
}

static smelt_status ein_run(op_ctx *c) {
  ein_plan p;
  TRY(ein_parse(c, &p));
  if (tensor_numel(c->out[0]) == 0) return SMELT_OK;
  bool done = false;
  TRY(ein_gemm(c, &p, &done));
  if (done) return SMELT_OK;
  return ein_reference(c, &p);
}

const op_def op_family_einsum[] = {
    {"Einsum", "", 1, -1, 1, 1, ein_infer, ein_run, false},
    {0}};
