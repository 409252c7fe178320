/* GEMM benchmark: GFLOP/s of every ISA path smelt has on this machine, next
 * to OpenBLAS's cblas_sgemm when libopenblas can be dlopen'ed (no link
 * dependency), and against the machine's measured FMA peak (a register-only
 * FMA loop per ISA, run on as many threads as the GEMM).
 *
 * Kernels are interleaved run by run (median of several after a warm-up), so
 * load from other processes on a shared machine hits all of them alike;
 * compare within one run, by ratio.
 *
 * usage: bench_gemm [--threads 1,2] [--sizes 64,128,...] [--no-square]
 *                   [--no-transformer] [--reps N] [--scalar] [--no-openblas] [--best]
 *                   [--shapes MxKxN,...] [--prepacked] [--blocks KCxMC,...]
 *   --shapes adds products of those sizes (A M x K, B K x N).
 *   --prepacked adds, per ISA, a column "ISA+pre": B packed ahead
 *   (gemm_pack_b_prepare, outside the timing, as a session does for a
 *   constant weight) on the packed path, next to what the library picks
 *   per call -- how the small-M / direct thresholds were set for it.
 *   --blocks adds, per ISA (with --prepacked), a B-packed-ahead column per
 *   K block x M block pair (gemm_blocking kc, mc; 0 keeps the ISA's
 *   default), e.g. --blocks 128x192,384x96: how the block sizes were set on
 *   a machine, read against the "+pre" column of the defaults.
 *   --best reports the fastest run instead of the median: on a machine
 *   shared with other work it is the closer estimate of the undisturbed
 *   speed (interference only ever slows a run down).
 *   OPENBLAS_CORETYPE=SkylakeX bench_gemm   picks OpenBLAS's AVX-512 kernels
 *   (OpenBLAS chooses by CPUID and may not know a new CPU). */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_time.h"
#include "kernels/gemm.h"
#include "kernels/gemm_kernels.h"
#include "kernels/ceiling.h"
#include "kernels/isa.h"
#include "parallel/pool.h"

/* ---- FMA peak: the library's ceiling loops (kernels/ceiling.h) ---- */

static double measure_peak(smelt_pool *pool, isa_level isa, int threads) {
  return ceiling_peak_gflops(pool, isa, threads);
}

/* ---- OpenBLAS through dlopen ---- */

typedef void (*sgemm_fn)(int order, int ta, int tb, int M, int N, int K, float alpha,
                         const float *A, int lda, const float *B, int ldb, float beta, float *C,
                         int ldc);
typedef struct openblas {
  void *lib;
  sgemm_fn sgemm;
  void (*set_threads)(int);
  char *(*corename)(void);
} openblas;

static bool openblas_open(openblas *ob) {
  static const char *names[] = {"libopenblas.so.0", "libopenblas.so"};
  memset(ob, 0, sizeof *ob);
  for (int i = 0; i < 2 && !ob->lib; i++) ob->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!ob->lib) return false;
  *(void **)&ob->sgemm = dlsym(ob->lib, "cblas_sgemm");
  *(void **)&ob->set_threads = dlsym(ob->lib, "openblas_set_num_threads");
  *(void **)&ob->corename = dlsym(ob->lib, "openblas_get_corename");
  if (!ob->sgemm || !ob->set_threads) {
    dlclose(ob->lib);
    ob->lib = NULL;
    return false;
  }
  return true;
}

/* ---- the benchmark ---- */

typedef struct shape {
  const char *name;
  int64_t M, K, N;
  bool tb;
} shape;

#define MAX_KERNELS 24
typedef struct kernel {
  const char *name;
  isa_level isa; /* ISA_COUNT for OpenBLAS */
  bool prepacked; /* B packed ahead, packed path */
  const gemm_blocking *blk; /* prepacked: block sizes (NULL: the ISA's) */
  gemm_packed *pre_b; /* ...for the shape being timed */
  double peak;   /* GFLOP/s of the matching peak loop at this thread count */
  double t[64];
  int n;
} kernel;

typedef struct opts {
  int threads[8], n_threads;
  int64_t sizes[32];
  int n_sizes;
  bool square, transformer, scalar, use_openblas, best, prepacked;
  int reps;
  int64_t shapes[16][3];
  int n_shapes;
  int64_t blocks[6][2]; /* --blocks: kc, mc */
  int n_blocks;
} opts;

static void run_once(kernel *k, smelt_pool *pool, const openblas *ob, gemm_params *p) {
  p->packed_b = k->prepacked ? k->pre_b : NULL;
  double t = now_s();
  if (k->isa == ISA_COUNT)
    ob->sgemm(101, 111, p->trans_b ? 112 : 111, (int)p->M, (int)p->N, (int)p->K, p->alpha, p->A,
              (int)p->lda, p->B, (int)p->ldb, p->beta, p->C, (int)p->ldc);
  else if (k->prepacked)
    gemm_f32_run(pool, p, k->isa, GEMM_PATH_PACKED, k->blk);
  else
    gemm_f32_isa(pool, p, k->isa);
  t = now_s() - t;
  if (k->n < 64) k->t[k->n++] = t;
}

/* Sampled check of one kernel's output against a double-precision dot
 * product: a benchmark of a wrong kernel is worthless. */
static bool output_ok(const gemm_params *p) {
  for (int t = 0; t < 64; t++) {
    int64_t m = (int64_t)((uint64_t)t * 2654435761u % (uint64_t)p->M);
    int64_t n = (int64_t)((uint64_t)t * 40503u % (uint64_t)p->N);
    double s = 0, mag = 0;
    for (int64_t k = 0; k < p->K; k++) {
      double a = p->A[m * p->lda + k], b = p->trans_b ? p->B[n * p->ldb + k] : p->B[k * p->ldb + n];
      s += a * b;
      mag += fabs(a * b);
    }
    if (!(fabs(p->C[m * p->ldc + n] - s) <= 2.0 * (double)(p->K + 4) * 1.2e-7 * mag + 1e-30))
      return false;
  }
  return true;
}

/* The scalar path is only timed up to 512^3: it is the reference, not a
 * contender, and slow. */
static bool skip_kernel(const kernel *k, double flops) {
  return k->isa == ISA_SCALAR && flops > 2.0 * 512 * 512 * 512;
}

static void bench_shape(const shape *s, int threads, smelt_pool *pool, const openblas *ob,
                        kernel *ks, int nk, const opts *o) {
  size_t a_len = (size_t)(s->M * s->K), b_len = (size_t)(s->K * s->N), c_len = (size_t)(s->M * s->N);
  float *A = malloc(a_len * sizeof(float)), *B = malloc(b_len * sizeof(float));
  float *C = malloc(c_len * sizeof(float));
  if (!A || !B || !C) {
    printf("%-22s out of memory\n", s->name);
    free(A), free(B), free(C);
    return;
  }
  for (size_t i = 0; i < a_len; i++) A[i] = (float)((i * 7 + 3) % 17) * 0.05f - 0.4f;
  for (size_t i = 0; i < b_len; i++) B[i] = (float)((i * 5 + 1) % 13) * 0.07f - 0.4f;
  gemm_params p = gemm_params_default();
  p.M = s->M, p.N = s->N, p.K = s->K, p.A = A, p.lda = s->K, p.B = B, p.C = C, p.ldc = s->N;
  p.trans_b = s->tb;
  p.ldb = s->tb ? s->K : s->N;
  if (ob->lib) ob->set_threads(threads);
  for (int i = 0; i < nk; i++)
    if (ks[i].prepacked &&
        gemm_pack_b_prepare_blk(pool, ks[i].isa, ks[i].blk, p.trans_b, p.K, p.N, B, p.ldb, &ks[i].pre_b) != SMELT_OK)
      ks[i].pre_b = NULL; /* out of memory: the column times packing per call */
  double flops = 2.0 * (double)s->M * (double)s->N * (double)s->K;
  /* Warm-up (page faults, caches, thread wake-up) with an output check,
   * which also sizes the reps. */
  double slowest = 0;
  bool wrong[MAX_KERNELS] = {false};
  for (int i = 0; i < nk; i++) {
    ks[i].n = 0;
    if (skip_kernel(&ks[i], flops)) continue;
    memset(C, 0xff, c_len * sizeof(float)); /* NaN: beta = 0 must not read it */
    run_once(&ks[i], pool, ob, &p);
    wrong[i] = !output_ok(&p);
    run_once(&ks[i], pool, ob, &p);
    if (ks[i].t[1] > slowest) slowest = ks[i].t[1];
    ks[i].n = 0;
  }
  int reps = o->reps > 0 ? o->reps : (int)(0.4 / (slowest * nk));
  if (reps < 5) reps = 5;
  if (reps > 61) reps = 61;
  for (int r = 0; r < reps; r++)
    for (int i = 0; i < nk; i++)
      if (!skip_kernel(&ks[i], flops)) run_once(&ks[i], pool, ob, &p);
  double gf[MAX_KERNELS], ob_gf = 0;
  for (int i = 0; i < nk; i++) {
    double t = ks[i].n ? median(ks[i].t, ks[i].n) : 0; /* sorts t[] */
    if (o->best && ks[i].n) t = ks[i].t[0];
    gf[i] = ks[i].n ? flops / t * 1e-9 : 0;
    if (ks[i].isa == ISA_COUNT) ob_gf = gf[i];
  }
  printf("%-22s %2d ", s->name, threads);
  for (int i = 0; i < nk; i++) {
    if (!ks[i].n) {
      printf("| %7s %5s %6s", "-", "", "");
      continue;
    }
    printf("| %7.1f %4.0f%%", gf[i], 100 * gf[i] / ks[i].peak);
    if (ob_gf > 0 && ks[i].isa != ISA_COUNT) printf(" %5.2fx", gf[i] / ob_gf);
    else printf("       ");
  }
  for (int i = 0; i < nk; i++)
    if (wrong[i]) printf("  WRONG OUTPUT: %s", ks[i].name);
  printf("\n");
  fflush(stdout);
  for (int i = 0; i < nk; i++) {
    gemm_packed_free(ks[i].pre_b);
    ks[i].pre_b = NULL;
  }
  free(A), free(B), free(C);
}

static int parse_list(const char *s, int64_t *out, int max) {
  int n = 0;
  while (*s && n < max) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || v <= 0) break;
    out[n++] = v;
    s = *end == ',' ? end + 1 : end;
  }
  return n;
}

static bool parse_opts(int argc, char **argv, opts *o) {
  static const int64_t def_sizes[] = {64, 128, 256, 384, 512, 768, 1024, 1536, 2048};
  memset(o, 0, sizeof *o);
  o->threads[0] = 1, o->threads[1] = 2, o->n_threads = 2;
  o->n_sizes = (int)(sizeof def_sizes / sizeof def_sizes[0]);
  memcpy(o->sizes, def_sizes, sizeof def_sizes);
  o->square = o->transformer = o->use_openblas = true;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int64_t tmp[8];
    if (!strcmp(a, "--threads") && v) {
      o->n_threads = parse_list(v, tmp, 8);
      for (int t = 0; t < o->n_threads; t++) o->threads[t] = (int)tmp[t];
      i++;
    } else if (!strcmp(a, "--sizes") && v) {
      o->n_sizes = parse_list(v, o->sizes, 32);
      i++;
    } else if (!strcmp(a, "--reps") && v) {
      o->reps = atoi(v);
      i++;
    } else if (!strcmp(a, "--no-square")) o->square = false;
    else if (!strcmp(a, "--no-transformer")) o->transformer = false;
    else if (!strcmp(a, "--scalar")) o->scalar = true;
    else if (!strcmp(a, "--no-openblas")) o->use_openblas = false;
    else if (!strcmp(a, "--best")) o->best = true;
    else if (!strcmp(a, "--prepacked")) o->prepacked = true;
    else if (!strcmp(a, "--blocks") && v) {
      for (const char *q = v; *q && o->n_blocks < 6;) {
        char *end;
        long long kc = strtoll(q, &end, 10), mc = *end == 'x' ? strtoll(end + 1, &end, 10) : -1;
        if (kc < 0 || mc < 0 || (*end && *end != ',')) {
          fprintf(stderr, "--blocks: want KCxMC[,KCxMC...], got '%s'\n", v);
          return false;
        }
        o->blocks[o->n_blocks][0] = kc, o->blocks[o->n_blocks++][1] = mc;
        q = *end ? end + 1 : end;
      }
      i++;
    }
    else if (!strcmp(a, "--shapes") && v) {
      for (const char *q = v; *q && o->n_shapes < 16; o->n_shapes++) {
        long long m, k, n;
        int used = 0;
        if (sscanf(q, "%lldx%lldx%lld%n", &m, &k, &n, &used) != 3 || m <= 0 || k <= 0 || n <= 0) {
          fprintf(stderr, "--shapes wants MxKxN,...: '%s'\n", q);
          return false;
        }
        o->shapes[o->n_shapes][0] = m, o->shapes[o->n_shapes][1] = k, o->shapes[o->n_shapes][2] = n;
        q += used;
        if (*q == ',') q++;
      }
      i++;
    }
    else {
      fprintf(stderr, "unknown argument '%s' (see the comment at the top of bench_gemm.c)\n", a);
      return false;
    }
  }
  return o->n_threads > 0;
}

int main(int argc, char **argv) {
  opts o;
  if (!parse_opts(argc, argv, &o)) return 2;
  isa_choice ch = isa_choose();
  printf("smelt bench_gemm: detected ISA %s (SMELT_ISA %s), %d cores\n", isa_name(ch.detected),
         ch.env_set ? getenv("SMELT_ISA") : "unset", pool_machine_cores());
  openblas ob;
  memset(&ob, 0, sizeof ob);
  if (o.use_openblas && openblas_open(&ob))
    printf("OpenBLAS: loaded, core %s\n", ob.corename ? ob.corename() : "?");
  else if (o.use_openblas)
    printf("OpenBLAS: not loadable (libopenblas.so.0 / libopenblas.so): %s\n", dlerror());

  shape shapes[64];
  int n_shapes = 0;
  static char names[32][32];
  for (int i = 0; o.square && i < o.n_sizes && n_shapes < 32; i++) {
    snprintf(names[i], sizeof names[i], "%lld^3", (long long)o.sizes[i]);
    shapes[n_shapes++] = (shape){names[i], o.sizes[i], o.sizes[i], o.sizes[i], false};
  }
  static char shape_names[16][40];
  for (int i = 0; i < o.n_shapes && n_shapes < 48; i++) {
    snprintf(shape_names[i], sizeof shape_names[i], "%lldx%lldx%lld", (long long)o.shapes[i][0],
             (long long)o.shapes[i][1], (long long)o.shapes[i][2]);
    shapes[n_shapes++] = (shape){shape_names[i], o.shapes[i][0], o.shapes[i][1], o.shapes[i][2], false};
  }
  if (o.transformer) {
    shapes[n_shapes++] = (shape){"128x768x3072 (MxKxN)", 128, 768, 3072, false};
    shapes[n_shapes++] = (shape){"128x768x3072 B^T", 128, 768, 3072, true};
    shapes[n_shapes++] = (shape){"1x768x768", 1, 768, 768, false};
    shapes[n_shapes++] = (shape){"1x768x768 B^T", 1, 768, 768, true};
    shapes[n_shapes++] = (shape){"1x768x50257", 1, 768, 50257, false};
    shapes[n_shapes++] = (shape){"1x768x50257 B^T", 1, 768, 50257, true};
  }

  /* The per-core ceiling, measured once on one thread.  The ceiling for T
   * threads is T times it (FMA units are per core); the T-thread loop is
   * printed too, but on a shared machine it rarely runs undisturbed. */
  double peak1[ISA_COUNT] = {0};
  printf("FMA peak, 1 thread:");
  for (int isa = ch.detected; isa >= ISA_SCALAR; isa--) {
    if (isa == ISA_SCALAR && !o.scalar) continue;
    peak1[isa] = measure_peak(NULL, (isa_level)isa, 1);
    printf(" %s %.1f GFLOP/s", isa_name((isa_level)isa), peak1[isa]);
  }
  printf("\n");

  for (int ti = 0; ti < o.n_threads; ti++) {
    int threads = o.threads[ti];
    smelt_pool *pool = NULL;
    if (pool_create(threads, &pool) != SMELT_OK) {
      printf("could not create a pool of %d threads: %s\n", threads, smelt_last_error());
      continue;
    }
    kernel ks[MAX_KERNELS];
    int nk = 0;
    printf("\n== %d thread%s; ceiling = %d x 1-thread peak", threads, threads > 1 ? "s" : "",
           threads);
    if (threads > 1) printf(" (the %d-thread loop measured:", threads);
    for (int isa = ch.detected; isa >= ISA_SCALAR; isa--) {
      if (isa == ISA_SCALAR && !o.scalar) continue;
      if (threads > 1)
        printf(" %s %.1f", isa_name((isa_level)isa), measure_peak(pool, (isa_level)isa, threads));
      ks[nk++] = (kernel){isa_name((isa_level)isa), (isa_level)isa, false, NULL, NULL, threads * peak1[isa], {0}, 0};
      static char pre_names[ISA_COUNT][24];
      snprintf(pre_names[isa], sizeof pre_names[isa], "%s+pre", isa_name((isa_level)isa));
      if (o.prepacked && isa != ISA_SCALAR)
        ks[nk++] = (kernel){pre_names[isa], (isa_level)isa, true, NULL, NULL, threads * peak1[isa], {0}, 0};
      static char blk_names[ISA_COUNT][6][24];
      static gemm_blocking blks[6];
      for (int b = 0; o.prepacked && isa != ISA_SCALAR && b < o.n_blocks && nk < MAX_KERNELS - 1; b++) {
        blks[b] = (gemm_blocking){.kc = o.blocks[b][0], .mc = o.blocks[b][1]};
        snprintf(blk_names[isa][b], sizeof blk_names[isa][b], "%s kc%lld mc%lld", isa_name((isa_level)isa),
                 (long long)o.blocks[b][0], (long long)o.blocks[b][1]);
        ks[nk++] = (kernel){blk_names[isa][b], (isa_level)isa, true, &blks[b], NULL, threads * peak1[isa], {0}, 0};
      }
    }
    if (threads > 1) printf(")");
    if (ob.lib) ks[nk++] = (kernel){"openblas", ISA_COUNT, false, NULL, NULL, ks[0].peak, {0}, 0};
    printf("\n%-22s %2s ", "shape", "th");
    for (int i = 0; i < nk; i++) printf("| %-20s", ks[i].name);
    printf("\n%-25s", "");
    for (int i = 0; i < nk; i++) printf("|  GFLOP/s  peak  /OB ");
    printf("\n");
    for (int s = 0; s < n_shapes; s++) bench_shape(&shapes[s], threads, pool, &ob, ks, nk, &o);
    pool_free(pool);
  }
  printf("\nGFLOP/s: %s over the runs; peak: of the same ISA's ceiling (OpenBLAS: of the "
         "best ISA's); /OB: over OpenBLAS's GFLOP/s.\n", o.best ? "best" : "median");
  return 0;
}
