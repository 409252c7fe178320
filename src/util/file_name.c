#include "util/file_name.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/hash.h"

static bool safe_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-';
}

/* The name before telling duplicates apart; leaves room for a suffix. */
static void base_name(const char *name, char *out, size_t room) {
  size_t len = strlen(name), o = 0;
  size_t keep = len <= room ? len : room - 9;
  for (size_t i = 0; i < keep; i++) out[o++] = safe_char(name[i]) ? name[i] : '_';
  if (keep < len)
    o += (size_t)snprintf(out + o, 10, "_%08x", (unsigned)hash_bytes(HASH_SEED, name, len));
  if (o == 0) out[o++] = '_';
  if (out[0] == '.') out[0] = '_';
  out[o] = 0;
}

smelt_status file_names_safe(int n, const char *const *names, char (*out)[FILE_NAME_MAX + 1], bool *renamed) {
  /* bases: room for "_" and up to 10 digits of a suffix */
  const size_t room = FILE_NAME_MAX - 11;
  for (int i = 0; i < n; i++) {
    base_name(names[i] ? names[i] : "", out[i], room);
    if (renamed) renamed[i] = false;
  }
  bool *dup = calloc((size_t)n + 1, sizeof *dup);
  if (!dup) return err_nomem("file names", (size_t)n + 1);
  /* Of outputs with equal names, the one whose name needed no change keeps it
   * (else the first); every other output's own name stays reserved. */
  for (int i = 0; i < n; i++) {
    bool exact_i = names[i] && !strcmp(names[i], out[i]);
    for (int j = 0; j < n && !dup[i]; j++) {
      if (j == i || strcmp(out[i], out[j])) continue;
      bool exact_j = names[j] && !strcmp(names[j], out[j]);
      dup[i] = exact_j > exact_i || (exact_j == exact_i && j < i);
    }
  }
  for (int i = 0; i < n; i++) {
    if (!dup[i]) continue;
    char cand[FILE_NAME_MAX + 1];
    for (unsigned k = 1;; k++) {
      snprintf(cand, sizeof cand, "%s_%u", out[i], k);
      bool used = false;
      for (int j = 0; j < n && !used; j++) used = j != i && (!dup[j] || j < i) && !strcmp(out[j], cand);
      if (!used) break;
    }
    memcpy(out[i], cand, sizeof cand);
    if (renamed) renamed[i] = true;
  }
  free(dup);
  return SMELT_OK;
}
