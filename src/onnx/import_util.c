/* Small helpers shared by the ONNX import files. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "onnx/import_internal.h"
#include "util/err.h"
#include "util/hash.h"

uint64_t imp_file_id_mix(uint64_t id, const struct stat *st) {
  int64_t f[7] = {(int64_t)st->st_dev, (int64_t)st->st_ino, (int64_t)st->st_size,
                  (int64_t)st->st_mtim.tv_sec, (int64_t)st->st_mtim.tv_nsec,
                  (int64_t)st->st_ctim.tv_sec, (int64_t)st->st_ctim.tv_nsec};
  uint64_t h = hash_mix64(hash_bytes(id ^ 0x66696c65ull, f, sizeof f));
  return h ? h : 1;
}

smelt_status imp_bytes(const pb_msg *m, const pb_field *f, const char *what, pb_str *out) {
  const uint8_t *p;
  size_t n;
  TRY(pb_get_bytes(m, f, what, &p, &n));
  out->s = (const char *)p;
  out->n = n;
  return SMELT_OK;
}

smelt_status imp_name(const pb_msg *m, const pb_field *f, const char *what, pb_str *out) {
  TRY(imp_bytes(m, f, what, out));
  if (memchr(out->s, 0, out->n))
    return err_set(SMELT_ERR_INVALID_MODEL, "%s at byte %zu in %s contains a NUL byte", what,
                   f->off, m->type);
  return SMELT_OK;
}

smelt_status imp_strdup(ir_graph *g, pb_str s, const char **out) {
  char *p = arena_strndup(&g->arena, s.s, s.n);
  if (!p) return err_nomem("string", s.n + 1);
  *out = p;
  return SMELT_OK;
}

smelt_status imp_cstr(onnx_imp *c, pb_str s, int slot, const char **out) {
  if (s.n + 1 > c->scratch_cap[slot]) {
    size_t cap = s.n + 1 > 256 ? s.n + 1 : 256;
    char *p = realloc(c->scratch[slot], cap);
    if (!p) return err_nomem("name", cap);
    c->scratch[slot] = p;
    c->scratch_cap[slot] = cap;
  }
  if (s.n) memcpy(c->scratch[slot], s.s, s.n);
  c->scratch[slot][s.n] = 0;
  *out = c->scratch[slot];
  return SMELT_OK;
}

void imp_scratch_free(onnx_imp *c) {
  for (int i = 0; i < 2; i++) {
    free(c->scratch[i]);
    c->scratch[i] = NULL;
    c->scratch_cap[i] = 0;
  }
}

/* Deeply nested errors ("node 'a': attribute 'body': graph 'g': node 'b': ...")
 * can outgrow the message buffer, and err_prefix would then cut off the end,
 * which holds the cause.  Here the middle of the path gives way instead. */
smelt_status imp_prefix(smelt_status code, const char *fmt, ...) {
  char pre[256], tail[SMELT_ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(pre, sizeof pre, fmt, ap);
  va_end(ap);
  const char *old = err_message();
  size_t lp = strlen(pre), lo = strlen(old);
  if (lp + lo < SMELT_ERR_MSG_MAX) return err_prefix(code, "%s", pre);
  size_t keep = SMELT_ERR_MSG_MAX - 1 - lp - 4; /* room for "... " */
  const char *t = old + lo - keep;
  const char *cut = strstr(t, ": "); /* start the kept part at a path boundary */
  if (cut && cut - t < 160) t = cut + 2;
  snprintf(tail, sizeof tail, "%s", t);
  return err_set(code, "%s... %s", pre, tail);
}
