#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/err.h"
#include "util/hash.h"
#include "util/quote.h"

/* strerror is not required to be thread-safe; the two strerror_r flavours differ. */
static const char *errstr(int e, char *b, size_t n) {
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
  return strerror_r(e, b, n);
#else
  if (strerror_r(e, b, n)) snprintf(b, n, "error %d", e);
  return b;
#endif
}

static smelt_status io_err(const char *what, const char *path, int e) {
  char b[128];
  return err_set(SMELT_ERR_IO, "%s %s: %s", what, q_path(path), errstr(e, b, sizeof b));
}

/* Reads fd to EOF into a buffer that starts with room for cap bytes and grows,
 * refusing to go past max bytes. */
static smelt_status read_fd(int fd, const char *path, size_t cap, size_t max, uint8_t **buf,
                            size_t *len) {
  uint8_t *p = malloc(cap + 1);
  if (!p) return err_nomem("file contents", cap + 1);
  size_t n = 0;
  for (;;) {
    if (n == cap) {
      /* Full: one more byte tells the expected EOF from a file that is larger
       * (or grew) without doubling the buffer of an exactly-sized read. */
      uint8_t extra;
      ssize_t r;
      do r = read(fd, &extra, 1); while (r < 0 && errno == EINTR);
      if (r == 0) break;
      if (r < 0 || cap >= max) {
        int e = errno;
        free(p);
        if (r < 0) return io_err("cannot read", path, e);
        return err_set(SMELT_ERR_IO, "%s is larger than the limit of %zu bytes", q_path(path), max);
      }
      size_t nc = cap < max / 2 ? (cap < 4096 ? 4096 : cap * 2) : max;
      if (nc > max) nc = max;
      uint8_t *q = realloc(p, nc + 1);
      if (!q) {
        free(p);
        return err_nomem("file contents", nc + 1);
      }
      p = q;
      cap = nc;
      p[n++] = extra;
      continue;
    }
    size_t want = cap - n > (1u << 30) ? (1u << 30) : cap - n;
    ssize_t r = read(fd, p + n, want);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      free(p);
      return io_err("cannot read", path, e);
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  p[n] = 0;
  *buf = p;
  *len = n;
  return SMELT_OK;
}

smelt_status file_read_all(const char *path, uint8_t **buf, size_t *len, size_t max_bytes) {
  *buf = NULL;
  *len = 0;
  if (!path || !*path) return err_set(SMELT_ERR_INVALID_ARGUMENT, "file_read_all: no path given");
  size_t max = max_bytes && max_bytes < SIZE_MAX - 1 ? max_bytes : SIZE_MAX - 1;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_err("cannot open", path, errno);
  struct stat st;
  if (fstat(fd, &st)) {
    int e = errno;
    close(fd);
    return io_err("cannot stat", path, e);
  }
  smelt_status s;
  if (S_ISDIR(st.st_mode)) {
    s = err_set(SMELT_ERR_IO, "cannot read %s: it is a directory", q_path(path));
  } else if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > max) {
    s = err_set(SMELT_ERR_IO, "%s is %lld bytes, larger than the limit of %zu bytes", q_path(path),
                (long long)st.st_size, max);
  } else {
    /* st_size is a hint only: the file may change while we read it. */
    size_t cap = S_ISREG(st.st_mode) ? (size_t)st.st_size : 65536;
    s = read_fd(fd, path, cap < max ? cap : max, max, buf, len);
  }
  close(fd);
  return s;
}

/* A temporary name beside path that no other process or thread is using now:
 * pid, time and a stack address tell callers apart, attempt retries collisions. */
static void temp_name(char *out, size_t n, const char *path, int attempt) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t h = HASH_SEED;
  int64_t parts[4] = {(int64_t)getpid(), (int64_t)ts.tv_sec, (int64_t)ts.tv_nsec, attempt};
  uintptr_t where = (uintptr_t)&ts;
  h = hash_bytes(h, parts, sizeof parts);
  h = hash_bytes(h, &where, sizeof where);
  snprintf(out, n, "%s.tmp%016llx", path, (unsigned long long)h);
}

/* Makes the rename durable.  Best effort: the new file is in place already, and
 * some file systems cannot fsync a directory. */
static void sync_parent_dir(const char *path) {
  const char *slash = strrchr(path, '/');
  char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
  if (!dir) return;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    (void)fsync(fd);
    close(fd);
  }
  free(dir);
}

int file_write_fd(int fd, const void *buf, size_t len) {
  const uint8_t *p = buf;
  while (len) {
    ssize_t w = write(fd, p, len > (1u << 30) ? (1u << 30) : len);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return errno;
    if (w == 0) return ENOSPC;
    p += w;
    len -= (size_t)w;
  }
  return 0;
}

smelt_status file_write_atomic(const char *path, const void *buf, size_t len) {
  return file_write_atomic_ex(path, buf, len, true);
}

smelt_status file_create_temp(const char *path, int access, int *fd_out, char **tmp_out) {
  *fd_out = -1;
  *tmp_out = NULL;
  size_t tn = strlen(path) + 32;
  char *tmp = malloc(tn);
  if (!tmp) return err_nomem("temporary file name", tn);
  int fd = -1;
  for (int attempt = 0; attempt < 100; attempt++) {
    temp_name(tmp, tn, path, attempt);
    fd = open(tmp, access | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) break;
  }
  if (fd < 0) {
    char b[128];
    smelt_status s = err_set(SMELT_ERR_IO, "cannot write %s: cannot create temporary file %s: %s",
                             q_path(path), q_path(tmp), errstr(errno, b, sizeof b));
    free(tmp);
    return s;
  }
  *fd_out = fd;
  *tmp_out = tmp;
  return SMELT_OK;
}

smelt_status file_write_temp(const char *path, const void *buf, size_t len, bool durable, char **tmp_out) {
  *tmp_out = NULL;
  if (!path || !*path) return err_set(SMELT_ERR_INVALID_ARGUMENT, "file_write_atomic: no path given");
  if (!buf && len) return err_set(SMELT_ERR_INVALID_ARGUMENT, "file_write_atomic: NULL data");
  char *tmp;
  int fd;
  TRY(file_create_temp(path, O_WRONLY, &fd, &tmp));
  const char *step = "writing";
  int e = file_write_fd(fd, buf, len);
  if (!e && durable && fsync(fd)) e = errno, step = "syncing";
  if (close(fd) && !e) e = errno, step = "closing";
  if (e) {
    char b[128];
    smelt_status s = err_set(SMELT_ERR_IO, "cannot write %s (%zu bytes): %s: %s", q_path(path), len, step,
                             errstr(e, b, sizeof b));
    unlink(tmp);
    free(tmp);
    return s;
  }
  *tmp_out = tmp;
  return SMELT_OK;
}

void file_sync_dir_of(const char *path) { sync_parent_dir(path); }

smelt_status file_write_atomic_ex(const char *path, const void *buf, size_t len, bool durable) {
  char *tmp;
  TRY(file_write_temp(path, buf, len, durable, &tmp));
  smelt_status s = SMELT_OK;
  if (rename(tmp, path)) {
    char b[128];
    s = err_set(SMELT_ERR_IO, "cannot write %s (%zu bytes): renaming the temporary file onto it: %s",
                q_path(path), len, errstr(errno, b, sizeof b));
    unlink(tmp);
  } else if (durable) {
    sync_parent_dir(path);
  }
  free(tmp);
  return s;
}
