/* com.microsoft MatMulNBits (ONNX Runtime's contrib op, as its
 * matmul_nbits_quantizer writes it): Y = A @ dequant(B)^T + bias.
 *
 * Inputs: A float32 [..., K]; B uint8 [N, n_blocks, block_size * bits / 8]
 * (column n's k-th code in byte k / 2 of its block, the low nibble first);
 * scales float32 [N * n_blocks] (any shape of that many); zero_points
 * (optional) uint8 packed two per byte the same way, [N, ceil(n_blocks / 2)],
 * or float32 [N * n_blocks] (default 8 = 2^(bits-1)); g_idx (input 4) must
 * be absent; bias (input 5, optional) float32 [N].  Attributes K, N, bits
 * (4 only), block_size (a power of 2, at least 16), accuracy_level (ignored:
 * the result is as the fast path computes it; see below).
 *   W[k][n] = (code(n, k) - zp(n, k / block_size)) * scale(n, k / block_size)
 * Y: A's shape with the last dim N.
 *
 * Reference (plain; no op cache: device cpu-ref, or a block size not a
 * multiple of 32, or B / scales / zero points not constants): W dequantized
 * to fp32 for the call and the fp32 GEMM.  Fast path (block_size a multiple
 * of 32, B, scales and zero points constant, an op cache): W repacked once
 * into kernels/q4gemm.h's int4 groups of 32 (a block's scale repeated over
 * its groups; no zero points: symmetric, code - 8 exactly; with zero points:
 * the asymmetric form, m = -scale * zp), kept in the op cache; few rows run
 * the int8 x int4 kernel (activations quantized per group of 32, as
 * accuracy_level 4 does in ONNX Runtime), many rows the fp32 GEMM over
 * dequantized panels. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/tensor.h"
#include "kernels/gemm.h"
#include "kernels/q4gemm.h"
#include "ops/nn_util.h"
#include "ops/op_cache.h"
#include "util/err.h"

typedef struct nbits {
  int64_t K, N, bs, nb, blob; /* blob: bytes per block */
  const uint8_t *B;
  const float *scales;
  const uint8_t *zp8; /* packed zero points, or NULL */
  const float *zpf;   /* float zero points, or NULL */
} nbits;

static const tensor *present(op_ctx *c, int i) {
  const tensor *t = op_in(c, i);
  return t && t->dtype != SMELT_UNDEFINED ? t : NULL;
}

/* Checks the attributes and what of the inputs' types and sizes is known. */
static smelt_status nbits_read(op_ctx *c, nbits *q) {
  memset(q, 0, sizeof *q);
  q->K = op_attr_int(c, "K", -1), q->N = op_attr_int(c, "N", -1), q->bs = op_attr_int(c, "block_size", -1);
  int64_t bits = op_attr_int(c, "bits", 4);
  if (bits != 4) return err_set(SMELT_ERR_UNSUPPORTED, "MatMulNBits: bits %lld (only 4 is implemented)", (long long)bits);
  if (q->K <= 0 || q->N <= 0 || q->K > ((int64_t)1 << 40) / q->N)
    return err_set(SMELT_ERR_INVALID_MODEL, "MatMulNBits: attributes K %lld and N %lld must be positive", (long long)q->K,
                   (long long)q->N);
  if (q->bs < 16 || (q->bs & (q->bs - 1)))
    return err_set(SMELT_ERR_INVALID_MODEL, "MatMulNBits: block_size %lld is not a power of 2 of at least 16",
                   (long long)q->bs);
  q->nb = (q->K + q->bs - 1) / q->bs, q->blob = q->bs / 2;
  const tensor *a = c->in[0], *b = c->in[1], *s = c->in[2], *zp = present(c, 3), *bias = present(c, 5);
  if (a->dtype != SMELT_F32) return err_set(SMELT_ERR_UNSUPPORTED, "MatMulNBits: input 0 (A) must be float32");
  if (b->dtype != SMELT_U8) return err_set(SMELT_ERR_INVALID_MODEL, "MatMulNBits: input 1 (B) must be uint8");
  if (s->dtype != SMELT_F32) return err_set(SMELT_ERR_UNSUPPORTED, "MatMulNBits: input 2 (scales) must be float32");
  if (present(c, 4)) return err_set(SMELT_ERR_UNSUPPORTED, "MatMulNBits: input 4 (g_idx) is not implemented");
  if (zp && zp->dtype != SMELT_U8 && zp->dtype != SMELT_F32)
    return err_set(SMELT_ERR_INVALID_MODEL, "MatMulNBits: input 3 (zero_points) must be uint8 or float32");
  if (bias && bias->dtype != SMELT_F32) return err_set(SMELT_ERR_INVALID_MODEL, "MatMulNBits: input 5 (bias) must be float32");
  if (a->rank == 0) return err_set(SMELT_ERR_INVALID_ARGUMENT, "MatMulNBits: input 0 (A) is a scalar");
  if (a->rank > 0 && dim_known(a->dims[a->rank - 1]) && a->dims[a->rank - 1] != q->K)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "MatMulNBits: A's last dim %lld is not K %lld",
                   (long long)a->dims[a->rank - 1], (long long)q->K);
  struct {
    const tensor *t;
    const char *name;
    int64_t want;
  } sizes[] = {{b, "input 1 (B)", q->N * q->nb * q->blob},
               {s, "input 2 (scales)", q->N * q->nb},
               {zp, "input 3 (zero_points)", zp && zp->dtype == SMELT_U8 ? q->N * ((q->nb + 1) / 2) : q->N * q->nb},
               {bias, "input 5 (bias)", q->N}};
  for (int i = 0; i < 4; i++) {
    const tensor *t = sizes[i].t;
    if (!t || t->rank < 0) continue;
    int64_t n = 1;
    bool known = true;
    for (int d = 0; d < t->rank; d++) known &= dim_known(t->dims[d]), n *= t->dims[d];
    if (known && n != sizes[i].want)
      return err_set(SMELT_ERR_INVALID_MODEL, "MatMulNBits: %s has %lld elements, expected %lld for K %lld, N %lld, "
                     "block_size %lld", sizes[i].name, (long long)n, (long long)sizes[i].want, (long long)q->K,
                     (long long)q->N, (long long)q->bs);
  }
  q->B = b->data, q->scales = s->data;
  if (zp && zp->dtype == SMELT_U8) q->zp8 = zp->data;
  else if (zp) q->zpf = zp->data;
  return SMELT_OK;
}

static smelt_status nbits_infer(op_ctx *c) {
  nbits q;
  TRY(nbits_read(c, &q));
  const tensor *a = c->in[0];
  if (a->rank < 0) {
    nn_out_unknown(c, 0, SMELT_F32);
    return SMELT_OK;
  }
  int64_t dims[SMELT_MAX_RANK];
  memcpy(dims, a->dims, sizeof(int64_t) * (size_t)a->rank);
  dims[a->rank - 1] = q.N;
  op_set_out(c, 0, SMELT_F32, a->rank, dims);
  return SMELT_OK;
}

static int code_at(const nbits *q, int64_t n, int64_t k) {
  uint8_t b = q->B[(n * q->nb + k / q->bs) * q->blob + k % q->bs / 2];
  return k % 2 ? b >> 4 : b & 15;
}

static float zp_at(const nbits *q, int64_t n, int64_t blk) {
  if (q->zpf) return q->zpf[n * q->nb + blk];
  if (!q->zp8) return 8.f;
  uint8_t b = q->zp8[n * ((q->nb + 1) / 2) + blk / 2];
  return (float)(blk % 2 ? b >> 4 : b & 15);
}

/* ---- the fast path's repacked weights, kept in the op cache ---- */

typedef struct nb_key {
  const void *B, *scales, *zp;
  int64_t K, N, bs;
} nb_key;

typedef struct nb_entry {
  q4gemm_weights w;
  void *blob;
} nb_entry;

static void nb_entry_free(void *p) {
  nb_entry *e = p;
  if (e) tensor_data_free(e->blob);
  free(e);
}

static void *nb_make(void *ctx) {
  const nbits *q = ctx;
  bool asym = q->zp8 || q->zpf;
  size_t bytes = q4gemm_weights_bytes(q->K, q->N, asym);
  nb_entry *e = calloc(1, sizeof *e);
  if (e) e->blob = tensor_data_alloc(bytes);
  if (!e || !e->blob) { /* no memory: the reference path */
    err_clear();
    nb_entry_free(e);
    return NULL;
  }
  q4gemm_weights_view(q->K, q->N, asym, e->blob, &e->w);
  q4gemm_clear(&e->w, e->blob);
  for (int64_t n = 0; n < q->N; n++)
    for (int64_t g = 0; g < e->w.Kg; g++) {
      int64_t blk = g * Q4_GROUP / q->bs;
      uint8_t codes[Q4_GROUP];
      for (int i = 0; i < Q4_GROUP; i++) {
        int64_t k = g * Q4_GROUP + i;
        codes[i] = k < q->K ? (uint8_t)code_at(q, n, k) : asym ? 0 : 8;
      }
      float s = q->scales[n * q->nb + blk];
      q4gemm_set(&e->w, e->blob, n, g, codes, s, asym ? -s * zp_at(q, n, blk) : 0.f);
    }
  return e;
}

static const q4gemm_weights *nb_weights(op_ctx *c, const nbits *q) {
  if (!c->cache || q->bs % Q4_GROUP) return NULL;
  for (int i = 1; i <= 3; i++)
    if (present(c, i) && !op_input_is_constant(c, i)) return NULL;
  nb_key key;
  memset(&key, 0, sizeof key);
  key.B = q->B, key.scales = q->scales, key.zp = q->zp8 ? (const void *)q->zp8 : (const void *)q->zpf;
  key.K = q->K, key.N = q->N, key.bs = q->bs;
  const nb_entry *e = op_cache_get_or_make(c->cache, &key, sizeof key, nb_make, (void *)q, nb_entry_free);
  return e ? &e->w : NULL;
}

static smelt_status nbits_run(op_ctx *c) {
  nbits q;
  TRY(nbits_read(c, &q));
  const tensor *a = c->in[0], *bias = present(c, 5);
  int64_t M = tensor_numel(a) / q.K;
  float *y = c->out[0]->data;
  if (M == 0) return SMELT_OK;
  const q4gemm_weights *w = nb_weights(c, &q);
  if (w) {
    q4gemm_args args = {.M = M, .A = a->data, .lda = q.K, .w = w, .alpha = 1.f, .bias = bias ? bias->data : NULL,
                        .C = y, .ldc = q.N};
    return q4gemm_run(c->pool, isa_active(), &args);
  }
  /* the reference: W (K x N) in fp32 for the call */
  float *W = NULL;
  TRY(nn_alloc((void **)&W, q.K * q.N, sizeof(float), "MatMulNBits: the dequantized weight"));
  for (int64_t n = 0; n < q.N; n++)
    for (int64_t k = 0; k < q.K; k++) {
      int64_t blk = k / q.bs;
      W[k * q.N + n] = ((float)code_at(&q, n, k) - zp_at(&q, n, blk)) * q.scales[n * q.nb + blk];
    }
  smelt_status s = gemm_f32(c->pool, false, false, M, q.N, q.K, 1.f, a->data, q.K, W, q.N, 0.f, y, q.N);
  free(W);
  if (!s && bias)
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < q.N; n++) y[m * q.N + n] += ((const float *)bias->data)[n];
  return s;
}

const op_def op_family_matmul_nbits[] = {
    {"MatMulNBits", "com.microsoft", 3, 6, 1, 1, nbits_infer, nbits_run, false},
    {0}};
