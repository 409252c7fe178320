/* A compiled plan: one specialization of a model for one set of input
 * shapes.  Built by compile.c, run by runtime/plan_run.c.
 *
 * Every value lives somewhere known before the run: in the arena at a fixed
 * offset, in a caller's input, in a constant, or — for values whose shape is
 * only known at run time (after a graph break) — in the run's dynamic table.
 * Steps are generated kernels, library kernels (an op's run function on
 * arena buffers) and graph breaks (node_run, allocating). */
#ifndef SMELT_PLAN_PLAN_H
#define SMELT_PLAN_PLAN_H

#include <pthread.h>

#include "codegen/loader.h"
#include "ir/ir.h"
#include "ops/op_memo.h"
#include "parallel/pool.h"

typedef enum vloc_kind {
  VL_NONE = 0, /* not materialized (kept in registers inside a kernel) */
  VL_ARENA,    /* arena + off */
  VL_INPUT,    /* graph input `input` (+ off for views: always 0) */
  VL_CONST,    /* cst->data */
  VL_DYN,      /* the run's dynamic table (shape known at run time only) */
  VL_OUTPUT    /* graph output `input` (its index in g->outputs): a buffer of its
                * own, allocated for each run and handed to the caller as the
                * output, so the producing step writes it in place (no copy out
                * of the arena); + off */
} vloc_kind;

typedef struct vloc {
  vloc_kind kind;
  size_t off;
  int input;
  const tensor *cst;
} vloc;

typedef enum pstep_kind { PS_KERNEL, PS_LIBRARY, PS_BREAK } pstep_kind;

/* Library-step variants max-autotune chooses among. */
typedef enum lib_variant {
  LV_POOL = 0,   /* the op's run function with the session's pool */
  LV_SERIAL,     /* the same on one thread (small ops: no pool hand-off) */
  LV_COUNT
} lib_variant;

typedef struct pstep {
  pstep_kind kind;
  int node;    /* library/break: the node; kernel: its group's first node */
  int group;   /* kernel: fusion group */
  int fn;      /* kernel: index in the loaded library */
  int fn_vars[8]; /* kernel, max-autotune: the variants' indices (fn is one of them) */
  int n_fn_vars;
  int n_args;  /* kernel: operands, inputs then outputs (value ids) */
  int *args;
  int64_t *params; /* kernel, dynamic mode */
  int n_params;
  bool zero_out;   /* library: clear outputs first (kernels that accumulate) */
  struct gemm_step *gemm; /* library: a GEMM the plan runs itself (runtime/gemm_step.h), else NULL */
  bool lib_alt;    /* kernel of one node (a window) that can also run its library op */
  bool use_lib;    /* ...and max-autotune found the library op faster */
  int variant;     /* library: lib_variant, or the GEMM step variant */
  double seconds;  /* max-autotune: measured time of the chosen variant */
  char kind_label[48]; /* for run hooks (the profiler): "smelt.fused_3", "Conv", ... */
  /* library: the op's run memo, the one field runs write */
  op_memo memo;
} pstep;

typedef struct plan_instance plan_instance;

typedef struct compiled_plan {
  ir_graph *g;       /* the specialized graph (owned) */
  smelt_mode mode;
  smelt_pool *pool;  /* the session's (borrowed) */
  /* whole-graph eager (control flow, sequences): eplan over the model graph,
   * the runtime's eager plan (runtime/eager.h; owned) */
  bool whole_eager;
  struct eager_plan *eplan;
  pstep *steps;
  int n_steps;
  vloc *loc;         /* per value of g */
  struct op_cache *caches; /* per node of g: weights library ops prepare once (ops/op_cache.h) */
  struct op_cache *shared_cache; /* the session's, shared by its plans (NULL: use caches) */
  size_t arena_bytes;
  size_t *out_bytes; /* per graph output: bytes of its VL_OUTPUT buffer, 0 when it has none */
  kernel_lib lib;
  bool owns_lib;     /* else the session's kernel memo closes it */
  char key[33];      /* cache key of the kernel library ("" if none) */
  int n_kernels, n_breaks, n_library;
  /* input guard: the shapes this plan was made for */
  int n_inputs;
  tensor *in_sig; /* dtype/rank/dims per input (no data) */
  /* arenas for concurrent runs */
  pthread_mutex_t lock;
  plan_instance *free_list;
  plan_instance *all;
} compiled_plan;

void compiled_plan_free(compiled_plan *p);

#endif
