/* Read-only file mappings whose pages may be dropped and read back.
 *
 * A model file (and its external data) is mapped PROT_READ, MAP_PRIVATE:
 * nothing ever writes to it, so a page of it that the process drops
 * (madvise MADV_DONTNEED) is read back from the file on its next access,
 * unchanged.  Once a constant weight has been packed into the form its
 * consumers run from (ops/gemm_weights.c, the convolution's prepared
 * weights), its float32 bytes need not stay resident: the packer asks to
 * release them, and any later reader (eager fallback, a re-plan for a new
 * shape, the cpu-ref device, the prepared-weight cache's hash, a decode-size
 * GEMM that reads the plain weights) pages them back in from the file.
 *
 * Only ranges inside a registered mapping are ever dropped: heap memory
 * (a model loaded from bytes) is never touched.  Thread-safe. */
#ifndef SMELT_UTIL_RO_MAP_H
#define SMELT_UTIL_RO_MAP_H

#include <stddef.h>
#include <stdint.h>

/* Registers [p, p+len) as a read-only file mapping (no-op if p is NULL or
 * the table cannot grow: its pages are then simply never dropped). */
void ro_map_add(const void *p, size_t len);

/* Registers [p, p+len) as scratch: private anonymous memory (a copy of a
 * model's bytes) whose pages come back zero once dropped, so only
 * ro_map_discard drops them, for ranges nothing reads again. */
void ro_map_add_scratch(const void *p, size_t len);

/* Forgets the mapping that starts at p; call before munmap. */
void ro_map_remove(const void *p);

/* Drops the process's resident pages lying wholly inside [p, p+len) when
 * that range is inside one registered mapping; returns the bytes of the
 * whole pages it dropped (0: nothing dropped, not a registered mapping, or
 * releasing is off: SMELT_WEIGHT_RELEASE=0/off/no). */
size_t ro_map_release(const void *p, size_t len);

/* As ro_map_release, and also inside scratch memory: for a range that is
 * never read again (the source of an import copy). */
size_t ro_map_discard(const void *p, size_t len);

/* Bytes dropped by ro_map_release and ro_map_discard since the process
 * started (tests, reports). */
uint64_t ro_map_released_total(void);

#endif
