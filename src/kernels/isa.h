/* Which x86 vector ISA the fast kernels may use: the one config module for it.
 * One binary runs everywhere: the AVX2 / AVX-512 kernels are compiled with
 * per-function target attributes and only called after isa_detect() says the
 * CPU and the OS (XCR0 register state) support them.
 *
 * SMELT_ISA=scalar|avx2|avx512 in the environment asks for a path; a request
 * above what the machine has falls back to the best level it does have, and
 * isa_choose() reports what was asked, what exists and what is used. */
#ifndef SMELT_KERNELS_ISA_H
#define SMELT_KERNELS_ISA_H

#include <stdbool.h>

typedef enum isa_level {
  ISA_SCALAR = 0, /* portable C */
  ISA_AVX2 = 1,   /* AVX2 + FMA */
  ISA_AVX512 = 2, /* AVX-512 F, BW, VL, DQ */
  ISA_COUNT
} isa_level;

typedef struct isa_choice {
  isa_level detected;  /* best level the CPU and OS support */
  isa_level requested; /* SMELT_ISA's level, or `detected` when unset/unknown */
  isa_level active;    /* what the kernels use: min(requested, detected) */
  bool env_set;        /* SMELT_ISA is set (even if not understood) */
  bool env_valid;      /* ...and names a level */
} isa_choice;

/* "scalar", "avx2", "avx512"; "?" for anything else. */
const char *isa_name(isa_level l);
/* Parses a level name (case-insensitive); false if unknown. */
bool isa_parse(const char *s, isa_level *out);
/* CPUID + XGETBV, computed once per process and cached (CPUID is slow
 * under a hypervisor). */
isa_level isa_detect(void);
/* The CPU has F16C (half <-> float conversion), and AVX2 with it. */
bool isa_has_f16c(void);
/* The CPU has AVX512_BF16 (vdpbf16ps, vcvtne2ps2bf16: CPUID.(7,1):EAX bit
 * 5) beside the AVX-512 level above (which checks the OS saves the zmm and
 * opmask state).  Only what the hardware offers: callers also check that
 * the active level (SMELT_ISA, isa_cap_enter) is ISA_AVX512. */
bool isa_has_avx512bf16(void);
/* The CPU has AVX512_VNNI (vpdpbusd, vpdpwssd: CPUID.(7,0):ECX bit 11)
 * beside the AVX-512 level above.  Only what the hardware offers, as for
 * isa_has_avx512bf16. */
bool isa_has_avx512vnni(void);
/* The VNNI kernels (vpdpbusd) run at `isa`: the level is avx512 and the
 * CPU has AVX512_VNNI. */
bool isa_avx512vnni_at(isa_level isa);
/* The CPU has AMX-BF16 and AMX-TILE and the OS saves the tile state (XCR0),
 * beside AVX512_BF16.  Whether Linux grants this process the tile data is a
 * separate request (kernels/x86/bf16dp_amx.c). */
bool isa_has_amx_bf16(void);
/* vdpbf16ps does twice the multiply-adds of an fp32 FMA per cycle on this
 * CPU, so bf16 arithmetic can double a compute-bound kernel's speed: AMD
 * cores with AVX512_BF16 (Zen 4 and later; CPUID vendor AuthenticAMD).  On
 * Intel cores (Cooper Lake, Sapphire/Emerald Rapids without AMX) it issues
 * on one port where the FMA has two, the same multiply-adds per cycle:
 * measured on an Emerald Rapids Xeon, the bf16 GEMM at 0.57-0.78x the fp32
 * one (README, precision bf16).  False without AVX512_BF16. */
bool isa_bf16_dot_fast(void);
/* The core's vector FMA units are 256 bits wide: AMD family 19h (Zen 3,
 * Zen 4; Zen 4 runs AVX-512 on them in two halves, one zmm FMA a cycle
 * where full-width cores issue two).  Cost models that were fitted on
 * full-width cores consult it (kernels/conv_select.c's Winograd pricing). */
bool isa_fma_256bit(void);
/* Reads SMELT_ISA on every call. */
isa_choice isa_choose(void);
isa_level isa_active(void);
/* The level a caller's request resolves to on this machine. */
isa_level isa_clamp(isa_level requested);
/* Caps the active level on the calling thread (isa_choose, isa_active) at
 * cap, whatever SMELT_ISA says; ISA_COUNT: no cap.  Returns the cap it
 * replaces, for the caller to restore.  The reference device (cpu-ref,
 * backend/) runs under ISA_SCALAR; pool workers do not inherit the cap. */
isa_level isa_cap_enter(isa_level cap);

#endif
