/* The versioned structs of the public API (include/smelt.h): each starts with
 * size_t struct_size, the caller's sizeof.  Layouts only grow at the end, so
 * a caller built against an older or newer header shares a prefix with this
 * library; these two copy exactly that prefix. */
#ifndef SMELT_UTIL_API_STRUCT_H
#define SMELT_UTIL_API_STRUCT_H

#include <stddef.h>

#include "smelt.h"

/* A struct the caller passes in: given->struct_size below v1 (the first
 * released layout) is refused, naming what and hint; otherwise the first
 * min(struct_size, known) bytes of given are copied over dst (which holds the
 * defaults) and dst's struct_size is set to known. */
smelt_status api_struct_read(const void *given, size_t v1, size_t known, void *dst, const char *what,
                             const char *hint);

/* A struct the library fills: out->struct_size below v1 is refused; then
 * the first min(struct_size, known) bytes of src are copied into out, the
 * bytes from known up to struct_size are zeroed, and out->struct_size keeps
 * the caller's value.  Nothing past out->struct_size is written. */
smelt_status api_struct_write(void *out, const void *src, size_t v1, size_t known, const char *what,
                              const char *hint);

#endif
