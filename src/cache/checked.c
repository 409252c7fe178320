/* Entries already checked (see checked.h). */
#include "cache/checked.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "util/hash.h"

/* ---- in this process: a direct-mapped table; an entry pushed out is
 * simply checked again ---- */
#define CHECKED_SLOTS 1024

typedef struct checked {
  uint64_t id; /* hash of key and kind; 0: empty */
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtim, ctim;
  uint64_t sum;
} checked;

static pthread_mutex_t checked_mu = PTHREAD_MUTEX_INITIALIZER;
static checked checked_tab[CHECKED_SLOTS];
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* A child forked while another thread (session/model_image.c's writer)
 * held the lock gets it free. */
static void child_unlock(void) { pthread_mutex_init(&checked_mu, NULL); }
static void register_atfork(void) { pthread_atfork(NULL, NULL, child_unlock); }

static void lock(void) {
  pthread_once(&atfork_once, register_atfork);
  pthread_mutex_lock(&checked_mu);
}

static uint64_t checked_id(const cache_key *k, const char *kind) {
  uint64_t h = hash_str(k->hex);
  h = hash_mix64(h ^ hash_str(kind));
  return h ? h : 1;
}

static bool same_time(const struct timespec *a, const struct timespec *b) {
  return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

bool checked_known(const cache_key *k, const char *kind, const struct stat *st, uint64_t sum) {
  uint64_t id = checked_id(k, kind);
  lock();
  const checked *e = &checked_tab[id % CHECKED_SLOTS];
  bool yes = e->id == id && e->dev == st->st_dev && e->ino == st->st_ino && e->size == st->st_size &&
             same_time(&e->mtim, &st->st_mtim) && same_time(&e->ctim, &st->st_ctim) && e->sum == sum;
  pthread_mutex_unlock(&checked_mu);
  return yes;
}

void checked_note(const cache_key *k, const char *kind, const struct stat *st, uint64_t sum) {
  uint64_t id = checked_id(k, kind);
  lock();
  checked_tab[id % CHECKED_SLOTS] = (checked){id, st->st_dev, st->st_ino, st->st_size, st->st_mtim, st->st_ctim, sum};
  pthread_mutex_unlock(&checked_mu);
}

void checked_forget(void) {
  lock();
  memset(checked_tab, 0, sizeof checked_tab);
  pthread_mutex_unlock(&checked_mu);
}

/* ---- across the processes of one boot: the meta's note ---- */
static pthread_once_t boot_once = PTHREAD_ONCE_INIT;
static char boot_id[40]; /* "" when unknown */

static void read_boot_id(void) {
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
  if (!f) return;
  char buf[64] = {0};
  if (fgets(buf, sizeof buf, f)) {
    size_t n = strcspn(buf, " \t\r\n");
    bool ok = n >= 16 && n < sizeof boot_id;
    for (size_t i = 0; ok && i < n; i++) ok = (buf[i] >= '0' && buf[i] <= '9') || (buf[i] >= 'a' && buf[i] <= 'f') || buf[i] == '-';
    if (ok) memcpy(boot_id, buf, n);
  }
  fclose(f);
}

static const char *this_boot(void) {
  pthread_once(&boot_once, read_boot_id);
  return boot_id;
}

static int ident_text(const struct stat *st, char *buf, size_t n) {
  return snprintf(buf, n, "%s %" PRIu64 " %" PRIu64 " %" PRId64 " %" PRId64 ".%09ld %" PRId64 ".%09ld",
                  this_boot(), (uint64_t)st->st_dev, (uint64_t)st->st_ino, (int64_t)st->st_size,
                  (int64_t)st->st_mtim.tv_sec, (long)st->st_mtim.tv_nsec, (int64_t)st->st_ctim.tv_sec,
                  (long)st->st_ctim.tv_nsec);
}

bool checked_can_note(void) { return this_boot()[0] != 0; }

size_t checked_meta_line(const struct stat *st, char *buf, size_t n) {
  if (!checked_can_note()) return 0;
  char id[256];
  ident_text(st, id, sizeof id);
  int w = snprintf(buf, n, "checked %s\n", id);
  return w > 0 && (size_t)w < n ? (size_t)w : 0;
}

bool checked_meta_says(const char *meta, const struct stat *st) {
  if (!checked_can_note()) return false;
  const char *p = strstr(meta, "\nchecked ");
  if (!p) return false;
  p += strlen("\nchecked ");
  char id[256];
  int n = ident_text(st, id, sizeof id);
  return n > 0 && (size_t)n < sizeof id && !strncmp(p, id, (size_t)n) && p[n] == '\n';
}
