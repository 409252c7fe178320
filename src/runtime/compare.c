#include "runtime/compare.h"

#include "ops/convert.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/err.h"

/* Running state over all elements (of all tensors of a sequence). */
typedef struct cmp_state {
  compare_result *r;
  double rtol, atol;
  double worst_score;        /* |a-e| / tolerance of the worst element so far */
  double worst_abs;
  const tensor *worst_tensor; /* for the multi-index in the message */
  bool exact;                /* integers/bool: no tolerance in the message */
} cmp_state;

static void note(cmp_state *st, const tensor *t, int seq, int64_t i, double a, double e,
                 double abs_err, double rel_err, double score, bool bad) {
  compare_result *r = st->r;
  r->count++;
  if (bad) r->mismatches++;
  if (abs_err > r->max_abs) r->max_abs = abs_err;
  if (rel_err > r->max_rel) r->max_rel = rel_err;
  if (r->worst_index < 0 || score > st->worst_score ||
      (score == st->worst_score && abs_err > st->worst_abs)) {
    st->worst_score = score;
    st->worst_abs = abs_err;
    st->worst_tensor = t;
    r->worst_index = i;
    r->worst_seq = seq;
    r->worst_actual = a;
    r->worst_expected = e;
  }
}

static void compare_float_elem(cmp_state *st, const tensor *t, int seq, int64_t i, double a, double e) {
  bool bad;
  double d, rel, score;
  if (isnan(a) || isnan(e) || isinf(a) || isinf(e)) {
    /* NaN matches NaN; an infinity only itself (a == e is false for NaNs). */
    bad = !(isnan(a) && isnan(e)) && a != e;
    d = rel = score = bad ? INFINITY : 0;
  } else {
    d = fabs(a - e);
    double tol = st->atol + st->rtol * fabs(e);
    bad = !(d <= tol);
    rel = e != 0 ? d / fabs(e) : 0;
    score = tol > 0 ? d / tol : d > 0 ? INFINITY : 0;
  }
  note(st, t, seq, i, a, e, d, rel, score, bad);
}

/* Floats compare within tolerance; float4e2m1 is one too (by decoded value). */
static bool cmp_is_float(smelt_dtype t) { return dtype_is_float(t) || t == SMELT_F4E2M1; }

/* Element i as a double; float8 kinds decoded exactly, packed types through
 * tensor_get_f64 (ir/subbyte.h). */
static double elem_f64(const tensor *t, int64_t i) {
  if (dtype_is_float(t->dtype) && dtype_size(t->dtype) == 1)
    return cvt_minifloat_decode(t->dtype, ((const uint8_t *)t->data)[i]);
  return tensor_get_f64(t, i);
}

/* |a-e| of two integers, exact before the final rounding to double. */
static double int_dist(bool is_signed, uint64_t a, uint64_t e) {
  bool a_ge = is_signed ? (int64_t)a >= (int64_t)e : a >= e;
  return (double)(a_ge ? a - e : e - a);
}

static void compare_int_elem(cmp_state *st, const tensor *act, const tensor *exp, int seq, int64_t i) {
  smelt_dtype t = exp->dtype;
  bool is_signed = dtype_is_signed_int(t) || t == SMELT_I4 || t == SMELT_I2;
  uint64_t a = (uint64_t)tensor_get_i64(act, i), e = (uint64_t)tensor_get_i64(exp, i);
  bool bad = a != e;
  double d = int_dist(is_signed, a, e);
  double rel = e ? d / fabs(elem_f64(exp, i)) : 0;
  note(st, exp, seq, i, elem_f64(act, i), elem_f64(exp, i), d, rel,
       bad ? INFINITY : 0, bad);
}

static smelt_status check_dense(const tensor *t, const char *which) {
  size_t nb = 0;
  bool ok_rank = t->rank >= 0 && t->rank <= SMELT_MAX_RANK;
  int64_t n = ok_rank ? shape_numel(t->rank, t->dims) : -1;
  if (!ok_rank || !dtype_nbytes(t->dtype, n, &nb) || nb != t->nbytes || (!t->data && n > 0))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "tensor_compare: the %s tensor's data (%zu bytes) "
                   "does not match its shape", which, t->nbytes);
  return SMELT_OK;
}

static bool comparable(smelt_dtype t) {
  return dtype_is_float(t) || t == SMELT_BOOL || dtype_is_int(t) || dtype_is_subbyte(t);
}

/* Structural differences (kind, dtype, shape): a message and ok = false. */
static bool differ_in_form(const tensor *a, const tensor *e, char *msg, size_t n) {
  static const char *kinds[] = {"tensor", "sequence", "missing optional"};
  if (a->kind != e->kind) {
    snprintf(msg, n, "got a %s, expected a %s", kinds[a->kind % 3], kinds[e->kind % 3]);
    return true;
  }
  if (a->kind == TENSOR_KIND_OPTIONAL_NONE) return false;
  if (a->dtype != e->dtype) {
    snprintf(msg, n, "dtype %s, expected %s", dtype_name(a->dtype), dtype_name(e->dtype));
    return true;
  }
  if (a->kind == TENSOR_KIND_SEQUENCE) {
    if (a->seq_len == e->seq_len) return false;
    snprintf(msg, n, "sequence of %d tensors, expected %d", a->seq_len, e->seq_len);
    return true;
  }
  if (a->rank == e->rank && (a->rank <= 0 || !memcmp(a->dims, e->dims, sizeof(int64_t) * (size_t)a->rank)))
    return false;
  char sa[256], se[256];
  snprintf(msg, n, "shape %s, expected %s", shape_str(sa, sizeof sa, a->rank, a->dims, NULL),
           shape_str(se, sizeof se, e->rank, e->dims, NULL));
  return true;
}

static smelt_status compare_one(cmp_state *st, const tensor *a, const tensor *e, int seq) {
  char where[32] = "";
  if (seq >= 0) snprintf(where, sizeof where, "sequence element %d: ", seq);
  if (differ_in_form(a, e, st->r->message + strlen(where), sizeof st->r->message - strlen(where))) {
    memcpy(st->r->message, where, strlen(where));
    st->r->ok = false;
    return SMELT_OK;
  }
  if (e->kind == TENSOR_KIND_OPTIONAL_NONE) return SMELT_OK;
  if (!comparable(e->dtype))
    return err_set(SMELT_ERR_UNSUPPORTED, "tensor_compare: cannot compare %s tensors",
                   dtype_name(e->dtype));
  TRY(check_dense(a, "actual"));
  TRY(check_dense(e, "expected"));
  int64_t n = shape_numel(e->rank, e->dims);
  bool fl = cmp_is_float(e->dtype);
  for (int64_t i = 0; i < n; i++) {
    if (fl) compare_float_elem(st, e, seq, i, elem_f64(a, i), elem_f64(e, i));
    else compare_int_elem(st, a, e, seq, i);
  }
  return SMELT_OK;
}

static void describe(const cmp_state *st, compare_result *r) {
  char idx[SMELT_MAX_RANK * 22 + 4], seq[40] = "";
  const tensor *t = st->worst_tensor;
  int64_t rem = r->worst_index, coord[SMELT_MAX_RANK];
  for (int d = t->rank - 1; d >= 0; d--) {
    coord[d] = t->dims[d] ? rem % t->dims[d] : 0;
    rem = t->dims[d] ? rem / t->dims[d] : 0;
  }
  shape_str(idx, sizeof idx, t->rank, coord, NULL);
  if (r->worst_seq >= 0) snprintf(seq, sizeof seq, " of sequence element %d", r->worst_seq);
  int o = snprintf(r->message, sizeof r->message,
                   "%lld of %lld elements differ; worst at %s%s: actual %.9g, expected %.9g",
                   (long long)r->mismatches, (long long)r->count, idx, seq, r->worst_actual,
                   r->worst_expected);
  if (o < 0 || (size_t)o >= sizeof r->message) return;
  if (st->exact)
    snprintf(r->message + o, sizeof r->message - (size_t)o, "; max abs difference %.17g",
             r->max_abs);
  else
    snprintf(r->message + o, sizeof r->message - (size_t)o,
             "; max abs err %.3g, max rel err %.3g (rtol %g, atol %g)", r->max_abs,
             r->max_rel, st->rtol, st->atol);
}

static smelt_status compare_all(const tensor *actual, const tensor *expected, double rtol,
                                double atol, compare_result *r) {
  r->ok = true;
  r->worst_index = -1;
  r->worst_seq = -1;
  if (!actual || !expected) return err_set(SMELT_ERR_INVALID_ARGUMENT, "tensor_compare: NULL tensor");
  if (!(rtol >= 0) || !(atol >= 0))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "tensor_compare: tolerances must be >= 0 (rtol %g, "
                   "atol %g)", rtol, atol);
  cmp_state st = {.r = r, .rtol = rtol, .atol = atol, .exact = !cmp_is_float(expected->dtype)};
  if (expected->kind == TENSOR_KIND_SEQUENCE && actual->kind == TENSOR_KIND_SEQUENCE &&
      actual->seq_len == expected->seq_len && actual->dtype == expected->dtype) {
    for (int i = 0; i < expected->seq_len && r->ok; i++) {
      if (!actual->seq || !expected->seq || !actual->seq[i] || !expected->seq[i])
        return err_set(SMELT_ERR_INVALID_ARGUMENT, "tensor_compare: sequence element %d is NULL", i);
      TRY(compare_one(&st, actual->seq[i], expected->seq[i], i));
    }
  } else {
    TRY(compare_one(&st, actual, expected, -1));
  }
  if (!r->ok) return SMELT_OK; /* a structural difference, already described */
  if (r->mismatches) {
    r->ok = false;
    describe(&st, r);
  }
  return SMELT_OK;
}

smelt_status tensor_compare(const tensor *actual, const tensor *expected, double rtol, double atol,
                            compare_result *r) {
  memset(r, 0, sizeof *r);
  smelt_status s = compare_all(actual, expected, rtol, atol, r);
  if (s) { /* a caller that only looks at r->ok must not see a pass */
    r->ok = false;
    snprintf(r->message, sizeof r->message, "%s", err_message());
  }
  return s;
}
