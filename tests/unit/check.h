/* Minimal test harness: CHECK records failures and keeps going; main returns
 * test_report(). */
#ifndef SMELT_TEST_CHECK_H
#define SMELT_TEST_CHECK_H

#include <stdio.h>

static int check_failures, check_count;

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

static inline int test_report(const char *name) {
  printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
  return check_failures ? 1 : 0;
}

#endif
