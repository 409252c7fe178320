/* The profiler behind `smelt profile`: per-step timings of runs, the pool's
 * chunks on every thread, a Chrome trace and a per-kernel summary.
 *
 * Use: profiler_create; profiler_attach_pool(session's pool); then for each
 * run: profiler_run_begin, run with eager_stats.hook = profiler_hook(p),
 * profiler_run_end; then read the events, write a trace, summarize.  A
 * profiler observes one run at a time (the hook keeps one stack of open
 * steps); pool chunks may be reported from any thread.  Strings handed to the
 * hook are kept as pointers: they must outlive the profiler. */
#ifndef SMELT_RUNTIME_PROFILE_H
#define SMELT_RUNTIME_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "parallel/pool.h"
#include "runtime/run_hook.h"
#include "util/json.h"

typedef enum profile_event_type {
  PROFILE_RUN = 0, /* one whole run, as measured by the caller */
  PROFILE_STEP,    /* a node or kernel, from the run hook */
  PROFILE_CHUNK    /* a pool chunk, from the pool observer */
} profile_event_type;

typedef struct profile_event {
  profile_event_type type;
  const char *kind; /* op type or kernel (steps), the enclosing step's kind (chunks), "run" */
  const char *name; /* node name (steps), else "" */
  int track;        /* 0: the thread that runs the graph; 1..: others, in order of appearance */
  int depth;        /* steps: nesting depth (0 = a step of the main graph) */
  int run;          /* index of the run it belongs to */
  int64_t t0_ns, t1_ns; /* since profiler_create; t1_ns < 0 while open */
  int64_t begin, end;   /* chunks: the item range; else -1 */
} profile_event;

typedef struct profiler profiler;

smelt_status profiler_create(profiler **out);
/* Detaches from the pool (if attached) and frees everything. */
void profiler_free(profiler *p);

/* The hook to put in eager_stats.hook; valid while p lives. */
const run_hook *profiler_hook(profiler *p);
/* Starts / stops reporting the pool's chunks to p (pool may be NULL). */
void profiler_attach_pool(profiler *p, smelt_pool *pool);
void profiler_detach_pool(profiler *p);

/* Bracket one run; the thread calling run_begin becomes track 0. */
void profiler_run_begin(profiler *p);
void profiler_run_end(profiler *p);

/* Events recorded so far (valid until the next recording call). */
const profile_event *profiler_events(const profiler *p, size_t *n);
int profiler_tracks(const profiler *p);
/* Events lost to a failed allocation or nesting deeper than the stack. */
int64_t profiler_dropped(const profiler *p);

/* One line of the summary: steps of the main graph grouped by kind (op type
 * or kernel) or by node name. */
typedef struct profile_row {
  const char *label;
  int64_t calls;
  int64_t total_ns;
} profile_row;

typedef struct profile_summary {
  profile_row *rows; /* sorted by total_ns, largest first; malloc'd */
  int n_rows;
  int runs;
  int64_t run_ns;   /* total of the runs' measured time */
  int64_t steps_ns; /* total of the top-level steps' time */
  double coverage;  /* steps_ns / run_ns (0 if no run) */
  int64_t *track_busy_ns; /* per track: time inside top-level steps (track 0) or chunks */
  int n_tracks;
} profile_summary;

smelt_status profiler_summarize(const profiler *p, bool by_name, profile_summary *out);
void profile_summary_free(profile_summary *s);

/* Writes the events as a Chrome trace (the JSON Object Format: "traceEvents"
 * of "X" complete events, ts/dur in microseconds, plus thread_name metadata),
 * which Perfetto and chrome://tracing load.  process_label names the process
 * track.  Fields of `other` are not written; the caller may add its own keys
 * to the top-level object after this returns (the object is left open). */
void profiler_write_chrome(const profiler *p, json_writer *w, const char *process_label);

#endif
