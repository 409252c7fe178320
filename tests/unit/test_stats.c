/* Statistics for smelt bench: percentiles, the median's order-statistic CI. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "util/stats.h"

static int near(double a, double b) { return fabs(a - b) <= 1e-12 * (1 + fabs(b)); }

/* P(B <= k) for B ~ Binomial(n, 1/2), exact in doubles for small n. */
static double binom_cdf(int n, int k) {
  double c = 1, sum = 0;
  for (int i = 0; i <= k; i++) {
    sum += c;
    c = c * (n - i) / (i + 1);
  }
  return sum / ldexp(1.0, n);
}

static void test_one(void) {
  double x[] = {5};
  stats_summary s;
  CHECK_OK(stats_summarize(x, 1, 0.95, &s));
  CHECK(s.n == 1 && s.median == 5 && s.p50 == 5 && s.p90 == 5 && s.p99 == 5);
  CHECK(s.mean == 5 && s.std == 0 && s.min == 5 && s.max == 5);
  CHECK(s.ci_lo == 5 && s.ci_hi == 5 && s.ci_lo_rank == 1 && s.ci_hi_rank == 1 && s.ci_coverage == 0);
}

static void test_odd(void) {
  double x[] = {3, 1, 4, 1, 5};
  stats_summary s;
  CHECK_OK(stats_summarize(x, 5, 0.95, &s));
  CHECK(s.median == 3 && s.min == 1 && s.max == 5);
  CHECK(near(s.mean, 2.8));
  CHECK(near(s.std, sqrt(3.2)));
  CHECK(near(s.p90, 4.6));
  CHECK(near(s.p99, 4.96));
  /* n = 5 cannot reach 95%: [min, max] with coverage 1 - 2/32 */
  CHECK(s.ci_lo == 1 && s.ci_hi == 5 && near(s.ci_coverage, 0.9375));
  CHECK(x[0] == 3 && x[1] == 1); /* the input is not reordered */
}

static void test_even(void) {
  double x[] = {4, 1, 3, 2};
  stats_summary s;
  CHECK_OK(stats_summarize(x, 4, 0.95, &s));
  CHECK(near(s.median, 2.5) && near(s.p50, 2.5));
  CHECK(near(s.p90, 3.7));
  double two[] = {2, 1};
  CHECK_OK(stats_summarize(two, 2, 0.95, &s));
  CHECK(near(s.median, 1.5) && s.ci_lo == 1 && s.ci_hi == 2 && near(s.ci_coverage, 0.5));
}

static void test_known_ranks(void) {
  /* published tables of the distribution-free CI: n=10 -> (2,9), n=20 -> (6,15), n=6 -> (1,6) */
  size_t lo, hi;
  double cov;
  stats_median_ci_ranks(10, 0.95, &lo, &hi, &cov);
  CHECK(lo == 2 && hi == 9 && near(cov, 1 - 22.0 / 1024));
  stats_median_ci_ranks(20, 0.95, &lo, &hi, &cov);
  CHECK(lo == 6 && hi == 15 && near(cov, 1 - 2 * 21700.0 / 1048576));
  stats_median_ci_ranks(6, 0.95, &lo, &hi, &cov);
  CHECK(lo == 1 && hi == 6 && near(cov, 1 - 2.0 / 64));
  double x[20];
  for (int i = 0; i < 20; i++) x[i] = 20 - i; /* 20..1 */
  stats_summary s;
  CHECK_OK(stats_summarize(x, 20, 0.95, &s));
  CHECK(near(s.median, 10.5) && s.ci_lo == 6 && s.ci_hi == 15);
}

/* For every n up to 60: coverage >= 95% and the next narrower interval falls short. */
static void test_ranks_optimal(void) {
  for (int n = 6; n <= 60; n++) {
    size_t lo, hi;
    double cov;
    stats_median_ci_ranks((size_t)n, 0.95, &lo, &hi, &cov);
    CHECK(hi == (size_t)n + 1 - lo);
    CHECK(fabs(cov - (1 - 2 * binom_cdf(n, (int)lo - 1))) < 1e-9);
    CHECK(cov >= 0.95);
    if (lo + 1 <= hi - 1) CHECK(1 - 2 * binom_cdf(n, (int)lo) < 0.95);
  }
}

static void test_large_n(void) {
  size_t lo, hi;
  double cov;
  stats_median_ci_ranks(100000, 0.95, &lo, &hi, &cov);
  /* normal approximation: n/2 - 1.96 sqrt(n)/2 ~ 49690 */
  CHECK(lo > 49680 && lo < 49700 && hi == 100001 - lo);
  CHECK(cov >= 0.95 && cov < 0.952);
}

static void test_errors(void) {
  stats_summary s;
  double bad[] = {1, NAN, 3};
  CHECK(stats_summarize(bad, 3, 0.95, &s) == SMELT_ERR_INVALID_ARGUMENT);
  double inf[] = {INFINITY};
  CHECK(stats_summarize(inf, 1, 0.95, &s) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(stats_summarize(bad, 0, 0.95, &s) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(stats_summarize(bad, 1, 1.5, &s) == SMELT_ERR_INVALID_ARGUMENT);
}

int main(void) {
  test_one();
  test_odd();
  test_even();
  test_known_ranks();
  test_ranks_optimal();
  test_large_n();
  test_errors();
  return test_report("test_stats");
}
