#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/quote.h"

void log_msg(const smelt_logger *lg, smelt_log_level level, const char *fmt, ...) {
  if (!lg || !lg->fn || level > lg->level) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  lg->fn(level, msg, lg->user);
}

smelt_status log_level_from_env(smelt_log_level *level) {
  static const char *const names[] = {"error", "warning", "info", "debug"};
  const char *v = getenv("SMELT_LOG_LEVEL");
  if (!v || !*v) return SMELT_OK;
  for (int i = 0; i < 4; i++)
    if (!strcmp(v, names[i]) || (v[0] == '0' + i && !v[1])) {
      *level = (smelt_log_level)i;
      return SMELT_OK;
    }
  return err_set(SMELT_ERR_INVALID_ARGUMENT, "SMELT_LOG_LEVEL is %s; expected error, warning, info or debug (or 0..3)",
                 q(v));
}

void smelt_log_stderr(smelt_log_level level, const char *message, void *user) {
  (void)user;
  const char *tag = level == SMELT_LOG_ERROR ? "error: " : level == SMELT_LOG_WARNING ? "warning: " : "";
  fprintf(stderr, "smelt: %s%s\n", tag, message ? message : "");
}
