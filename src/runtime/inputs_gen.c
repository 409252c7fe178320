#include "runtime/inputs_gen.h"

#include <string.h>

#include "util/err.h"

/* ---- PRNG: splitmix64 to seed, xoshiro256** to draw (Blackman & Vigna) ---- */

static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t splitmix64(uint64_t *x) { return mix64(*x += 0x9e3779b97f4a7c15ull); }

typedef struct rng { uint64_t s[4]; } rng;

static void rng_seed(rng *g, uint64_t seed, int index) {
  uint64_t x = mix64(seed ^ mix64((uint64_t)(int64_t)index));
  for (int i = 0; i < 4; i++) g->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(rng *g) {
  uint64_t *s = g->s;
  uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return r;
}

/* Uniform in [0, n), n > 0: rejection removes the modulo bias. */
static uint64_t rng_below(rng *g, uint64_t n) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % n; /* multiple of n */
  uint64_t x;
  do x = rng_next(g); while (x >= limit);
  return x % n;
}

/* k uniform in [0, 2^bits) scaled to [-1, 1): (k - 2^(bits-1)) / 2^(bits-1), exact. */
static double rng_sym(rng *g, int bits) {
  int64_t k = (int64_t)(rng_next(g) >> (64 - bits));
  double half = (double)(1ull << (bits - 1));
  return ((double)k - half) / half;
}

/* ---- filling ---- */

static uint64_t int_type_limit(smelt_dtype t) { /* max + 1, 0 for 64-bit unsigned (no limit) */
  switch (t) {
    case SMELT_I8: return 1ull << 7;
    case SMELT_U8: return 1ull << 8;
    case SMELT_I16: return 1ull << 15;
    case SMELT_U16: return 1ull << 16;
    case SMELT_I32: return 1ull << 31;
    case SMELT_U32: return 1ull << 32;
    case SMELT_I64: return 1ull << 63;
    default: return 0;
  }
}

static void fill_ints(tensor *t, rng *g, int64_t n, uint64_t hi) {
  uint64_t lim = int_type_limit(t->dtype);
  if (lim && hi > lim) hi = lim;
  for (int64_t i = 0; i < n; i++) {
    uint64_t v = rng_below(g, hi);
    switch (t->dtype) {
      case SMELT_I8: ((int8_t *)t->data)[i] = (int8_t)v; break;
      case SMELT_U8: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
      case SMELT_I16: ((int16_t *)t->data)[i] = (int16_t)v; break;
      case SMELT_U16: ((uint16_t *)t->data)[i] = (uint16_t)v; break;
      case SMELT_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
      case SMELT_U32: ((uint32_t *)t->data)[i] = (uint32_t)v; break;
      case SMELT_I64: ((int64_t *)t->data)[i] = (int64_t)v; break;
      case SMELT_U64: ((uint64_t *)t->data)[i] = v; break;
      default: break;
    }
  }
}

static void fill_floats(tensor *t, rng *g, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    switch (t->dtype) {
      case SMELT_F32: ((float *)t->data)[i] = (float)rng_sym(g, 24); break;
      case SMELT_F64: ((double *)t->data)[i] = rng_sym(g, 53); break;
      case SMELT_F16: ((uint16_t *)t->data)[i] = f32_to_f16((float)rng_sym(g, 11)); break;
      case SMELT_BF16: ((uint16_t *)t->data)[i] = f32_to_bf16((float)rng_sym(g, 8)); break;
      default: break;
    }
  }
}

static smelt_status check_request(smelt_dtype dt, int rank, const int64_t *dims, int index,
                                  int64_t int_high) {
  bool ok = dt == SMELT_F32 || dt == SMELT_F64 || dt == SMELT_F16 || dt == SMELT_BF16 ||
            dt == SMELT_BOOL || dtype_is_int(dt);
  if (!ok)
    return err_set(SMELT_ERR_UNSUPPORTED, "input %d: cannot generate random %s values; give the "
                   "input in a file", index, dtype_name(dt));
  if (int_high < 0)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %d: integer upper bound %lld is negative",
                   index, (long long)int_high);
  if (rank < 0 || rank > SMELT_MAX_RANK)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %d: rank %d is outside 0..%d", index, rank,
                   SMELT_MAX_RANK);
  for (int d = 0; d < rank; d++)
    if (dims[d] < 0)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %d: dimension %d is not known; give the "
                     "input's shape", index, d);
  return SMELT_OK;
}

smelt_status inputs_generate(tensor *t, smelt_dtype dt, int rank, const int64_t *dims,
                             uint64_t seed, int index, int64_t int_high) {
  memset(t, 0, sizeof *t);
  TRY(check_request(dt, rank, dims, index, int_high));
  smelt_status s = tensor_alloc(t, dt, rank, dims);
  if (s) return err_prefix(s, "input %d: ", index);
  rng g;
  rng_seed(&g, seed, index);
  int64_t n = tensor_numel(t);
  if (dt == SMELT_BOOL) {
    for (int64_t i = 0; i < n; i++) ((uint8_t *)t->data)[i] = (uint8_t)(rng_next(&g) >> 63);
  } else if (dtype_is_int(dt)) {
    fill_ints(t, &g, n, int_high ? (uint64_t)int_high : INPUTS_INT_HIGH_DEFAULT);
  } else {
    fill_floats(t, &g, n);
  }
  return SMELT_OK;
}
