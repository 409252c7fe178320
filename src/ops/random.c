/* Random ops: RandomUniform, RandomNormal, RandomUniformLike,
 * RandomNormalLike, Bernoulli and Multinomial.
 *
 * Each node run draws from its own xoshiro256** generator, seeded from the
 * `seed` attribute when given (so a seeded node gives the same values every
 * run) and from the OS entropy source otherwise.  The streams are not
 * numpy's: models that need particular random values cannot match, which is
 * why ONNX's own tests of these ops cannot pass bit for bit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "ops/convert.h"
#include "ops/nn_util.h"
#include "util/err.h"

#define RND_PI 3.14159265358979323846

typedef struct rng {
  uint64_t s[4];
} rng;

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(rng *r) {
  uint64_t *s = r->s, out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t, s[3] = rotl(s[3], 45);
  return out;
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(rng *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

static double rng_normal(rng *r) {
  double u1 = rng_uniform(r), u2 = rng_uniform(r);
  return sqrt(-2.0 * log(1.0 - u1)) * cos(2 * RND_PI * u2);
}

static void rng_init(op_ctx *c, rng *r) {
  uint64_t seed;
  if (ir_attr_find(c->node, "seed")) {
    float f = op_attr_float(c, "seed", 0.0f);
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    seed = bits;
  } else if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)(uintptr_t)r;
  }
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

/* ---- shapes and types ---- */

static smelt_status rnd_dtype(op_ctx *c, smelt_dtype dflt, bool float_only, smelt_dtype *dt) {
  int64_t d = op_attr_int(c, "dtype", dflt);
  if (d <= 0 || d >= SMELT_DTYPE_COUNT || !cvt_supported((smelt_dtype)d) || (float_only && !nn_is_float((smelt_dtype)d)))
    return err_set(SMELT_ERR_UNSUPPORTED, "attribute dtype %lld is not a supported output type", (long long)d);
  *dt = (smelt_dtype)d;
  return SMELT_OK;
}

static smelt_status shape_infer(op_ctx *c) {
  smelt_dtype dt = SMELT_F32;
  TRY(rnd_dtype(c, SMELT_F32, true, &dt));
  int n;
  const int64_t *shape = ir_attr_ints(c->node, "shape", &n);
  if (!shape) return err_set(SMELT_ERR_INVALID_MODEL, "attribute shape is required");
  if (n > SMELT_MAX_RANK) return err_set(SMELT_ERR_UNSUPPORTED, "shape of rank %d", n);
  for (int i = 0; i < n; i++)
    if (shape[i] < 0) return err_set(SMELT_ERR_INVALID_MODEL, "attribute shape has a negative dim");
  op_set_out(c, 0, dt, n, shape);
  return SMELT_OK;
}

static smelt_status like_infer(op_ctx *c) {
  const tensor *x = c->in[0];
  smelt_dtype dt = x->dtype;
  if (ir_attr_find(c->node, "dtype")) TRY(rnd_dtype(c, SMELT_F32, true, &dt));
  else if (!nn_is_float(dt) && dt != SMELT_UNDEFINED)
    return err_set(SMELT_ERR_INVALID_MODEL, "input is %s: a dtype attribute is needed", dtype_name(dt));
  op_set_out(c, 0, dt, x->rank, x->dims);
  return SMELT_OK;
}

/* ---- RandomUniform(Like), RandomNormal(Like) ---- */

static smelt_status fill(op_ctx *c, bool normal) {
  tensor *y = c->out[0];
  rng r;
  rng_init(c, &r);
  double a = normal ? op_attr_float(c, "mean", 0.0f) : op_attr_float(c, "low", 0.0f);
  double b = normal ? op_attr_float(c, "scale", 1.0f) : op_attr_float(c, "high", 1.0f);
  for (int64_t i = 0; i < tensor_numel(y); i++) {
    double v = normal ? a + b * rng_normal(&r) : a + (b - a) * rng_uniform(&r);
    nn_store_f64(y->dtype, y->data, i, 1, 1, &v);
  }
  return SMELT_OK;
}

static smelt_status uniform_run(op_ctx *c) { return fill(c, false); }
static smelt_status normal_run(op_ctx *c) { return fill(c, true); }

/* ---- Bernoulli ---- */

static smelt_status bern_infer(op_ctx *c) {
  TRY(nn_check_float(c, 0, "input"));
  smelt_dtype dt = c->in[0]->dtype;
  if (ir_attr_find(c->node, "dtype")) TRY(rnd_dtype(c, SMELT_F32, false, &dt));
  op_set_out(c, 0, dt, c->in[0]->rank, c->in[0]->dims);
  return SMELT_OK;
}

static smelt_status bern_run(op_ctx *c) {
  const tensor *x = c->in[0];
  tensor *y = c->out[0];
  rng r;
  rng_init(c, &r);
  for (int64_t i = 0; i < tensor_numel(x); i++) {
    double p, v;
    nn_load_f64(x->dtype, x->data, i, 1, 1, &p);
    if (!(p >= 0 && p <= 1))
      return err_set(SMELT_ERR_RUNTIME, "probability %g at %lld is outside [0, 1]", p, (long long)i);
    v = rng_uniform(&r) < p ? 1.0 : 0.0;
    cvt_opts o = cvt_opts_default();
    cvt_store_f64_at(y->dtype, &v, 1, y->data, i, &o); /* by index: packed types too */
  }
  return SMELT_OK;
}

/* ---- Multinomial ---- */

static smelt_status multi_infer(op_ctx *c) {
  TRY(nn_check_float(c, 0, "input"));
  TRY(nn_check_rank(c, 0, "input", 2));
  smelt_dtype dt = SMELT_I32;
  TRY(rnd_dtype(c, SMELT_I32, false, &dt));
  if (dt != SMELT_I32 && dt != SMELT_I64) return err_set(SMELT_ERR_INVALID_MODEL, "dtype must be int32 or int64");
  int64_t n = op_attr_int(c, "sample_size", 1);
  if (n < 0) return err_set(SMELT_ERR_INVALID_MODEL, "sample_size must be >= 0");
  op_set_out(c, 0, dt, 2, (int64_t[]){c->in[0]->rank == 2 ? c->in[0]->dims[0] : DIM_UNKNOWN, n});
  return SMELT_OK;
}

/* Samples class indices from the softmax of each row of log-probabilities. */
static smelt_status multi_run(op_ctx *c) {
  const tensor *x = c->in[0];
  tensor *y = c->out[0];
  int64_t B = x->dims[0], K = x->dims[1], n = y->dims[1];
  if (K < 1) return err_set(SMELT_ERR_INVALID_ARGUMENT, "input has no classes");
  double *cdf = NULL;
  TRY(nn_alloc((void **)&cdf, K, sizeof(double), "class weights"));
  rng r;
  rng_init(c, &r);
  for (int64_t b = 0; b < B; b++) {
    nn_load_f64(x->dtype, x->data, b * K, 1, K, cdf);
    double mx = -INFINITY, sum = 0;
    for (int64_t k = 0; k < K; k++)
      if (cdf[k] > mx) mx = cdf[k];
    for (int64_t k = 0; k < K; k++) cdf[k] = sum += exp(cdf[k] - mx);
    for (int64_t s = 0; s < n; s++) {
      double u = rng_uniform(&r) * sum;
      int64_t k = 0;
      while (k < K - 1 && cdf[k] <= u) k++;
      int64_t v = k;
      nn_store_i64(y->dtype, y->data, b * n + s, 1, 1, &v);
    }
  }
  free(cdf);
  return SMELT_OK;
}

const op_def op_family_random[] = {
    {"RandomUniform", "", 0, 0, 1, 1, shape_infer, uniform_run, false},
    {"RandomNormal", "", 0, 0, 1, 1, shape_infer, normal_run, false},
    {"RandomUniformLike", "", 1, 1, 1, 1, like_infer, uniform_run, false},
    {"RandomNormalLike", "", 1, 1, 1, 1, like_infer, normal_run, false},
    {"Bernoulli", "", 1, 1, 1, 1, bern_infer, bern_run, false},
    {"Multinomial", "", 1, 1, 1, 1, multi_infer, multi_run, false},
    {0}};
