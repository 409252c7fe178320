/* Summary statistics for benchmark timings.
 *
 * Percentiles interpolate linearly between order statistics (numpy's default,
 * "type 7"): p in [0, 100] maps to the 0-based position h = (n-1)*p/100 in the
 * sorted sample, and the result is x[floor h] + (h - floor h)*(x[floor h + 1] -
 * x[floor h]).  So the median of an even-sized sample is the mean of the two
 * middle values.
 *
 * The confidence interval of the median is distribution-free (no normality
 * assumed; timings are skewed and have outliers): for n independent samples,
 * the number B of samples below the true median is Binomial(n, 1/2), so the
 * interval between the order statistics x(j) and x(n+1-j) (1-based) covers the
 * median with probability 1 - 2*P(B <= j-1).  stats_median_ci picks the largest
 * j whose coverage is still >= the level asked for; below 6 samples no such j
 * exists for 95%, and the interval is [min, max] with its (lower) coverage
 * reported. */
#ifndef SMELT_UTIL_STATS_H
#define SMELT_UTIL_STATS_H

#include <stddef.h>

#include "smelt.h"

typedef struct stats_summary {
  size_t n;
  double mean, std; /* std: sample standard deviation (n-1); 0 for n = 1 */
  double min, max;
  double median, p50, p90, p99;
  double ci_lo, ci_hi; /* confidence interval of the median */
  double ci_coverage;  /* its actual coverage probability (>= the level asked for when n allows) */
  size_t ci_lo_rank, ci_hi_rank; /* 1-based order statistics that bound it */
} stats_summary;

/* Percentile p (0..100) of an ascending sorted sample of n >= 1 values. */
double stats_percentile_sorted(const double *sorted, size_t n, double p);

/* 1-based ranks (*lo, *hi) of the order statistics bounding a distribution-free
 * confidence interval of the median at the given level (e.g. 0.95), and the
 * interval's exact coverage.  n >= 1. */
void stats_median_ci_ranks(size_t n, double level, size_t *lo, size_t *hi, double *coverage);

/* Sorts a copy of x[0..n) and summarizes it; n >= 1 and every value finite,
 * else SMELT_ERR_INVALID_ARGUMENT.  level: the CI level (e.g. 0.95). */
smelt_status stats_summarize(const double *x, size_t n, double level, stats_summary *out);

#endif
