/* The compiler: from a model graph and concrete input shapes to a compiled
 * plan (plan.h).
 *
 *   clone the graph, set the input shapes, infer every shape again
 *   passes_run                 (fold, dce, cse, pattern fusions into smelt.* ops)
 *   classify + fuse            (cgraph.c, fuse.c)
 *   schedule + memory plan     (schedule.c, plan/memplan.c)
 *   emit C, compile, load      (kernels.c, codegen/, cache/)
 *   max-autotune: time variants on the real shapes, keep the fastest (tune/)
 *
 * Without a C compiler (or when the generated code does not build) the
 * groups run through their reference kernels instead, after a warning; with
 * fullgraph that is an error, as is any graph break. */
#ifndef SMELT_COMPILE_COMPILE_H
#define SMELT_COMPILE_COMPILE_H

#include "cache/cache.h"
#include "codegen/cc.h"
#include "compile/cgraph.h"
#include "compile/fuse.h"
#include "plan/plan.h"
#include "util/strbuf.h"
#include "util/log.h"

typedef struct compile_options {
  smelt_mode mode;
  smelt_precision precision; /* passes/autocast.c */
  bool fullgraph;
  bool dynamic;
  smelt_pool *pool;
  const smelt_cache *cache;
  const char *debug_dir; /* SMELT_DEBUG: this compile's folder; NULL: off */
  int jobs;              /* compilers run at once */
  const cc_toolchain *tc; /* NULL: no usable C compiler (tc_error says why) */
  const char *tc_error;
  struct kernel_memo *memo; /* the session's loaded kernel libraries, by key */
  struct op_cache *op_cache; /* the session's prepared weights, shared by its plans (may be NULL) */
  const smelt_logger *log;   /* the session's log (max-autotune's progress); NULL: none */
  /* Prepare the plan's constant weights (plan_prepare) on this thread while
   * the C compiler builds its kernels on another, instead of after: the
   * caller still calls plan_prepare after compile_model (it finds what was
   * prepared in the op cache, and reports any failure). */
  bool prepare_while_cc;
} compile_options;

/* What a compile did (for stats, --explain and SMELT_DEBUG). */
typedef struct compile_report {
  strbuf explain;        /* human-readable account */
  double seconds;        /* total */
  double t_front, t_passes, t_fuse, t_plan, t_emit, t_cc, t_load, t_tune;
  bool cache_hit;
  bool tune_cache_hit;
  bool no_codegen;       /* the compiler could not be used: groups ran eagerly */
  char warning[1024];    /* a warning for the session's log (no compiler, cache refused...), "" if none */
  int graph_breaks, kernels, groups, fusions, library_steps;
  size_t arena_bytes;
  size_t eager_bytes;    /* what the eager executor would hold at its peak (estimate) */
} compile_report;

/* Compiles model graph mg for inputs of the given shapes (data unused except
 * by max-autotune, which runs the plan on them).  rep may be NULL. */
smelt_status compile_model(const ir_graph *mg, tensor *const *inputs, const compile_options *o,
                           compiled_plan **out, compile_report *rep);
void compile_report_free(compile_report *r);

/* ---- stages (one file each) ---- */

/* specialize.c: the private, re-inferred, optimized copy of the graph. */
smelt_status specialize_graph(const ir_graph *mg, tensor *const *inputs, const compile_options *o,
                              ir_graph **out, compile_report *rep);

/* schedule.c: steps, value locations, arena.  use_kernels false: every
 * group's nodes become library steps (no generated code). */
smelt_status schedule_plan(const cgraph *cg, fusion *fu, bool use_kernels, compiled_plan *p);

/* kernels.c: generates, builds (or finds in the cache) and loads the
 * kernels of p's kernel steps. */
smelt_status kernels_build(compiled_plan *p, const fusion *fu, const compile_options *o,
                           compile_report *rep);

/* Libraries loaded in a session, shared by its plans (kernels.c). */
typedef struct kernel_memo {
  pthread_mutex_t lock;
  struct memo_entry {
    char key[33];
    kernel_lib lib;
  } *e;
  int n, cap;
} kernel_memo;
void kernel_memo_init(kernel_memo *m);
void kernel_memo_free(kernel_memo *m);

#endif
