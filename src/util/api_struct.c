#include "util/api_struct.h"

#include <string.h>

#include "util/err.h"

static smelt_status size_of(const void *p, size_t v1, const char *what, const char *hint, size_t *out) {
  if (!p) return err_set(SMELT_ERR_INVALID_ARGUMENT, "%s: NULL", what);
  memcpy(out, p, sizeof *out); /* the first field, whatever the layout */
  if (*out < v1)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "%s: struct_size is %zu, expected at least %zu (%s)", what, *out,
                   v1, hint);
  return SMELT_OK;
}

smelt_status api_struct_read(const void *given, size_t v1, size_t known, void *dst, const char *what,
                             const char *hint) {
  size_t n = 0;
  TRY(size_of(given, v1, what, hint, &n));
  memcpy(dst, given, n < known ? n : known);
  memcpy(dst, &known, sizeof known);
  return SMELT_OK;
}

smelt_status api_struct_write(void *out, const void *src, size_t v1, size_t known, const char *what,
                              const char *hint) {
  size_t n = 0;
  TRY(size_of(out, v1, what, hint, &n));
  if (n > sizeof n) memcpy((char *)out + sizeof n, (const char *)src + sizeof n, (n < known ? n : known) - sizeof n);
  if (n > known) memset((char *)out + known, 0, n - known);
  return SMELT_OK;
}
