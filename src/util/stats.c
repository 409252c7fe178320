#include "util/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

double stats_percentile_sorted(const double *sorted, size_t n, double p) {
  if (n == 1 || p <= 0) return sorted[0];
  if (p >= 100) return sorted[n - 1];
  double h = (double)(n - 1) * p / 100.0;
  size_t i = (size_t)h;
  if (i + 1 >= n) return sorted[n - 1];
  return sorted[i] + (h - (double)i) * (sorted[i + 1] - sorted[i]);
}

void stats_median_ci_ranks(size_t n, double level, size_t *lo, size_t *hi, double *coverage) {
  double alpha_half = (1.0 - level) / 2.0;
  /* Binomial(n, 1/2) probabilities in log space: 2^-n underflows past n = 1074.
   * log_t is log P(B = i); cdf is P(B <= j-1) for the current j. */
  double log_t = -(double)n * log(2.0);
  double cdf = exp(log_t);
  size_t j = 1;
  for (;;) {
    size_t i = j; /* would move to j+1, adding P(B = j) */
    if (j + 1 > (n + 1) / 2) break; /* lo may not pass the middle */
    double next_log_t = log_t + log((double)(n - i + 1)) - log((double)i);
    double next_cdf = cdf + exp(next_log_t);
    if (next_cdf > alpha_half) break;
    log_t = next_log_t;
    cdf = next_cdf;
    j++;
  }
  *lo = j;
  *hi = n + 1 - j;
  double c = 1.0 - 2.0 * cdf;
  *coverage = c < 0 ? 0 : c;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

smelt_status stats_summarize(const double *x, size_t n, double level, stats_summary *out) {
  memset(out, 0, sizeof *out);
  if (n == 0 || !x) return err_set(SMELT_ERR_INVALID_ARGUMENT, "statistics of an empty sample");
  if (!(level > 0 && level < 1))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "confidence level %g is outside (0, 1)", level);
  if (n > SIZE_MAX / sizeof(double)) return err_nomem("samples", SIZE_MAX);
  double *s = malloc(n * sizeof *s);
  if (!s) return err_nomem("samples", n * sizeof *s);
  double sum = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(x[i])) {
      free(s);
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "sample %zu is not a finite number", i);
    }
    s[i] = x[i];
    sum += x[i];
  }
  qsort(s, n, sizeof *s, cmp_double);
  out->n = n;
  out->mean = sum / (double)n;
  double ss = 0; /* two-pass variance: no cancellation on tightly clustered timings */
  for (size_t i = 0; i < n; i++) ss += (s[i] - out->mean) * (s[i] - out->mean);
  out->std = n > 1 ? sqrt(ss / (double)(n - 1)) : 0;
  out->min = s[0];
  out->max = s[n - 1];
  out->median = out->p50 = stats_percentile_sorted(s, n, 50);
  out->p90 = stats_percentile_sorted(s, n, 90);
  out->p99 = stats_percentile_sorted(s, n, 99);
  stats_median_ci_ranks(n, level, &out->ci_lo_rank, &out->ci_hi_rank, &out->ci_coverage);
  out->ci_lo = s[out->ci_lo_rank - 1];
  out->ci_hi = s[out->ci_hi_rank - 1];
  free(s);
  return SMELT_OK;
}
