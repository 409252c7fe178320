/* Graph passes: one file per pass, each registered in passes.def, counted,
 * timed and dumpable.  A pass rewrites an ir_graph in place and reports how
 * many changes it made; the pipeline repeats the cleanup passes until nothing
 * changes.  Passes work on a private copy of the model's graph (ir_graph_clone),
 * never on the model itself. */
#ifndef SMELT_PASSES_PASS_H
#define SMELT_PASSES_PASS_H

#include <stdbool.h>

#include "ir/ir.h"

typedef struct pass_options {
  smelt_mode mode;
  bool specialized;       /* input shapes are concrete (static compile) */
  const char *debug_dir;  /* SMELT_DEBUG: write IR before/after each pass here; NULL = off */
  smelt_precision precision; /* session precision: autocast marks nodes for it (autocast.c) */
  bool static_kv;         /* a generator's decode graph (passes/static_kv.h): lengths symbolic */
  int threads;            /* the session's threads (bf16_acts.c asks the conv registry's pick); 0: one */
} pass_options;

typedef struct pass_stat {
  const char *name;
  int runs, changes;
  double seconds;
} pass_stat;

/* What the pipeline did, for `smelt compile --explain` and SMELT_DEBUG. */
typedef struct pass_report {
  pass_stat stats[64];
  int n_stats;
  char **log;    /* one line per decision: "fused 'Conv_3' + 'Relu_4' -> smelt.Conv(relu)" */
  int n_log, cap_log;
} pass_report;

typedef struct pass_def {
  const char *name;
  smelt_status (*run)(ir_graph *g, const pass_options *o, pass_report *r, int *changes);
} pass_def;

/* Runs the whole pipeline on g. */
smelt_status passes_run(ir_graph *g, const pass_options *o, pass_report *r);
void pass_report_free(pass_report *r);
/* Appends a line to the report's log (printf-style). */
void pass_log(pass_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
