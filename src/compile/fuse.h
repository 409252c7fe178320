/* Fusion: groups of elementwise and reduction nodes that become one
 * generated loop nest each.  Decided greedily by memory traffic: the edges
 * carrying the most bytes are fused first, when the union is still acyclic
 * (as a graph of groups) and lowers to one kernel (same iteration space, the
 * reduced dims collapse to one inner extent, limits on size). */
#ifndef SMELT_COMPILE_FUSE_H
#define SMELT_COMPILE_FUSE_H

#include "compile/cgraph.h"

#define FUSE_MAX_NODES 64

typedef struct fgroup {
  int *nodes; /* node ids in execution order (malloc'd) */
  int n;
  int r, k;
  int64_t I[SMELT_MAX_RANK];
  kir_group *kir; /* malloc'd */
  win_geom *win;  /* a window kernel (pool, depthwise conv); NULL for fused groups */
  size_t bytes_saved; /* intermediate traffic avoided (written once, read once) */
} fgroup;

typedef struct fusion {
  int *group_of; /* per node: group index, or -1 */
  fgroup *groups;
  int n_groups;
  char **log; /* decisions, for --explain and SMELT_DEBUG */
  int n_log, cap_log;
} fusion;

/* Groups every CN_PW / CN_RED node of cg (singletons where nothing fuses).
 * enable=false: every such node is its own group (no fusion). */
smelt_status fuse_graph(const cgraph *cg, bool enable, fusion *f);
void fusion_free(fusion *f);
void fusion_log(fusion *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
