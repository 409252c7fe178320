#include "util/env.h"

#include <stdlib.h>
#include <string.h>

extern char **environ;

/* Where name's answer came from.  Found: environ[idx] held entry
 * ("name=value").  Absent: the array had idx entries, the last one `entry`
 * (NULL when empty).  setenv of a new name appends (the slot at idx is then
 * no longer NULL, or the array moved), unsetenv shifts later entries down
 * (the slot at idx, or at idx - 1, changes), setenv or putenv of a present
 * name replaces its slot's pointer: each leaves a remembered answer failing
 * its check. */
typedef struct env_memo {
  const char *hint; /* the address the name was last asked at (checked against name) */
  char name[48];
  char **base;
  size_t idx;
  const char *entry;
  const char *value;
} env_memo;

enum { ENV_MEMOS = 48 };
static _Thread_local env_memo memos[ENV_MEMOS];
static _Thread_local int n_memos, next_memo;

static bool memo_valid(const env_memo *m) {
  char **e = environ;
  if (e != m->base || !e) return false;
  if (m->value) return e[m->idx] == m->entry;
  return !e[m->idx] && (m->idx == 0 ? !m->entry : e[m->idx - 1] == m->entry);
}

static void memo_fill(env_memo *m, const char *name, size_t len) {
  char **e = environ;
  size_t i = 0;
  memcpy(m->name, name, len + 1);
  m->hint = name, m->base = e, m->value = NULL, m->entry = NULL, m->idx = 0;
  if (!e) return;
  for (; e[i]; i++)
    if (!strncmp(e[i], name, len) && e[i][len] == '=') {
      m->idx = i, m->entry = e[i], m->value = e[i] + len + 1;
      return;
    }
  m->idx = i, m->entry = i ? e[i - 1] : NULL;
}

const char *env_get(const char *name) {
  if (!name) return NULL;
  env_memo *m = NULL;
  /* a name asked at the same address as last time (a literal): the common case */
  for (int i = 0; i < n_memos && !m; i++)
    if (memos[i].hint == name && !strcmp(memos[i].name, name)) m = &memos[i];
  size_t len = 0;
  if (!m) { /* the name's text: only names a memo can hold */
    len = strnlen(name, sizeof memos[0].name);
    if (!len || len == sizeof memos[0].name || strchr(name, '=')) return getenv(name);
    for (int i = 0; i < n_memos && !m; i++)
      if (!strcmp(memos[i].name, name)) m = &memos[i];
  }
  if (m && memo_valid(m)) {
    m->hint = name;
    return m->value;
  }
  if (m) len = strlen(m->name);
  else { /* a new name: the next free memo, else the one taken longest ago */
    if (n_memos < ENV_MEMOS) m = &memos[n_memos++];
    else m = &memos[next_memo], next_memo = (next_memo + 1) % ENV_MEMOS;
  }
  memo_fill(m, name, len);
  return m->value;
}

bool env_flag_on(const char *name) {
  const char *v = env_get(name);
  return !v || !*v || (strcmp(v, "0") && strcmp(v, "off") && strcmp(v, "no"));
}
