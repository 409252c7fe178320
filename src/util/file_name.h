/* File names made from model strings (smelt run -o DIR writes output NAME as
 * DIR/NAME.npy): safe on any file system and distinct for distinct outputs. */
#ifndef SMELT_UTIL_FILE_NAME_H
#define SMELT_UTIL_FILE_NAME_H

#include <stdbool.h>
#include <stddef.h>

#include "smelt.h"

/* Longest name file_names_safe makes, NUL not counted: room under NAME_MAX
 * (255) for an extension and the temporary and backup suffixes of
 * util/file_set.h. */
#define FILE_NAME_MAX 160

/* One file name per names[i] into out[i] (FILE_NAME_MAX + 1 bytes each):
 *  - bytes other than [A-Za-z0-9._-] become '_' ("a/b" -> "a_b");
 *  - an empty name becomes "_", a leading '.' becomes '_' (no hidden files,
 *    no "." or "..");
 *  - a name longer than FILE_NAME_MAX is cut and ends in '_' and 8 hex digits
 *    of a hash of the whole name;
 *  - names that would come out equal are told apart: the one that needed no
 *    change keeps the name (else the first), the others get "_1", "_2"... in
 *    order, skipping any name another output has as its own — so
 *    ["a/b", "a_b"] gives "a_b_1" and "a_b", ["a/b", "a:b"] "a_b" and "a_b_1".
 * renamed[i] (may be NULL) is set when out[i] got such a suffix. */
smelt_status file_names_safe(int n, const char *const *names, char (*out)[FILE_NAME_MAX + 1], bool *renamed);

#endif
