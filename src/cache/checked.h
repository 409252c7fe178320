/* Entries already checked: when a mapped entry needs no checksum pass.
 *
 * A checksum guards against an entry that is not what its writer wrote: a
 * write torn by a crash (entries are not fsync'd), or a file changed since.
 * Neither can have happened to a data file whose identity -- device, inode,
 * size, modification and change times -- is what a checked (or written)
 * entry had, within one boot: any write changes the change time, which no
 * one can set back, a replaced file is another inode, and without a crash
 * every process reads the same page cache the writer wrote.  So:
 *
 *  - in a process, a small table remembers the entries it wrote or checked;
 *  - across the processes of one boot, the entry's meta carries a note --
 *    the boot's id (/proc/sys/kernel/random/boot_id) and the data file's
 *    identity -- written with the entry, and again by the first process
 *    that checks it after a reboot.  A note from another boot, or for
 *    another identity, is ignored: the entry is checked as before.
 *
 * Without a boot id (not Linux, /proc missing) there is no note and every
 * process checks what it maps once. */
#ifndef SMELT_CACHE_CHECKED_H
#define SMELT_CACHE_CHECKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "cache/cache.h"

/* This process: whether (k, kind) with data file st and checksum sum was
 * written or checked here; and noting that it was. */
bool checked_known(const cache_key *k, const char *kind, const struct stat *st, uint64_t sum);
void checked_note(const cache_key *k, const char *kind, const struct stat *st, uint64_t sum);
/* Forgets every note of this process (tests: as a new process would start). */
void checked_forget(void);

/* Whether this system has a boot id to note (else no meta carries a note). */
bool checked_can_note(void);
/* The meta's note line for data file st ("checked BOOT DEV INO SIZE
 * MTIME CTIME\n") into buf: its length, or 0 without a boot id (or room). */
size_t checked_meta_line(const struct stat *st, char *buf, size_t n);
/* Whether meta text (NUL-terminated) holds a note of this boot for exactly
 * data file st. */
bool checked_meta_says(const char *meta, const struct stat *st);

#endif
