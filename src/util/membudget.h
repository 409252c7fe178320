/* The session memory budget (smelt_session_options.max_memory, --max-memory):
 * its default from the machine and the cgroup, sizes written by people
 * ("512M", "8G") and sizes written for people ("24.0 GB").  The accounting
 * itself is in the session's allocation path (util/bufcache.h). */
#ifndef SMELT_UTIL_MEMBUDGET_H
#define SMELT_UTIL_MEMBUDGET_H

#include <stdbool.h>
#include <stddef.h>

/* 80% of the smallest of MemAvailable (/proc/meminfo; MemTotal where that is
 * missing), the cgroup's limit (v2 memory.max, v1 memory.limit_in_bytes) and
 * the address-space limit (ulimit -v), where those are set.  Where none of
 * these can be read: SIZE_MAX (no budget). */
size_t membudget_default(void);

/* The same from given figures (0 = unknown); for tests. */
size_t membudget_from(size_t mem_available, size_t mem_total, size_t cgroup_limit);

/* "1048576", "512K", "512M", "8G", "1T" (powers of 1024; a trailing B or iB is
 * accepted: "8GB", "8GiB").  False on anything else, zero or overflow. */
bool membudget_parse(const char *s, size_t *out);

/* "22.4 GiB", "512.0 MiB", "64.0 KiB", "100 bytes": powers of 1024, as the
 * suffixes membudget_parse reads. */
const char *membudget_fmt(char *buf, size_t n, size_t bytes);

#endif
