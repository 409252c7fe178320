/* Several files written as one: all of them replace their old versions, or
 * none does (smelt run -o DIR writes every output this way). */
#ifndef SMELT_UTIL_FILE_SET_H
#define SMELT_UTIL_FILE_SET_H

#include <stddef.h>

#include "smelt.h"

/* Writes bufs[i][0..lens[i]) to paths[i] for every i < n (paths distinct, in
 * one directory or several).  Each file first goes to a temporary file beside
 * its path (file_write_temp); once all are written, every existing file at a
 * path is hard-linked to a backup name, then the temporaries are renamed onto
 * the paths, then the backups are removed.  On any failure — a write, a
 * backup, a rename — the temporaries are removed, the paths already renamed
 * get their old files back (or are removed where there was none) and the
 * error names the path and the step.  Not atomic against a crash halfway
 * through the renames (a backup may be left beside its path then). */
smelt_status file_set_write(int n, const char *const *paths, const void *const *bufs, const size_t *lens);

#endif
