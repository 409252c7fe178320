/* The on-disk compile cache (see cache.h). */
#include "cache/cache.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/checked.h"
#include "cache/evict.h"
#include "parallel/pool.h"
#include "util/err.h"
#include "util/file.h"
#include "util/hash.h"
#include "util/quote.h"

#define META_MAX 1024
#define DATA_MAX ((size_t)1 << 30)
#define DEFAULT_MAX_MB 2048

static void off(smelt_cache *c, bool *warn, bool w, const char *fmt, const char *a, const char *b) {
  c->enabled = false;
  snprintf(c->why_off, sizeof c->why_off, fmt, a, b);
  *warn = w;
}

/* mkdir -p, new components with mode 0700. */
static int make_dirs(const char *path) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(buf, 0700) && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(buf, 0700) && errno != EEXIST) return -1;
  return 0;
}

/* SMELT_CACHE_MAX_MB in bytes (unset: the default); false when it is not a
 * whole number of megabytes that fits. */
static bool parse_max(uint64_t *bytes) {
  *bytes = (uint64_t)DEFAULT_MAX_MB << 20;
  const char *v = getenv("SMELT_CACHE_MAX_MB");
  if (!v || !*v) return true;
  uint64_t mb = 0;
  for (const char *p = v; *p; p++) {
    if (*p < '0' || *p > '9' || mb > (UINT64_MAX >> 20) / 10) return false;
    mb = mb * 10 + (uint64_t)(*p - '0');
  }
  if (mb > UINT64_MAX >> 20) return false;
  *bytes = mb << 20;
  return true;
}

void cache_open(smelt_cache *c, const char *dir_option, bool *warn) {
  memset(c, 0, sizeof *c);
  *warn = false;
  const char *e = getenv("SMELT_CACHE");
  if (e && (!strcmp(e, "off") || !strcmp(e, "0"))) {
    off(c, warn, false, "SMELT_CACHE=%s%s", e, "");
    return;
  }
  if (!parse_max(&c->max_bytes)) {
    off(c, warn, true, "SMELT_CACHE_MAX_MB=%s is not a whole number of megabytes%s",
        q(getenv("SMELT_CACHE_MAX_MB")), "");
    return;
  }
  const char *d = dir_option && *dir_option ? dir_option : getenv("SMELT_CACHE_DIR");
  int n;
  if (d && *d) {
    n = snprintf(c->dir, sizeof c->dir, "%s", d);
  } else if ((d = getenv("XDG_CACHE_HOME")) && *d) {
    n = snprintf(c->dir, sizeof c->dir, "%s/smelt", d);
  } else if ((d = getenv("HOME")) && *d) {
    n = snprintf(c->dir, sizeof c->dir, "%s/.cache/smelt", d);
  } else {
    off(c, warn, true, "no cache directory: set SMELT_CACHE_DIR, XDG_CACHE_HOME or HOME%s%s", "", "");
    return;
  }
  if (n < 0 || (size_t)n >= sizeof c->dir - 64) {
    off(c, warn, true, "the cache directory path is too long (%s%s)", "", "");
    return;
  }
  if (make_dirs(c->dir)) {
    off(c, warn, true, "cannot create the cache directory %s: %s", q_path(c->dir), strerror(errno));
    return;
  }
  struct stat st;
  if (stat(c->dir, &st) || !S_ISDIR(st.st_mode)) {
    off(c, warn, true, "the cache path %s is not a directory%s", q_path(c->dir), "");
    return;
  }
  if (st.st_uid != geteuid() || (st.st_mode & 022)) {
    off(c, warn, true, "the cache directory %s %s; not using it", q_path(c->dir),
        st.st_uid != geteuid() ? "belongs to another user" : "is writable by others");
    return;
  }
  c->enabled = true;
}

/* ---- keys ---- */

void key_init(key_hasher *h) {
  h->a = HASH_SEED;
  h->b = 0x6a09e667f3bcc909ull;
}

void key_add(key_hasher *h, const void *p, size_t n) {
  const unsigned char *s = p;
  uint64_t a = h->a, b = h->b;
  for (size_t i = 0; i < n; i++) {
    a = (a ^ s[i]) * 0x100000001b3ull;
    b = ((b ^ s[i]) * 0x9e3779b97f4a7c15ull);
    b ^= b >> 29;
  }
  h->a = a;
  h->b = b;
}

void key_add_str(key_hasher *h, const char *s) {
  size_t n = s ? strlen(s) : 0;
  key_add_i64(h, (int64_t)n);
  if (n) key_add(h, s, n);
}

void key_add_i64(key_hasher *h, int64_t v) { key_add(h, &v, sizeof v); }


cache_key key_final(const key_hasher *h) {
  cache_key k;
  snprintf(k.hex, sizeof k.hex, "%016" PRIx64 "%016" PRIx64, hash_mix64(h->a), hash_mix64(h->b ^ h->a));
  return k;
}

/* Checksums (and prepared weights' source hashes) hash 1 MiB blocks
 * independently and combine the block hashes in order: the same value
 * whether the blocks ran on one thread or on a pool. */
#define SUM_BLOCK ((size_t)1 << 20)

typedef struct sum_job {
  const unsigned char *p;
  size_t n;
  uint64_t *h;
} sum_job;

static uint64_t block_hash(const unsigned char *p, size_t n, size_t i) {
  size_t off = i * SUM_BLOCK;
  return hash_fast(p + off, n - off < SUM_BLOCK ? n - off : SUM_BLOCK);
}

static void sum_blocks(void *ctx, int64_t b, int64_t e) {
  const sum_job *j = ctx;
  for (int64_t i = b; i < e; i++) j->h[i] = block_hash(j->p, j->n, (size_t)i);
}

uint64_t cache_checksum_pool(smelt_pool *pool, const void *p, size_t n) {
  size_t nb = n / SUM_BLOCK + (n % SUM_BLOCK != 0);
  if (nb <= 1) return hash_fast(p, n);
  uint64_t small[64], *h = nb <= 64 ? small : malloc(sizeof(uint64_t) * nb);
  if (h) {
    sum_job j = {p, n, h};
    pool_parallel_for(pool, (int64_t)nb, 2, sum_blocks, &j);
  }
  uint64_t acc = hash_mix64(n); /* without room for the block hashes: one at a time */
  for (size_t i = 0; i < nb; i++) acc = hash_mix64(acc ^ (h ? h[i] : block_hash(p, n, i)));
  if (h != small) free(h);
  return acc;
}

uint64_t cache_checksum(const void *p, size_t n) { return cache_checksum_pool(NULL, p, n); }

/* ---- entries ---- */

void cache_entry_path(const smelt_cache *c, const cache_key *k, const char *kind, bool meta,
                      char *out, size_t n) {
  snprintf(out, n, "%s/%s.%s%s", c->dir, k->hex, kind, meta ? ".meta" : "");
}

/* Opens an entry file, refusing what is not ours or is writable by others. */
static int open_checked(const char *path, struct stat *st, char *why, size_t why_n) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) snprintf(why, why_n, "cannot open '%s': %s", path, strerror(errno));
    return -1;
  }
  if (fstat(fd, st) || !S_ISREG(st->st_mode)) {
    snprintf(why, why_n, "'%s' is not a regular file", path);
  } else if (st->st_uid != geteuid()) {
    snprintf(why, why_n, "'%s' belongs to uid %u, not to this user", path, (unsigned)st->st_uid);
  } else if (st->st_mode & 022) {
    snprintf(why, why_n, "'%s' is writable by others", path);
  } else {
    return fd;
  }
  close(fd);
  return -1;
}

static bool read_fd(int fd, uint8_t *buf, size_t len) {
  size_t got = 0;
  while (got < len) {
    ssize_t r = read(fd, buf + got, len - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += (size_t)r;
  }
  return true;
}

static bool parse_meta(const char *text, const cache_key *k, const char *kind, size_t *size,
                       uint64_t *sum) {
  char key[64], knd[64];
  unsigned long long sz, cs;
  int ver;
  if (sscanf(text, "smelt-cache %d\nkey %63s\nkind %63s\nsize %llu\nsum %llx\n", &ver, key, knd, &sz,
             &cs) != 5)
    return false;
  if (ver != 3 || strcmp(key, k->hex) || strcmp(knd, kind)) return false;
  *size = (size_t)sz;
  *sum = (uint64_t)cs;
  return true;
}

/* Opens entry KEY.kind's data after checking its meta and its size: the
 * descriptor, or -1 (a miss; *why says why when the entry was rejected). */
static int open_entry(const smelt_cache *c, const cache_key *k, const char *kind, size_t *size,
                      uint64_t *sum, struct stat *dst, bool *noted, char *why, size_t why_n) {
  why[0] = 0;
  if (noted) *noted = false;
  if (!c->enabled) return -1;
  char mpath[1200], dpath[1200], meta[META_MAX + 1];
  cache_entry_path(c, k, kind, true, mpath, sizeof mpath);
  cache_entry_path(c, k, kind, false, dpath, sizeof dpath);
  struct stat ms, local, *ds_ = dst ? dst : &local;
#define ds (*ds_)
  int mfd = open_checked(mpath, &ms, why, why_n);
  if (mfd < 0) return -1;
  size_t mlen = ms.st_size > META_MAX ? META_MAX : (size_t)ms.st_size;
  bool ok = read_fd(mfd, (uint8_t *)meta, mlen);
  meta[ok ? mlen : 0] = 0;
  if (!ok || !parse_meta(meta, k, kind, size, sum) || *size > DATA_MAX) {
    snprintf(why, why_n, "'%s' is damaged", mpath);
    close(mfd);
    return -1;
  }
  int dfd = open_checked(dpath, &ds, why, why_n);
  if (dfd >= 0 && (size_t)ds.st_size != *size) {
    snprintf(why, why_n, "'%s' is truncated or grown", dpath);
    close(dfd);
    dfd = -1;
  } /* a missing data file is a plain miss: evicted between our two opens */
  if (dfd >= 0 && noted) *noted = checked_meta_says(meta, &ds);
  /* A use for eviction's recency.  An entry whose checksum then fails is
   * rewritten by the caller at once, so touching it early costs nothing. */
  if (dfd >= 0) cache_touch(mfd, &ms.st_mtim);
  close(mfd);
  return dfd;
#undef ds
}

/* Writes entry (k, kind)'s meta for len bytes with checksum sum and, when ds
 * (the data file) is given, the note that this boot checked it; *n (NULL
 * ok): the meta's length. */
static smelt_status write_meta(const smelt_cache *c, const cache_key *k, const char *kind, size_t len,
                               uint64_t sum, const struct stat *ds, size_t *n) {
  char mpath[1200], meta[META_MAX];
  cache_entry_path(c, k, kind, true, mpath, sizeof mpath);
  int w = snprintf(meta, sizeof meta, "smelt-cache 3\nkey %s\nkind %s\nsize %zu\nsum %016" PRIx64 "\n",
                   k->hex, kind, len, sum);
  size_t used = (size_t)w;
  if (ds) used += checked_meta_line(ds, meta + used, sizeof meta - used);
  if (n) *n = used;
  return file_write_atomic_ex(mpath, meta, used, false);
}

static _Atomic uint64_t map_checks;

uint64_t cache_map_checks(void) { return map_checks; }

void cache_get(const smelt_cache *c, const cache_key *k, const char *kind, uint8_t **data,
               size_t *len, bool *hit, char *why, size_t why_n) {
  *data = NULL;
  *len = 0;
  *hit = false;
  size_t size = 0;
  uint64_t sum = 0;
  int dfd = open_entry(c, k, kind, &size, &sum, NULL, NULL, why, why_n);
  if (dfd < 0) return;
  uint8_t *buf = malloc(size + 1);
  bool ok = buf && read_fd(dfd, buf, size);
  close(dfd);
  if (!ok || cache_checksum(buf, size) != sum) {
    char dpath[1200];
    cache_entry_path(c, k, kind, false, dpath, sizeof dpath);
    snprintf(why, why_n, "'%s' is %s", dpath, buf ? "corrupt" : "too large to read");
    free(buf);
    return;
  }
  *data = buf;
  *len = size;
  *hit = true;
}

void cache_map(const smelt_cache *c, smelt_pool *pool, const cache_key *k, const char *kind,
               const void **data, size_t *len, bool *hit, char *why, size_t why_n) {
  *data = NULL;
  *len = 0;
  *hit = false;
  size_t size = 0;
  uint64_t sum = 0;
  struct stat ds;
  bool noted;
  int dfd = open_entry(c, k, kind, &size, &sum, &ds, &noted, why, why_n);
  if (dfd < 0) return;
  if (size == 0) {
    close(dfd);
    snprintf(why, why_n, "an empty '%s' entry", kind);
    return;
  }
#ifdef MAP_POPULATE
  void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, dfd, 0);
#else
  void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, dfd, 0);
#endif
  close(dfd);
  if (m == MAP_FAILED) {
    snprintf(why, why_n, "cannot map a '%s' entry of %zu bytes: %s", kind, size, strerror(errno));
    return;
  }
  if (noted) {
    checked_note(k, kind, &ds, sum); /* checked in this boot (checked.h) */
  } else if (!checked_known(k, kind, &ds, sum)) {
    if (cache_checksum_pool(pool, m, size) != sum) {
      char dpath[1200];
      cache_entry_path(c, k, kind, false, dpath, sizeof dpath);
      snprintf(why, why_n, "'%s' is corrupt", dpath);
      munmap(m, size);
      return;
    }
    map_checks++;
    checked_note(k, kind, &ds, sum);
    /* the next processes of this boot need not check it again: best effort */
    if (checked_can_note()) (void)write_meta(c, k, kind, size, sum, &ds, NULL);
  }
  *data = m;
  *len = size;
  *hit = true;
}

void cache_unmap(const void *data, size_t len) {
  if (data) munmap((void *)data, len);
}

smelt_status cache_put(const smelt_cache *c, const cache_key *k, const char *kind, const void *data,
                       size_t len) {
  return cache_put_pool(c, NULL, k, kind, data, len);
}

/* Whether an entry of len bytes may be written at all. */
static smelt_status put_allowed(const smelt_cache *c, const char *kind, size_t len) {
  if (!cache_kind_ok(kind))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "cache_put: kind %s is not 1 to 32 letters, digits, '_' or '-'",
                   q(kind));
  if (len > DATA_MAX) /* never read back (open_entry): not written either */
    return err_set(SMELT_ERR_IO, "a '%s' cache entry of %zu bytes is over the cache's limit of %zu bytes per entry",
                   kind, len, DATA_MAX);
  if (c->max_bytes && (len > c->max_bytes || c->max_bytes - len < META_MAX))
    return err_set(SMELT_ERR_IO, "a '%s' cache entry of %zu bytes does not fit the cache's cap of %" PRIu64
                   " MB (SMELT_CACHE_MAX_MB)", kind, len, c->max_bytes >> 20);
  return SMELT_OK;
}

/* With the data file in place (len bytes, checksum sum): the meta, the
 * process's note that the entry needs no check, and eviction when due. */
static smelt_status finish_put(const smelt_cache *c, const cache_key *k, const char *kind, size_t len,
                               uint64_t sum) {
  char dpath[1200];
  cache_entry_path(c, k, kind, false, dpath, sizeof dpath);
  struct stat ds; /* what was just written needs no check when this boot maps it */
  bool have = !stat(dpath, &ds) && (size_t)ds.st_size == len;
  size_t n;
  TRY(write_meta(c, k, kind, len, sum, have ? &ds : NULL, &n));
  if (have) checked_note(k, kind, &ds, sum);
  if (cache_evict_due(c->max_bytes, len + n, k, kind)) {
    char keep[128];
    snprintf(keep, sizeof keep, "%s.%s", k->hex, kind);
    cache_evict(c, keep);
  }
  return SMELT_OK;
}

smelt_status cache_put_pool(const smelt_cache *c, smelt_pool *pool, const cache_key *k, const char *kind,
                            const void *data, size_t len) {
  if (!c->enabled) return SMELT_OK;
  TRY(put_allowed(c, kind, len));
  char dpath[1200];
  cache_entry_path(c, k, kind, false, dpath, sizeof dpath);
  uint64_t sum = cache_checksum_pool(pool, data, len);
  /* no fsync: a torn entry fails its size or checksum check and is rebuilt */
  TRY(file_write_atomic_ex(dpath, data, len, false));
  return finish_put(c, k, kind, len, sum);
}

/* cache_checksum of the concatenation of parts (total bytes), reading each
 * byte once: a block inside one part is hashed in place, a block across
 * parts through bounce (SUM_BLOCK bytes). */
typedef struct part_cursor {
  const cache_part *parts;
  int n, i;
  size_t off;
} part_cursor;

/* The next want bytes (want <= SUM_BLOCK, all there): in place or in bounce. */
static const uint8_t *next_block(part_cursor *c, size_t want, uint8_t *bounce) {
  while (c->i < c->n && c->off == c->parts[c->i].len) c->i++, c->off = 0;
  if (c->i < c->n && c->parts[c->i].len - c->off >= want) {
    const uint8_t *p = (const uint8_t *)c->parts[c->i].data + c->off;
    c->off += want;
    return p;
  }
  for (size_t got = 0; got < want;) {
    while (c->off == c->parts[c->i].len) c->i++, c->off = 0;
    size_t take = c->parts[c->i].len - c->off < want - got ? c->parts[c->i].len - c->off : want - got;
    memcpy(bounce + got, (const uint8_t *)c->parts[c->i].data + c->off, take);
    got += take, c->off += take;
  }
  return bounce;
}

static uint64_t checksum_parts(const cache_part *parts, int n, size_t total, uint8_t *bounce) {
  part_cursor cur = {parts, n, 0, 0};
  if (total <= SUM_BLOCK) return hash_fast(next_block(&cur, total, bounce), total); /* as cache_checksum_pool */
  uint64_t acc = hash_mix64(total);
  for (size_t at = 0; at < total; at += SUM_BLOCK) {
    size_t want = total - at < SUM_BLOCK ? total - at : SUM_BLOCK;
    acc = hash_mix64(acc ^ hash_fast(next_block(&cur, want, bounce), want));
  }
  return acc;
}

smelt_status cache_put_parts(const smelt_cache *c, const cache_key *k, const char *kind, const cache_part *parts,
                             int n) {
  if (!c->enabled) return SMELT_OK;
  size_t len = 0;
  for (int i = 0; i < n; i++) {
    if (len + parts[i].len < len) return err_set(SMELT_ERR_INVALID_ARGUMENT, "cache_put_parts: size overflows");
    len += parts[i].len;
  }
  TRY(put_allowed(c, kind, len));
  uint8_t *bounce = malloc(SUM_BLOCK);
  if (!bounce) return err_nomem("checksum block", SUM_BLOCK);
  uint64_t sum = checksum_parts(parts, n, len, bounce);
  free(bounce);
  char dpath[1200];
  cache_entry_path(c, k, kind, false, dpath, sizeof dpath);
  int fd;
  char *tmp;
  TRY(file_create_temp(dpath, O_WRONLY, &fd, &tmp));
  int e = 0;
  for (int i = 0; i < n && !e; i++) e = file_write_fd(fd, parts[i].data, parts[i].len);
  if (close(fd) && !e) e = errno;
  /* no fsync, as cache_put: a torn entry fails its size or checksum check */
  if (!e && rename(tmp, dpath)) e = errno;
  if (e) {
    smelt_status st = err_set(SMELT_ERR_IO, "cannot write %s (%zu bytes): %s", q_path(dpath), len, strerror(e));
    unlink(tmp);
    free(tmp);
    return st;
  }
  free(tmp);
  return finish_put(c, k, kind, len, sum);
}

smelt_status cache_reserve(const smelt_cache *c, const cache_key *k, const char *kind, size_t len,
                           cache_slot *slot) {
  memset(slot, 0, sizeof *slot);
  if (!c->enabled) return err_set(SMELT_ERR_UNSUPPORTED, "the cache is off");
  if (!len) return err_set(SMELT_ERR_INVALID_ARGUMENT, "cache_reserve: an empty '%s' entry", kind);
  TRY(put_allowed(c, kind, len));
  char dpath[1200];
  cache_entry_path(c, k, kind, false, dpath, sizeof dpath);
  int fd;
  char *tmp;
  TRY(file_create_temp(dpath, O_RDWR, &fd, &tmp));
  /* blocks allocated now: a store into a mapping of a hole on a full disk
   * would be SIGBUS, not an error */
#ifdef __linux__
  int e = fallocate(fd, 0, 0, (off_t)len) ? errno : 0;
#else
  int e = posix_fallocate(fd, 0, (off_t)len);
#endif
  void *m = MAP_FAILED;
  if (!e) {
    m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    /* No MADV_HUGEPAGE here: with it each store fault over the fresh
     * extents read ahead and zeroed a 2 MiB page-cache folio, and a cold
     * compile of bert_base or gpt2_small (340-480 MB of prepared weights)
     * took 0.29-1.19 s, half of it in the kernel's memset; without it 0.36-0.44 s
     * (2-core VM, six cold compiles each).  A later session maps the entry
     * in 4 KiB pages: bert_base from the cache 13 -> 35-44 ms.
     * MADV_RANDOM: no read-ahead either, so a store fault makes one 4 KiB
     * folio, not a large one (ext4 read ahead up to 128 KiB-2 MiB folios
     * and zeroed them).  Fresh large folios are what is slow on a VM whose
     * host backs guest memory on demand: a gpt2_small session created
     * after ONNX Runtime's in the same process packed its 470 MB in
     * 1.3-1.7 s with read-ahead, 0.8-1.1 s without (the packer's faults
     * were 31% of the process's samples, all in that zeroing). */
    if (m != MAP_FAILED) madvise(m, len, MADV_RANDOM); /* advice only */
    if (m == MAP_FAILED) e = errno;
  }
  close(fd);
  if (e) {
    smelt_status st = err_set(SMELT_ERR_IO, "cannot make room for a '%s' cache entry of %zu bytes in %s: %s",
                              kind, len, q_path(tmp), strerror(e));
    unlink(tmp);
    free(tmp);
    return st;
  }
  *slot = (cache_slot){m, len, tmp};
  return SMELT_OK;
}

smelt_status cache_commit(const smelt_cache *c, smelt_pool *pool, const cache_key *k, const char *kind,
                          cache_slot *slot) {
  char *tmp = slot->tmp;
  slot->tmp = NULL;
  mprotect(slot->data, slot->len, PROT_READ); /* filled: read-only from now on, like a mapped entry */
  uint64_t sum = cache_checksum_pool(pool, slot->data, slot->len);
  char dpath[1200];
  cache_entry_path(c, k, kind, false, dpath, sizeof dpath);
  /* no fsync, as cache_put: a torn entry fails its size or checksum check */
  if (rename(tmp, dpath)) {
    smelt_status st = err_set(SMELT_ERR_IO, "cannot write %s (%zu bytes): renaming %s onto it: %s", q_path(dpath),
                              slot->len, q_path(tmp), strerror(errno));
    unlink(tmp);
    free(tmp);
    return st;
  }
  free(tmp);
  return finish_put(c, k, kind, slot->len, sum);
}

void cache_abort(cache_slot *slot) {
  if (slot->data) munmap(slot->data, slot->len);
  if (slot->tmp) unlink(slot->tmp);
  free(slot->tmp);
  memset(slot, 0, sizeof *slot);
}
