/* The compile cache: directory rules, entries that are corrupt, truncated
 * or foreign-owned are rejected (and rebuilt by the compiler), SMELT_CACHE=off,
 * and a warm compile that finds its kernels in the cache. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/checked.h"
#include "check.h"
#include "util/file.h"
#include "graph_builder.h"

static char root[256];

static void fresh_dir(char *out, size_t n, const char *name) {
  snprintf(out, n, "%s/%s", root, name);
}

/* A cache in folder name (dir: its path) and a key made of text. */
static void open_in(const char *name, char *dir, size_t n, smelt_cache *c) {
  bool warn;
  fresh_dir(dir, n, name);
  cache_open(c, dir, &warn);
  CHECK(c->enabled);
}

static cache_key key_of(const char *text) {
  key_hasher h;
  key_init(&h);
  key_add_str(&h, text);
  return key_final(&h);
}

static void test_open(void) {
  char dir[512];
  fresh_dir(dir, sizeof dir, "a/b/smelt");
  smelt_cache c;
  bool warn;
  unsetenv("SMELT_CACHE");
  cache_open(&c, dir, &warn);
  CHECK(c.enabled && !warn);
  struct stat st;
  CHECK(!stat(dir, &st) && (st.st_mode & 0777) == 0700);
  setenv("SMELT_CACHE", "off", 1);
  cache_open(&c, dir, &warn);
  CHECK(!c.enabled && !warn && strstr(c.why_off, "SMELT_CACHE=off"));
  unsetenv("SMELT_CACHE");
  chmod(dir, 0777); /* others could plant entries: refused */
  cache_open(&c, dir, &warn);
  CHECK(!c.enabled && warn && strstr(c.why_off, "writable by others"));
  chmod(dir, 0700);
  setenv("SMELT_CACHE_DIR", dir, 1);
  cache_open(&c, NULL, &warn);
  CHECK(c.enabled && !strcmp(c.dir, dir));
  unsetenv("SMELT_CACHE_DIR");
}

static void write_bytes(const char *path, const void *p, size_t n) {
  int fd = open(path, O_WRONLY | O_TRUNC);
  if (fd >= 0) {
    CHECK(write(fd, p, n) == (ssize_t)n);
    close(fd);
  }
}

static void test_entries(void) {
  char dir[512];
  fresh_dir(dir, sizeof dir, "entries");
  smelt_cache c;
  bool warn, hit;
  cache_open(&c, dir, &warn);
  key_hasher h;
  key_init(&h);
  key_add_str(&h, "test entry");
  cache_key k = key_final(&h);
  char data[1000];
  for (int i = 0; i < 1000; i++) data[i] = (char)(i * 7);
  CHECK_OK(cache_put(&c, &k, "so", data, sizeof data));
  uint8_t *got = NULL;
  size_t len = 0;
  char why[512];
  cache_get(&c, &k, "so", &got, &len, &hit, why, sizeof why);
  CHECK(hit && len == sizeof data && !memcmp(got, data, len));
  free(got);
  char path[1200];
  cache_entry_path(&c, &k, "so", false, path, sizeof path);
  /* one flipped byte */
  data[500] ^= 1;
  write_bytes(path, data, sizeof data);
  cache_get(&c, &k, "so", &got, &len, &hit, why, sizeof why);
  CHECK(!hit && !got && strstr(why, "corrupt"));
  /* truncated */
  write_bytes(path, data, 100);
  cache_get(&c, &k, "so", &got, &len, &hit, why, sizeof why);
  CHECK(!hit && strstr(why, "truncated"));
  /* rewritten: good again */
  data[500] ^= 1;
  CHECK_OK(cache_put(&c, &k, "so", data, sizeof data));
  cache_get(&c, &k, "so", &got, &len, &hit, why, sizeof why);
  CHECK(hit);
  free(got);
  /* a damaged meta file */
  char meta[1200];
  cache_entry_path(&c, &k, "so", true, meta, sizeof meta);
  write_bytes(meta, "smelt-cache 3\nkey nonsense\n", 27);
  cache_get(&c, &k, "so", &got, &len, &hit, why, sizeof why);
  CHECK(!hit && strstr(why, "damaged"));
  CHECK_OK(cache_put(&c, &k, "so", data, sizeof data));
  /* writable by others */
  chmod(path, 0666);
  cache_get(&c, &k, "so", &got, &len, &hit, why, sizeof why);
  CHECK(!hit && strstr(why, "writable by others"));
  chmod(path, 0600);
  /* owned by someone else (needs root to arrange) */
  if (geteuid() == 0) {
    CHECK(chown(path, 65534, 65534) == 0);
    cache_get(&c, &k, "so", &got, &len, &hit, why, sizeof why);
    CHECK(!hit && strstr(why, "belongs to uid 65534"));
    CHECK_OK(cache_put(&c, &k, "so", data, sizeof data)); /* replaced by ours */
    struct stat st;
    CHECK(!stat(path, &st) && st.st_uid == 0);
    cache_get(&c, &k, "so", &got, &len, &hit, why, sizeof why);
    CHECK(hit);
    free(got);
  } else {
    printf("test_cache: not root, foreign-owner check skipped\n");
  }
  /* a miss is just a miss */
  key_add_str(&h, "other");
  cache_key k2 = key_final(&h);
  cache_get(&c, &k2, "so", &got, &len, &hit, why, sizeof why);
  CHECK(!hit && !why[0]);
}

/* Files in dir whose name contains what. */
static int count_files(const char *dir, const char *what) {
  char cmd[800];
  snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -c -- '%s'", dir, what);
  FILE *f = popen(cmd, "r");
  int n = -1;
  if (f) {
    if (fscanf(f, "%d", &n) != 1) n = -1;
    pclose(f);
  }
  return n;
}

/* Entries written in place: reserve, fill, commit is an entry like a put's
 * (mapped back, checked when damaged); nothing is visible before the commit;
 * an abort leaves nothing behind; one over the cap or with the cache off is
 * refused before any file is made. */
static void test_reserve(void) {
  char dir[512];
  fresh_dir(dir, sizeof dir, "reserve");
  smelt_cache c;
  bool warn, hit;
  cache_open(&c, dir, &warn);
  CHECK(c.enabled);
  key_hasher h;
  key_init(&h);
  key_add_str(&h, "reserved entry");
  cache_key k = key_final(&h);
  enum { N = 100000 };
  cache_slot slot;
  CHECK_OK(cache_reserve(&c, &k, "prep", N, &slot));
  CHECK(slot.data && slot.len == N && slot.tmp);
  const void *m = NULL;
  size_t len = 0;
  char why[1400];
  /* zero-filled, and not an entry yet */
  CHECK(slot.data && ((unsigned char *)slot.data)[0] == 0 && ((unsigned char *)slot.data)[N - 1] == 0);
  cache_map(&c, NULL, &k, "prep", &m, &len, &hit, why, sizeof why);
  CHECK(!hit && !why[0]);
  CHECK(count_files(dir, ".tmp") == 1);
  for (int i = 0; i < N; i++) ((unsigned char *)slot.data)[i] = (unsigned char)(i * 13);
  void *filled = slot.data;
  CHECK_OK(cache_commit(&c, NULL, &k, "prep", &slot));
  CHECK(slot.data == filled && !slot.tmp && count_files(dir, ".tmp") == 0);
  cache_map(&c, NULL, &k, "prep", &m, &len, &hit, why, sizeof why);
  CHECK(hit && len == N && !memcmp(m, filled, N));
  cache_unmap(m, len);
  cache_unmap(slot.data, slot.len); /* still valid after the commit, read-only */
  /* damaged in place (identity changed: see cache.h): a miss */
  char path[1200];
  cache_entry_path(&c, &k, "prep", false, path, sizeof path);
  unsigned char bad[N];
  for (int i = 0; i < N; i++) bad[i] = (unsigned char)(i * 13);
  bad[N / 2] ^= 1;
  write_bytes(path, bad, sizeof bad);
  cache_map(&c, NULL, &k, "prep", &m, &len, &hit, why, sizeof why);
  CHECK(!hit && strstr(why, "corrupt"));
  /* an aborted slot leaves no file and no entry */
  key_add_str(&h, "aborted");
  cache_key k2 = key_final(&h);
  CHECK_OK(cache_reserve(&c, &k2, "prep", 4096, &slot));
  cache_abort(&slot);
  CHECK(!slot.data && !slot.tmp && count_files(dir, ".tmp") == 0 && count_files(dir, k2.hex) == 0);
  /* refused before anything is made: over the cap, an empty entry, a bad kind, the cache off */
  setenv("SMELT_CACHE_MAX_MB", "1", 1);
  smelt_cache small;
  cache_open(&small, dir, &warn);
  unsetenv("SMELT_CACHE_MAX_MB");
  CHECK(cache_reserve(&small, &k2, "prep", 2 << 20, &slot) != SMELT_OK && !slot.data);
  CHECK(cache_reserve(&c, &k2, "prep", 0, &slot) != SMELT_OK && !slot.data);
  CHECK(cache_reserve(&c, &k2, "bad kind!", 16, &slot) != SMELT_OK && !slot.data);
  setenv("SMELT_CACHE", "off", 1);
  smelt_cache offc;
  cache_open(&offc, dir, &warn);
  unsetenv("SMELT_CACHE");
  CHECK(cache_reserve(&offc, &k2, "prep", 16, &slot) != SMELT_OK && !slot.data);
  CHECK(count_files(dir, ".tmp") == 0 && count_files(dir, k2.hex) == 0);
}

/* cache_put_parts: the concatenation of its parts, with the checksum
 * cache_checksum gives it (checked again as a new process would: parts
 * across the checksum's 1 MiB blocks, one part, tiny parts, none). */
static void test_put_parts(void) {
  char dir[512];
  smelt_cache c;
  bool hit;
  open_in("parts", dir, sizeof dir, &c);
  enum { TOTAL = (3 << 20) + 12345 };
  unsigned char *all = malloc(TOTAL);
  if (!all) return;
  for (int i = 0; i < TOTAL; i++) all[i] = (unsigned char)(i * 31 + (i >> 13));
  const size_t cuts[][6] = {{7, 1 << 20, 3, (1 << 20) - 10, 65536, 0},
                            {TOTAL, 0, 0, 0, 0, 0},
                            {1, 2, 3, 0, 0, 0},
                            {0, 0, 0, 0, 0, 0}};
  const int n_cuts[] = {6, 1, 3, 0};
  for (int t = 0; t < 4; t++) {
    cache_part parts[6];
    size_t at = 0;
    for (int i = 0; i < n_cuts[t]; i++) {
      size_t len = i == n_cuts[t] - 1 && t == 0 ? TOTAL - at : cuts[t][i]; /* case 0: the rest in the last */
      parts[i] = (cache_part){all + at, len};
      at += len;
    }
    char name[16];
    snprintf(name, sizeof name, "parts %d", t);
    cache_key k = key_of(name);
    CHECK_OK(cache_put_parts(&c, &k, "prep", parts, n_cuts[t]));
    checked_forget(); /* as a new process: the checksum is read again */
    char mpath[1200];
    cache_entry_path(&c, &k, "prep", true, mpath, sizeof mpath);
    size_t mlen = 0;
    uint8_t *meta = NULL;
    CHECK_OK(file_read_all(mpath, &meta, &mlen, 0));
    char *note = meta ? strstr((char *)meta, "\nchecked ") : NULL;
    if (note) { /* and without this boot's note */
      note[1] = 'X';
      write_bytes(mpath, meta, mlen);
    }
    free(meta);
    const void *m = NULL;
    size_t len = 0;
    char why[1400];
    if (at) {
      uint64_t checks = cache_map_checks();
      cache_map(&c, NULL, &k, "prep", &m, &len, &hit, why, sizeof why);
      CHECK(hit && len == at && !memcmp(m, all, at) && cache_map_checks() == checks + 1);
      cache_unmap(m, len);
    } else { /* nothing to map: the meta says 0 bytes */
      uint8_t *d = NULL;
      cache_get(&c, &k, "prep", &d, &len, &hit, why, sizeof why);
      CHECK(hit && len == 0);
      free(d);
    }
  }
  /* over 1 GiB: refused before anything is read or written */
  cache_part huge = {all, ((size_t)1 << 30) + 1};
  cache_key kh = key_of("huge");
  CHECK(cache_put_parts(&c, &kh, "prep", &huge, 1) == SMELT_ERR_IO && strstr(smelt_last_error(), "per entry"));
  free(all);
}

/* An entry checked (or written) in this boot is mapped by a new process
 * without a checksum pass; a note of another boot, or of a file since
 * changed, is not trusted. */
static void test_boot_note(void) {
  char dir[512];
  smelt_cache c;
  bool hit;
  open_in("notes", dir, sizeof dir, &c);
  cache_key k = key_of("noted entry");
  static unsigned char data[200000];
  for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)(i * 7);
  CHECK_OK(cache_put(&c, &k, "prep", data, sizeof data));
  char mpath[1200];
  cache_entry_path(&c, &k, "prep", true, mpath, sizeof mpath);
  size_t mlen = 0;
  uint8_t *meta = NULL;
  CHECK_OK(file_read_all(mpath, &meta, &mlen, 0));
  bool has_boot = access("/proc/sys/kernel/random/boot_id", R_OK) == 0;
  CHECK(meta && (strstr((char *)meta, "\nchecked ") != NULL) == has_boot);
  const void *p;
  size_t len;
  char why[1400];
  checked_forget();
  uint64_t before = cache_map_checks();
  cache_map(&c, NULL, &k, "prep", &p, &len, &hit, why, sizeof why);
  CHECK(hit && len == sizeof data && !memcmp(p, data, sizeof data));
  CHECK(cache_map_checks() == before + (has_boot ? 0 : 1));
  cache_unmap(p, len);
  /* a note of another boot: checked again, and noted anew */
  if (meta && has_boot) {
    char *at = strstr((char *)meta, "\nchecked ");
    at[strlen("\nchecked ")] ^= 1; /* another boot id */
    write_bytes(mpath, meta, mlen);
    checked_forget();
    before = cache_map_checks();
    cache_map(&c, NULL, &k, "prep", &p, &len, &hit, why, sizeof why);
    CHECK(hit && cache_map_checks() == before + 1);
    cache_unmap(p, len);
    checked_forget();
    cache_map(&c, NULL, &k, "prep", &p, &len, &hit, why, sizeof why);
    CHECK(hit && cache_map_checks() == before + 1); /* the note was written again */
    cache_unmap(p, len);
  }
  free(meta);
}

/* A compile through the cache: miss, then hit; a corrupt library is rebuilt. */
static void test_compile_cache(void) {
  gb_env env;
  gb_env_init(&env);
  if (!env.have_cc) {
    test_skip("test_cache", "no C compiler, the end-to-end part did not run");
    pool_free(env.pool);
    return;
  }
  char dir[512];
  fresh_dir(dir, sizeof dir, "compile");
  bool warn;
  cache_open(&env.cache, dir, &warn);
  gb b;
  gb_init(&b, 17);
  int x = gb_input(&b, "x", SMELT_F32, 2, (int64_t[]){3, 50});
  int y = gb_node(&b, "Exp", 1, (int[]){gb_node(&b, "Neg", 1, (int[]){x}, NULL, 0)}, NULL, 0);
  gb_output(&b, y);
  CHECK_OK(gb_finish(&b));
  tensor in = {0}, *pin = &in;
  gb_rand(&in, SMELT_F32, 2, (int64_t[]){3, 50}, 1);
  compile_options o = gb_opts(&env, SMELT_MODE_DEFAULT);
  const bool expect_hit[] = {false, true, false, true};
  compiled_plan *p = NULL;
  for (int round = 0; round < 4; round++) {
    compile_report rep;
    memset(&rep, 0, sizeof rep);
    CHECK(gb_compare(&env, b.g, &pin, &o, &rep, &p) <= 1);
    CHECK(rep.cache_hit == expect_hit[round]);
    if (round == 2) CHECK(strstr(rep.warning, "corrupt") != NULL);
    if (round == 1 && p) { /* damage the library for round 2 */
      cache_key k;
      snprintf(k.hex, sizeof k.hex, "%s", p->key);
      char path[1200];
      cache_entry_path(&env.cache, &k, "so", false, path, sizeof path);
      int fd = open(path, O_WRONLY);
      CHECK(fd >= 0 && pwrite(fd, "\xff\xff\xff\xff", 4, 64) == 4);
      if (fd >= 0) close(fd);
    }
    compiled_plan_free(p);
    p = NULL;
    compile_report_free(&rep);
  }
  tensor_release(&in);
  gb_free(&b);
  pool_free(env.pool);
}

static void remove_all(const char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
}

int main(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(root, sizeof root, "%s/smelt-test-cache-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(root)) {
    perror("mkdtemp");
    return 1;
  }
  test_open();
  test_entries();
  test_reserve();
  test_put_parts();
  test_boot_note();
  test_compile_cache();
  remove_all(root);
  return test_report("test_cache");
}
