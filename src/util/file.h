/* Whole-file reads and crash-safe writes.  Errors name the path and give the
 * system's reason (strerror). */
#ifndef SMELT_UTIL_FILE_H
#define SMELT_UTIL_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smelt.h"

/* Reads the whole file at path into a malloc'd buffer (*buf, freed by the
 * caller with free) of *len bytes, followed by one NUL byte not counted in *len
 * so text can be parsed in place.  Works on regular files and on pipes.
 * max_bytes caps the size read (0 = no cap): a larger file is an error
 * (SMELT_ERR_IO), found before the whole file is read.  On failure *buf is NULL. */
smelt_status file_read_all(const char *path, uint8_t **buf, size_t *len, size_t max_bytes);

/* Replaces the file at path with buf[0..len), atomically: the bytes go to a new
 * temporary file in the same directory (created with mode 0666 minus umask),
 * which is fsync'd, then renamed over path, then the directory is fsync'd.  A
 * reader sees the old file or the new one, never a mix.  On any failure (full
 * disk, missing directory, path is a directory...) the temporary file is
 * removed and an existing file at path is left untouched.  A symlink at path
 * is replaced by the file, not followed. */
smelt_status file_write_atomic(const char *path, const void *buf, size_t len);
/* durable false: no fsync of the file and its directory (the rename stays
 * atomic, but after a crash the file may be empty or partly written: for
 * data that carries its own checksum, like cache entries). */
smelt_status file_write_atomic_ex(const char *path, const void *buf, size_t len, bool durable);

/* The two halves of file_write_atomic_ex, for writers that rename several
 * files together (util/file_set.h): file_write_temp writes buf to a new
 * temporary file beside path (fsync'd when durable) and gives its malloc'd
 * name in *tmp (NULL on failure, when nothing is left behind);
 * file_sync_dir_of fsyncs the directory holding path (best effort). */
smelt_status file_write_temp(const char *path, const void *buf, size_t len, bool durable, char **tmp);
/* Creates (O_EXCL, mode 0666 before the umask) and opens with access
 * (O_WRONLY or O_RDWR) a new temporary file beside path, named as
 * file_write_temp's are: *fd (the caller closes it) and *tmp (malloc'd; the
 * caller renames or unlinks it and frees the name). */
smelt_status file_create_temp(const char *path, int access, int *fd, char **tmp);
void file_sync_dir_of(const char *path);
/* Writes all of buf[0..len) to fd (retrying short writes and EINTR): 0, or
 * the errno that stopped it (ENOSPC for a write of nothing). */
int file_write_fd(int fd, const void *buf, size_t len);

#endif
