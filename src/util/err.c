#include "util/err.h"

#include "util/quote.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/bufcache.h"
#include "util/membudget.h"

static _Thread_local char err_buf[SMELT_ERR_MSG_MAX];

/* Model strings reach messages quoted (util/quote.h); this is the safety net
 * for any that do not: no control character but the library's own newlines
 * (ESC, CR, ...) is ever stored in the message. */
static void set_clean(const char *msg) { str_escape_controls(err_buf, sizeof err_buf, msg, true); }

smelt_status err_set(smelt_status code, const char *fmt, ...) {
  char msg[SMELT_ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  set_clean(msg);
  return code;
}

smelt_status err_prefix(smelt_status code, const char *fmt, ...) {
  char raw[SMELT_ERR_MSG_MAX], pre[SMELT_ERR_MSG_MAX], old[SMELT_ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  str_escape_controls(pre, sizeof pre, raw, true);
  memcpy(old, err_buf, sizeof old);
  size_t n = strlen(pre);
  if (n >= sizeof err_buf) n = sizeof err_buf - 1;
  memcpy(err_buf, pre, n);
  size_t m = strnlen(old, sizeof old - 1);
  if (m > sizeof err_buf - 1 - n) m = sizeof err_buf - 1 - n;
  memcpy(err_buf + n, old, m);
  err_buf[n + m] = 0;
  return code;
}

const char *err_message(void) { return err_buf; }
void err_clear(void) { err_buf[0] = 0; }

static _Thread_local struct {
  size_t asked, in_use, budget;
} refusal;

void err_budget_refused(size_t asked, size_t in_use, size_t budget) {
  refusal.asked = asked;
  refusal.in_use = in_use;
  refusal.budget = budget;
}

void err_budget_clear(void) { refusal.asked = 0; }

smelt_status err_nomem(const char *what, size_t bytes) {
  size_t in_use, budget; /* the cache's record of a refusal on another thread (or this one) */
  if (bytes && bufcache_refusal(bytes, &in_use, &budget) && !refusal.asked)
    refusal.asked = bytes, refusal.in_use = in_use, refusal.budget = budget;
  if (refusal.asked) {
    char a[32], u[32], b[32];
    membudget_fmt(a, sizeof a, bytes && bytes <= refusal.asked ? bytes : refusal.asked);
    membudget_fmt(b, sizeof b, refusal.budget);
    char used[64] = "";
    if (refusal.in_use >= ((size_t)1 << 20))
      snprintf(used, sizeof used, " with %s in use", membudget_fmt(u, sizeof u, refusal.in_use));
    refusal.asked = 0;
    return err_set(SMELT_ERR_NOMEM, "%s needs %s%s, over the memory budget of %s (--max-memory)", what, a,
                   used, b);
  }
  return err_set(SMELT_ERR_NOMEM, "out of memory allocating %zu bytes for %s", bytes, what);
}

const char *smelt_last_error(void) { return err_buf; }

const char *smelt_status_name(smelt_status s) {
  switch (s) {
    case SMELT_OK: return "ok";
    case SMELT_ERR_INVALID_ARGUMENT: return "invalid argument";
    case SMELT_ERR_INVALID_MODEL: return "invalid model";
    case SMELT_ERR_UNSUPPORTED: return "unsupported";
    case SMELT_ERR_IO: return "i/o error";
    case SMELT_ERR_NOMEM: return "out of memory";
    case SMELT_ERR_RUNTIME: return "runtime error";
    case SMELT_ERR_INTERNAL: return "internal error";
    case SMELT_CANCELLED: return "cancelled";
    case SMELT_TIMEOUT: return "timeout";
  }
  return "unknown status";
}
