/* Strings from a model (node, value, attribute and domain names, op types,
 * attribute values, file paths inside the model) in messages: quoted, with
 * control characters escaped, so that a name holding "\x1b[2J" or a newline
 * cannot clear the user's screen or forge a log line, and cut when long.
 *
 *   err_set(SMELT_ERR_INVALID_MODEL, "value %s is undefined", q(name));
 *
 * gives  value 'a\x1b[2J\n' is undefined.  Escapes: \\ \' \n \t \r, other
 * bytes below 0x20, 0x7f, the C1 controls U+0080..U+009F and bytes that are
 * not valid UTF-8 as \xNN; valid UTF-8 text is kept as it is.  A string longer
 * than QUOTE_MAX bytes is cut there (at a character boundary) and the quote is
 * followed by "...". */
#ifndef SMELT_UTIL_QUOTE_H
#define SMELT_UTIL_QUOTE_H

#include <stdbool.h>
#include <stddef.h>

#define QUOTE_MAX 128
/* Paths are cut later: their tail (the file name) is what tells them apart. */
#define QUOTE_PATH_MAX 400
/* Longest result of q_path(), NUL included: 4 bytes per source byte, the
 * quotes and "...". */
#define QUOTE_BUF (4 * QUOTE_PATH_MAX + 8)

/* s (NULL reads as "") quoted into a per-thread ring of 8 buffers: the result
 * stays valid until the 8th next q/q_n call on the same thread, enough for
 * every argument of one message. */
const char *q(const char *s);
/* The same for n bytes at s (may hold NUL bytes, shown as \x00). */
const char *q_n(const char *s, size_t n);
/* A path (from a model or from the user): cut at QUOTE_PATH_MAX bytes. */
const char *q_path(const char *s);
/* s itself when it is a plain word (0..QUOTE_MAX bytes of printable ASCII
 * other than space, quote and backslash), as op types, domains and most value
 * names are, else q(s): for names shown without quotes, such as the op type
 * in "node 'x' (Conv)" or an output name in smelt run's listing. */
const char *q_ident(const char *s);

/* Quotes n bytes at s into dst (cap bytes, cap >= 8), cutting at max source
 * bytes; returns dst. */
char *str_quote(char *dst, size_t cap, const char *s, size_t n, size_t max);

/* Escapes src (NUL-terminated) into dst (cap bytes) without quotes or cutting
 * at a length (only at cap): as above, but newlines are kept when keep_nl, and
 * backslashes and quotes are left alone.  Used on whole messages, where
 * newlines may be the library's own.  Returns dst. */
char *str_escape_controls(char *dst, size_t cap, const char *src, bool keep_nl);

#endif
