#include "parallel/run_ctl.h"

#include <math.h>
#include <string.h>
#include <time.h>

#include "util/api_struct.h"
#include "util/err.h"

static _Thread_local run_ctl *current;

run_ctl *run_ctl_enter(run_ctl *c) {
  run_ctl *prev = current;
  current = c;
  return prev;
}

run_ctl *run_ctl_current(void) { return current; }

int64_t run_ctl_now_ns(void) {
  struct timespec t;
#ifdef CLOCK_MONOTONIC_COARSE
  clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
#else
  clock_gettime(CLOCK_MONOTONIC, &t);
#endif
  return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

smelt_status run_ctl_init(run_ctl *c, const smelt_run_options *o, bool *active) {
  memset(c, 0, sizeof *c);
  atomic_init(&c->stop, 0);
  *active = false;
  if (!o) return SMELT_OK;
  smelt_run_options d = smelt_run_options_default();
  /* a caller built against a later header may pass more: its known prefix counts */
  TRY(api_struct_read(o, offsetof(smelt_run_options, cancel) + sizeof d.cancel, sizeof d, &d, "run options",
                      "start from smelt_run_options_default()"));
  if (isnan(d.timeout_s) || d.timeout_s < 0)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "run options: timeout_s must be >= 0 (0 = none), got %g",
                   d.timeout_s);
  c->cancel = d.cancel;
  c->timeout_s = d.timeout_s;
  if (d.timeout_s > 0 && d.timeout_s < 1e9) /* beyond ~30 years: no deadline */
    c->deadline_ns = run_ctl_now_ns() + (int64_t)(d.timeout_s * 1e9);
  *active = c->cancel || c->deadline_ns;
  return SMELT_OK;
}

int run_ctl_poll_slow(run_ctl *c) {
  int s = 0;
  if (c->cancel && __atomic_load_n((const int *)c->cancel, __ATOMIC_RELAXED)) s = SMELT_CANCELLED;
  else if (c->deadline_ns && run_ctl_now_ns() >= c->deadline_ns) s = SMELT_TIMEOUT;
  if (!s) return 0;
  int expect = 0; /* the first stop seen wins */
  if (!atomic_compare_exchange_strong(&c->stop, &expect, s)) s = expect;
  return s;
}

smelt_status run_ctl_check(run_ctl *c, smelt_status s) {
  if (!c || s == SMELT_CANCELLED || s == SMELT_TIMEOUT) return s;
  int stop = run_ctl_poll(c);
  if (!stop) return s;
  if (stop == SMELT_CANCELLED) return err_set(SMELT_CANCELLED, "cancelled: the run's cancel flag was set");
  return err_set(SMELT_TIMEOUT, "timeout: the run took longer than its %g s limit", c->timeout_s);
}

smelt_run_options smelt_run_options_default(void) {
  smelt_run_options o = {.struct_size = sizeof(smelt_run_options), .timeout_s = 0, .cancel = NULL};
  return o;
}
