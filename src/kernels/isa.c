#include "kernels/isa.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <strings.h>

#include "util/env.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* XGETBV without needing -mxsave: the OS says which register state it saves
 * on context switch; a CPU feature is usable only if its state is saved. */
static uint64_t read_xcr0(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}

static isa_level detect_uncached(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return ISA_SCALAR;
  bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28);
  if (!osxsave || !avx) return ISA_SCALAR;
  uint64_t xcr0 = read_xcr0();
  if ((xcr0 & 0x6) != 0x6) return ISA_SCALAR; /* SSE + AVX state */
  if (__get_cpuid_max(0, NULL) < 7) return ISA_SCALAR;
  __cpuid_count(7, 0, a, b, c, d);
  bool avx2 = b & (1u << 5);
  if (!avx2 || !fma) return ISA_SCALAR;
  bool f = b & (1u << 16), dq = b & (1u << 17), bw = b & (1u << 30), vl = b & (1u << 31);
  bool zmm_state = (xcr0 & 0xe0) == 0xe0; /* opmask, ZMM0-15 upper, ZMM16-31 */
  if (f && dq && bw && vl && zmm_state) return ISA_AVX512;
  return ISA_AVX2;
}

/* CPUID traps to the hypervisor in a VM (microseconds each, ~10% of a
 * 256^3 GEMM measured), so the answer is cached: the one process-wide
 * mutable value here, written once with the same value by whichever thread
 * gets there first. */
isa_level isa_detect(void) {
  static atomic_int cached = -1;
  int v = atomic_load_explicit(&cached, memory_order_relaxed);
  if (v < 0) {
    v = (int)detect_uncached();
    atomic_store_explicit(&cached, v, memory_order_relaxed);
  }
  return (isa_level)v;
}

/* probe() computed once per process and cached, as isa_detect (CPUID is
 * slow under a hypervisor). */
static bool cached_probe(atomic_int *cached, bool (*probe)(void)) {
  int v = atomic_load_explicit(cached, memory_order_relaxed);
  if (v < 0) {
    v = probe();
    atomic_store_explicit(cached, v, memory_order_relaxed);
  }
  return v;
}

/* F16C (CPUID.1:ECX bit 29): vcvtph2ps / vcvtps2ph, the fp16 weight kernels'
 * widening. */
static bool probe_f16c(void) {
  unsigned a, b, c, d;
  return isa_detect() >= ISA_AVX2 && __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}

/* AVX512_BF16: CPUID leaf 7 subleaf 1, EAX bit 5 (leaf 7 subleaf 0's EAX
 * is the highest subleaf); only on top of ISA_AVX512 (zmm state saved). */
static bool probe_avx512bf16(void) {
  unsigned a, b, c, d;
  if (isa_detect() < ISA_AVX512) return false;
  __cpuid_count(7, 0, a, b, c, d);
  if (a < 1) return false;
  __cpuid_count(7, 1, a, b, c, d);
  return (a >> 5) & 1u;
}

/* AVX512_VNNI: CPUID leaf 7 subleaf 0, ECX bit 11, on top of ISA_AVX512. */
static bool probe_avx512vnni(void) {
  unsigned a, b, c, d;
  if (isa_detect() < ISA_AVX512) return false;
  __cpuid_count(7, 0, a, b, c, d);
  return (c >> 11) & 1u;
}

/* AMX-BF16 and AMX-TILE: CPUID leaf 7 EDX bits 22 and 24, with the tile
 * state enabled by the OS (XCR0 bits 17-18), on top of AVX512_BF16 (the AMX
 * kernels convert and finish with it). */
static bool probe_amx_bf16(void) {
  unsigned a, b, c, d;
  if (!isa_has_avx512bf16()) return false;
  __cpuid_count(7, 0, a, b, c, d);
  return (d & (1u << 22)) && (d & (1u << 24)) && (read_xcr0() & (3u << 17)) == (3u << 17);
}

/* CPUID leaf 0's vendor string is "AuthenticAMD" ("Auth" "enti" "cAMD"). */
static bool cpu_is_amd(void) {
  unsigned a, b, c, d;
  return __get_cpuid(0, &a, &b, &c, &d) && b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;
}

static bool probe_bf16_dot_fast(void) { return isa_has_avx512bf16() && cpu_is_amd(); }

bool isa_bf16_dot_fast(void) {
  static atomic_int cached = -1;
  return cached_probe(&cached, probe_bf16_dot_fast);
}

/* AMD ("AuthenticAMD") with family 19h: the base family 0xF plus the
 * extended family 0xA (CPUID leaf 1, EAX bits 8-11 and 20-27). */
static bool probe_fma_256bit(void) {
  unsigned a, b, c, d;
  if (!cpu_is_amd() || !__get_cpuid(1, &a, &b, &c, &d)) return false;
  unsigned family = (a >> 8) & 0xf;
  if (family == 0xf) family += (a >> 20) & 0xff;
  return family == 0x19;
}

bool isa_fma_256bit(void) {
  static atomic_int cached = -1;
  return cached_probe(&cached, probe_fma_256bit);
}

bool isa_has_f16c(void) {
  static atomic_int cached = -1;
  return cached_probe(&cached, probe_f16c);
}

bool isa_has_avx512bf16(void) {
  static atomic_int cached = -1;
  return cached_probe(&cached, probe_avx512bf16);
}

bool isa_has_avx512vnni(void) {
  static atomic_int cached = -1;
  return cached_probe(&cached, probe_avx512vnni);
}

bool isa_has_amx_bf16(void) {
  static atomic_int cached = -1;
  return cached_probe(&cached, probe_amx_bf16);
}
#else
isa_level isa_detect(void) { return ISA_SCALAR; }
bool isa_has_f16c(void) { return false; }
bool isa_has_avx512bf16(void) { return false; }
bool isa_has_avx512vnni(void) { return false; }
bool isa_has_amx_bf16(void) { return false; }
bool isa_bf16_dot_fast(void) { return false; }
bool isa_fma_256bit(void) { return false; }
#endif

bool isa_avx512vnni_at(isa_level isa) { return isa >= ISA_AVX512 && isa_has_avx512vnni(); }

const char *isa_name(isa_level l) {
  switch (l) {
    case ISA_SCALAR: return "scalar";
    case ISA_AVX2: return "avx2";
    case ISA_AVX512: return "avx512";
    default: return "?";
  }
}

bool isa_parse(const char *s, isa_level *out) {
  if (!s) return false;
  for (int l = 0; l < ISA_COUNT; l++) {
    if (strcasecmp(s, isa_name((isa_level)l)) == 0) {
      *out = (isa_level)l;
      return true;
    }
  }
  return false;
}

isa_level isa_clamp(isa_level requested) {
  isa_level d = isa_detect();
  if ((int)requested < 0) return ISA_SCALAR;
  return requested < d ? requested : d;
}

static _Thread_local int thread_cap = ISA_COUNT;

isa_level isa_cap_enter(isa_level cap) {
  isa_level prev = (isa_level)thread_cap;
  thread_cap = (int)cap;
  return prev;
}

isa_choice isa_choose(void) {
  isa_choice ch = {0};
  ch.detected = isa_detect();
  const char *env = env_get("SMELT_ISA");
  ch.env_set = env != NULL;
  ch.env_valid = isa_parse(env, &ch.requested);
  if (!ch.env_valid) ch.requested = ch.detected;
  ch.active = ch.requested < ch.detected ? ch.requested : ch.detected;
  if ((int)ch.active > thread_cap) ch.active = (isa_level)thread_cap;
  return ch;
}

isa_level isa_active(void) { return isa_choose().active; }
