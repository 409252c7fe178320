/* Error reporting.  Internal functions return a smelt_status; on failure they
 * first record a message with err_set.  Callers add context ("node 'X' (Conv): ")
 * with err_prefix as the error travels up.  The message buffer is per thread,
 * like errno, so concurrent runs on one session do not clobber each other. */
#ifndef SMELT_UTIL_ERR_H
#define SMELT_UTIL_ERR_H

#include "smelt.h"

#define SMELT_ERR_MSG_MAX 1024

smelt_status err_set(smelt_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prepends context to the current message; returns code unchanged. */
smelt_status err_prefix(smelt_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
const char *err_message(void);
void err_clear(void);

/* Allocation failure shorthand: records what could not be allocated.  When
 * the allocation failed because the session's memory budget refused it
 * (err_budget_refused on this thread since its last allocation), the message
 * says so: "WHAT needs 22.4 GiB, over the memory budget of 17.6 GiB (--max-memory)". */
smelt_status err_nomem(const char *what, size_t bytes);

/* The allocator (util/bufcache.c) records a refusal: asked bytes would take
 * the in_use bytes past budget.  err_budget_clear forgets it (each new
 * allocation does, so a stale refusal never colours a later failure). */
void err_budget_refused(size_t asked, size_t in_use, size_t budget);
void err_budget_clear(void);

#define TRY(expr)                          \
  do {                                     \
    smelt_status try_s_ = (expr);          \
    if (try_s_ != SMELT_OK) return try_s_; \
  } while (0)

#endif
