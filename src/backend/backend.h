/* The device seam: one small, versioned table per device (in the spirit of
 * ggml's backend interface and XNNPACK's per-(dtype, ISA) configs).  A
 * session looks its device up by name (smelt_session_options.device) and
 * then goes through the table only: its buffers, what it supports, plans
 * for input shapes, runs, synchronization.
 *
 * Devices in this library (backend_find):
 *   "cpu"      the default: the eager runtime and the compiled plans as
 *              they are (wraps runtime/ and compile/; no speed change);
 *   "cpu-ref"  test-only: the CPU through this table with the reference
 *              kernels alone (eager, no compiled plans, no prepared weights,
 *              scalar ISA, one thread) and buffers of its own that inputs
 *              are copied into and results out of, so the seam is exercised
 *              as a device with separate memory would use it;
 *   "cuda", "cuda:N"  reserved: a clear "not built into this library" error.
 *
 * Layering: backend/ (this header and the registry) sits just below
 * session/, which includes it; the two CPU devices are defined in session/
 * (session/device_cpu.c, device_cpu_ref.c) because they wrap the session's
 * runtime and compiler.  Lower layers never include it: tensor data comes
 * from a device through the buffer_fns it enters on the running thread
 * (ir/tensor.h), and the ISA cap is kernels/isa.h's. */
#ifndef SMELT_BACKEND_BACKEND_H
#define SMELT_BACKEND_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "ir/ir.h"

/* Bumped when the table's layout or a function's contract changes; a table
 * of another version is refused by the registry. */
#define BACKEND_ABI_VERSION 1

struct smelt_session;
struct eager_stats;
struct compile_report;

typedef enum backend_copy_kind {
  BACKEND_COPY_HOST_TO_DEVICE = 0,
  BACKEND_COPY_DEVICE_TO_HOST,
  BACKEND_COPY_DEVICE_TO_DEVICE
} backend_copy_kind;

typedef struct backend {
  int abi_version;   /* BACKEND_ABI_VERSION */
  const char *name;  /* "cpu", "cpu-ref" */
  const char *about; /* one line for listings and --help */
  /* Device memory: tensor data of the session's runs (inputs copied in,
   * intermediates, results) is allocated and freed through these while the
   * run is going on (ir/tensor.h: tensor_buffers_enter). */
  buffer_fns buffers;
  /* true: buffers are the host's memory as it is (the caller's inputs are
   * used in place and results handed over without a copy); false: inputs
   * are copied in and results copied out with copy. */
  bool host_memory;
  smelt_status (*copy)(void *dst, const void *src, size_t n, backend_copy_kind kind);
  /* Whether the device runs node (of graph g) with elements of type dtype
   * (its first output's); asked for every node, subgraphs included, when a
   * session is made. */
  bool (*supports)(const ir_graph *g, const ir_node *node, smelt_dtype dtype);
  /* Per-session state: made when the session is (threads, mode and options
   * are in s->opts), freed with it.  open fails with a message naming the
   * device when it cannot honour the options (a mode it lacks).  close
   * frees what open made, also after a failed open (the session calls it
   * then, so open need not undo its own partial work). */
  smelt_status (*open)(struct smelt_session *s);
  void (*close)(struct smelt_session *s);
  /* Compiles a plan for these input shapes now (ahead of the runs that
   * bring them); rep (may be NULL) receives the compiler's account.  A
   * device that needs no plan per shape returns SMELT_OK. */
  smelt_status (*compile)(struct smelt_session *s, tensor *const *inputs, struct compile_report *rep);
  /* Launches a run: inputs (checked against the model, in device memory),
   * outputs zeroed, receiving owning results (device memory).  stats may be
   * NULL (profiling hook, eager peak bytes). */
  smelt_status (*run)(struct smelt_session *s, tensor *const *inputs, tensor *outputs,
                      struct eager_stats *stats);
  /* Waits until the work the session launched is done (the CPU devices run
   * synchronously: nothing to wait for). */
  smelt_status (*synchronize)(struct smelt_session *s);
} backend;

/* The device called name (NULL or "": "cpu").  Unknown names fail with
 * SMELT_ERR_INVALID_ARGUMENT listing the devices there are; "cuda" and
 * "cuda:N" with SMELT_ERR_UNSUPPORTED ("not built into this library"). */
smelt_status backend_lookup(const char *name, const backend **out);
/* The registered devices, in order (for listings); NULL past the end. */
const backend *backend_at(int i);
/* "cpu, cpu-ref" into buf. */
const char *backend_names(char *buf, size_t n);

/* The registered devices (defined in session/device_cpu.c and
 * session/device_cpu_ref.c). */
extern const backend backend_cpu;
extern const backend backend_cpu_ref;

#endif
