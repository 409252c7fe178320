#include "util/quote.h"

#include <string.h>

/* Length of the valid UTF-8 sequence of 2..4 bytes at p (n bytes left), or 0
 * when p[0] does not start one that may be shown as it is: invalid, overlong,
 * a surrogate, a C1 control (U+0080..U+009F) or a bidirectional override
 * (U+202A..U+202E, U+2066..U+2069), which reorders the text around it. */
static size_t utf8_len(const unsigned char *p, size_t n) {
  unsigned c = p[0];
  size_t len;
  if (c >= 0xc2 && c <= 0xdf) len = 2;
  else if (c >= 0xe0 && c <= 0xef) len = 3;
  else if (c >= 0xf0 && c <= 0xf4) len = 4;
  else return 0;
  if (len > n) return 0;
  for (size_t i = 1; i < len; i++)
    if ((p[i] & 0xc0) != 0x80) return 0;
  if ((c == 0xc2 && p[1] < 0xa0) || (c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0) ||
      (c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90))
    return 0;
  if (c == 0xe2 && ((p[1] == 0x80 && p[2] >= 0xaa && p[2] <= 0xae) ||
                    (p[1] == 0x81 && p[2] >= 0xa6 && p[2] <= 0xa9)))
    return 0;
  return len;
}

enum { ESC_QUOTES = 1, ESC_KEEP_NL = 2 };

/* Escapes s[0..n) into dst[*o..cap-1) (always NUL-terminated), stopping before
 * a character whose escaped form does not fit or once max source bytes are
 * used.  Returns the number of source bytes consumed. */
static size_t escape(char *dst, size_t cap, size_t *o, const char *s, size_t n, size_t max, int flags) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0;
  while (i < n && i < max) {
    char e[4 * 4];
    size_t k = 0, used = 1;
    unsigned c = p[i];
    if (c >= 0x80) {
      size_t len = utf8_len(p + i, n - i);
      if (len && i + len <= max) {
        memcpy(e, p + i, len);
        k = used = len;
      } else if (len) {
        break; /* a character that would cross the cut */
      }
    } else if (c >= 0x20 && c != 0x7f && !((flags & ESC_QUOTES) && (c == '\\' || c == '\''))) {
      e[k++] = (char)c;
    } else if (c == '\n' && (flags & ESC_KEEP_NL)) {
      e[k++] = '\n';
    } else if ((flags & ESC_QUOTES) && (c == '\\' || c == '\'')) {
      e[k++] = '\\', e[k++] = (char)c;
    } else if (c == '\n' || c == '\t' || c == '\r') {
      e[k++] = '\\', e[k++] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
    }
    if (k == 0) { /* anything else: \xNN */
      e[k++] = '\\', e[k++] = 'x', e[k++] = hex[c >> 4], e[k++] = hex[c & 15];
    }
    if (*o + k + 1 > cap) break;
    memcpy(dst + *o, e, k);
    *o += k;
    i += used;
  }
  dst[*o] = 0;
  return i;
}

char *str_quote(char *dst, size_t cap, const char *s, size_t n, size_t max) {
  if (!s) n = 0;
  size_t o = 0;
  dst[o++] = '\'';
  /* room for the closing quote and "..." */
  size_t used = escape(dst, cap - 4, &o, s, n, max, ESC_QUOTES);
  dst[o++] = '\'';
  if (used < n) memcpy(dst + o, "...", 3), o += 3;
  dst[o] = 0;
  return dst;
}

static _Thread_local char ring[8][QUOTE_BUF];
static _Thread_local unsigned ring_next;

const char *q_n(const char *s, size_t n) {
  char *b = ring[ring_next++ % 8];
  return str_quote(b, QUOTE_BUF, s, n, QUOTE_MAX);
}

const char *q(const char *s) { return q_n(s, s ? strlen(s) : 0); }

const char *q_path(const char *s) {
  char *b = ring[ring_next++ % 8];
  return str_quote(b, QUOTE_BUF, s, s ? strlen(s) : 0, QUOTE_PATH_MAX);
}

const char *q_ident(const char *s) {
  size_t n = 0;
  for (; s && s[n] && n <= QUOTE_MAX; n++) {
    unsigned char c = (unsigned char)s[n];
    if (c <= ' ' || c >= 0x7f || c == '\'' || c == '\\') return q(s);
  }
  return n <= QUOTE_MAX ? s ? s : "" : q(s);
}

char *str_escape_controls(char *dst, size_t cap, const char *src, bool keep_nl) {
  size_t o = 0;
  escape(dst, cap, &o, src ? src : "", src ? strlen(src) : 0, (size_t)-1, keep_nl ? ESC_KEEP_NL : 0);
  return dst;
}
