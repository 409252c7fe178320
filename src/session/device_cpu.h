/* The CPU devices of the back-end seam (backend/backend.h): "cpu"
 * (device_cpu.c) and the test-only "cpu-ref" (device_cpu_ref.c). */
#ifndef SMELT_SESSION_DEVICE_CPU_H
#define SMELT_SESSION_DEVICE_CPU_H

#include "backend/backend.h"
#include "session/session.h"

/* The session's eager plan run on pool (NULL: the calling thread alone),
 * recording the run's peak bytes in its stats. */
smelt_status backend_eager_run(smelt_session *s, smelt_pool *pool, tensor *const *inputs, tensor *outputs,
                               eager_stats *stats);

/* cpu-ref's counters since the process started: blocks allocated through
 * its buffers, and copies in and out (tests check the seam is used). */
void backend_cpu_ref_counts(size_t *allocs, size_t *copies);

#endif
