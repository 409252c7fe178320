/* A large copy into fresh memory, split over a few short-lived threads.
 *
 * Copying into pages nothing has touched yet is bound by the kernel's page
 * faults (zeroing each page, and on a VM the host backing it), and those
 * run in parallel on separate cores: 512 MB into fresh memory on the 2-core
 * test VM took 0.31-0.36 s on one thread and 0.18-0.22 s on two.  The
 * importer's aligned copies of misaligned weights (hundreds of MB for a
 * transformer exported with inline data) go through here.
 *
 * n bytes from src to dst in parts of at least COPY_PAR_MIN_PART bytes, one
 * per core the process may run on, at most COPY_PAR_MAX_THREADS; the
 * calling thread copies the first part and waits for the others (a thread
 * that cannot be started leaves its part to the caller).  done, when not
 * NULL, is called after every step of at most COPY_PAR_STEP bytes with the
 * source range just copied, from whichever thread copied it: it must be
 * thread-safe.  Nothing is allocated; nothing fails. */
#ifndef SMELT_UTIL_COPY_PAR_H
#define SMELT_UTIL_COPY_PAR_H

#include <stddef.h>

#define COPY_PAR_MIN_PART ((size_t)16 << 20)
#define COPY_PAR_MAX_THREADS 4
#define COPY_PAR_STEP ((size_t)8 << 20)

typedef void (*copy_par_done)(const void *src, size_t n, void *ctx);

void copy_par(void *dst, const void *src, size_t n, copy_par_done done, void *ctx);

/* How many parts copy_par splits n bytes into (tests). */
int copy_par_parts(size_t n);

#endif
