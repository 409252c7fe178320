/* GEMM with operands packed ahead (gemm_pack_b_prepare / gemm_pack_a_prepare)
 * against the reference GEMM (gemm_f32_scalar) on every ISA path this
 * machine has: awkward shapes (1, primes, sizes off the tile and the
 * vector width), all transpositions, the default blocking and a tiny one
 * (several K super-blocks, K blocks, N chunks and row blocks on small
 * matrices), 1-3 threads, alpha/beta, bias/relu/clip epilogues.
 * The operand the call passes is poisoned (NaN) while a matching packed
 * copy is given, so a result that ignored the packed copy fails; a packed
 * copy that does not match the call (another K, N, transposition, ISA,
 * blocking or kind) must be ignored, with the call's own operand used.
 * The small-M path over packed B is swept the same way (M 1..7).
 * Also: wrap over saved floats, and the argument checks. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/gemm.h"
#include "kernels/gemm_kernels.h"
#include "kernels/isa.h"
#include "util/err.h"

#define TEST_RNG_SEED 0x2545f4914f6cdd1dull
#include "test_rng.h"

static float *fill(size_t n, float v, bool random) {
  float *x = malloc(sizeof(float) * (n + 1));
  for (size_t i = 0; x && i < n; i++) x[i] = random ? frand() : v;
  return x;
}

typedef struct pcase {
  gemm_params p;
  float *a, *b, *c0, *bias, *nan_a, *nan_b;
  size_t a_len, b_len, c_len;
} pcase;

static bool pcase_make(pcase *g, bool ta, bool tb, int64_t M, int64_t N, int64_t K, int i) {
  static const float alphas[] = {1.f, -0.5f, 2.f}, betas[] = {0.f, 1.f, 0.3f, 0.f};
  memset(g, 0, sizeof *g);
  gemm_params *p = &g->p;
  *p = gemm_params_default();
  p->trans_a = ta, p->trans_b = tb, p->M = M, p->N = N, p->K = K;
  p->alpha = alphas[i % 3], p->beta = betas[i % 4];
  int64_t pad = i % 3 == 2 ? 3 : 0;
  p->lda = (ta ? M : K) + pad, p->ldb = (tb ? K : N) + pad, p->ldc = N + pad;
  g->a_len = (size_t)((ta ? K : M) * p->lda), g->b_len = (size_t)((tb ? N : K) * p->ldb);
  g->c_len = (size_t)(M * p->ldc);
  g->a = fill(g->a_len, 0, true), g->b = fill(g->b_len, 0, true), g->c0 = fill(g->c_len, 0, true);
  g->bias = fill((size_t)(M > N ? M : N), 0, true);
  g->nan_a = fill(g->a_len, NAN, false), g->nan_b = fill(g->b_len, NAN, false);
  p->epilogue.bias_kind = (gemm_bias)(i % 5 == 1 ? GEMM_BIAS_COL : i % 5 == 3 ? GEMM_BIAS_ROW : 0);
  p->epilogue.bias = p->epilogue.bias_kind ? g->bias : NULL;
  p->epilogue.act = (gemm_act)(i % 7 == 2 ? GEMM_ACT_RELU : i % 7 == 5 ? GEMM_ACT_CLIP : 0);
  p->epilogue.clip_lo = -0.25f, p->epilogue.clip_hi = 0.5f;
  return g->a && g->b && g->c0 && g->bias && g->nan_a && g->nan_b;
}

static void pcase_free(pcase *g) {
  free(g->a), free(g->b), free(g->c0), free(g->bias), free(g->nan_a), free(g->nan_b);
}

/* |got - ref| within the rounding of both sums, relative to sum |terms|. */
static bool close_to_ref(const pcase *g, const float *got, const float *ref) {
  const gemm_params *p = &g->p;
  for (int64_t m = 0; m < p->M; m++)
    for (int64_t n = 0; n < p->ldc; n++) {
      float x = got[m * p->ldc + n], r = ref[m * p->ldc + n];
      if (n >= p->N) { /* the stride gap is never written */
        if (memcmp(&x, &g->c0[m * p->ldc + n], sizeof x)) return false;
        continue;
      }
      double mag = 0;
      for (int64_t k = 0; k < p->K; k++) {
        double a = p->trans_a ? g->a[k * p->lda + m] : g->a[m * p->lda + k];
        double b = p->trans_b ? g->b[n * p->ldb + k] : g->b[k * p->ldb + n];
        mag += fabs(a * b);
      }
      mag = mag * fabs((double)p->alpha) + fabs((double)p->beta * g->c0[m * p->ldc + n]) + 1.0;
      if (!(fabs((double)x - (double)r) <= 4.0 * (double)(p->K + 4) * FLT_EPSILON * mag)) {
        fprintf(stderr, "  m=%lld n=%lld: got %g, reference %g\n", (long long)m, (long long)n, x, r);
        return false;
      }
    }
  return true;
}

/* Which operands come packed ahead. */
enum { PRE_B = 1, PRE_A = 2 };

static int n_cases;

/* One product: the reference, then the call with packed operands (built
 * with blk on isa) whose own A / B are NaN where a packed copy is given. */
static void run_case(smelt_pool *pool, isa_level isa, const gemm_blocking *blk, gemm_path path, int pre,
                     bool ta, bool tb, int64_t M, int64_t N, int64_t K, int i) {
  pcase g;
  n_cases++;
  if (!pcase_make(&g, ta, tb, M, N, K, i)) {
    CHECK(!"out of memory in test");
    pcase_free(&g);
    return;
  }
  float *ref = fill(g.c_len, 0, false), *got = fill(g.c_len, 0, false);
  gemm_packed *pa = NULL, *pb = NULL;
  if (pre & PRE_B) CHECK_OK(gemm_pack_b_prepare_blk(pool, isa, blk, tb, K, N, g.b, g.p.ldb, &pb));
  if (pre & PRE_A) CHECK_OK(gemm_pack_a_prepare_blk(pool, isa, blk, ta, M, K, g.a, g.p.lda, &pa));
  memcpy(ref, g.c0, sizeof(float) * g.c_len);
  memcpy(got, g.c0, sizeof(float) * g.c_len);
  gemm_params r = g.p;
  r.A = g.a, r.B = g.b, r.C = ref;
  gemm_f32_scalar(NULL, &r);
  gemm_params q = g.p;
  q.A = pa ? g.nan_a : g.a, q.B = pb ? g.nan_b : g.b, q.C = got;
  q.packed_a = pa, q.packed_b = pb;
  CHECK_OK(gemm_f32_run(pool, &q, isa, path, blk));
  bool ok = close_to_ref(&g, got, ref);
  if (!ok)
    fprintf(stderr, "  %s blk=%s path=%d pre=%d threads=%d ta=%d tb=%d M=%lld N=%lld K=%lld case %d\n",
            isa_name(isa), blk ? "tiny" : "default", (int)path, pre, pool_threads(pool), ta, tb, (long long)M,
            (long long)N, (long long)K, i);
  CHECK(ok);
  gemm_packed_free(pa);
  gemm_packed_free(pb);
  free(ref), free(got);
  pcase_free(&g);
}

static const int64_t DIMS[] = {1, 2, 3, 5, 7, 8, 13, 17, 31, 33, 48, 49, 65, 97, 129, 257};
#define N_DIMS (int)(sizeof DIMS / sizeof DIMS[0])

static void sweep(smelt_pool *pool, isa_level isa, const gemm_blocking *blk, int cases) {
  for (int i = 0; i < cases; i++) {
    int64_t M, N, K;
    do {
      M = DIMS[rng() % N_DIMS], N = DIMS[rng() % N_DIMS], K = DIMS[rng() % N_DIMS];
    } while (M * N * K > (1 << 20));
    int pre = 1 + i % 3; /* B, A, both */
    gemm_path path = i % 4 == 3 ? GEMM_PATH_AUTO : GEMM_PATH_PACKED;
    /* AUTO may choose the small-M / direct paths, which read the operand
     * itself: give it the real one there (only B packed, rows where the
     * packed path wins). */
    if (path == GEMM_PATH_AUTO) pre = PRE_B, M = M < GEMM_PREPACKED_MIN_M ? GEMM_PREPACKED_MIN_M + M : M;
    run_case(pool, isa, blk, path, pre, i & 1, (i >> 1) & 1, M, N, K, i);
  }
}

/* Packed copies that do not fit the call are ignored: the call's operands
 * (real here) give the right result. */
static void mismatches(smelt_pool *pool, isa_level isa, const gemm_blocking *tiny) {
  pcase g;
  int64_t M = 37, N = 45, K = 70;
  if (!pcase_make(&g, false, false, M, N, K, 1)) {
    CHECK(!"out of memory in test");
    pcase_free(&g);
    return;
  }
  float *ref = fill(g.c_len, 0, false), *got = fill(g.c_len, 0, false);
  float *big = fill((size_t)((K + 1) * (N + 1) + (M + 1) * (K + 1)), 0, true);
  gemm_packed *wrong[6] = {NULL};
  CHECK_OK(gemm_pack_b_prepare_blk(pool, isa, NULL, false, K + 1, N, big, N, &wrong[0])); /* other K */
  CHECK_OK(gemm_pack_b_prepare_blk(pool, isa, NULL, false, K, N + 1, big, N + 1, &wrong[1])); /* other N */
  CHECK_OK(gemm_pack_b_prepare_blk(pool, isa, NULL, true, K, N, big, K, &wrong[2]));      /* transposed */
  CHECK_OK(gemm_pack_b_prepare_blk(pool, isa, tiny, false, K, N, big, N, &wrong[3]));     /* other blocking */
  CHECK_OK(gemm_pack_a_prepare_blk(pool, isa, NULL, false, M, K, big, K, &wrong[4]));     /* an A as B */
  CHECK_OK(gemm_pack_a_prepare_blk(pool, isa, NULL, false, M + 1, K, big, K, &wrong[5])); /* other M */
  memcpy(ref, g.c0, sizeof(float) * g.c_len);
  gemm_params r = g.p;
  r.A = g.a, r.B = g.b, r.C = ref;
  gemm_f32_scalar(NULL, &r);
  for (int w = 0; w < 6; w++) {
    for (int path = 0; path < 2; path++) {
      memcpy(got, g.c0, sizeof(float) * g.c_len);
      gemm_params q = g.p;
      q.A = g.a, q.B = g.b, q.C = got;
      q.packed_b = w < 5 ? wrong[w] : NULL;
      q.packed_a = w >= 4 ? wrong[w] : NULL;
      if (w == 4) q.packed_a = wrong[1]; /* a B as A */
      CHECK_OK(gemm_f32_run(pool, &q, isa, path ? GEMM_PATH_PACKED : GEMM_PATH_AUTO, NULL));
      bool ok = close_to_ref(&g, got, ref);
      if (!ok) fprintf(stderr, "  %s: mismatched packed operand %d not ignored\n", isa_name(isa), w);
      CHECK(ok);
    }
  }
  /* On another ISA (AVX2 packs 16-wide panels, AVX-512 32-wide). */
  if (isa == ISA_AVX512) {
    gemm_packed *other = NULL;
    CHECK_OK(gemm_pack_b_prepare(pool, ISA_AVX2, false, K, N, g.b, N, &other));
    memcpy(got, g.c0, sizeof(float) * g.c_len);
    gemm_params q = g.p;
    q.A = g.a, q.B = g.b, q.C = got, q.packed_b = other;
    CHECK_OK(gemm_f32_run(pool, &q, isa, GEMM_PATH_PACKED, NULL));
    CHECK(close_to_ref(&g, got, ref));
    gemm_packed_free(other);
  }
  for (int w = 0; w < 6; w++) gemm_packed_free(wrong[w]);
  free(ref), free(got), free(big);
  pcase_free(&g);
}

/* A packed copy over saved floats (as the prep store maps them) computes
 * the same; a wrong size or ISA without a packed path is refused. */
static void wrap(smelt_pool *pool, isa_level isa) {
  int64_t K = 300, N = 77, M = 20;
  float *b = fill((size_t)(K * N), 0, true), *a = fill((size_t)(M * K), 0, true);
  float *c1 = fill((size_t)(M * N), 0, false), *c2 = fill((size_t)(M * N), 0, false);
  gemm_packed *pb = NULL, *wb = NULL, *pa = NULL, *wa = NULL;
  CHECK_OK(gemm_pack_b_prepare(pool, isa, false, K, N, b, N, &pb));
  CHECK_OK(gemm_pack_a_prepare(pool, isa, false, M, K, a, K, &pa));
  int64_t nb = 0, na = 0;
  const float *db = gemm_packed_data(pb, &nb), *da = gemm_packed_data(pa, &na);
  CHECK(nb == gemm_pack_b_floats(isa, K, N) && na == gemm_pack_a_floats(isa, M, K));
  float *sb = aligned_alloc(64, sizeof(float) * (size_t)(nb + 16)), *sa = aligned_alloc(64, sizeof(float) * (size_t)(na + 16));
  memcpy(sb, db, sizeof(float) * (size_t)nb);
  memcpy(sa, da, sizeof(float) * (size_t)na);
  CHECK_OK(gemm_pack_b_wrap(isa, false, K, N, sb, nb, &wb));
  CHECK_OK(gemm_pack_a_wrap(isa, false, M, K, sa, na, &wa));
  gemm_params p = gemm_params_default();
  p.M = M, p.N = N, p.K = K, p.A = a, p.lda = K, p.B = b, p.ldb = N, p.C = c1, p.ldc = N;
  p.packed_a = pa, p.packed_b = pb;
  CHECK_OK(gemm_f32_run(pool, &p, isa, GEMM_PATH_PACKED, NULL));
  p.packed_a = wa, p.packed_b = wb, p.C = c2;
  CHECK_OK(gemm_f32_run(pool, &p, isa, GEMM_PATH_PACKED, NULL));
  CHECK(memcmp(c1, c2, sizeof(float) * (size_t)(M * N)) == 0);
  gemm_packed *bad = NULL;
  CHECK(gemm_pack_b_wrap(isa, false, K, N, sb, nb - 1, &bad) == SMELT_ERR_INVALID_ARGUMENT && !bad);
  CHECK(strstr(smelt_last_error(), "floats given") != NULL);
  CHECK(gemm_pack_b_wrap(isa, false, 2 * K, N, sb, nb, &bad) == SMELT_ERR_INVALID_ARGUMENT && !bad);
  CHECK(gemm_pack_b_wrap(isa, false, K, N, sb + 4, nb, &bad) == SMELT_ERR_INVALID_ARGUMENT && !bad);
  CHECK(strstr(smelt_last_error(), "aligned") != NULL);
  /* packed into a caller's buffer (as into a reserved cache entry), which
   * it borrows: the same products (the buffer starts as NaN: every float the
   * layout uses is written; B's gaps past a short last K block never are) */
  float *ib = aligned_alloc(64, sizeof(float) * (size_t)(nb + 16)), *ia = aligned_alloc(64, sizeof(float) * (size_t)(na + 16));
  memset(ib, 0xff, sizeof(float) * (size_t)(nb + 16));
  memset(ia, 0xff, sizeof(float) * (size_t)(na + 16));
  gemm_packed *xb = NULL, *xa = NULL;
  CHECK_OK(gemm_pack_b_into(pool, isa, false, K, N, b, N, ib, nb, &xb));
  CHECK_OK(gemm_pack_a_into(pool, isa, false, M, K, a, K, ia, na, &xa));
  int64_t n2 = 0;
  CHECK(xb && gemm_packed_data(xb, &n2) == ib && n2 == nb);
  CHECK(xa && gemm_packed_data(xa, &n2) == ia && n2 == na && !memcmp(ia, da, sizeof(float) * (size_t)na));
  p.packed_a = xa, p.packed_b = xb, p.C = c2;
  memset(c2, 0, sizeof(float) * (size_t)(M * N));
  CHECK_OK(gemm_f32_run(pool, &p, isa, GEMM_PATH_PACKED, NULL));
  CHECK(memcmp(c1, c2, sizeof(float) * (size_t)(M * N)) == 0);
  gemm_packed_free(xb), gemm_packed_free(xa); /* borrowed: ib, ia stay */
  CHECK(gemm_pack_b_into(pool, isa, false, K, N, b, N, ib, nb - 1, &bad) == SMELT_ERR_INVALID_ARGUMENT && !bad);
  CHECK(gemm_pack_b_into(pool, isa, false, K, N, b, N, ib + 4, nb, &bad) == SMELT_ERR_INVALID_ARGUMENT && !bad);
  CHECK(gemm_pack_a_into(pool, isa, false, M, K, a, K, NULL, na, &bad) == SMELT_ERR_INVALID_ARGUMENT && !bad);
  free(ib), free(ia);
  gemm_packed_free(pb), gemm_packed_free(wb), gemm_packed_free(pa), gemm_packed_free(wa);
  free(sb), free(sa), free(a), free(b), free(c1), free(c2);
}

static void bad_args(void) {
  gemm_packed *pk = (gemm_packed *)&pk;
  float x[4] = {0};
  CHECK(gemm_pack_b_prepare(NULL, isa_detect(), false, 0, 4, x, 4, &pk) == SMELT_ERR_INVALID_ARGUMENT && !pk);
  CHECK(gemm_pack_b_prepare(NULL, isa_detect(), false, 2, 2, NULL, 2, &pk) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(gemm_pack_a_prepare(NULL, isa_detect(), false, 2, 3, x, 2, &pk) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(smelt_last_error(), "ld 2") != NULL);
  /* No packed path on the scalar ISA: nothing prepared, and no error. */
  CHECK_OK(gemm_pack_b_prepare(NULL, ISA_SCALAR, false, 2, 2, x, 2, &pk));
  CHECK(pk == NULL && gemm_pack_b_floats(ISA_SCALAR, 2, 2) == 0);
  gemm_packed_free(NULL);
}

/* The small-M path over packed B (M < GEMM_PREPACKED_MIN_M: a decode
 * step's GEMVs): every row count 1..7, sizes off the panel width and the
 * vector width, odd K, both transpositions of B, forced and chosen by AUTO
 * (B passed as NaN: the packed copy must be what is read). */
static void small_m_packed(smelt_pool *pool, isa_level isa, const gemm_blocking *blk) {
  static const int64_t NS[] = {1, 7, 15, 16, 17, 33, 100, 529}, KS[] = {1, 3, 8, 31, 65, 257, 300};
  int i = 0;
  for (int64_t M = 1; M < GEMM_PREPACKED_MIN_M; M++)
    for (int ni = 0; ni < 8; ni++)
      for (int ki = 0; ki < 7; ki++, i++)
        run_case(pool, isa, blk, i % 2 ? GEMM_PATH_AUTO : GEMM_PATH_SMALL_M_PACKED, PRE_B, i % 5 == 4, i % 3 == 1,
                 M, NS[ni], KS[ki], i);
}

int main(void) {
  bad_args();
  smelt_pool *pools[3] = {NULL, NULL, NULL};
  for (int t = 0; t < 3; t++) CHECK_OK(pool_create(t + 1, &pools[t]));
  /* kc 24, mc 16, 4096 floats of B per chunk, 2 K blocks per pass */
  static const gemm_blocking tiny = {24, 16, 4096, 2, 1, 0}, panels = {24, 16, 4096, 2, 1, 1};
  int isas = 0;
  for (int isa = ISA_AVX2; isa <= (int)isa_detect(); isa++, isas++) {
    int before = check_failures;
    n_cases = 0;
    for (int t = 0; t < 3; t++) {
      sweep(pools[t], (isa_level)isa, NULL, 40);
      sweep(pools[t], (isa_level)isa, &tiny, 40);
      sweep(pools[t], (isa_level)isa, &panels, 40); /* each item's panels over all K blocks in turn */
      small_m_packed(pools[t], (isa_level)isa, NULL);
      small_m_packed(pools[t], (isa_level)isa, &tiny);
    }
    /* a GEMV over several K super-blocks and N chunks at the default blocking */
    run_case(pools[1], (isa_level)isa, NULL, GEMM_PATH_AUTO, PRE_B, false, false, 1, 3001, 4300, 0);
    run_case(pools[1], (isa_level)isa, NULL, GEMM_PATH_AUTO, PRE_B, false, true, 3, 2999, 4300, 1);
    /* big enough for several K super-blocks and N chunks at the default blocking */
    run_case(pools[1], (isa_level)isa, NULL, GEMM_PATH_PACKED, PRE_A | PRE_B, false, false, 9, 1000, 4200, 1);
    run_case(pools[2], (isa_level)isa, NULL, GEMM_PATH_AUTO, PRE_B, false, true, 9, 1100, 700, 2);
    mismatches(pools[1], (isa_level)isa, &tiny);
    wrap(pools[1], (isa_level)isa);
    printf("%s: %d cases, %s\n", isa_name((isa_level)isa), n_cases, check_failures == before ? "ok" : "FAILED");
  }
  if (!isas) test_skip("gemm_prepack", "no packed GEMM path on this machine: only the argument checks ran");
  for (int t = 0; t < 3; t++) pool_free(pools[t]);
  return test_report("gemm_prepack");
}
