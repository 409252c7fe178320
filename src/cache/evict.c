/* Size cap and least-recently-used eviction of the on-disk cache (see evict.h). */
#include "cache/evict.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/hash.h"

#define KIND_MAX 32
#define NAME_MAX_LEN (32 + 1 + KIND_MAX + 5) /* KEY.kind.meta */
#define TEMP_MAX_AGE_S 3600
#define TOUCH_AFTER_S 60
#define NONE SIZE_MAX

/* When to scan.  The cache handle is const and shared by threads, and most
 * processes are short (a `smelt compile`, one session): a per-process "every
 * N puts" counter would never fire for them, while the cache still grows.
 * So each put scans with probability bytes / budget, budget = cap / 32,
 * decided by a hash of the entry's name (no state, reproducible): whichever
 * processes do the writing, a scan comes on average once per cap/32 bytes
 * written, and a put of cap/32 or more always scans.  With the 10% headroom
 * eviction leaves, the cache rarely goes past its cap, and then by a few
 * percent.  At the default 2 GB cap a 100 KB kernel library scans one put in
 * ~650 and resnet18's 74 MB of prepared weights about once; a scan lists the
 * directory and stats our files (2.5 ms for 570 entries, 117 MB, here).
 * Reads never scan. */
#define BUDGET_FRACTION 32


bool cache_evict_due(uint64_t cap, uint64_t bytes, const cache_key *k, const char *kind) {
  if (!cap) return false;
  uint64_t budget = cap / BUDGET_FRACTION ? cap / BUDGET_FRACTION : 1;
  if (bytes >= budget) return true;
  uint64_t h = hash_bytes(HASH_SEED, k->hex, strlen(k->hex));
  h = hash_mix64(hash_bytes(h, kind, strlen(kind)));
  return h % budget < bytes;
}

void cache_touch(int meta_fd, const struct timespec *mtime) {
  struct timespec now;
  if (clock_gettime(CLOCK_REALTIME, &now)) return;
  long long age = (long long)now.tv_sec - (long long)mtime->tv_sec;
  if (age >= 0 && age < TOUCH_AFTER_S) return;
  (void)futimens(meta_fd, NULL); /* best effort: a read-only cache just ages */
}

/* ---- names ---- */

typedef enum { NAME_OTHER, NAME_DATA, NAME_META, NAME_TEMP } name_class;

static bool is_hex(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
  return true;
}

static bool is_kind_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
         ch == '-';
}

bool cache_kind_ok(const char *kind) {
  size_t n = 0;
  while (is_kind_char(kind[n])) n++;
  return n && n <= KIND_MAX && !kind[n];
}

/* KEY.kind, KEY.kind.meta, or one of those + ".tmp" + 16 hex digits (a
 * temporary of file_write_atomic); *base_len is the length of KEY.kind. */
static name_class classify(const char *name, size_t *base_len) {
  if (strlen(name) < 34 || !is_hex(name, 32) || name[32] != '.') return NAME_OTHER;
  size_t i = 33;
  while (is_kind_char(name[i])) i++;
  if (i == 33 || i - 33 > KIND_MAX) return NAME_OTHER;
  *base_len = i;
  const char *rest = name + i;
  bool meta = !strncmp(rest, ".meta", 5);
  if (meta) rest += 5;
  if (!*rest) return meta ? NAME_META : NAME_DATA;
  if (!strncmp(rest, ".tmp", 4) && strlen(rest + 4) == 16 && is_hex(rest + 4, 16)) return NAME_TEMP;
  return NAME_OTHER;
}

/* ---- scanning ---- */

typedef struct ev_file {
  char name[NAME_MAX_LEN + 1];
  size_t base_len;
  bool meta;
  uint64_t size;
  struct timespec mtime;
  dev_t dev;
  ino_t ino;
} ev_file;

typedef struct ev_scan {
  ev_file *f;
  size_t n, cap;
  uint64_t total;
} ev_scan;

static bool push(ev_scan *s, const ev_file *f) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 256;
    if (cap > SIZE_MAX / sizeof *s->f) return false;
    ev_file *p = realloc(s->f, cap * sizeof *p);
    if (!p) return false;
    s->f = p;
    s->cap = cap;
  }
  s->f[s->n++] = *f;
  s->total += f->size;
  return true;
}

/* Our regular file (not followed through a symlink)? */
static bool stat_ours(int dfd, const char *name, struct stat *st) {
  return !fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) && S_ISREG(st->st_mode) && st->st_uid == geteuid();
}

/* Lists our entry files; with drop_temps, deletes our temporaries older
 * than an hour (a writer that died; a live one takes milliseconds). */
static bool scan_dir(DIR *d, ev_scan *s, bool drop_temps) {
  int dfd = dirfd(d);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  struct dirent *de;
  while ((de = readdir(d))) {
    size_t base_len = 0;
    name_class nc = classify(de->d_name, &base_len);
    struct stat st;
    if (nc == NAME_OTHER || !stat_ours(dfd, de->d_name, &st)) continue;
    if (nc == NAME_TEMP) {
      if (drop_temps && (long long)now.tv_sec - (long long)st.st_mtim.tv_sec > TEMP_MAX_AGE_S)
        (void)unlinkat(dfd, de->d_name, 0);
      continue;
    }
    ev_file f = {.base_len = base_len, .meta = nc == NAME_META, .size = (uint64_t)st.st_size,
                 .mtime = st.st_mtim, .dev = st.st_dev, .ino = st.st_ino};
    memcpy(f.name, de->d_name, strlen(de->d_name) + 1); /* classify bounded the length */
    if (!push(s, &f)) return false;
  }
  return true;
}

/* Orders files by entry (KEY.kind), data before meta: an entry's files end
 * up side by side. */
static int by_entry(const void *a, const void *b) {
  const ev_file *x = a, *y = b;
  size_t n = x->base_len < y->base_len ? x->base_len : y->base_len;
  int c = memcmp(x->name, y->name, n);
  if (c) return c;
  if (x->base_len != y->base_len) return x->base_len < y->base_len ? -1 : 1;
  return (int)x->meta - (int)y->meta;
}

typedef struct ev_entry {
  size_t data, meta; /* indices into the scan, or NONE */
  uint64_t size;
  struct timespec used;
  const char *name; /* of either file; compared up to base_len */
  size_t base_len;
} ev_entry;

static int ts_cmp(struct timespec a, struct timespec b) {
  if (a.tv_sec != b.tv_sec) return a.tv_sec < b.tv_sec ? -1 : 1;
  return a.tv_nsec < b.tv_nsec ? -1 : a.tv_nsec > b.tv_nsec;
}

static int by_use(const void *a, const void *b) {
  const ev_entry *x = a, *y = b;
  int c = ts_cmp(x->used, y->used);
  return c ? c : strcmp(x->name, y->name);
}

/* Groups the sorted files into entries; recency is the meta's mtime (a lone
 * data file: its own).  Returns the count, entries in *out (malloc'd). */
static size_t group(const ev_scan *s, ev_entry **out) {
  *out = s->n ? malloc(s->n * sizeof **out) : NULL;
  if (!*out) return 0;
  size_t n = 0;
  for (size_t i = 0; i < s->n; i++) {
    const ev_file *f = &s->f[i];
    ev_entry *e = n ? &(*out)[n - 1] : NULL;
    if (!e || e->base_len != f->base_len || memcmp(e->name, f->name, f->base_len)) {
      e = &(*out)[n++];
      *e = (ev_entry){NONE, NONE, 0, f->mtime, f->name, f->base_len};
    }
    e->size += f->size;
    if (f->meta) {
      e->meta = i;
      e->used = f->mtime;
    } else {
      e->data = i;
    }
  }
  return n;
}

/* ---- deleting ---- */

/* Unchanged since the scan (not rewritten, not touched by a hit)? */
static bool unchanged(int dfd, const ev_file *f) {
  struct stat st;
  return stat_ours(dfd, f->name, &st) && st.st_ino == f->ino && st.st_dev == f->dev &&
         !ts_cmp(st.st_mtim, f->mtime);
}

/* The meta goes first: it is written last (cache_put), so while a meta
 * exists its data does, and a reader racing with us sees the whole entry
 * or a plain miss.  A meta never outlives its data by our hand; one left
 * by a crash is a miss anyway (its size and checksum must match). */
static bool delete_entry(int dfd, const ev_scan *s, const ev_entry *e) {
  const ev_file *m = e->meta != NONE ? &s->f[e->meta] : NULL;
  const ev_file *d = e->data != NONE ? &s->f[e->data] : NULL;
  if ((m && !unchanged(dfd, m)) || (d && !unchanged(dfd, d))) return false; /* used meanwhile */
  if (m && unlinkat(dfd, m->name, 0) && errno != ENOENT) return false;
  if (d) (void)unlinkat(dfd, d->name, 0);
  return true;
}

static bool is_keep(const ev_entry *e, const char *keep) {
  return keep && strlen(keep) == e->base_len && !memcmp(keep, e->name, e->base_len);
}

static int evict_lru(int dfd, const ev_scan *s, const char *keep, uint64_t target) {
  ev_entry *es;
  size_t n = group(s, &es);
  if (n) qsort(es, n, sizeof *es, by_use);
  uint64_t total = s->total;
  int removed = 0;
  for (size_t i = 0; i < n && total > target; i++) {
    if (is_keep(&es[i], keep) || !delete_entry(dfd, s, &es[i])) continue;
    total -= es[i].size;
    removed++;
  }
  free(es);
  return removed;
}

int cache_evict(const smelt_cache *c, const char *keep) {
  if (!c->enabled || !c->max_bytes) return 0;
  DIR *d = opendir(c->dir);
  if (!d) return 0;
  ev_scan s = {0};
  int removed = 0;
  if (scan_dir(d, &s, true) && s.total > c->max_bytes) {
    qsort(s.f, s.n, sizeof *s.f, by_entry);
    removed = evict_lru(dirfd(d), &s, keep, c->max_bytes - c->max_bytes / 10);
  }
  free(s.f);
  closedir(d);
  return removed;
}

void cache_usage(const smelt_cache *c, uint64_t *bytes, int64_t *entries) {
  *bytes = 0;
  *entries = 0;
  if (!c->enabled) return;
  DIR *d = opendir(c->dir);
  if (!d) return;
  ev_scan s = {0};
  if (scan_dir(d, &s, false)) {
    ev_entry *es = NULL;
    if (s.n) qsort(s.f, s.n, sizeof *s.f, by_entry);
    *entries = (int64_t)group(&s, &es);
    *bytes = s.total;
    free(es);
  }
  free(s.f);
  closedir(d);
}
