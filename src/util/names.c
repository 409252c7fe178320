/* Enum <-> name tables (see names.h). */
#include "util/names.h"

#include <string.h>

#include "util/err.h"
#include "util/quote.h"
#include "util/strbuf.h"

const char *names_name(const char *const *names, int n, int v) { return v >= 0 && v < n ? names[v] : "unknown"; }

smelt_status names_parse(const char *const *names, int n, const char *what, const char *name, int *out) {
  for (int i = 0; name && i < n; i++)
    if (!strcmp(name, names[i])) {
      *out = i;
      return SMELT_OK;
    }
  strbuf sb = {0};
  for (int i = 0; i < n; i++) sb_printf(&sb, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", names[i]);
  smelt_status st = err_set(SMELT_ERR_INVALID_ARGUMENT, "unknown %s %s: expected %s", what,
                            q(name ? name : "(null)"), sb.s && !sb.oom ? sb.s : "");
  sb_free(&sb);
  return st;
}
