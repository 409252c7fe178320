/* Generating, building and loading the kernels of a plan.
 *
 * Identical kernels (same text) are emitted once.  The kernels are spread
 * over several translation units compiled at once, plus one unit with the
 * table the loader looks up.  The library is keyed by everything that
 * determines its bytes (cache/keys.h) and taken from the cache when there.
 *
 * Complexity: O(kernel steps x kernel text) to emit; identical kernels are
 * found in a hash table (O(1) expected per step, one strcmp on a hit); the C
 * compile is proportional to the distinct kernels, spread over `jobs` units. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/keys.h"
#include "compile/compile.h"
#include "runtime/plan_run.h"
#include "util/err.h"
#include "util/file.h"
#include "util/hash.h"
#include "util/quote.h"

typedef struct kvariant {
  int lanes, unroll;
  int64_t grain;
  const char *flags;
} kvariant;

/* What max-autotune tries for each generated kernel. */
/* Grain: elements of work a task must have before the pool splits it.
 * Waking a worker costs microseconds (far more on a loaded machine), so the
 * default keeps small kernels on the calling thread. */
static const kvariant variants[] = {
    {16, 0, 65536, ""},                          /* the default */
    {16, 0, 65536, "-mprefer-vector-width=512"}, /* full-width vectors where the CPU has them */
    {32, 4, 65536, ""},                          /* more accumulators, unrolled loops */
    {16, 0, 262144, ""},                         /* coarser tasks: less pool traffic */
    {8, 0, 8192, ""},                            /* finer tasks: better balance */
};
#define N_VARIANTS (int)(sizeof variants / sizeof *variants)

typedef struct kset {
  char **text; /* emitted with the placeholder name (for dedup) */
  char **code; /* emitted with the real name */
  int *vflags; /* index into variants (for its flags) */
  uint64_t *hash; /* of text and variant */
  int n, cap;
  int *slot; /* open addressing over hash: kernel index + 1, 0 empty */
  int n_slots; /* a power of two, at least twice cap */
} kset;

static void kset_free(kset *k) {
  for (int i = 0; i < k->n; i++) {
    free(k->text[i]);
    free(k->code[i]);
  }
  free(k->text);
  free(k->code);
  free(k->vflags);
  free(k->hash);
  free(k->slot);
}

/* The slot holding the kernel with this text and variant, or the empty one
 * where it would go. */
static int kset_find(const kset *k, uint64_t h, const char *text, int v) {
  int i = (int)(h & (uint64_t)(k->n_slots - 1));
  for (;; i = (i + 1) & (k->n_slots - 1)) {
    int e = k->slot[i] - 1;
    if (e < 0 || (k->hash[e] == h && k->vflags[e] == v && !strcmp(k->text[e], text))) return i;
  }
}

static smelt_status kset_grow(kset *k) {
  int nc = k->cap ? k->cap * 2 : 16;
  char **nt = realloc(k->text, sizeof(char *) * (size_t)nc);
  if (nt) k->text = nt;
  char **ncd = realloc(k->code, sizeof(char *) * (size_t)nc);
  if (ncd) k->code = ncd;
  int *nv = realloc(k->vflags, sizeof(int) * (size_t)nc);
  if (nv) k->vflags = nv;
  uint64_t *nh = realloc(k->hash, sizeof(uint64_t) * (size_t)nc);
  if (nh) k->hash = nh;
  int *ns = calloc((size_t)nc * 2, sizeof(int));
  if (!nt || !ncd || !nv || !nh || !ns) {
    free(ns);
    return err_nomem("kernel list", sizeof(char *) * (size_t)nc);
  }
  free(k->slot);
  k->slot = ns;
  k->n_slots = nc * 2;
  k->cap = nc;
  for (int i = 0; i < k->n; i++) k->slot[kset_find(k, k->hash[i], k->text[i], k->vflags[i])] = i + 1;
  return SMELT_OK;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Index of the kernel with this text (adding it if new). */
static void emit_one(strbuf *b, const fgroup *fg, const kir_loops *lp, const char *name, const emit_opts *eo,
                     int64_t *params, int *n_params) {
  if (fg->win) {
    emit_window(b, fg->win, name, eo);
    *n_params = 0;
  } else {
    emit_kernel(b, fg->kir, lp, name, eo, params, n_params);
  }
}

static smelt_status kset_add(kset *k, const fgroup *fg, const kir_loops *lp, const emit_opts *eo,
                             int v, int *idx, int64_t *params, int *n_params) {
  strbuf t = {0};
  emit_one(&t, fg, lp, "smk_X", eo, params, n_params);
  if (t.oom) return err_nomem("kernel source", t.cap);
  uint64_t h = hash_mix64(hash_str(t.s) ^ (uint64_t)v);
  if (k->n_slots) {
    int e = k->slot[kset_find(k, h, t.s, v)] - 1;
    if (e >= 0) {
      sb_free(&t);
      *idx = e;
      return SMELT_OK;
    }
  }
  if (k->n == k->cap) {
    smelt_status st = kset_grow(k);
    if (st) {
      sb_free(&t);
      return st;
    }
  }
  char name[32];
  snprintf(name, sizeof name, "smk_%d", k->n);
  strbuf c = {0};
  int np;
  int64_t scratch[EMIT_MAX_PARAMS];
  emit_one(&c, fg, lp, name, eo, scratch, &np);
  if (c.oom) {
    sb_free(&t);
    return err_nomem("kernel source", c.cap);
  }
  k->text[k->n] = t.s;
  k->code[k->n] = c.s;
  k->vflags[k->n] = v;
  k->hash[k->n] = h;
  k->slot[kset_find(k, h, t.s, v)] = k->n + 1;
  *idx = k->n++;
  return SMELT_OK;
}

/* Emits every kernel step (all variants under max-autotune). */
static smelt_status emit_all(compiled_plan *p, const fusion *fu, const compile_options *o, kset *ks) {
  int nv = o->mode == SMELT_MODE_MAX_AUTOTUNE ? N_VARIANTS : 1;
  for (int s = 0; s < p->n_steps; s++) {
    pstep *st = &p->steps[s];
    if (st->kind != PS_KERNEL) continue;
    const fgroup *fg = &fu->groups[st->group];
    kir_loops lp;
    if (!fg->win && !kir_collapse(fg->kir, &lp))
      return err_set(SMELT_ERR_INTERNAL, "fused group %d has no loop form", st->group);
    int64_t params[EMIT_MAX_PARAMS];
    int n_params = 0;
    for (int v = 0; v < nv; v++) {
      emit_opts eo = emit_opts_default();
      eo.lanes = variants[v].lanes;
      eo.unroll = variants[v].unroll;
      eo.grain = variants[v].grain;
      eo.dynamic = o->dynamic;
      TRY(kset_add(ks, fg, &lp, &eo, v, &st->fn_vars[v], params, &n_params));
    }
    st->n_fn_vars = nv;
    st->fn = st->fn_vars[0];
    if (n_params) {
      st->params = malloc(sizeof(int64_t) * (size_t)n_params);
      if (!st->params) return err_nomem("kernel parameters", sizeof(int64_t) * (size_t)n_params);
      memcpy(st->params, params, sizeof(int64_t) * (size_t)n_params);
      st->n_params = n_params;
    }
  }
  return SMELT_OK;
}

typedef struct units {
  strbuf *src;
  const char **flags;
  int n;
} units;

static void units_free(units *u) {
  for (int i = 0; i < u->n; i++) sb_free(&u->src[i]);
  free(u->src);
  free(u->flags);
}

/* Spreads the kernels over translation units (by flags, then round robin)
 * and adds the table unit last. */
static smelt_status make_units(const kset *ks, int jobs, units *u) {
  int max_units = N_VARIANTS * (jobs > 0 ? jobs : 1) + 1;
  u->src = calloc((size_t)max_units, sizeof(strbuf));
  u->flags = calloc((size_t)max_units, sizeof(char *));
  if (!u->src || !u->flags) return err_nomem("translation units", sizeof(strbuf) * (size_t)max_units);
  for (int v = 0; v < N_VARIANTS; v++) {
    int n_k = 0;
    for (int i = 0; i < ks->n; i++) n_k += ks->vflags[i] == v;
    if (!n_k) continue;
    int per = jobs < n_k ? jobs : n_k, base = u->n;
    for (int t = 0; t < per; t++) {
      sb_printf(&u->src[base + t], "%s", emit_prelude_text());
      u->flags[base + t] = variants[v].flags;
    }
    for (int i = 0, c = 0; i < ks->n; i++)
      if (ks->vflags[i] == v) sb_printf(&u->src[base + (c++ % per)], "\n%s", ks->code[i]);
    u->n += per;
  }
  strbuf *tab = &u->src[u->n];
  u->flags[u->n++] = "";
  sb_printf(tab, "%s\n", emit_prelude_text());
  for (int i = 0; i < ks->n; i++) sb_printf(tab, "extern smelt_kernel smk_%d;\n", i);
  sb_printf(tab, "__attribute__((visibility(\"default\"))) smelt_kernel *const smelt_ktab[] = {\n");
  for (int i = 0; i < ks->n; i++) sb_printf(tab, "  smk_%d,\n", i);
  sb_printf(tab, "};\n__attribute__((visibility(\"default\"))) const int smelt_kcount = %d;\n", ks->n);
  sb_printf(tab, "__attribute__((visibility(\"default\"))) const int smelt_kabi = %d;\n", EMIT_ABI);
  for (int i = 0; i < u->n; i++)
    if (u->src[i].oom) return err_nomem("translation unit", u->src[i].cap);
  return SMELT_OK;
}

static cache_key library_key(const compiled_plan *p, const compile_options *o, const units *u) {
  key_hasher h;
  key_init(&h);
  key_add_str(&h, "smelt-kernel-library-1");
  key_add_machine(&h);
  key_add_toolchain(&h, o->tc->cmd, o->tc->identity, o->tc->flags);
  key_add_graph(&h, p->g, !o->dynamic);
  key_add_i64(&h, o->mode);
  key_add_i64(&h, o->dynamic);
  for (int i = 0; i < u->n; i++) {
    key_add_str(&h, u->flags[i]);
    key_add(&h, u->src[i].s, u->src[i].len);
  }
  return key_final(&h);
}

static void remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  char path[2048];
  while (d && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  if (d) closedir(d);
  rmdir(dir);
}

static smelt_status make_workdir(const compile_options *o, char *dir, size_t n) {
  const char *base = o->cache && o->cache->enabled ? o->cache->dir : getenv("TMPDIR");
  if (!base || !*base) base = "/tmp";
  snprintf(dir, n, "%s/build-XXXXXX", base);
  if (!mkdtemp(dir)) return err_set(SMELT_ERR_IO, "cannot create a build directory in %s: %s", q_path(base), strerror(errno));
  return SMELT_OK;
}

static void debug_write(const compile_options *o, const char *name, const char *text, size_t len) {
  if (!o->debug_dir) return;
  char path[2048];
  snprintf(path, sizeof path, "%s/%s", o->debug_dir, name);
  file_write_atomic(path, text, len);
}

/* Compiles the units; so and so_len receive the library bytes. */
static smelt_status build_library(const compile_options *o, const units *u, uint8_t **so, size_t *so_len,
                                  compile_report *rep) {
  char dir[1200], so_path[1300];
  TRY(make_workdir(o, dir, sizeof dir));
  snprintf(so_path, sizeof so_path, "%s/kernels.so", dir);
  cc_unit *cu = calloc((size_t)u->n, sizeof *cu);
  if (!cu) {
    remove_tree(dir);
    return err_nomem("compile units", sizeof *cu * (size_t)u->n);
  }
  for (int i = 0; i < u->n; i++) cu[i] = (cc_unit){u->src[i].s, u->flags[i]};
  strbuf log = {0};
  double t0 = now_s();
  smelt_status s = cc_build(o->tc, cu, u->n, dir, o->jobs, so_path, &log);
  if (rep) rep->t_cc += now_s() - t0;
  if (!s) s = file_read_all(so_path, so, so_len, 0);
  if (log.s) debug_write(o, "cc.txt", log.s, log.len);
  sb_free(&log);
  free(cu);
  remove_tree(dir);
  return s;
}

/* build_library on a thread of its own, while the caller prepares weights. */
typedef struct cc_job {
  const compile_options *o;
  const units *u;
  uint8_t *so;
  size_t so_len;
  compile_report rep; /* its t_cc only */
  smelt_status st;
  char err[1024]; /* the thread's error message (messages are per thread) */
} cc_job;

static void *cc_main(void *arg) {
  cc_job *j = arg;
  j->st = build_library(j->o, j->u, &j->so, &j->so_len, &j->rep);
  if (j->st) snprintf(j->err, sizeof j->err, "%s", smelt_last_error());
  return NULL;
}

/* build_library, overlapped with plan_prepare(p) when the options ask for it
 * (and a thread can be started). */
static smelt_status build_library_overlapped(compiled_plan *p, const compile_options *o, const units *u, uint8_t **so,
                                             size_t *so_len, compile_report *rep) {
  pthread_t th;
  cc_job j;
  memset(&j, 0, sizeof j);
  j.o = o;
  j.u = u;
  if (!o->prepare_while_cc || pthread_create(&th, NULL, cc_main, &j)) return build_library(o, u, so, so_len, rep);
  if (plan_prepare(p)) err_clear(); /* the caller prepares again and reports it */
  pthread_join(th, NULL);
  if (rep) rep->t_cc += j.rep.t_cc;
  *so = j.so;
  *so_len = j.so_len;
  return j.st ? err_set(j.st, "%s", j.err) : SMELT_OK;
}

void kernel_memo_init(kernel_memo *m) {
  memset(m, 0, sizeof *m);
  pthread_mutex_init(&m->lock, NULL);
}

void kernel_memo_free(kernel_memo *m) {
  for (int i = 0; i < m->n; i++) kernel_lib_close(&m->e[i].lib);
  free(m->e);
  pthread_mutex_destroy(&m->lock);
  memset(m, 0, sizeof *m);
}

static bool memo_find(kernel_memo *m, const char *key, kernel_lib *out) {
  if (!m) return false;
  bool found = false;
  pthread_mutex_lock(&m->lock);
  for (int i = 0; i < m->n && !found; i++)
    if (!strcmp(m->e[i].key, key)) {
      *out = m->e[i].lib;
      found = true;
    }
  pthread_mutex_unlock(&m->lock);
  return found;
}

/* Hands the library to the memo (which closes it at the end); without a
 * memo the plan keeps it. */
static smelt_status memo_add(kernel_memo *m, const char *key, const kernel_lib *lib, bool *plan_owns) {
  *plan_owns = !m;
  if (!m) return SMELT_OK;
  pthread_mutex_lock(&m->lock);
  smelt_status s = SMELT_OK;
  if (m->n == m->cap) {
    int nc = m->cap ? m->cap * 2 : 8;
    struct memo_entry *ne = realloc(m->e, sizeof *ne * (size_t)nc);
    if (ne) {
      m->e = ne;
      m->cap = nc;
    } else {
      *plan_owns = true; /* not shared, still usable */
    }
  }
  if (!*plan_owns) {
    snprintf(m->e[m->n].key, sizeof m->e[m->n].key, "%s", key);
    m->e[m->n++].lib = *lib;
  }
  pthread_mutex_unlock(&m->lock);
  return s;
}

smelt_status kernels_build(compiled_plan *p, const fusion *fu, const compile_options *o,
                           compile_report *rep) {
  if (!p->n_kernels) return SMELT_OK;
  if (!o->tc) return err_set(SMELT_ERR_UNSUPPORTED, "%s", o->tc_error ? o->tc_error : "no C compiler");
  double t0 = now_s();
  kset ks = {0};
  units u = {0};
  smelt_status s = emit_all(p, fu, o, &ks);
  if (!s) s = make_units(&ks, o->jobs > 0 ? o->jobs : 1, &u);
  if (rep) rep->t_emit += now_s() - t0;
  if (s) {
    kset_free(&ks);
    units_free(&u);
    return s;
  }
  for (int i = 0; o->debug_dir && i < u.n; i++) {
    char name[64];
    snprintf(name, sizeof name, "kernels%d.c", i);
    debug_write(o, name, u.src[i].s, u.src[i].len);
  }
  cache_key key = library_key(p, o, &u);
  snprintf(p->key, sizeof p->key, "%s", key.hex);
  if (rep) rep->kernels = ks.n;
  if (memo_find(o->memo, key.hex, &p->lib)) {
    if (rep) rep->cache_hit = true;
    kset_free(&ks);
    units_free(&u);
    return SMELT_OK;
  }
  uint8_t *so = NULL;
  size_t so_len = 0;
  bool hit = false;
  char why[512];
  cache_get(o->cache, &key, "so", &so, &so_len, &hit, why, sizeof why);
  if (why[0] && rep) snprintf(rep->warning, sizeof rep->warning, "cache entry rejected, rebuilding: %s", why);
  if (!hit) {
    s = build_library_overlapped(p, o, &u, &so, &so_len, rep);
    if (!s && o->cache && o->cache->enabled) {
      smelt_status cs = cache_put(o->cache, &key, "so", so, so_len);
      if (cs && rep) snprintf(rep->warning, sizeof rep->warning, "could not write the cache: %s", smelt_last_error());
    }
  }
  if (rep) rep->cache_hit = hit;
  double t1 = now_s();
  if (!s) s = kernel_lib_load(so, so_len, ks.n, &p->lib);
  if (!s) s = memo_add(o->memo, key.hex, &p->lib, &p->owns_lib);
  if (rep) rep->t_load += now_s() - t1;
  free(so);
  kset_free(&ks);
  units_free(&u);
  return s;
}
