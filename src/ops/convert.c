/* Element conversions (see convert.h for the rules). */
#include "ops/convert.h"

#include <math.h>

#include "ir/subbyte.h"

/* ---- small float formats ---- */

typedef enum mf_kind {
  MF_IEEE, /* all-ones exponent is inf/NaN (f16, bf16, E5M2) */
  MF_FN,   /* no inf; only all-ones exponent+mantissa is NaN (E4M3FN) */
  MF_FNUZ,  /* no inf, no -0; 0x80 is the only NaN */
  MF_FINITE /* every code a finite number (E2M1): always saturates */
} mf_kind;

typedef struct mf_fmt {
  int ebits, mbits, bias;
  mf_kind kind;
} mf_fmt;

static const mf_fmt *mf_of(smelt_dtype t) {
  static const mf_fmt f16 = {5, 10, 15, MF_IEEE}, bf16 = {8, 7, 127, MF_IEEE},
                      e4m3fn = {4, 3, 7, MF_FN}, e4m3fnuz = {4, 3, 8, MF_FNUZ},
                      e5m2 = {5, 2, 15, MF_IEEE}, e5m2fnuz = {5, 2, 16, MF_FNUZ},
                      e2m1 = {2, 1, 1, MF_FINITE};
  switch (t) {
    case SMELT_F16: return &f16;
    case SMELT_BF16: return &bf16;
    case SMELT_F8E4M3FN: return &e4m3fn;
    case SMELT_F8E4M3FNUZ: return &e4m3fnuz;
    case SMELT_F8E5M2: return &e5m2;
    case SMELT_F8E5M2FNUZ: return &e5m2fnuz;
    case SMELT_F4E2M1: return &e2m1;
    default: return NULL;
  }
}

static uint32_t mf_nan(const mf_fmt *f, uint32_t sign) {
  uint32_t emask = ((1u << f->ebits) - 1) << f->mbits;
  switch (f->kind) {
    case MF_IEEE: return sign | emask | 1u << (f->mbits - 1);
    case MF_FN: return sign | emask | ((1u << f->mbits) - 1);
    case MF_FNUZ: return 1u << (f->ebits + f->mbits);
    default: return 0; /* no NaN to give: +0, as the ONNX test data for E2M1 expect */
  }
}

/* Largest finite value's exponent field and mantissa. */
static uint32_t mf_max_bits(const mf_fmt *f) {
  uint32_t eall = (1u << f->ebits) - 1, mall = (1u << f->mbits) - 1;
  switch (f->kind) {
    case MF_IEEE: return (eall - 1) << f->mbits | mall;
    case MF_FN: return eall << f->mbits | (mall - 1);
    default: return eall << f->mbits | mall;
  }
}

/* What a value beyond the largest finite one becomes. */
static uint32_t mf_overflow(const mf_fmt *f, uint32_t sign, bool saturate) {
  if (saturate || f->kind == MF_FINITE) return sign | mf_max_bits(f);
  if (f->kind == MF_IEEE) return sign | ((1u << f->ebits) - 1) << f->mbits;
  return mf_nan(f, sign);
}

double cvt_minifloat_decode(smelt_dtype t, uint32_t bits) {
  if (t == SMELT_F8E8M0) return (bits & 0xff) == 0xff ? NAN : ldexp(1.0, (int)(bits & 0xff) - 127);
  const mf_fmt *f = mf_of(t);
  if (!f) return NAN;
  int m = f->mbits;
  uint32_t sign = bits >> (f->ebits + m) & 1, e = bits >> m & ((1u << f->ebits) - 1);
  uint32_t man = bits & ((1u << m) - 1), eall = (1u << f->ebits) - 1;
  if (f->kind == MF_FNUZ && bits == 1u << (f->ebits + m)) return NAN;
  if (f->kind == MF_FN && e == eall && man == (1u << m) - 1) return sign ? -NAN : NAN;
  if (f->kind == MF_IEEE && e == eall) {
    if (man) return sign ? -NAN : NAN;
    return sign ? -INFINITY : INFINITY;
  }
  double v = e ? ldexp((double)(man | 1u << m), (int)e - f->bias - m)
               : ldexp((double)man, 1 - f->bias - m);
  return sign ? -v : v;
}

uint32_t cvt_minifloat_encode(smelt_dtype t, double x, bool saturate) {
  if (t == SMELT_F8E8M0) return cvt_e8m0_encode(x, saturate, CVT_ROUND_UP);
  const mf_fmt *f = mf_of(t);
  if (!f) return 0;
  int m = f->mbits, emin = 1 - f->bias;
  uint32_t sign = signbit(x) ? 1u << (f->ebits + m) : 0;
  if (isnan(x)) return f->kind == MF_FINITE ? 0 : mf_nan(f, sign);
  double ax = fabs(x);
  if (isinf(ax)) return mf_overflow(f, sign, saturate);
  int e2;
  frexp(ax, &e2);
  int eu = ax == 0 ? emin : e2 - 1; /* ax in [2^eu, 2^(eu+1)) */
  int qe = (eu < emin ? emin : eu) - m; /* weight of the last mantissa bit */
  double r = nearbyint(ldexp(ax, -qe)); /* default rounding mode: to nearest even */
  if (ldexp(r, qe) > cvt_minifloat_decode(t, mf_max_bits(f))) return mf_overflow(f, sign, saturate);
  if (r == 0) return f->kind == MF_FNUZ ? 0 : sign;
  uint32_t ri = (uint32_t)r;
  if (eu < emin) return sign | ri; /* subnormal; ri == 2^m lands on the smallest normal */
  uint32_t ef = (uint32_t)(eu + f->bias);
  if (ri == 2u << m) { /* rounded up to the next binade */
    ri >>= 1;
    ef++;
  }
  return sign | ef << m | (ri - (1u << m));
}

uint32_t cvt_e8m0_encode(double x, bool saturate, cvt_round r) {
  if (isnan(x)) return 0xff;
  double a = fabs(x);
  if (isinf(a)) return saturate ? 0xfe : 0xff;
  if (a == 0) return saturate ? 0 : 0xff; /* below the smallest, 2^-127 */
  int e2;
  double m = frexp(a, &e2); /* a = m 2^e2, m in [0.5, 1): a in [2^(e2-1), 2^e2) */
  int k = e2 - 1;
  if (r == CVT_ROUND_UP && m > 0.5) k++;
  if (r == CVT_ROUND_NEAREST && m >= 0.75) k++; /* a >= 1.5 2^k: ties go up */
  if (r == CVT_ROUND_UP && k < -127) k = -127; /* rounding up lands on the smallest */
  if (k > 127) return saturate ? 0xfe : 0xff;
  if (k < -127) return saturate ? 0 : 0xff;
  return (uint32_t)(k + 127);
}

/* ---- packed integers ---- */

/* float → int4/uint4/int2/uint2: truncate, then wrap modulo 2^bits (see
 * convert.h).  fmod is exact, so any finite double wraps correctly. */
static unsigned f64_to_packed_int(double v, int bits) {
  if (!isfinite(v)) return 0;
  double m = fmod(trunc(v), (double)(1u << bits));
  if (m < 0) m += (double)(1u << bits);
  return (unsigned)m;
}

/* ---- tiles ---- */

bool cvt_supported(smelt_dtype t) {
  return cvt_is_intlike(t) || t == SMELT_F32 || t == SMELT_F64 || t == SMELT_F8E8M0 ||
         mf_of(t) != NULL;
}

#define LOAD_LOOP(T, EXPR)                             \
  do {                                                 \
    const T *s_ = src;                                 \
    for (int64_t i = 0; i < n; i++) {                  \
      T v = s_[i * st];                                \
      dst[i] = (EXPR);                                 \
    }                                                  \
  } while (0)

/* Loads of byte-addressed types from src (element 0 there). */
static void load_f64_bytes(smelt_dtype t, const void *src, int64_t st, int64_t n, double *dst) {
  switch (t) {
    case SMELT_F32: LOAD_LOOP(float, v); break;
    case SMELT_F64: LOAD_LOOP(double, v); break;
    case SMELT_F16: LOAD_LOOP(uint16_t, f16_to_f32(v)); break;
    case SMELT_BF16: LOAD_LOOP(uint16_t, bf16_to_f32(v)); break;
    case SMELT_F8E4M3FN: case SMELT_F8E4M3FNUZ: case SMELT_F8E5M2: case SMELT_F8E5M2FNUZ:
    case SMELT_F8E8M0:
      LOAD_LOOP(uint8_t, cvt_minifloat_decode(t, v));
      break;
    case SMELT_BOOL: LOAD_LOOP(uint8_t, v != 0); break;
    case SMELT_I8: LOAD_LOOP(int8_t, v); break;
    case SMELT_I16: LOAD_LOOP(int16_t, v); break;
    case SMELT_I32: LOAD_LOOP(int32_t, v); break;
    case SMELT_I64: LOAD_LOOP(int64_t, (double)v); break;
    case SMELT_U8: LOAD_LOOP(uint8_t, v); break;
    case SMELT_U16: LOAD_LOOP(uint16_t, v); break;
    case SMELT_U32: LOAD_LOOP(uint32_t, v); break;
    case SMELT_U64: LOAD_LOOP(uint64_t, (double)v); break;
    default:
      for (int64_t i = 0; i < n; i++) dst[i] = 0;
  }
}

static void load_i64_bytes(smelt_dtype t, const void *src, int64_t st, int64_t n, int64_t *dst) {
  switch (t) {
    case SMELT_BOOL: LOAD_LOOP(uint8_t, v != 0); break;
    case SMELT_I8: LOAD_LOOP(int8_t, v); break;
    case SMELT_I16: LOAD_LOOP(int16_t, v); break;
    case SMELT_I32: LOAD_LOOP(int32_t, v); break;
    case SMELT_I64: LOAD_LOOP(int64_t, v); break;
    case SMELT_U8: LOAD_LOOP(uint8_t, v); break;
    case SMELT_U16: LOAD_LOOP(uint16_t, v); break;
    case SMELT_U32: LOAD_LOOP(uint32_t, v); break;
    case SMELT_U64: LOAD_LOOP(uint64_t, (int64_t)v); break;
    default:
      for (int64_t i = 0; i < n; i++) dst[i] = 0;
  }
}

static const void *elem_ptr(smelt_dtype t, const void *base, int64_t i) {
  return (const char *)base + (size_t)i * dtype_size(t);
}

void cvt_load_f64_at(smelt_dtype t, const void *base, int64_t first, int64_t st, int64_t n,
                     double *dst) {
  if (!dtype_is_subbyte(t)) {
    load_f64_bytes(t, elem_ptr(t, base, first), st, n, dst);
    return;
  }
  int bits = dtype_bits(t);
  for (int64_t i = 0; i < n; i++) {
    unsigned code = sb_get(base, bits, first + i * st);
    dst[i] = t == SMELT_F4E2M1 ? sb_f4e2m1_value(code) : sb_int_value(t, code);
  }
}

void cvt_load_i64_at(smelt_dtype t, const void *base, int64_t first, int64_t st, int64_t n,
                     int64_t *dst) {
  if (!dtype_is_subbyte(t)) {
    load_i64_bytes(t, elem_ptr(t, base, first), st, n, dst);
    return;
  }
  int bits = dtype_bits(t);
  for (int64_t i = 0; i < n; i++)
    dst[i] = t == SMELT_F4E2M1 ? 0 : sb_int_value(t, sb_get(base, bits, first + i * st));
}

void cvt_load_f64(smelt_dtype t, const void *src, int64_t st, int64_t n, double *dst) {
  cvt_load_f64_at(t, src, 0, st, n, dst);
}

void cvt_load_i64(smelt_dtype t, const void *src, int64_t st, int64_t n, int64_t *dst) {
  cvt_load_i64_at(t, src, 0, st, n, dst);
}

/* Float to integer: truncate, saturate at [lo, hi], NaN to 0.  hi_excl is the
 * first double above the range (hi itself may not be a double). */
#define F2I(T, lo, hi, hi_excl) \
  (isnan(v) ? (T)0 : v <= (double)(lo) ? (T)(lo) : v >= (hi_excl) ? (T)(hi) : (T)v)

#define STORE_LOOP(T, EXPR)                  \
  do {                                       \
    T *d_ = dst;                             \
    for (int64_t i = 0; i < n; i++) {        \
      double v = src[i];                     \
      d_[i] = (EXPR);                        \
    }                                        \
  } while (0)

static void store_f64_bytes(smelt_dtype t, const double *src, int64_t n, void *dst,
                            const cvt_opts *o) {
  switch (t) {
    case SMELT_F32: STORE_LOOP(float, (float)v); break;
    case SMELT_F64: STORE_LOOP(double, v); break;
    case SMELT_F16: case SMELT_BF16:
      STORE_LOOP(uint16_t, (uint16_t)cvt_minifloat_encode(t, v, false));
      break;
    case SMELT_F8E4M3FN: case SMELT_F8E4M3FNUZ: case SMELT_F8E5M2: case SMELT_F8E5M2FNUZ:
      STORE_LOOP(uint8_t, (uint8_t)cvt_minifloat_encode(t, v, o->saturate));
      break;
    case SMELT_F8E8M0:
      STORE_LOOP(uint8_t, (uint8_t)cvt_e8m0_encode(v, o->saturate, o->e8m0_round));
      break;
    case SMELT_BOOL: STORE_LOOP(uint8_t, v != 0); break;
    case SMELT_I8: STORE_LOOP(int8_t, F2I(int8_t, INT8_MIN, INT8_MAX, 128.0)); break;
    case SMELT_I16: STORE_LOOP(int16_t, F2I(int16_t, INT16_MIN, INT16_MAX, 32768.0)); break;
    case SMELT_I32: STORE_LOOP(int32_t, F2I(int32_t, INT32_MIN, INT32_MAX, 2147483648.0)); break;
    case SMELT_I64:
      STORE_LOOP(int64_t, F2I(int64_t, INT64_MIN, INT64_MAX, 9223372036854775808.0));
      break;
    case SMELT_U8: STORE_LOOP(uint8_t, F2I(uint8_t, 0, UINT8_MAX, 256.0)); break;
    case SMELT_U16: STORE_LOOP(uint16_t, F2I(uint16_t, 0, UINT16_MAX, 65536.0)); break;
    case SMELT_U32: STORE_LOOP(uint32_t, F2I(uint32_t, 0, UINT32_MAX, 4294967296.0)); break;
    case SMELT_U64:
      STORE_LOOP(uint64_t, F2I(uint64_t, 0, UINT64_MAX, 18446744073709551616.0));
      break;
    default: break;
  }
}

void cvt_store_f64_at(smelt_dtype t, const double *src, int64_t n, void *base, int64_t first,
                      const cvt_opts *o) {
  if (!dtype_is_subbyte(t)) {
    store_f64_bytes(t, src, n, (char *)base + (size_t)first * dtype_size(t), o);
    return;
  }
  int bits = dtype_bits(t);
  for (int64_t i = 0; i < n; i++) {
    unsigned code = t == SMELT_F4E2M1 ? cvt_minifloat_encode(t, src[i], true)
                                      : f64_to_packed_int(src[i], bits);
    sb_set(base, bits, first + i, code);
  }
}

void cvt_store_f64(smelt_dtype t, const double *src, int64_t n, void *dst, bool saturate) {
  cvt_opts o = {saturate, CVT_ROUND_UP};
  cvt_store_f64_at(t, src, n, dst, 0, &o);
}

#define ISTORE_LOOP(T, EXPR)                 \
  do {                                       \
    T *d_ = dst;                             \
    for (int64_t i = 0; i < n; i++) {        \
      int64_t v = src[i];                    \
      d_[i] = (EXPR);                        \
    }                                        \
  } while (0)

#define AS_F(FT) (src_unsigned ? (FT)(uint64_t)v : (FT)v)

static void store_i64_bytes(smelt_dtype t, const int64_t *src, bool src_unsigned, int64_t n,
                            void *dst, const cvt_opts *o) {
  switch (t) {
    case SMELT_F32: ISTORE_LOOP(float, AS_F(float)); break;
    case SMELT_F64: ISTORE_LOOP(double, AS_F(double)); break;
    case SMELT_F16: case SMELT_BF16:
      ISTORE_LOOP(uint16_t, (uint16_t)cvt_minifloat_encode(t, AS_F(double), false));
      break;
    case SMELT_F8E4M3FN: case SMELT_F8E4M3FNUZ: case SMELT_F8E5M2: case SMELT_F8E5M2FNUZ:
      ISTORE_LOOP(uint8_t, (uint8_t)cvt_minifloat_encode(t, AS_F(double), o->saturate));
      break;
    case SMELT_F8E8M0:
      ISTORE_LOOP(uint8_t, (uint8_t)cvt_e8m0_encode(AS_F(double), o->saturate, o->e8m0_round));
      break;
    case SMELT_BOOL: ISTORE_LOOP(uint8_t, v != 0); break;
    /* Integer narrowing wraps: go through the unsigned type of the target. */
    case SMELT_I8: ISTORE_LOOP(int8_t, (int8_t)(uint8_t)v); break;
    case SMELT_I16: ISTORE_LOOP(int16_t, (int16_t)(uint16_t)v); break;
    case SMELT_I32: ISTORE_LOOP(int32_t, (int32_t)(uint32_t)v); break;
    case SMELT_I64: ISTORE_LOOP(int64_t, v); break;
    case SMELT_U8: ISTORE_LOOP(uint8_t, (uint8_t)v); break;
    case SMELT_U16: ISTORE_LOOP(uint16_t, (uint16_t)v); break;
    case SMELT_U32: ISTORE_LOOP(uint32_t, (uint32_t)v); break;
    case SMELT_U64: ISTORE_LOOP(uint64_t, (uint64_t)v); break;
    default: break;
  }
}

void cvt_store_i64_at(smelt_dtype t, const int64_t *src, bool src_unsigned, int64_t n, void *base,
                      int64_t first, const cvt_opts *o) {
  if (!dtype_is_subbyte(t)) {
    store_i64_bytes(t, src, src_unsigned, n, (char *)base + (size_t)first * dtype_size(t), o);
    return;
  }
  int bits = dtype_bits(t);
  for (int64_t i = 0; i < n; i++) {
    int64_t v = src[i];
    /* Packed integers wrap like the other integer narrowings. */
    unsigned code = t == SMELT_F4E2M1 ? cvt_minifloat_encode(t, AS_F(double), true)
                                      : (unsigned)((uint64_t)v & ((1u << bits) - 1));
    sb_set(base, bits, first + i, code);
  }
}

void cvt_store_i64(smelt_dtype t, const int64_t *src, bool src_unsigned, int64_t n, void *dst,
                   bool saturate) {
  cvt_opts o = {saturate, CVT_ROUND_UP};
  cvt_store_i64_at(t, src, src_unsigned, n, dst, 0, &o);
}
#undef AS_F
