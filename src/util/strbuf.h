/* A growing string buffer for reports and generated text: sb_printf
 * appends; a failed allocation sets oom and makes later appends no-ops (the
 * caller checks oom once at the end).  Zero-initialize; sb_free releases. */
#ifndef SMELT_UTIL_STRBUF_H
#define SMELT_UTIL_STRBUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct strbuf {
  char *s;
  size_t len, cap;
  bool oom;
} strbuf;

void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_vprintf(strbuf *b, const char *fmt, va_list ap);
void sb_free(strbuf *b);

#endif
