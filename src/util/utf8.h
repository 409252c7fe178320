/* UTF-8 decoding and encoding shared by the JSON reader and writer and the
 * tokenizer. */
#ifndef SMELT_UTIL_UTF8_H
#define SMELT_UTIL_UTF8_H

#include <stddef.h>
#include <stdint.h>

#define UTF8_BAD 0xFFFFFFFFu

/* Decodes the character at s (n >= 1 bytes available) and returns the bytes
 * it takes, with the code point in *cp.  Bytes that are not valid UTF-8
 * (overlongs, surrogates, above U+10FFFF, cut short) give *cp = UTF8_BAD and
 * the length of the maximal invalid subpart, at least 1: Unicode's
 * "substitution of maximal subparts", as Rust's String::from_utf8_lossy and
 * Python's errors="replace" count them. */
size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp);

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if invalid. */
static inline size_t utf8_valid_len(const unsigned char *s, size_t n) {
  uint32_t cp;
  size_t k = utf8_next(s, n, &cp);
  return cp == UTF8_BAD ? 0 : k;
}

/* Writes cp (<= U+10FFFF, not a surrogate) as UTF-8 into out; returns its length (1-4). */
size_t utf8_encode(uint32_t cp, char out[4]);

/* Offset of the first byte that is not valid UTF-8 in s[0..n), or n if all is. */
size_t utf8_check(const char *s, size_t n);

#endif
