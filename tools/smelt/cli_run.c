/* Runs under the CLI's --timeout (the deadline of smelt_run_options). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "parallel/run_ctl.h"
#include "session/session.h"

bool cli_timeout_flag(int argc, char **argv, int *i, double *timeout_s, bool *bad) {
  const char *v;
  if (!cli_flag_arg(argc, argv, i, "--timeout", &v)) return false;
  if (!v || !cli_double("--timeout", v, timeout_s)) {
    *bad = true;
  } else if (!(*timeout_s > 0)) {
    fprintf(stderr, "smelt: --timeout expects seconds > 0, got '%s'\n", v);
    *bad = true;
  }
  return true;
}

smelt_status cli_session_run(smelt_session *s, tensor *const *inputs, tensor *outputs,
                             eager_stats *stats, double timeout_s) {
  smelt_run_options o = smelt_run_options_default();
  o.timeout_s = timeout_s;
  run_ctl ctl;
  bool active = false;
  smelt_status st = run_ctl_init(&ctl, &o, &active);
  if (st) return st;
  run_ctl *prev = run_ctl_enter(active ? &ctl : NULL);
  st = session_run_tensors(s, inputs, outputs, stats);
  run_ctl_enter(prev);
  return st;
}
