#include "ops/shape_util.h"

#include <math.h>
#include <string.h>

#include "kernels/isa.h"
#include "kernels/transpose.h"
#include "util/err.h"
#include "util/quote.h"

/* SMELT_UNDEFINED passes: during static inference a type may be unknown yet. */
smelt_status su_check_index_type(const tensor *t, const char *what) {
  if (t->dtype != SMELT_UNDEFINED && t->dtype != SMELT_I32 && t->dtype != SMELT_I64)
    return err_set(SMELT_ERR_INVALID_MODEL, "%s has type %s, expected int32 or int64", what,
                   dtype_name(t->dtype));
  return SMELT_OK;
}

smelt_status su_check_i64(const tensor *t, const char *what) {
  if (t->dtype != SMELT_UNDEFINED && t->dtype != SMELT_I64)
    return err_set(SMELT_ERR_INVALID_MODEL, "%s has type %s, expected int64", what,
                   dtype_name(t->dtype));
  return SMELT_OK;
}

smelt_status su_check_movable(const tensor *t, int i) {
  if (t->dtype != SMELT_UNDEFINED && dtype_is_subbyte(t->dtype))
    return err_set(SMELT_ERR_UNSUPPORTED, "input %d has type %s: this op does not support "
                   "packed sub-byte types", i, dtype_name(t->dtype));
  if (t->dtype != SMELT_UNDEFINED && dtype_size(t->dtype) == 0)
    return err_set(SMELT_ERR_UNSUPPORTED, "input %d has type %s, which smelt cannot store", i,
                   dtype_name(t->dtype));
  return SMELT_OK;
}

smelt_status su_check_copyable(const tensor *t, int i) {
  if (t->dtype != SMELT_UNDEFINED && dtype_bits(t->dtype) == 0)
    return err_set(SMELT_ERR_UNSUPPORTED, "input %d has type %s, which smelt cannot store", i,
                   dtype_name(t->dtype));
  return SMELT_OK;
}

smelt_status su_read_ints(const tensor *t, const char *what, int max, int64_t *out, int *n) {
  TRY(su_check_index_type(t, what));
  if (t->rank > 1)
    return err_set(SMELT_ERR_INVALID_MODEL, "%s has rank %d, expected a 1-D tensor", what, t->rank);
  int64_t cnt = tensor_numel(t);
  if (cnt < 0 || cnt > max)
    return err_set(SMELT_ERR_INVALID_MODEL, "%s has %lld elements, at most %d are allowed", what,
                   (long long)cnt, max);
  for (int64_t i = 0; i < cnt; i++) out[i] = su_index_at(t, i);
  *n = (int)cnt;
  return SMELT_OK;
}

smelt_status su_norm_axes(int64_t *axes, int n, int rank, const char *what) {
  for (int i = 0; i < n; i++) {
    int a;
    TRY(op_axis(axes[i], rank, what, &a));
    axes[i] = a;
    for (int j = 0; j < i; j++)
      if (axes[j] == a)
        return err_set(SMELT_ERR_INVALID_MODEL, "%s names axis %d twice", what, a);
  }
  return SMELT_OK;
}

void su_dense_strides(int rank, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; i--) {
    strides[i] = s;
    s *= dims[i];
  }
}

int64_t su_dims_product(const int64_t *dims, int b, int e) {
  int64_t p = 1, sym = 0;
  int n_sym = 0;
  for (int i = b; i < e; i++) {
    if (dims[i] == 0) return 0;
    if (!dim_known(dims[i])) {
      n_sym++;
      sym = dims[i];
    }
  }
  if (n_sym == 0) {
    int64_t n = shape_numel(e - b, dims + b);
    return n >= 0 ? n : DIM_UNKNOWN;
  }
  for (int i = b; i < e; i++)
    if (dim_known(dims[i])) p *= dims[i];
  return n_sym == 1 && p == 1 ? sym : DIM_UNKNOWN;
}

void su_out_unknown(op_ctx *c, int i, smelt_dtype dt) {
  c->out[i]->dtype = dt;
  c->out[i]->rank = -1;
}

/* ---- strided copy ---- */

typedef struct copy_plan {
  char *dst;
  const char *src;
  size_t es;
  int m; /* outer axes, iterated by an odometer */
  int64_t dims[SU_MAX_AXES], ss[SU_MAX_AXES], ds[SU_MAX_AXES]; /* bytes */
  int64_t n, s;      /* inner row: element count and source stride (bytes) */
  bool tiled;        /* source-contiguous axis a is tiled against the row */
  int64_t na, da;    /* tiled: a's extent and destination stride (bytes) */
  int64_t tile, nblk;
} copy_plan;

#define ROW_CASE(ES)                                                    \
  case ES:                                                              \
    for (int64_t i = 0; i < n; i++) memcpy(d + i * ES, s + i * ss, ES); \
    return;

static void row_copy(char *d, const char *s, int64_t n, int64_t ss, size_t es) {
  if (ss == (int64_t)es) {
    memcpy(d, s, (size_t)n * es);
    return;
  }
  switch (es) {
    ROW_CASE(1)
    ROW_CASE(2)
    ROW_CASE(4)
    ROW_CASE(8)
    ROW_CASE(16)
    default:
      for (int64_t i = 0; i < n; i++) memcpy(d + i * (int64_t)es, s + i * ss, es);
  }
}

/* d[a*da + b*ES] = s[a*ES + b*sb] for a in [0,na), b in [0,nb): 8x8 micro
 * tiles go through a local buffer so both sides are read and written in runs
 * of 8 (this also dodges cache-set conflicts at power-of-two strides); the
 * ragged edges and skinny views run plain loops. */
#define MICRO 8
#define TILE_FN(ES)                                                                    \
  static void tile_##ES(char *d, const char *s, int64_t na, int64_t da, int64_t nb,      \
                        int64_t sb) {                                                  \
    int64_t a8 = na - na % MICRO, b8 = nb - nb % MICRO;                                \
    for (int64_t b0 = 0; b0 < b8; b0 += MICRO)                                         \
      for (int64_t a0 = 0; a0 < a8; a0 += MICRO) {                                     \
        unsigned char t[MICRO][MICRO][ES];                                             \
        for (int b = 0; b < MICRO; b++)                                                \
          for (int a = 0; a < MICRO; a++)                                              \
            memcpy(t[a][b], s + (a0 + a) * ES + (b0 + b) * sb, ES);                    \
        for (int a = 0; a < MICRO; a++)                                                \
          memcpy(d + (a0 + a) * da + b0 * ES, t[a], MICRO * ES);                       \
      }                                                                                \
    for (int64_t a = 0; a < na; a++)                                                   \
      for (int64_t b = a < a8 ? b8 : 0; b < nb; b++)                                   \
        memcpy(d + a * da + b * ES, s + a * ES + b * sb, ES);                          \
  }
TILE_FN(1)
TILE_FN(2)
TILE_FN(8)
TILE_FN(16)

/* One block of rows a in [0, na) against the whole row length nb, in macro
 * tiles of t columns so the source lines stay in cache. */
static void tile_copy(char *d, const char *s, int64_t na, int64_t da, int64_t nb, int64_t sb,
                      size_t es, int64_t t) {
  isa_level isa = es == 4 ? isa_active() : ISA_SCALAR;
  for (int64_t b0 = 0; b0 < nb; b0 += t) {
    int64_t n = nb - b0 < t ? nb - b0 : t;
    char *db = d + b0 * (int64_t)es;
    const char *sbp = s + b0 * sb;
    switch (es) {
      case 1: tile_1(db, sbp, na, da, n, sb); break;
      case 2: tile_2(db, sbp, na, da, n, sb); break;
      case 4: transpose32(isa, db, da / 4, sbp, sb / 4, n, na); break; /* 8x8 blocks in registers */
      case 8: tile_8(db, sbp, na, da, n, sb); break;
      case 16: tile_16(db, sbp, na, da, n, sb); break;
      default:
        for (int64_t a = 0; a < na; a++)
          for (int64_t b = 0; b < n; b++)
            memcpy(db + a * da + b * (int64_t)es, sbp + a * (int64_t)es + b * sb, es);
    }
  }
}

static void copy_units(void *ctx, int64_t begin, int64_t end) {
  const copy_plan *p = ctx;
  int64_t per = p->tiled ? p->nblk : 1;
  int64_t idx[SU_MAX_AXES], so = 0, dof = 0, rem = begin / per, blk = begin % per;
  for (int k = p->m - 1; k >= 0; k--) {
    idx[k] = rem % p->dims[k];
    rem /= p->dims[k];
    so += idx[k] * p->ss[k];
    dof += idx[k] * p->ds[k];
  }
  for (int64_t u = begin; u < end; u++) {
    if (p->tiled) {
      int64_t a0 = blk * p->tile, na = p->na - a0 < p->tile ? p->na - a0 : p->tile;
      tile_copy(p->dst + dof + a0 * p->da, p->src + so + a0 * (int64_t)p->es, na, p->da, p->n,
                p->s, p->es, 64);
      if (++blk < per) continue;
      blk = 0;
    } else {
      row_copy(p->dst + dof, p->src + so, p->n, p->s, p->es);
    }
    for (int k = p->m - 1; k >= 0; k--) {
      so += p->ss[k];
      dof += p->ds[k];
      if (++idx[k] < p->dims[k]) break;
      so -= p->ss[k] * p->dims[k];
      dof -= p->ds[k] * p->dims[k];
      idx[k] = 0;
    }
  }
}

/* Drops size-1 axes and merges axes that are contiguous in the source too
 * (the destination is dense, so only the source decides).  Returns the new
 * rank, or -1 if the view is empty. */
static int simplify_view(int rank, const int64_t *dims, const int64_t *strides, int64_t *od,
                         int64_t *os) {
  int r = 0;
  for (int i = 0; i < rank; i++) {
    if (dims[i] == 0) return -1;
    if (dims[i] == 1) continue;
    if (r > 0 && os[r - 1] == strides[i] * dims[i]) {
      od[r - 1] *= dims[i];
      os[r - 1] = strides[i];
      continue;
    }
    od[r] = dims[i];
    os[r] = strides[i];
    r++;
  }
  return r;
}

void su_copy_strided(void *dst, const void *src, size_t es, int rank, const int64_t *dims,
                     const int64_t *src_strides, smelt_pool *pool) {
  int64_t d[SU_MAX_AXES], s[SU_MAX_AXES];
  int r = simplify_view(rank, dims, src_strides, d, s);
  if (r < 0) return;
  if (r == 0) {
    memcpy(dst, src, es);
    return;
  }
  copy_plan p = {.dst = dst, .src = src, .es = es, .n = d[r - 1], .s = s[r - 1]};
  int64_t dstride[SU_MAX_AXES];
  su_dense_strides(r, d, dstride);
  int a = -1;
  if (p.s != (int64_t)es && p.s != 0)
    for (int k = r - 2; k >= 0; k--)
      if (s[k] == (int64_t)es) a = k;
  p.tiled = a >= 0;
  if (p.tiled) {
    p.na = d[a];
    p.da = dstride[a] * (int64_t)es;
    /* Short rows take taller blocks so each unit still moves enough bytes. */
    p.tile = p.n >= 64 ? 64 : 4096 / p.n;
    p.nblk = (p.na + p.tile - 1) / p.tile;
  }
  int64_t units = p.tiled ? p.nblk : 1;
  for (int k = 0; k < r - 1; k++) {
    if (k == a) continue;
    p.dims[p.m] = d[k];
    p.ss[p.m] = s[k];
    p.ds[p.m] = dstride[k] * (int64_t)es;
    p.m++;
    units *= d[k];
  }
  int64_t bytes_per_unit = (p.tiled ? p.tile : 1) * p.n * (int64_t)es;
  int64_t grain = (1 << 16) / (bytes_per_unit ? bytes_per_unit : 1) + 1;
  if (pool && units > grain)
    pool_parallel_for(pool, units, grain, copy_units, &p);
  else
    copy_units(&p, 0, units);
}

void su_transpose(void *dst, const void *src, size_t es, int rank, const int64_t *in_dims,
                  const int *perm, smelt_pool *pool) {
  int64_t in_str[SMELT_MAX_RANK], od[SMELT_MAX_RANK], os[SMELT_MAX_RANK];
  su_dense_strides(rank, in_dims, in_str);
  for (int j = 0; j < rank; j++) {
    od[j] = in_dims[perm[j]];
    os[j] = in_str[perm[j]] * (int64_t)es;
  }
  su_copy_strided(dst, src, es, rank, od, os, pool);
}

/* ---- typed element helpers ---- */

#define CMP3(x, y) ((x) < (y) ? -1 : (x) > (y) ? 1 : 0)

static int cmp_double(double x, double y) {
  if (isnan(x) || isnan(y)) return isnan(x) - isnan(y);
  return CMP3(x, y);
}

#define CMP_CASE(DT, T)        \
  case DT: {                   \
    T x, y;                    \
    memcpy(&x, a, sizeof x);   \
    memcpy(&y, b, sizeof y);   \
    return CMP3(x, y);         \
  }

int su_cmp_elem(smelt_dtype dt, const void *a, const void *b) {
  switch (dt) {
    CMP_CASE(SMELT_I8, int8_t)
    CMP_CASE(SMELT_U8, uint8_t)
    CMP_CASE(SMELT_BOOL, uint8_t)
    CMP_CASE(SMELT_I16, int16_t)
    CMP_CASE(SMELT_U16, uint16_t)
    CMP_CASE(SMELT_I32, int32_t)
    CMP_CASE(SMELT_U32, uint32_t)
    CMP_CASE(SMELT_I64, int64_t)
    CMP_CASE(SMELT_U64, uint64_t)
    case SMELT_F32: {
      float x, y;
      memcpy(&x, a, 4);
      memcpy(&y, b, 4);
      return cmp_double(x, y);
    }
    case SMELT_F64: {
      double x, y;
      memcpy(&x, a, 8);
      memcpy(&y, b, 8);
      return cmp_double(x, y);
    }
    case SMELT_F16:
    case SMELT_BF16: {
      uint16_t x, y;
      memcpy(&x, a, 2);
      memcpy(&y, b, 2);
      float (*cv)(uint16_t) = dt == SMELT_F16 ? f16_to_f32 : bf16_to_f32;
      return cmp_double(cv(x), cv(y));
    }
    default: return memcmp(a, b, dtype_size(dt));
  }
}

smelt_status su_parse_reduction(op_ctx *c, su_reduce *out) {
  const char *r = ir_attr_string(c->node, "reduction", "none");
  static const char *const names[] = {"none", "add", "mul", "max", "min"};
  for (int i = 0; i < 5; i++)
    if (!strcmp(r, names[i])) {
      *out = (su_reduce)i;
      return SMELT_OK;
    }
  return err_set(SMELT_ERR_INVALID_MODEL, "attribute reduction %s is not one of none, add, "
                 "mul, max, min", q(r));
}

smelt_status su_check_reducible(smelt_dtype dt, su_reduce r) {
  if (r == SU_RED_NONE) return SMELT_OK;
  if (dtype_is_int(dt) || dt == SMELT_BOOL || dt == SMELT_F32 || dt == SMELT_F64 ||
      dt == SMELT_F16 || dt == SMELT_BF16)
    return SMELT_OK;
  return err_set(SMELT_ERR_UNSUPPORTED, "reduction on type %s is not supported", dtype_name(dt));
}

#define RED(x, y, r)                                      \
  ((r) == SU_RED_ADD   ? (x) + (y)                        \
   : (r) == SU_RED_MUL ? (x) * (y)                        \
   : (r) == SU_RED_MAX ? ((y) > (x) ? (y) : (x))          \
                       : ((y) < (x) ? (y) : (x)))

/* Unsigned arithmetic for the integer kinds so overflow wraps, not traps. */
#define COMBINE_INT(DT, T, U)                                   \
  case DT: {                                                    \
    T x, y;                                                     \
    memcpy(&x, dst, sizeof x);                                  \
    memcpy(&y, src, sizeof y);                                  \
    T z;                                                        \
    if (r == SU_RED_ADD) z = (T)((U)x + (U)y);                  \
    else if (r == SU_RED_MUL) z = (T)((U)x * (U)y);             \
    else z = RED(x, y, r);                                      \
    memcpy(dst, &z, sizeof z);                                  \
    return;                                                     \
  }

void su_combine(smelt_dtype dt, su_reduce r, void *dst, const void *src) {
  size_t es = dtype_size(dt);
  if (r == SU_RED_NONE) {
    memcpy(dst, src, es);
    return;
  }
  switch (dt) {
    COMBINE_INT(SMELT_I8, int8_t, uint32_t)
    COMBINE_INT(SMELT_U8, uint8_t, uint32_t)
    COMBINE_INT(SMELT_I16, int16_t, uint32_t)
    COMBINE_INT(SMELT_U16, uint16_t, uint32_t)
    COMBINE_INT(SMELT_I32, int32_t, uint32_t)
    COMBINE_INT(SMELT_U32, uint32_t, uint32_t)
    COMBINE_INT(SMELT_I64, int64_t, uint64_t)
    COMBINE_INT(SMELT_U64, uint64_t, uint64_t)
    case SMELT_BOOL: {
      uint8_t x = *(uint8_t *)dst != 0, y = *(const uint8_t *)src != 0;
      *(uint8_t *)dst = (r == SU_RED_ADD || r == SU_RED_MAX) ? (x | y) : (x & y);
      return;
    }
    case SMELT_F32: {
      float x, y, z;
      memcpy(&x, dst, 4);
      memcpy(&y, src, 4);
      z = RED(x, y, r);
      memcpy(dst, &z, 4);
      return;
    }
    case SMELT_F64: {
      double x, y, z;
      memcpy(&x, dst, 8);
      memcpy(&y, src, 8);
      z = RED(x, y, r);
      memcpy(dst, &z, 8);
      return;
    }
    case SMELT_F16:
    case SMELT_BF16: {
      uint16_t hx, hy, hz;
      memcpy(&hx, dst, 2);
      memcpy(&hy, src, 2);
      bool h = dt == SMELT_F16;
      float x = h ? f16_to_f32(hx) : bf16_to_f32(hx), y = h ? f16_to_f32(hy) : bf16_to_f32(hy);
      float z = RED(x, y, r);
      hz = h ? f32_to_f16(z) : f32_to_bf16(z);
      memcpy(dst, &hz, 2);
      return;
    }
    default: memcpy(dst, src, es); /* su_check_reducible rejects these first */
  }
}

void su_sort_idx(int64_t *idx, int64_t *tmp, int64_t n,
                 int (*cmp)(const void *ctx, int64_t a, int64_t b), const void *ctx) {
  int64_t *from = idx, *to = tmp;
  for (int64_t w = 1; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) to[k++] = cmp(ctx, from[j], from[i]) < 0 ? from[j++] : from[i++];
      while (i < mid) to[k++] = from[i++];
      while (j < hi) to[k++] = from[j++];
    }
    int64_t *t = from;
    from = to;
    to = t;
  }
  if (from != idx) memcpy(idx, from, sizeof *idx * (size_t)n);
}
