/* Generated kernels are compiled for the active ISA: with SMELT_ISA below
 * AVX-512 (or under valgrind, whose CPU has none) -march=native is lowered. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "codegen/cc.h"
#include "kernels/isa.h"

static const char *flags_with(const char *isa, cc_toolchain *tc) {
  setenv("SMELT_ISA", isa, 1);
  cc_probe(tc); /* the flags are set even when no compiler can be run */
  return tc->flags ? tc->flags : "";
}

int main(void) {
  cc_toolchain tc;
  /* the element loops' `#pragma omp simd` is honoured (emit.c, cc.c) */
  CHECK(strstr(flags_with("avx2", &tc), " -fopenmp-simd") != NULL);
#if defined(__x86_64__) || defined(__i386__)
  CHECK(strstr(flags_with("avx2", &tc), "-march=native -") && strstr(tc.flags, " -mno-avx512f"));
  CHECK(strstr(flags_with("scalar", &tc), " -mno-avx") && !strstr(tc.flags, "-mno-avx512f"));
  const char *f = flags_with("avx512", &tc);
  if (isa_detect() == ISA_AVX512) CHECK(!strstr(f, "-mno-avx"));
  else CHECK(strstr(f, "-mno-avx") != NULL); /* clamped to what the CPU has */
#else
  CHECK(!strstr(flags_with("scalar", &tc), "-mno-avx"));
#endif
  return test_report("test_cc_flags");
}
