/* The versioned structs of the public API and the log callback:
 * - smelt_session_options / smelt_session_stats carry struct_size: below the
 *   first released layout is refused with a message; a newer caller's bigger
 *   struct is read up to the known fields (options) or filled up to them with
 *   zeros after (stats), and nothing past struct_size is ever written;
 * - the library's warnings go to smelt_session_options.log, filtered by
 *   log_level and $SMELT_LOG_LEVEL, and nowhere (not stderr) without one. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "smelt.h"
#include "util/api_struct.h"

#ifndef SMELT_SOURCE_DIR
#define SMELT_SOURCE_DIR "."
#endif

static const char *const MLP = SMELT_SOURCE_DIR "/models/mlp/model.onnx";

/* ---- struct_size ---- */

static void options_size(smelt_model *m) {
  smelt_session_options o = smelt_session_options_default();
  CHECK(o.struct_size == sizeof o && o.log == NULL && o.log_level == SMELT_LOG_INFO && o.recompile_limit == 8);
  smelt_session *s = NULL;
  o.struct_size = 0; /* a caller that did not start from the defaults */
  CHECK(smelt_session_create(m, &o, &s) == SMELT_ERR_INVALID_ARGUMENT && !s);
  CHECK(strstr(smelt_last_error(), "session options: struct_size is 0") != NULL);
  o.struct_size = offsetof(smelt_session_options, log_level); /* short of the first released layout */
  CHECK(smelt_session_create(m, &o, &s) == SMELT_ERR_INVALID_ARGUMENT && !s);
  /* a caller built against a later header: more fields after ours, ignored */
  struct {
    smelt_session_options o;
    char later[64];
  } big;
  memset(&big, 0x5a, sizeof big);
  big.o = smelt_session_options_default();
  big.o.struct_size = sizeof big;
  big.o.threads = 1;
  CHECK_OK(smelt_session_create(m, &big.o, &s));
  smelt_session_free(s);
}

static void stats_size(smelt_model *m) {
  smelt_session *s = NULL;
  CHECK_OK(smelt_session_create(m, NULL, &s));
  if (!s) return;
  smelt_session_stats st;
  memset(&st, 0, sizeof st);
  CHECK(smelt_session_get_stats(s, &st) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(smelt_last_error(), "session stats: struct_size is 0") != NULL);
  /* exact size, with a canary after it: the canary is not written */
  struct {
    smelt_session_stats st;
    unsigned char canary[32];
  } a;
  memset(&a, 0xab, sizeof a);
  a.st.struct_size = sizeof a.st;
  CHECK_OK(smelt_session_get_stats(s, &a.st));
  CHECK(a.st.struct_size == sizeof a.st && a.st.compiles == 0 && a.st.arena_bytes == 0 && a.st.prepared_saved == 0);
  for (size_t i = 0; i < sizeof a.canary; i++) CHECK(a.canary[i] == 0xab);
  /* a newer caller: its fields past ours come back zero; past its size nothing */
  struct {
    smelt_session_stats st;
    unsigned char later[16];
    unsigned char canary[16];
  } b;
  memset(&b, 0xab, sizeof b);
  b.st.struct_size = offsetof(__typeof__(b), canary);
  CHECK_OK(smelt_session_get_stats(s, &b.st));
  CHECK(b.st.struct_size == offsetof(__typeof__(b), canary) && b.st.compiles == 0);
  for (size_t i = 0; i < sizeof b.later; i++) CHECK(b.later[i] == 0);
  for (size_t i = 0; i < sizeof b.canary; i++) CHECK(b.canary[i] == 0xab);
  smelt_session_free(s);
}

/* The copy rules on a made-up layout that has grown: v1 = 16 bytes, this
 * library knows 32, callers of 16, 24 and 40 bytes. */
typedef struct grown {
  size_t struct_size;
  uint64_t a, b, c;
} grown;

static void struct_helpers(void) {
  grown src = {sizeof src, 1, 2, 3}, dst;
  unsigned char buf[48];
  for (size_t n = 0; n <= 40; n += 8) {
    memset(buf, 0xee, sizeof buf);
    memcpy(buf, &n, sizeof n);
    smelt_status st = api_struct_write(buf, &src, 16, sizeof src, "grown", "hint");
    CHECK((st == SMELT_OK) == (n >= 16));
    size_t back;
    memcpy(&back, buf, sizeof back);
    CHECK(back == n);
    for (size_t i = 8; n >= 16 && i < sizeof buf; i++) {
      unsigned char want = i >= n ? 0xee : i >= sizeof src ? 0 : ((unsigned char *)&src)[i];
      CHECK(buf[i] == want);
    }
    /* read: the defaults stay where the caller's struct ends */
    grown d = {sizeof d, 7, 8, 9};
    memset(buf, 0, sizeof buf);
    memcpy(buf, &n, sizeof n);
    buf[8] = 1, buf[16] = 2, buf[24] = 3, buf[32] = 4;
    st = api_struct_read(buf, 16, sizeof d, &d, "grown", "hint");
    CHECK((st == SMELT_OK) == (n >= 16));
    if (st == SMELT_OK)
      CHECK(d.struct_size == sizeof d && d.a == 1 && d.b == (n >= 24 ? 2u : 8u) && d.c == (n >= 32 ? 3u : 9u));
    else
      CHECK(strstr(smelt_last_error(), "grown: struct_size") && strstr(smelt_last_error(), "hint"));
  }
  CHECK(api_struct_read(NULL, 16, sizeof dst, &dst, "grown", "hint") == SMELT_ERR_INVALID_ARGUMENT);
}

/* ---- the log callback ---- */

typedef struct log_seen {
  int n;
  smelt_log_level level;
  char last[1024];
} log_seen;

static void record(smelt_log_level level, const char *msg, void *user) {
  log_seen *l = user;
  l->n++;
  l->level = level;
  snprintf(l->last, sizeof l->last, "%s", msg);
}

/* A compiled-mode session whose cache_dir is a file: "compile cache off" is
 * a warning.  dynamic: nothing is compiled at creation. */
static smelt_status warned_session(smelt_model *m, smelt_log_fn fn, log_seen *seen, smelt_log_level lvl) {
  smelt_session_options o = smelt_session_options_default();
  o.mode = SMELT_MODE_DEFAULT;
  o.dynamic = 1;
  o.cache_dir = MLP; /* a file, not a directory */
  o.log = fn;
  o.log_user = seen;
  o.log_level = lvl;
  smelt_session *s = NULL;
  smelt_status st = smelt_session_create(m, &o, &s);
  smelt_session_free(s);
  return st;
}

static void log_callback(smelt_model *m) {
  unsetenv("SMELT_LOG_LEVEL");
  unsetenv("SMELT_CACHE");
  log_seen seen = {0};
  CHECK_OK(warned_session(m, record, &seen, SMELT_LOG_INFO));
  CHECK(seen.n == 1 && seen.level == SMELT_LOG_WARNING);
  CHECK(strstr(seen.last, "compile cache off") && strstr(seen.last, "not a directory"));
  CHECK(!strchr(seen.last, '\n') && strncmp(seen.last, "smelt:", 6));
  /* below the threshold: dropped */
  memset(&seen, 0, sizeof seen);
  CHECK_OK(warned_session(m, record, &seen, SMELT_LOG_ERROR));
  CHECK(seen.n == 0);
  /* $SMELT_LOG_LEVEL overrides the option */
  setenv("SMELT_LOG_LEVEL", "warning", 1);
  CHECK_OK(warned_session(m, record, &seen, SMELT_LOG_ERROR));
  CHECK(seen.n == 1);
  setenv("SMELT_LOG_LEVEL", "loud", 1);
  CHECK(warned_session(m, record, &seen, SMELT_LOG_INFO) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(smelt_last_error(), "SMELT_LOG_LEVEL") && strstr(smelt_last_error(), "loud"));
  unsetenv("SMELT_LOG_LEVEL");
  CHECK(warned_session(m, record, &seen, (smelt_log_level)7) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(smelt_last_error(), "log_level") != NULL);
}

/* Without a callback the library is silent: stderr stays empty. */
static void silent_by_default(smelt_model *m) {
  fflush(stderr);
  FILE *tmp = tmpfile();
  int saved = dup(2);
  if (!tmp || saved < 0) {
    CHECK(!"cannot redirect stderr");
    return;
  }
  dup2(fileno(tmp), 2);
  smelt_status st = warned_session(m, NULL, NULL, SMELT_LOG_DEBUG);
  fflush(stderr);
  long written = lseek(fileno(tmp), 0, SEEK_END);
  /* smelt_log_stderr, installed, writes one line */
  smelt_status st2 = warned_session(m, smelt_log_stderr, NULL, SMELT_LOG_INFO);
  fflush(stderr);
  long after = lseek(fileno(tmp), 0, SEEK_END);
  char line[512] = "";
  if (pread(fileno(tmp), line, sizeof line - 1, written) < 0) line[0] = 0;
  dup2(saved, 2);
  close(saved);
  fclose(tmp);
  CHECK_OK(st);
  CHECK_OK(st2);
  CHECK(written == 0);
  CHECK(after > written && !strncmp(line, "smelt: warning: compile cache off", 33));
  CHECK(strchr(line, '\n') == line + (after - written) - 1);
}

int main(void) {
  smelt_model *m = NULL;
  CHECK_OK(smelt_model_load(MLP, &m));
  if (m) {
    options_size(m);
    stats_size(m);
    log_callback(m);
    silent_by_default(m);
  }
  struct_helpers();
  smelt_model_free(m);
  return test_report("test_api");
}
