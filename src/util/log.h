/* The library's messages (warnings, progress) go to the log callback of the
 * session's options (smelt_session_options.log), never to stderr on their
 * own.  A logger is a copy of those three fields, kept where the message is
 * written (session compiler, prepared-weight store, autotuner's options). */
#ifndef SMELT_UTIL_LOG_H
#define SMELT_UTIL_LOG_H

#include "smelt.h"

typedef struct smelt_logger {
  smelt_log_fn fn; /* NULL: messages are dropped */
  void *user;
  smelt_log_level level; /* messages up to this level pass */
} smelt_logger;

/* Formats one message and hands it to lg->fn when lg, lg->fn are set and
 * level <= lg->level.  Messages longer than 1 KiB are cut. */
void log_msg(const smelt_logger *lg, smelt_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* $SMELT_LOG_LEVEL (error, warning, info, debug or 0..3) into *level when it
 * is set and not empty; another value is SMELT_ERR_INVALID_ARGUMENT. */
smelt_status log_level_from_env(smelt_log_level *level);

#endif
