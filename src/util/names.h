/* Enum <-> name tables for the public API's choices (modes, precisions):
 * one lookup instead of a loop per enum. */
#ifndef SMELT_UTIL_NAMES_H
#define SMELT_UTIL_NAMES_H

#include "smelt.h"

/* names[v] for 0 <= v < n, else "unknown". */
const char *names_name(const char *const *names, int n, int v);

/* Sets *out to the index of name in names; else SMELT_ERR_INVALID_ARGUMENT
 * "unknown WHAT 'name': expected a, b or c" (name may be NULL). */
smelt_status names_parse(const char *const *names, int n, const char *what, const char *name, int *out);

#endif
