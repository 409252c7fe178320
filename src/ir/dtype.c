#include <math.h>
#include <string.h>

#include "ir/tensor.h"

static const struct {
  const char *name;
  size_t size;
  int bits; /* storage width of one element; 0: no fixed-width storage (string) */
} dtype_table[SMELT_DTYPE_COUNT] = {
    [SMELT_UNDEFINED] = {"undefined", 0, 0},
    [SMELT_F32] = {"float32", 4, 32},
    [SMELT_U8] = {"uint8", 1, 8},
    [SMELT_I8] = {"int8", 1, 8},
    [SMELT_U16] = {"uint16", 2, 16},
    [SMELT_I16] = {"int16", 2, 16},
    [SMELT_I32] = {"int32", 4, 32},
    [SMELT_I64] = {"int64", 8, 64},
    [SMELT_STRING] = {"string", 0, 0},
    [SMELT_BOOL] = {"bool", 1, 8},
    [SMELT_F16] = {"float16", 2, 16},
    [SMELT_F64] = {"float64", 8, 64},
    [SMELT_U32] = {"uint32", 4, 32},
    [SMELT_U64] = {"uint64", 8, 64},
    [SMELT_C64] = {"complex64", 8, 64},
    [SMELT_C128] = {"complex128", 16, 128},
    [SMELT_BF16] = {"bfloat16", 2, 16},
    [SMELT_F8E4M3FN] = {"float8e4m3fn", 1, 8},
    [SMELT_F8E4M3FNUZ] = {"float8e4m3fnuz", 1, 8},
    [SMELT_F8E5M2] = {"float8e5m2", 1, 8},
    [SMELT_F8E5M2FNUZ] = {"float8e5m2fnuz", 1, 8},
    /* Packed: dtype_size is 0 so that byte-generic code cannot index them. */
    [SMELT_U4] = {"uint4", 0, 4},
    [SMELT_I4] = {"int4", 0, 4},
    [SMELT_F4E2M1] = {"float4e2m1", 0, 4},
    [SMELT_F8E8M0] = {"float8e8m0", 1, 8},
    [SMELT_U2] = {"uint2", 0, 2},
    [SMELT_I2] = {"int2", 0, 2},
};

size_t dtype_size(smelt_dtype t) {
  return (unsigned)t < SMELT_DTYPE_COUNT ? dtype_table[t].size : 0;
}
const char *dtype_name(smelt_dtype t) {
  return (unsigned)t < SMELT_DTYPE_COUNT && dtype_table[t].name ? dtype_table[t].name : "unknown";
}
int dtype_bits(smelt_dtype t) {
  return (unsigned)t < SMELT_DTYPE_COUNT ? dtype_table[t].bits : 0;
}
bool dtype_is_subbyte(smelt_dtype t) {
  int b = dtype_bits(t);
  return b > 0 && b < 8;
}
bool dtype_nbytes(smelt_dtype t, int64_t n, size_t *out) {
  uint64_t bits = (uint64_t)dtype_bits(t);
  if (!bits || n < 0 || (uint64_t)n > (UINT64_MAX - 7) / bits) return false;
  uint64_t nb = ((uint64_t)n * bits + 7) / 8;
  if (nb > SIZE_MAX) return false;
  *out = (size_t)nb;
  return true;
}
size_t smelt_dtype_size(smelt_dtype t) { return dtype_size(t); }
const char *smelt_dtype_name(smelt_dtype t) { return dtype_name(t); }

bool dtype_is_float(smelt_dtype t) {
  switch (t) {
    case SMELT_F16: case SMELT_BF16: case SMELT_F32: case SMELT_F64:
    case SMELT_F8E4M3FN: case SMELT_F8E4M3FNUZ: case SMELT_F8E5M2: case SMELT_F8E5M2FNUZ:
    case SMELT_F8E8M0:
      return true;
    default: return false;
  }
}
bool dtype_is_signed_int(smelt_dtype t) {
  return t == SMELT_I8 || t == SMELT_I16 || t == SMELT_I32 || t == SMELT_I64;
}
bool dtype_is_unsigned_int(smelt_dtype t) {
  return t == SMELT_U8 || t == SMELT_U16 || t == SMELT_U32 || t == SMELT_U64;
}
bool dtype_is_int(smelt_dtype t) { return dtype_is_signed_int(t) || dtype_is_unsigned_int(t); }

smelt_dtype dtype_from_name(const char *s) {
  static const struct { const char *alias; smelt_dtype t; } aliases[] = {
      {"f32", SMELT_F32}, {"float", SMELT_F32}, {"f16", SMELT_F16}, {"half", SMELT_F16},
      {"bf16", SMELT_BF16}, {"f64", SMELT_F64}, {"double", SMELT_F64}, {"i8", SMELT_I8},
      {"u8", SMELT_U8}, {"i16", SMELT_I16}, {"u16", SMELT_U16}, {"i32", SMELT_I32},
      {"u32", SMELT_U32}, {"i64", SMELT_I64}, {"u64", SMELT_U64}};
  for (int i = 1; i < SMELT_DTYPE_COUNT; i++)
    if (dtype_table[i].name && !strcmp(s, dtype_table[i].name)) return (smelt_dtype)i;
  for (size_t i = 0; i < sizeof aliases / sizeof *aliases; i++)
    if (!strcmp(s, aliases[i].alias)) return aliases[i].t;
  return SMELT_UNDEFINED;
}

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    float v = ldexpf((float)man, -24);
    return sign ? -v : v;
  }
  return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t f32_to_f16(float f) {
  uint32_t u = f32_bits(f), sign = (u >> 16) & 0x8000;
  uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (a > 0x7f800000u ? 0x200 : 0));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to inf */
  if (a < 0x38800000u) { /* subnormal or zero in f16 */
    float v = bits_f32(a) * 16777216.0f;  /* scale by 2^24: now integer count of 2^-24 */
    uint32_t m = (uint32_t)lrintf(v);     /* round to nearest even */
    return (uint16_t)(sign | m);
  }
  uint32_t r = a + 0xfffu + ((a >> 13) & 1); /* round to nearest even */
  return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}


