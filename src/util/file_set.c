#include "util/file_set.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/err.h"
#include "util/file.h"
#include "util/quote.h"

typedef struct entry {
  char *tmp;    /* the new contents, until renamed onto the path */
  char *backup; /* a hard link to the old file, NULL when there was none */
  bool placed;  /* tmp has been renamed onto the path */
  bool kept;    /* the old file could not be put back: the backup stays */
} entry;

/* Links the existing file at path to a new name beside it (*backup); no file
 * at path leaves *backup NULL. */
static smelt_status make_backup(const char *path, char **backup) {
  *backup = NULL;
  struct stat st;
  if (lstat(path, &st)) {
    if (errno == ENOENT) return SMELT_OK;
    return err_set(SMELT_ERR_IO, "cannot write %s: %s", q_path(path), strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) return err_set(SMELT_ERR_IO, "cannot write %s: it is a directory", q_path(path));
  size_t n = strlen(path) + 40;
  char *b = malloc(n);
  if (!b) return err_nomem("backup file name", n);
  for (unsigned k = 0; k < 1000; k++) {
    snprintf(b, n, "%s.old%ld-%u", path, (long)getpid(), k);
    if (!link(path, b)) {
      *backup = b;
      return SMELT_OK;
    }
    if (errno != EEXIST) break;
  }
  smelt_status s = err_set(SMELT_ERR_IO, "cannot write %s: cannot keep the old file as %s while the new "
                           "ones are put in place: %s", q_path(path), q_path(b), strerror(errno));
  free(b);
  return s;
}

/* Undoes everything done so far: temporaries removed, old files back. */
static void roll_back(int n, const char *const *paths, entry *e) {
  for (int i = 0; i < n; i++) {
    if (e[i].placed) {
      if (e[i].backup) {
        if (rename(e[i].backup, paths[i])) {
          e[i].kept = true;
        } else {
          free(e[i].backup);
          e[i].backup = NULL;
        }
      } else {
        unlink(paths[i]);
      }
    } else if (e[i].tmp) {
      unlink(e[i].tmp);
    }
  }
}

smelt_status file_set_write(int n, const char *const *paths, const void *const *bufs, const size_t *lens) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < i; j++)
      if (!strcmp(paths[i], paths[j]))
        return err_set(SMELT_ERR_INVALID_ARGUMENT, "file_set_write: %s is given twice", q_path(paths[i]));
  entry *e = calloc((size_t)n + 1, sizeof *e);
  if (!e) return err_nomem("file set", sizeof *e * ((size_t)n + 1));
  smelt_status s = SMELT_OK;
  for (int i = 0; i < n && !s; i++) s = file_write_temp(paths[i], bufs[i], lens[i], true, &e[i].tmp);
  for (int i = 0; i < n && !s; i++) s = make_backup(paths[i], &e[i].backup);
  for (int i = 0; i < n && !s; i++) {
    if (rename(e[i].tmp, paths[i]))
      s = err_set(SMELT_ERR_IO, "cannot write %s: renaming the temporary file onto it: %s", q_path(paths[i]),
                  strerror(errno));
    else
      e[i].placed = true;
  }
  if (s) roll_back(n, paths, e);
  for (int i = 0; i < n; i++) {
    if (!s) file_sync_dir_of(paths[i]);
    /* on success the old file; after a roll-back a second link to it */
    if (e[i].backup && !e[i].kept) unlink(e[i].backup);
    free(e[i].backup);
    free(e[i].tmp);
  }
  free(e);
  return s;
}
