/* util/file_set.h: several files replaced together, or none of them. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

#include "check.h"
#include "util/file.h"
#include "util/file_set.h"

static char dir[] = "/tmp/smelt-test-file-set-XXXXXX";

/* dir/name in one of 16 buffers, each used once */
static char *path_in(const char *name) {
  static char b[16][256];
  static int k;
  char *p = b[k++ % 16];
  snprintf(p, 256, "%s/%s", dir, name);
  return p;
}

static bool has(const char *name, const char *text) {
  uint8_t *buf;
  size_t len;
  char p[256];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  if (file_read_all(p, &buf, &len, 0)) return false;
  bool ok = len == strlen(text) && !memcmp(buf, text, len);
  free(buf);
  return ok;
}

static int n_entries(void) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
  if (d) closedir(d);
  return n;
}

int main(void) {
  if (!mkdtemp(dir)) return 1;
  const char *p3[3] = {path_in("a.npy"), path_in("b.npy"), path_in("c.npy")};
  const void *new3[3] = {"new a", "new b", "new c"};
  size_t len3[3] = {5, 5, 5};
  CHECK_OK(file_write_atomic(p3[0], "old a", 5));
  CHECK_OK(file_set_write(3, p3, new3, len3));
  CHECK(has("a.npy", "new a") && has("b.npy", "new b") && has("c.npy", "new c") && n_entries() == 3);

  /* c.npy is a directory: nothing changes, no temporary or backup is left */
  CHECK_OK(file_write_atomic(p3[0], "old a", 5));
  unlink(p3[2]);
  mkdir(p3[2], 0700);
  const void *newer[3] = {"NEW A", "NEW B", "NEW C"};
  CHECK(file_set_write(3, p3, newer, len3) == SMELT_ERR_IO);
  CHECK(strstr(smelt_last_error(), "c.npy") != NULL);
  CHECK(has("a.npy", "old a") && has("b.npy", "new b") && n_entries() == 3);
  rmdir(p3[2]);

  /* a path in a missing folder: the others are not written either */
  const char *bad[2] = {path_in("d.npy"), path_in("missing/e.npy")};
  CHECK(file_set_write(2, bad, newer, len3) == SMELT_ERR_IO);
  CHECK(n_entries() == 2 && !has("d.npy", "NEW A"));

  /* a path given twice is refused */
  const char *twice[2] = {p3[0], p3[0]};
  CHECK(file_set_write(2, twice, newer, len3) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(has("a.npy", "old a"));

  unlink(p3[0]);
  unlink(p3[1]);
  rmdir(dir);
  return test_report("test_file_set");
}
