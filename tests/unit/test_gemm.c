/* GEMM on every ISA path this machine has, against a double-precision triple
 * loop, on shapes that break the tilings (1, primes, block +- 1), all four
 * transpose combinations, alpha/beta variants (beta = 0 over NaN-filled C),
 * strided views, 1-3 threads and epilogues.  Also: the degenerate cases,
 * argument checks, the scalar fallback when scratch memory runs out, and
 * the ISA config module. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "check.h"
#include "kernels/gemm.h"
#include "kernels/gemm_kernels.h"
#include "kernels/isa.h"

#define TEST_RNG_SEED 0x9e3779b97f4a7c15ull
#include "test_rng.h"

static const int64_t DIMS[] = {1, 2, 3, 5, 7, 8, 13, 15, 16, 17, 31, 33, 64, 65, 127, 129, 255, 257};
#define N_DIMS (int)(sizeof DIMS / sizeof DIMS[0])

typedef struct gcase {
  gemm_params p;
  float *a, *b, *c, *c0, *bias;
  size_t c_len;
} gcase;

/* Fills a case: operands random, C (with its stride gap) NaN when beta == 0
 * so a read of C shows, otherwise random; the gap is checked afterwards. */
static bool case_make(gcase *g, bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t pad,
                      float alpha, float beta, gemm_bias bias, gemm_act act) {
  memset(g, 0, sizeof *g);
  gemm_params *p = &g->p;
  *p = gemm_params_default();
  p->trans_a = ta, p->trans_b = tb, p->M = M, p->N = N, p->K = K;
  p->alpha = alpha, p->beta = beta;
  p->lda = (ta ? M : K) + pad;
  p->ldb = (tb ? K : N) + pad;
  p->ldc = N + pad;
  size_t a_len = (size_t)((ta ? K : M) * p->lda), b_len = (size_t)((tb ? N : K) * p->ldb);
  g->c_len = (size_t)(M * p->ldc);
  g->a = malloc(sizeof(float) * (a_len + 1));
  g->b = malloc(sizeof(float) * (b_len + 1));
  g->c = malloc(sizeof(float) * (g->c_len + 1));
  g->c0 = malloc(sizeof(float) * (g->c_len + 1));
  g->bias = malloc(sizeof(float) * (size_t)(M > N ? M : N));
  if (!g->a || !g->b || !g->c || !g->c0 || !g->bias) return false;
  for (size_t i = 0; i < a_len; i++) g->a[i] = frand();
  for (size_t i = 0; i < b_len; i++) g->b[i] = frand();
  for (size_t i = 0; i < g->c_len; i++) g->c0[i] = beta == 0.f ? NAN : frand();
  for (int64_t i = 0; i < (M > N ? M : N); i++) g->bias[i] = frand();
  memcpy(g->c, g->c0, sizeof(float) * g->c_len);
  p->A = g->a, p->B = g->b, p->C = g->c;
  p->epilogue.bias_kind = bias;
  p->epilogue.bias = bias == GEMM_BIAS_NONE ? NULL : g->bias;
  p->epilogue.act = act;
  p->epilogue.clip_lo = -0.25f, p->epilogue.clip_hi = 0.5f;
  return true;
}

static void case_free(gcase *g) {
  free(g->a), free(g->b), free(g->c), free(g->c0), free(g->bias);
}

/* Max violation ratio |got - want| / tol over C; the stride gap must be
 * unchanged (NaN stays NaN). */
static double case_error(const gcase *g) {
  const gemm_params *p = &g->p;
  const gemm_epilogue *e = &p->epilogue;
  double worst = 0;
  for (int64_t m = 0; m < p->M; m++) {
    for (int64_t n = 0; n < p->ldc; n++) {
      float got = g->c[m * p->ldc + n], old = g->c0[m * p->ldc + n];
      if (n >= p->N) {
        if (memcmp(&got, &old, sizeof got) != 0) return INFINITY;
        continue;
      }
      double s = 0, mag = 0;
      for (int64_t k = 0; k < p->K; k++) {
        double a = p->trans_a ? g->a[k * p->lda + m] : g->a[m * p->lda + k];
        double b = p->trans_b ? g->b[n * p->ldb + k] : g->b[k * p->ldb + n];
        s += a * b;
        mag += fabs(a * b);
      }
      double want = (double)p->alpha * s, bias = 0;
      mag *= fabs((double)p->alpha);
      if (p->beta != 0.f) {
        want += (double)p->beta * old;
        mag += fabs((double)p->beta * old);
      }
      if (e->bias_kind == GEMM_BIAS_COL) bias = e->bias[n];
      if (e->bias_kind == GEMM_BIAS_ROW) bias = e->bias[m];
      want += bias;
      mag += fabs(bias);
      if (e->act == GEMM_ACT_RELU) want = want < 0 ? 0 : want;
      if (e->act == GEMM_ACT_CLIP) want = want < e->clip_lo ? e->clip_lo : (want > e->clip_hi ? e->clip_hi : want);
      double tol = 2.0 * (double)(p->K + 4) * FLT_EPSILON * mag + 1e-30;
      double err = fabs((double)got - want);
      if (!(err <= tol)) return isnan(err) ? INFINITY : err / tol;
      if (err / tol > worst) worst = err / tol;
    }
  }
  return worst;
}

static int n_cases;

/* The path and blocking the cases run with (see gemm_f32_run). */
typedef struct route {
  const char *name;
  gemm_path path;
  const gemm_blocking *blk;
} route;
static route cur = {"auto", GEMM_PATH_AUTO, NULL};

static void run_case(smelt_pool *pool, isa_level isa, bool ta, bool tb, int64_t M, int64_t N,
                     int64_t K, int64_t pad, float alpha, float beta, gemm_bias bias,
                     gemm_act act) {
  gcase g;
  n_cases++;
  if (!case_make(&g, ta, tb, M, N, K, pad, alpha, beta, bias, act)) {
    CHECK(!"out of memory in test");
    case_free(&g);
    return;
  }
  CHECK_OK(gemm_f32_run(pool, &g.p, isa, cur.path, cur.blk));
  double err = case_error(&g);
  if (!(err <= 1.0)) {
    fprintf(stderr,
            "  %s/%s threads=%d ta=%d tb=%d M=%lld N=%lld K=%lld pad=%lld alpha=%g beta=%g "
            "bias=%d act=%d: error %g x tolerance\n",
            isa_name(isa), cur.name, pool_threads(pool), ta, tb, (long long)M, (long long)N, (long long)K,
            (long long)pad, alpha, beta, bias, act, err);
  }
  CHECK(err <= 1.0);
  case_free(&g);
}

static int64_t pick_dim(void) { return DIMS[rng() % N_DIMS]; }

/* Random shapes from DIMS with bounded work, every transpose combination,
 * alpha/beta/stride/epilogue variants cycling. */
static void sweep(smelt_pool *pool, isa_level isa, int cases, int64_t max_work) {
  static const float alphas[] = {1.f, -0.5f, 2.f};
  static const float betas[] = {0.f, 1.f, 0.3f, 0.f};
  static const int64_t pads[] = {0, 3, 17};
  for (int i = 0; i < cases; i++) {
    int64_t M, N, K;
    do {
      M = pick_dim(), N = pick_dim(), K = pick_dim();
    } while (M * N * K > max_work);
    gemm_bias bias = (gemm_bias)(i % 5 == 1 ? GEMM_BIAS_COL : i % 5 == 3 ? GEMM_BIAS_ROW : 0);
    gemm_act act = (gemm_act)(i % 7 == 2 ? GEMM_ACT_RELU : i % 7 == 5 ? GEMM_ACT_CLIP : 0);
    run_case(pool, isa, i & 1, (i >> 1) & 1, M, N, K, pads[i % 3], alphas[i % 3], betas[i % 4],
             bias, act);
  }
}

/* Every M of the small-M path (1..16) and around it, both B layouts. */
static void small_m(smelt_pool *pool, isa_level isa) {
  for (int64_t M = 1; M <= 18; M++) {
    for (int t = 0; t < 4; t++) {
      int64_t N = t < 2 ? 1 + rng() % 300 : 129, K = t < 2 ? 1 + rng() % 200 : 257;
      run_case(pool, isa, t == 3, t & 1, M, N, K, t, t == 2 ? 2.f : 1.f, t == 1 ? 0.5f : 0.f,
               (gemm_bias)(t % 3), (gemm_act)((t + M) % 3));
    }
  }
  /* Rows streamed through the column-sum buffer (1-3 rows, B not
   * transposed): N across several buffer widths with a partial vector at
   * the end, K not a multiple of the rows of B per pass, A both ways. */
  for (int64_t M = 1; M <= 4; M++)
    for (int t = 0; t < 3; t++)
      run_case(pool, isa, t == 2, false, M, t == 0 ? 1037 : 513 + 8 * t, t == 1 ? 19 : 7 + M, t,
               t == 1 ? -1.f : 1.f, t == 0 ? 0.5f : 0.f, (gemm_bias)t, (gemm_act)((t + M) % 3));
}

/* Bigger than one block in every direction (K blocks, M blocks, N panels). */
static void big(smelt_pool *pool, isa_level isa) {
  run_case(pool, isa, false, false, 300, 333, 600, 5, 1.f, 0.f, GEMM_BIAS_COL, GEMM_ACT_RELU);
  run_case(pool, isa, true, true, 257, 129, 513, 0, -1.f, 1.f, GEMM_BIAS_ROW, GEMM_ACT_NONE);
  run_case(pool, isa, false, true, 65, 1100, 300, 1, 0.5f, 0.3f, GEMM_BIAS_NONE, GEMM_ACT_CLIP);
  run_case(pool, isa, true, false, 1, 5000, 64, 0, 1.f, 0.f, GEMM_BIAS_COL, GEMM_ACT_NONE);
}

/* alpha == 0 or K == 0: C = act(beta*C + bias) with A and B never read
 * (they are NaN here, and NULL is accepted). */
static void degenerate(smelt_pool *pool, isa_level isa) {
  float nan_ab[64], c[12], c0[12], bias[4] = {1, -2, 3, -4};
  for (int i = 0; i < 64; i++) nan_ab[i] = NAN;
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < 12; i++) c[i] = c0[i] = (float)i - 5.f;
    gemm_params p = gemm_params_default();
    p.M = 3, p.N = 4, p.K = pass == 0 ? 0 : 5;
    p.alpha = pass == 0 ? 1.f : 0.f;
    p.beta = 0.5f;
    p.A = pass == 0 ? NULL : nan_ab, p.B = pass == 0 ? NULL : nan_ab;
    p.lda = 5, p.ldb = 4, p.C = c, p.ldc = 4;
    p.epilogue.bias_kind = GEMM_BIAS_COL, p.epilogue.bias = bias, p.epilogue.act = GEMM_ACT_RELU;
    CHECK_OK(gemm_f32_run(pool, &p, isa, cur.path, cur.blk));
    bool ok = true;
    for (int i = 0; i < 12; i++) {
      float want = 0.5f * c0[i] + bias[i % 4];
      ok &= c[i] == (want < 0 ? 0.f : want);
    }
    CHECK(ok);
  }
  /* Empty output: nothing touched, NULL C fine. */
  gemm_params p = gemm_params_default();
  p.M = 0, p.N = 7, p.K = 3, p.lda = 3, p.ldb = 7, p.ldc = 7;
  CHECK_OK(gemm_f32_run(pool, &p, isa, cur.path, cur.blk));
}

/* NaN from beta*C passes through relu and clip on every path, including the
 * masked edge columns and the small-M kernels. */
static void nan_passes(smelt_pool *pool, isa_level isa) {
  for (int64_t M = 3; M <= 40; M += 37) {
    for (int act = GEMM_ACT_RELU; act <= GEMM_ACT_CLIP; act++) {
      gcase g;
      if (!case_make(&g, false, false, M, 37, 9, 0, 1.f, 1.f, GEMM_BIAS_NONE, (gemm_act)act)) {
        CHECK(!"out of memory in test");
        case_free(&g);
        continue;
      }
      g.c[1 * g.p.ldc + 36] = NAN;
      g.c[2 * g.p.ldc + 0] = NAN;
      CHECK_OK(gemm_f32_run(pool, &g.p, isa, cur.path, cur.blk));
      CHECK(isnan(g.c[1 * g.p.ldc + 36]) && isnan(g.c[2 * g.p.ldc + 0]));
      CHECK(!isnan(g.c[1 * g.p.ldc + 35]));
      case_free(&g);
    }
  }
}

static void bad_args(void) {
  float buf[64] = {0};
  gemm_params p = gemm_params_default();
  p.M = 4, p.N = 4, p.K = 4, p.A = buf, p.B = buf, p.C = buf, p.lda = 4, p.ldb = 4, p.ldc = 4;
  gemm_params q = p;
  q.M = -1;
  CHECK(gemm_f32_ex(NULL, &q) == SMELT_ERR_INVALID_ARGUMENT);
  q = p, q.lda = 3;
  CHECK(gemm_f32_ex(NULL, &q) == SMELT_ERR_INVALID_ARGUMENT);
  q = p, q.trans_b = true, q.K = 5, q.lda = 5;
  CHECK(gemm_f32_ex(NULL, &q) == SMELT_ERR_INVALID_ARGUMENT); /* ldb 4 < K 5 */
  q = p, q.ldc = 2;
  CHECK(gemm_f32_ex(NULL, &q) == SMELT_ERR_INVALID_ARGUMENT);
  q = p, q.B = NULL;
  CHECK(gemm_f32_ex(NULL, &q) == SMELT_ERR_INVALID_ARGUMENT);
  q = p, q.epilogue.bias_kind = GEMM_BIAS_ROW;
  CHECK(gemm_f32_ex(NULL, &q) == SMELT_ERR_INVALID_ARGUMENT);
  q = p, q.epilogue.act = GEMM_ACT_CLIP, q.epilogue.clip_lo = 1, q.epilogue.clip_hi = 0;
  CHECK(gemm_f32_ex(NULL, &q) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(smelt_last_error(), "clip") != NULL);
  /* A rejected call leaves C alone. */
  float c[16];
  for (int i = 0; i < 16; i++) c[i] = 7.f;
  q = p, q.C = c, q.lda = 1;
  CHECK(gemm_f32_ex(NULL, &q) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(c[0] == 7.f && c[15] == 7.f);
}

/* The public entry gemm_f32 (no epilogue) agrees with the oracle. */
static void public_entry(smelt_pool *pool) {
  gcase g;
  if (case_make(&g, true, false, 37, 45, 29, 2, 1.5f, 0.f, GEMM_BIAS_NONE, GEMM_ACT_NONE)) {
    const gemm_params *p = &g.p;
    CHECK_OK(gemm_f32(pool, p->trans_a, p->trans_b, p->M, p->N, p->K, p->alpha, p->A, p->lda, p->B,
                      p->ldb, p->beta, p->C, p->ldc));
    CHECK(case_error(&g) <= 1.0);
  } else {
    CHECK(!"out of memory in test");
  }
  case_free(&g);
  /* bad arguments come back as a status with a message; C is untouched */
  float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 0, 1, 1, 1}, c[4] = {7, 7, 7, 7};
  CHECK(gemm_f32(pool, false, false, -1, 2, 3, 1.f, a, 3, b, 2, 0.f, c, 2) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(gemm_f32(pool, false, false, 2, 2, 3, 1.f, a, 2, b, 2, 0.f, c, 2) == SMELT_ERR_INVALID_ARGUMENT); /* lda < K */
  CHECK(strstr(smelt_last_error(), "lda") != NULL);
  CHECK(gemm_f32(pool, false, false, 2, 2, 3, 1.f, NULL, 3, b, 2, 0.f, c, 2) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(gemm_f32(pool, false, false, 2, 2, 3, 1.f, a, 3, b, 2, 0.f, NULL, 2) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(c[0] == 7.f && c[1] == 7.f && c[2] == 7.f && c[3] == 7.f);
  CHECK_OK(gemm_f32(pool, false, false, 2, 2, 3, 1.f, a, 3, b, 2, 0.f, c, 2));
  CHECK(c[0] == 4.f && c[1] == 5.f && c[2] == 10.f && c[3] == 11.f);
}

/* Sanitizer runtimes need address space of their own and die when it is
 * capped, so the allocation-failure test runs only without them. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define SANITIZED 1
#endif
#endif

/* With the address space capped, the packed path cannot get its scratch
 * buffers and must fall back to the scalar path: same result, no crash.
 * Runs in a child forked before the pools exist, so the heap holds no freed
 * memory the buffers could come from; the child's exit code is the verdict
 * (0 pass, 1 fail, 2 could not cap the address space). */
static void alloc_failure(isa_level isa) {
#if defined(__linux__) && !defined(SANITIZED)
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    CHECK(!"fork failed");
    return;
  }
  if (pid == 0) {
    gcase g;
    if (!case_make(&g, false, false, 17, 2048, 2048, 0, 1.f, 0.f, GEMM_BIAS_COL, GEMM_ACT_RELU))
      _exit(1);
    long pages = 0, page = sysconf(_SC_PAGESIZE);
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld", &pages) != 1) _exit(2);
    fclose(f);
    struct rlimit tight;
    if (getrlimit(RLIMIT_AS, &tight) != 0) _exit(2);
    tight.rlim_cur = (rlim_t)pages * (rlim_t)page + (1 << 20); /* 1 MiB of headroom */
    if (setrlimit(RLIMIT_AS, &tight) != 0) _exit(2);
    /* What the packed path needs here; volatile, or the compiler may drop
     * the call and assume it succeeded. */
    void *volatile probe = malloc(8 << 20);
    if (probe) _exit(2);
    smelt_status s = gemm_f32_run(NULL, &g.p, isa, GEMM_PATH_PACKED, NULL);
    _exit(s == SMELT_OK && case_error(&g) <= 1.0 ? 0 : 1);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 2)
    printf("allocation-failure test skipped: could not cap the address space\n");
  else
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
#else
  printf("allocation-failure test skipped (not Linux, or a sanitizer build)\n");
  (void)isa;
#endif
}

static void isa_module(void) {
  isa_level d = isa_detect();
  printf("isa: detected %s\n", isa_name(d));
  CHECK(strcmp(isa_name(ISA_SCALAR), "scalar") == 0 && strcmp(isa_name(ISA_AVX512), "avx512") == 0);
  isa_level l;
  CHECK(isa_parse("AVX2", &l) && l == ISA_AVX2);
  CHECK(!isa_parse("sse9", &l) && !isa_parse(NULL, &l));
  CHECK(isa_clamp(ISA_AVX512) == d && isa_clamp(ISA_SCALAR) == ISA_SCALAR);
  /* The env var: single-threaded here, before any pool exists. */
  const char *old = getenv("SMELT_ISA");
  char *saved = old ? strdup(old) : NULL;
  setenv("SMELT_ISA", "scalar", 1);
  CHECK(isa_active() == ISA_SCALAR);
  setenv("SMELT_ISA", "avx512", 1);
  isa_choice ch = isa_choose();
  CHECK(ch.env_set && ch.env_valid && ch.requested == ISA_AVX512 && ch.active == d);
  setenv("SMELT_ISA", "bogus", 1);
  ch = isa_choose();
  CHECK(ch.env_set && !ch.env_valid && ch.active == d);
  unsetenv("SMELT_ISA");
  ch = isa_choose();
  CHECK(!ch.env_set && ch.active == d);
  if (saved) setenv("SMELT_ISA", saved, 1);
  free(saved);
}

/* A row's result does not depend on the row tile it falls in: the last row
 * tile of M rows (M not a multiple of the kernel's MR) runs a loop over
 * fewer rows (kernels/x86/f32_gemm_avx2.c), which must compute exactly what
 * a full tile does.  Rows of M = 1..13 against the same rows of M = 24
 * (whole tiles for MR 6 and 8), bit for bit. */
static void tail_rows_exact(smelt_pool *pool, isa_level isa) {
  enum { MAXM = 24, N = 37, K = 70 };
  static float a[MAXM * K], b[K * N], full[MAXM * N], part[MAXM * N];
  for (int i = 0; i < MAXM * K; i++) a[i] = frand();
  for (int i = 0; i < K * N; i++) b[i] = frand();
  for (int64_t M = MAXM; M >= 1; M = M == MAXM ? 13 : M - 1) {
    gemm_params p = gemm_params_default();
    p.M = M, p.N = N, p.K = K, p.A = a, p.B = b, p.lda = K, p.ldb = N, p.ldc = N;
    p.C = M == MAXM ? full : part;
    CHECK_OK(gemm_f32_run(pool, &p, isa, cur.path, cur.blk));
    if (M == MAXM) continue;
    bool same = memcmp(part, full, sizeof(float) * (size_t)(M * N)) == 0;
    CHECK(same);
    if (!same) fprintf(stderr, "%s/%s: rows of M=%lld differ from the same rows of M=%d\n", isa_name(isa), cur.name,
                       (long long)M, MAXM);
  }
}

/* A shared by the threads (packed once per K block, in slices that the
 * threads needing the block pack together): 2 and 3 threads give exactly
 * the one-thread result.  97 rows are 17 micro-panels on AVX2 (9 slices of
 * at most 2), 13 on AVX-512 (7 slices); K 150 is 5 K blocks of 32; N 70
 * ends in a partial panel. */
static void shared_a_slices(smelt_pool *const pools[3], isa_level isa) {
  enum { M = 97, N = 70, K = 150 };
  static float a[M * K], b[K * N], bias[N], one[M * N], many[M * N];
  for (int i = 0; i < M * K; i++) a[i] = frand();
  for (int i = 0; i < K * N; i++) b[i] = frand();
  for (int i = 0; i < N; i++) bias[i] = frand();
  /* panels: each item's panels finished over all K blocks in turn (the
   * order of a wide C in rows off 64-byte boundaries) adds the same K blocks in the same order:
   * the same bits too, on every thread count. */
  static const gemm_blocking blk = {32, 0, 0, 0, 1, 0}, panels = {32, 0, 0, 0, 1, 1};
  for (int run = 0; run < 6; run++) {
    int t = run % 3;
    gemm_params p = gemm_params_default();
    p.M = M, p.N = N, p.K = K, p.A = a, p.B = b, p.lda = K, p.ldb = N, p.ldc = N;
    p.epilogue.bias_kind = GEMM_BIAS_COL, p.epilogue.bias = bias;
    p.C = run == 0 ? one : many;
    for (int i = 0; i < M * N; i++) p.C[i] = NAN; /* beta 0: every element written */
    CHECK_OK(gemm_f32_run(pools[t], &p, isa, GEMM_PATH_PACKED, run < 3 ? &blk : &panels));
    if (run == 0) continue;
    bool same = memcmp(many, one, sizeof many) == 0;
    CHECK(same);
    if (!same)
      fprintf(stderr, "%s: shared A on %d threads%s differs from one thread\n", isa_name(isa), t + 1,
              run < 3 ? "" : " (panels outer)");
  }
}

/* A wide C in rows off 64-byte boundaries (a vocabulary projection's: ldc
 * odd), at the default blocking: the packed path finishes its panels one at
 * a time over the K blocks (GEMM_C_ITEM_BYTES in gemm.c) -- the same bits
 * as K blocks outer (panels_outer -1), with a bias and on 1 and 2 threads. */
static void wide_c_orders(smelt_pool *const pools[3], isa_level isa) {
  enum { M = 128, N = 3001, K = 600 };
  float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N), *bias = malloc(sizeof(float) * N);
  float *auto_c = malloc(sizeof(float) * M * N), *kouter = malloc(sizeof(float) * M * N);
  if (!a || !b || !bias || !auto_c || !kouter) {
    CHECK(!"out of memory in test");
    free(a), free(b), free(bias), free(auto_c), free(kouter);
    return;
  }
  for (int i = 0; i < M * K; i++) a[i] = frand();
  for (int i = 0; i < K * N; i++) b[i] = frand();
  for (int i = 0; i < N; i++) bias[i] = frand();
  static const gemm_blocking never = {0, 0, 0, 0, 0, -1};
  for (int t = 0; t < 2; t++) {
    gemm_params p = gemm_params_default();
    p.M = M, p.N = N, p.K = K, p.A = a, p.B = b, p.lda = K, p.ldb = N, p.ldc = N;
    p.epilogue.bias_kind = GEMM_BIAS_COL, p.epilogue.bias = bias;
    p.C = auto_c;
    CHECK_OK(gemm_f32_run(pools[t], &p, isa, GEMM_PATH_PACKED, NULL));
    p.C = kouter;
    CHECK_OK(gemm_f32_run(pools[t], &p, isa, GEMM_PATH_PACKED, &never));
    bool same = memcmp(auto_c, kouter, sizeof(float) * M * N) == 0;
    CHECK(same);
    if (!same) fprintf(stderr, "%s: wide C on %d threads differs between the orders\n", isa_name(isa), t + 1);
  }
  double err = 0;
  for (int n = 0; n < N; n += 97) { /* a sample of columns against a double sum */
    for (int m = 0; m < M; m += 13) {
      double want = bias[n];
      for (int k = 0; k < K; k++) want += (double)a[m * K + k] * (double)b[k * N + n];
      double e = fabs(want - auto_c[m * N + n]);
      if (e > err) err = e;
    }
  }
  CHECK(err < 1e-3);
  free(a), free(b), free(bias), free(auto_c), free(kouter);
}

int main(void) {
  isa_module();
  bad_args();
  alloc_failure(isa_detect());
  smelt_pool *pools[3] = {NULL, NULL, NULL};
  for (int t = 0; t < 3; t++) CHECK_OK(pool_create(t + 1, &pools[t]));
  isa_level top = isa_detect();
  /* Tiny blocks: several K blocks, K passes, N chunks and M blocks on small
   * matrices, so every branch of the packed driver runs; and every thread
   * woken however small the problem (thread_flops 1). */
  /* packed-panels: the same, each item's panels finished over all K blocks
   * in turn (panels_outer 1: the order of a wide C in rows off 64-byte boundaries). */
  static const gemm_blocking tiny = {24, 16, 4096, 2, 1, 0}, eager = {0, 0, 0, 0, 1, 0},
                             panels = {24, 16, 4096, 2, 1, 1};
  const route routes[] = {{"auto", GEMM_PATH_AUTO, NULL},
                          {"packed", GEMM_PATH_PACKED, &eager},
                          {"packed-tiny", GEMM_PATH_PACKED, &tiny},
                          {"packed-panels", GEMM_PATH_PACKED, &panels},
                          {"direct", GEMM_PATH_DIRECT, &eager},
                          {"small-m", GEMM_PATH_SMALL_M, &eager}};
  for (int isa = ISA_SCALAR; isa <= (int)top; isa++) {
    for (int r = 0; r < 6; r++) {
      if (isa == ISA_SCALAR && r > 0) break; /* one algorithm there */
      cur = routes[r];
      int before = check_failures;
      n_cases = 0;
      for (int t = 0; t < 3; t++) {
        smelt_pool *pool = pools[t];
        if (cur.path == GEMM_PATH_SMALL_M) {
          small_m(pool, (isa_level)isa);
          continue;
        }
        /* The scalar path is the slow reference: fewer cases. */
        int cases = isa == ISA_SCALAR ? 40 : r == 0 ? 120 : 50;
        sweep(pool, (isa_level)isa, cases, isa == ISA_SCALAR ? 1 << 19 : 1 << 21);
        degenerate(pool, (isa_level)isa);
        nan_passes(pool, (isa_level)isa);
        if (isa != ISA_SCALAR && t > 0 && r < 4) big(pool, (isa_level)isa);
        if (isa != ISA_SCALAR && r == 0) small_m(pool, (isa_level)isa);
        if (isa != ISA_SCALAR && r == 1) tail_rows_exact(pool, (isa_level)isa);
      }
      printf("%s/%s: %d cases, %s\n", isa_name((isa_level)isa), cur.name, n_cases,
             check_failures == before ? "ok" : "FAILED");
    }
  }
  for (int isa = ISA_SCALAR + 1; isa <= (int)top; isa++) shared_a_slices(pools, (isa_level)isa);
  for (int isa = ISA_SCALAR + 1; isa <= (int)top; isa++) wide_c_orders(pools, (isa_level)isa);
  cur = routes[0];
  public_entry(pools[1]);
  for (int t = 0; t < 3; t++) pool_free(pools[t]);
  return test_report("gemm");
}
