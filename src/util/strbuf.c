/* See strbuf.h. */
#include "util/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sb_vprintf(strbuf *b, const char *fmt, va_list ap) {
  if (b->oom) return;
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) {
    b->oom = true;
    return;
  }
  if (b->len + (size_t)n + 1 > b->cap) {
    size_t nc = b->cap ? b->cap * 2 : 4096;
    while (nc < b->len + (size_t)n + 1) nc *= 2;
    char *ns = realloc(b->s, nc);
    if (!ns) {
      b->oom = true;
      return;
    }
    b->s = ns;
    b->cap = nc;
  }
  vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
  b->len += (size_t)n;
}

void sb_printf(strbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(b, fmt, ap);
  va_end(ap);
}

void sb_free(strbuf *b) {
  free(b->s);
  memset(b, 0, sizeof *b);
}
