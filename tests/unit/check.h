/* Minimal test harness: CHECK records failures and keeps going; main returns
 * test_report().  A part that cannot run because its data (../shared) or a
 * tool it needs is missing calls test_skip: the test then exits 77 (ctest:
 * skipped, SKIP_RETURN_CODE) instead of passing, unless a check failed. */
#ifndef SMELT_TEST_CHECK_H
#define SMELT_TEST_CHECK_H

#include <stdio.h>

static int check_failures, check_count, check_skips;

#define CHECK(cond)                                                    \
  do {                                                                 \
    check_count++;                                                     \
    if (!(cond)) {                                                     \
      check_failures++;                                                \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                  \
  } while (0)

#define CHECK_OK(expr)                                                              \
  do {                                                                              \
    check_count++;                                                                  \
    smelt_status check_s_ = (expr);                                                 \
    if (check_s_ != SMELT_OK) {                                                     \
      check_failures++;                                                             \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr, smelt_last_error()); \
    }                                                                               \
  } while (0)

/* Records that part of test `name` did not run, and why. */
static inline void test_skip(const char *name, const char *why) {
  check_skips++;
  printf("%s: SKIP: %s\n", name, why);
}

/* 1 if a check failed, else 77 if a part was skipped, else 0. */
static inline int test_report(const char *name) {
  printf("%s: %d checks, %d failed%s\n", name, check_count, check_failures,
         check_skips ? ", parts skipped (exit 77)" : "");
  return check_failures ? 1 : check_skips ? 77 : 0;
}

#endif
