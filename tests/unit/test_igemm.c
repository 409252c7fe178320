/* The exact integer matrix product (kernels/igemm.h) against a plain int64
 * reference cast to int32 (MatMulInteger's arithmetic), on every ISA path
 * the machine has (and the byte form where it has AVX512_VNNI), with and
 * without a pool and B packed ahead: uint8 and
 * int8 operands in all four pairings, zero points scalar, per row of A and
 * per column of B (extremes included), K odd and even, M off the tile
 * height, N off the panel width, row strides past the row length, and a K
 * long enough for the int32 sum to wrap (it must wrap as the reference's
 * cast does).  Every output element is compared; the element after each
 * row's N is a canary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/igemm.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t next(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}

static int32_t at(const void *p, bool s, int64_t i) { return s ? ((const int8_t *)p)[i] : ((const uint8_t *)p)[i]; }

static void check_case(smelt_pool *pool, int64_t M, int64_t N, int64_t K, bool as, bool bs, int zmode, bool extreme) {
  int64_t lda = K + 3, ldb = N + 2, ldc = N + 1;
  uint8_t *A = malloc((size_t)(M * lda + 1)), *B = malloc((size_t)(K * ldb + 1));
  int32_t *za = malloc(sizeof(int32_t) * (size_t)(M + 1)), *zb = malloc(sizeof(int32_t) * (size_t)(N + 1));
  int32_t *C = malloc(sizeof(int32_t) * (size_t)(M * ldc + 1));
  for (int64_t i = 0; i < M * lda; i++) A[i] = extreme ? (as ? 0x80 : 0xff) : (uint8_t)next();
  for (int64_t i = 0; i < K * ldb; i++) B[i] = extreme ? (bs ? 0x7f : 0x00) : (uint8_t)next();
  for (int64_t i = 0; i < M; i++) za[i] = zmode & 1 ? (as ? (int8_t)next() : (uint8_t)next()) : 0;
  for (int64_t i = 0; i < N; i++) zb[i] = zmode & 2 ? (bs ? (int8_t)next() : (uint8_t)next()) : 0;
  if (extreme) za[0] = as ? 127 : 0, zb[0] = bs ? -128 : 255;
  bool zap = (zmode & 1) && !extreme, zbp = (zmode & 2) && !extreme;
  igemm_args g = {M, N, K, A, lda, as, za, zap, B, ldb, bs, zb, zbp, C, ldc};
  int16_t *pk = malloc(sizeof(int16_t) * (size_t)(igemm_packed_b_len(K, N) + 1));
  void *vb = malloc(igemm_vnni_b_bytes(K, N));
  /* isa levels, then (ISA_COUNT) the byte form where the CPU has VNNI */
  for (int isa = 0; isa <= (int)ISA_COUNT; isa++)
    for (int packed = 0; packed < 2; packed++) {
      bool vnni = isa == (int)ISA_COUNT;
      if (vnni ? !igemm_vnni_usable(isa_detect()) : isa > (int)isa_detect()) continue;
      for (int64_t i = 0; i < M * ldc; i++) C[i] = 0x5a5a5a5a;
      if (vnni) {
        if (packed) igemm_vnni_pack_b(pool, &g, vb);
        CHECK_OK(igemm_s32_vnni(pool, &g, packed ? vb : NULL));
      } else if (packed) {
        igemm_pack_b(pool, &g, pk);
        CHECK_OK(igemm_s32_packed(pool, (isa_level)isa, &g, pk));
      } else {
        CHECK_OK(igemm_s32(pool, (isa_level)isa, &g));
      }
      for (int64_t m = 0; m < M; m++) {
        for (int64_t n = 0; n < N; n++) {
          int64_t acc = 0;
          for (int64_t k = 0; k < K; k++)
            acc += (int64_t)(at(A, as, m * lda + k) - za[zap ? m : 0]) * (at(B, bs, k * ldb + n) - zb[zbp ? n : 0]);
          int32_t want = (int32_t)(uint32_t)acc;
          if (C[m * ldc + n] != want) {
            fprintf(stderr, "%s packed %d M%lld N%lld K%lld a%c b%c z%d: C[%lld][%lld] = %d, want %d\n",
                    vnni ? "vnni" : isa_name((isa_level)isa), packed, (long long)M, (long long)N, (long long)K, as ? 's' : 'u',
                    bs ? 's' : 'u', zmode, (long long)m, (long long)n, C[m * ldc + n], want);
            CHECK(0);
            m = M;
            break;
          }
        }
        if (m < M && N < ldc) CHECK(C[m * ldc + N] == 0x5a5a5a5a);
      }
    }
  free(A), free(B), free(za), free(zb), free(C), free(pk), free(vb);
}

int main(void) {
  smelt_pool *p2 = NULL;
  CHECK_OK(pool_create(2, &p2));
  static const int64_t Ms[] = {1, 3, 4, 5, 17, 67};
  static const int64_t Ns[] = {1, 7, 8, 9, 33, 70};
  static const int64_t Ks[] = {1, 2, 5, 64, 129};
  for (int pi = 0; pi < 2; pi++)
    for (size_t a = 0; a < sizeof Ms / sizeof *Ms; a++)
      for (size_t b = 0; b < sizeof Ns / sizeof *Ns; b++)
        for (size_t k = 0; k < sizeof Ks / sizeof *Ks; k++)
          for (int t = 0; t < 4; t++) check_case(pi ? p2 : NULL, Ms[a], Ns[b], Ks[k], t & 1, t & 2, (int)(a + b + k) % 4, false);
  /* every product at its largest: the int32 sum wraps past K = 33026 */
  for (int t = 0; t < 4; t++) check_case(p2, 2, 3, 70001, t & 1, t & 2, 0, true);
  /* K = 0: all zeros */
  int32_t c[4] = {7, 7, 7, 7}, z = 0;
  uint8_t dummy = 1;
  igemm_args g0 = {2, 2, 0, &dummy, 0, false, &z, false, &dummy, 2, false, &z, false, c, 2};
  CHECK_OK(igemm_s32(NULL, isa_detect(), &g0));
  CHECK(c[0] == 0 && c[1] == 0 && c[2] == 0 && c[3] == 0);
  if (igemm_vnni_usable(isa_detect())) {
    c[0] = c[3] = 7;
    CHECK_OK(igemm_s32_vnni(NULL, &g0, NULL));
    CHECK(c[0] == 0 && c[1] == 0 && c[2] == 0 && c[3] == 0);
  }
  g0.ldc = 1;
  CHECK(igemm_s32(NULL, isa_detect(), &g0) == SMELT_ERR_INVALID_ARGUMENT);
  if (igemm_vnni_usable(isa_detect())) CHECK(igemm_s32_vnni(NULL, &g0, NULL) == SMELT_ERR_INVALID_ARGUMENT);
  pool_free(p2);
  return test_report("test_igemm");
}
