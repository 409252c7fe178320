#include "util/utf8.h"

size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
  unsigned c = s[0];
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t len;
  uint32_t v;
  unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
  if (c >= 0xC2 && c <= 0xDF) len = 2, v = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF) {
    len = 3, v = c & 0x0F;
    if (c == 0xE0) lo = 0xA0;      /* no overlongs */
    else if (c == 0xED) hi = 0x9F; /* no surrogates */
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4, v = c & 0x07;
    if (c == 0xF0) lo = 0x90;      /* no overlongs */
    else if (c == 0xF4) hi = 0x8F; /* nothing above U+10FFFF */
  } else {
    *cp = UTF8_BAD;
    return 1;
  }
  for (size_t i = 1; i < len; i++) {
    unsigned b = i < n ? s[i] : 0;
    unsigned blo = i == 1 ? lo : 0x80, bhi = i == 1 ? hi : 0xBF;
    if (i >= n || b < blo || b > bhi) {
      *cp = UTF8_BAD;
      return i;
    }
    v = (v << 6) | (b & 0x3F);
  }
  *cp = v;
  return len;
}

size_t utf8_encode(uint32_t cp, char out[4]) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

size_t utf8_check(const char *str, size_t n) {
  const unsigned char *s = (const unsigned char *)str;
  size_t i = 0;
  while (i < n) {
    if (s[i] < 0x80) {
      i++;
      continue;
    }
    uint32_t cp;
    size_t k = utf8_next(s + i, n - i, &cp);
    if (cp == UTF8_BAD) return i;
    i += k;
  }
  return n;
}
