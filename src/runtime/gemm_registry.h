/* The GEMM kernel registry of the compiled path: a GEMM step (gemm_step.h)
 * does not call a kernel by name; it looks one up by the element types of
 * A, B and Y -- B's with its quantization (ir/quant.h: int8 with a scale
 * per output channel, int4 with a scale per group of 32 along K, bf16 or
 * fp16 storage, declared on the weight by passes/autocast.c,
 * ops/gemm_quant.h; the node's precision mark where B has no declaration)
 * --, the form the weight takes (gemm_wform, which follows from it), the
 * ISA and the shape class,
 * in the spirit of XNNPACK's per-(datatype, ISA) kernel configs.  A new
 * element type or ISA gets an entry here; the plan, the schedule and
 * max-autotune do not change.
 *
 * Entries today: f32 (the GEMM library, kernels/gemm.h, as before: the
 * shape class picks nothing, gemm_f32_run's AUTO path does); the
 * reduced-precision weight forms on f32 activations (int8: kernels/qgemm.h,
 * bf16 and fp16 weights: kernels/wbf16.h, int4: kernels/q4gemm.h, each through
 * their op's weight preparation, ops/gemm_int8.h etc.; bf16 weights with
 * more than 16 rows on a CPU with AVX512_BF16: kernels/bf16dp.h, A rounded
 * to bf16 too); and f16 or bf16
 * throughout (A, B, Y: a model that is f16 inside) through f32 panels
 * widened per run and the f32 kernel -- the seam, nothing faster yet.
 * Mixed types have no entry: such nodes stay library steps. */
#ifndef SMELT_RUNTIME_GEMM_REGISTRY_H
#define SMELT_RUNTIME_GEMM_REGISTRY_H

#include "ir/ir.h"
#include "kernels/isa.h"
#include "ops/op.h"

typedef enum gemm_wform { GEMM_W_F32, GEMM_W_INT8, GEMM_W_BF16, GEMM_W_INT4, GEMM_W_F16, GEMM_W_COUNT } gemm_wform;

/* Shape classes, by rows of A (M): one row (decode, GEMV), a few (<= 16),
 * many.  Entries say which they take (a mask of 1 << class). */
typedef enum gemm_shape_class {
  GEMM_SHAPE_GEMV,
  GEMM_SHAPE_SMALL_M,
  GEMM_SHAPE_LARGE,
  GEMM_SHAPE_COUNT
} gemm_shape_class;
#define GEMM_SHAPES_ALL ((1u << GEMM_SHAPE_COUNT) - 1)

struct gemm_step;

/* What a step's kernel reads and writes (inputs 0-3 of the node, output 0),
 * with the node's graph, node index and op cache (reduced weights live
 * there, made at plan_prepare). */
typedef struct gemm_io {
  const ir_graph *g;
  int node;
  op_cache *cache;
  const void *A, *B, *bias, *res;
  void *Y;
} gemm_io;

typedef struct gemm_kernel {
  const char *name;
  smelt_dtype a, b;       /* element types of A, B (as stored in the graph) */
  ir_quant_scheme bq;     /* B's quantization (ir/quant.h): with b, B's element type as the kernel reads it */
  smelt_dtype y;          /* Y's element type */
  gemm_wform w;           /* the weight's form */
  isa_level min_isa;      /* runs at this level and above */
  unsigned shapes;        /* mask of 1 << gemm_shape_class */
  /* Makes what runs need ahead (packed / quantized B, a constant); may do nothing. */
  void (*prepare)(struct gemm_step *gs, const gemm_io *io, smelt_pool *pool);
  /* Y = the node's result; variant as gemm_step.h's. */
  smelt_status (*run)(const struct gemm_step *gs, const gemm_io *io, smelt_pool *pool, int variant);
  /* NULL, or whether the entry may run at this ISA level on this CPU
   * (a feature the level does not imply: AVX512_BF16). */
  bool (*usable)(isa_level isa);
} gemm_kernel;

gemm_shape_class gemm_shape_of(int64_t M, int64_t N, int64_t K);
/* The first entry that takes these types (B: b with quantization bq),
 * form, ISA and shape; NULL if none. */
const gemm_kernel *gemm_kernel_select(smelt_dtype a, smelt_dtype b, ir_quant_scheme bq, smelt_dtype y, gemm_wform w,
                                      isa_level isa, gemm_shape_class shape);
const char *gemm_wform_name(gemm_wform w);

#endif
