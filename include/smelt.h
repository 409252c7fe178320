/* smelt — ONNX inference runtime and compiler.  The one public header.
 *
 * Lifecycle: smelt_model_load → smelt_session_create → smelt_session_run (any
 * number of times, from any number of threads) → smelt_session_free →
 * smelt_model_free.  A session keeps a reference to its model: free sessions
 * before their model.
 *
 * Errors: every fallible call returns a smelt_status.  On failure the message
 * (what went wrong and where) is available from smelt_last_error() in the
 * calling thread until that thread's next failing smelt call.
 */
#ifndef SMELT_H
#define SMELT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SMELT_MAX_RANK 12

typedef enum smelt_status {
  SMELT_OK = 0,
  SMELT_ERR_INVALID_ARGUMENT, /* a caller argument is wrong (name, shape, dtype, NULL) */
  SMELT_ERR_INVALID_MODEL,    /* the model file is malformed or inconsistent */
  SMELT_ERR_UNSUPPORTED,      /* valid, but not implemented by smelt */
  SMELT_ERR_IO,               /* a file could not be read or written */
  SMELT_ERR_NOMEM,            /* an allocation failed, a size is implausible, or it is over the memory budget */
  SMELT_ERR_RUNTIME,          /* a kernel failed on the given data (index out of range...) */
  SMELT_ERR_INTERNAL,         /* a bug in smelt: please report it */
  SMELT_CANCELLED,            /* the run was stopped through smelt_run_options.cancel */
  SMELT_TIMEOUT               /* the run took longer than smelt_run_options.timeout_s */
} smelt_status;

/* Element types, numbered as ONNX's TensorProto.DataType. */
typedef enum smelt_dtype {
  SMELT_UNDEFINED = 0,
  SMELT_F32 = 1,
  SMELT_U8 = 2,
  SMELT_I8 = 3,
  SMELT_U16 = 4,
  SMELT_I16 = 5,
  SMELT_I32 = 6,
  SMELT_I64 = 7,
  SMELT_STRING = 8,
  SMELT_BOOL = 9,
  SMELT_F16 = 10,
  SMELT_F64 = 11,
  SMELT_U32 = 12,
  SMELT_U64 = 13,
  SMELT_C64 = 14,
  SMELT_C128 = 15,
  SMELT_BF16 = 16,
  SMELT_F8E4M3FN = 17,
  SMELT_F8E4M3FNUZ = 18,
  SMELT_F8E5M2 = 19,
  SMELT_F8E5M2FNUZ = 20,
  SMELT_U4 = 21,
  SMELT_I4 = 22,
  SMELT_F4E2M1 = 23,
  SMELT_F8E8M0 = 24, /* exponent only (2^(e-127)), 0xff NaN: the scale of MX formats */
  SMELT_U2 = 25,
  SMELT_I2 = 26,
  SMELT_DTYPE_COUNT
} smelt_dtype;

/* A tensor view: a plain descriptor, not owned by smelt unless a function says so.
 * Data is dense, row-major (C order).  name is optional (NULL = by position). */
typedef struct smelt_tensor {
  const char *name;
  smelt_dtype dtype;
  int rank;
  int64_t dims[SMELT_MAX_RANK];
  void *data;
  size_t nbytes;
} smelt_tensor;

/* Description of a model input or output.  dims[i] < 0 means the dimension is
 * symbolic (dim_names[i] holds its name) or unknown (dim_names[i] NULL).  rank < 0:
 * unknown rank.  Strings are owned by the model. */
typedef struct smelt_value_info {
  const char *name;
  smelt_dtype dtype;
  int rank;
  int64_t dims[SMELT_MAX_RANK];
  const char *dim_names[SMELT_MAX_RANK];
} smelt_value_info;

typedef struct smelt_model smelt_model;
typedef struct smelt_session smelt_session;

typedef enum smelt_mode {
  SMELT_MODE_EAGER = 0, /* node by node with the reference kernels */
  SMELT_MODE_DEFAULT,
  SMELT_MODE_REDUCE_OVERHEAD,
  SMELT_MODE_MAX_AUTOTUNE
} smelt_mode;

typedef struct smelt_session_options {
  int threads;         /* worker threads; 0 = the machine's cores */
  smelt_mode mode;     /* execution mode */
  int fullgraph;       /* compiled modes: any graph break is an error */
  int dynamic;         /* compiled modes: kernels generic over symbolic dims */
  int recompile_limit; /* compiled modes: new shapes compiled before falling back to eager (default 8) */
  const char *buckets; /* compiled modes: "NAME:AXIS=64,128,256[;...]" pads an input axis up to a bucket */
  const char *cache_dir; /* NULL: $SMELT_CACHE_DIR, else $XDG_CACHE_HOME/smelt, else ~/.cache/smelt */
  /* compiled modes: sizes for symbolic dims, "batch=1,seq=128".  When they
   * (or the model itself) fix every input shape, the session compiles and
   * prepares its weights at creation, so the first run does no one-time
   * work; other shapes still compile on their first run.  NULL: none. */
  const char *dims;
  /* The most bytes the session may allocate at once: intermediates, outputs,
   * compiled arenas, prepared weights, kernel scratch, recycled buffers (not
   * the model's mapped weights nor the caller's inputs).  Checked before each
   * allocation; a request past it fails with SMELT_ERR_NOMEM naming the node,
   * the bytes and the budget, and the session stays usable.  0 = the default:
   * 80% of the smallest of MemAvailable, the cgroup's memory limit and
   * ulimit -v.
   * SIZE_MAX: no budget. */
  size_t max_memory;
} smelt_session_options;

/* What a session has done so far (for benchmarks and diagnostics). */
typedef struct smelt_session_stats {
  int compiles;            /* specializations compiled (cold or from cache) */
  int cache_hits;          /* of those, loaded from the on-disk cache */
  int eager_fallback;      /* 1 once the recompile limit sent this session to eager */
  int graph_breaks;        /* nodes run through eager kernels inside the compiled plan */
  int kernels_generated;   /* generated (fused) kernels in the last plan */
  double compile_seconds;  /* total time spent compiling */
  size_t arena_bytes;      /* planned arena of the last compiled plan (0 in eager) */
  size_t eager_peak_bytes; /* eager: peak bytes of intermediates in the last run */
  int prepared_loaded;     /* prepared weights (e.g. Winograd-transformed) mapped from the cache */
  int prepared_saved;      /* prepared weights written to the cache by this session */
} smelt_session_stats;

/* ---- library ---- */
const char *smelt_version(void);
/* The message of the calling thread's last failure ("" if none).  Valid until
 * the thread's next smelt call that fails. */
const char *smelt_last_error(void);
const char *smelt_status_name(smelt_status s);
const char *smelt_dtype_name(smelt_dtype t);
/* Bytes per element, 0 for string and sub-byte types.  Sub-byte types (int4,
 * uint4, float4e2m1: two per byte; int2, uint2: four per byte) are packed, the
 * first element in the low bits, as ONNX stores them: a tensor of n elements
 * takes ceil(n * bits / 8) bytes (smelt_tensor.nbytes). */
size_t smelt_dtype_size(smelt_dtype t);

/* ---- models ---- */
/* Loads an ONNX model.  The file is memory-mapped; weights are viewed in place.
 * On success *out is owned by the caller: free with smelt_model_free. */
smelt_status smelt_model_load(const char *path, smelt_model **out);
/* Loads an ONNX model from memory (len bytes at data).  The model keeps its own
 * copy, so data may be freed after the call.  External data is not allowed
 * (there is no folder to resolve it in).  Free with smelt_model_free. */
smelt_status smelt_model_load_bytes(const void *data, size_t len, smelt_model **out);
void smelt_model_free(smelt_model *m);
int smelt_model_num_inputs(const smelt_model *m);
int smelt_model_num_outputs(const smelt_model *m);
/* Fills *info for input/output i.  Strings in *info are owned by the model. */
smelt_status smelt_model_input(const smelt_model *m, int i, smelt_value_info *info);
smelt_status smelt_model_output(const smelt_model *m, int i, smelt_value_info *info);

/* ---- sessions ---- */
smelt_session_options smelt_session_options_default(void);
/* Creates a session (thread pool, prepared plan) for a model.  opts may be NULL
 * for defaults.  The model must outlive the session. */
smelt_status smelt_session_create(const smelt_model *m, const smelt_session_options *opts,
                                  smelt_session **out);
void smelt_session_free(smelt_session *s);
smelt_status smelt_session_get_stats(const smelt_session *s, smelt_session_stats *out);
/* Parses "eager", "default", "reduce-overhead", "max-autotune". */
smelt_status smelt_mode_parse(const char *name, smelt_mode *out);
const char *smelt_mode_name(smelt_mode m);

/* Runs the model.  inputs: n_inputs tensors, matched by name when name is set,
 * else by position among the model's inputs; every input must be given.
 * outputs: n_outputs descriptors, matched the same way (n_outputs may be fewer
 * than the model has).  For each output whose data is NULL, smelt allocates the
 * data and fills the descriptor; the caller frees it with smelt_tensor_release.
 * An output whose data is set must have the right dtype and nbytes; smelt
 * writes into it.  Thread-safe: concurrent calls on one session are allowed. */
smelt_status smelt_session_run(smelt_session *s, const smelt_tensor *inputs, size_t n_inputs,
                               smelt_tensor *outputs, size_t n_outputs);
/* ---- run options: cancellation and deadlines ----
 * Like ONNX Runtime's RunOptions with its terminate flag.  A run given
 * options stops early when *cancel becomes non-zero (set it from any thread,
 * e.g. with __atomic_store_n(&flag, 1, __ATOMIC_RELAXED) or a plain store)
 * or when it has taken longer than timeout_s seconds, and returns
 * SMELT_CANCELLED or SMELT_TIMEOUT.  The run is checked between nodes (and
 * steps of a compiled plan), at every Loop/Scan iteration and between the
 * chunks of parallel kernels, so it stops within about one chunk of work.
 * Everything the run allocated is released (outputs too: no output
 * descriptor is filled; caller-owned output buffers hold unspecified
 * bytes), and the session stays usable.  A compile for new input shapes
 * or a weight preparation that a run triggers is not interrupted (what it
 * makes is kept for later runs) but counts toward timeout_s. */
typedef struct smelt_run_options {
  size_t struct_size;         /* sizeof(smelt_run_options): set by smelt_run_options_default */
  double timeout_s;           /* > 0: the run's deadline, in seconds from its start; 0 = none */
  const volatile int *cancel; /* non-NULL: the run stops once *cancel != 0; NULL = none */
} smelt_run_options;

smelt_run_options smelt_run_options_default(void);
/* smelt_session_run with options (NULL = none: the same as smelt_session_run). */
smelt_status smelt_session_run_with(smelt_session *s, const smelt_tensor *inputs, size_t n_inputs,
                                    smelt_tensor *outputs, size_t n_outputs,
                                    const smelt_run_options *options);

/* Frees data that smelt allocated for an output and clears the descriptor. */
void smelt_tensor_release(smelt_tensor *t);

/* ---- tensor files ---- */
/* Reads a tensor from a .npy (v1-v3, C order) or ONNX TensorProto .pb file,
 * chosen by the file's contents.  out->name is set to NULL.  The caller frees
 * the data with smelt_tensor_release. */
smelt_status smelt_tensor_load(const char *path, smelt_tensor *out);
/* Writes a tensor as .npy (v1).  Atomic: written to a temporary file, then renamed. */
smelt_status smelt_tensor_save_npy(const char *path, const smelt_tensor *t);

/* ---- generation: decoder-only language models with a KV cache ----
 * A generator drives a session of a decoder exported with its cache as inputs
 * and outputs: input_ids int64 [batch, seq]; optionally attention_mask int64
 * [batch, past + seq] and position_ids int64 [batch, seq]; per layer
 * past.N.key/value or past_key_values.N.key/value float32 [batch, heads,
 * past_seq, head_dim] in, present.N.key/value out; logits float32 [batch,
 * seq, vocab].  Prefill runs the prompt, then each step feeds one token per
 * sequence with the cache the previous run returned.  Tokens are picked
 * greedily by default, or sampled (temperature, top-k, top-p) from a seeded
 * generator: the same seed gives the same tokens.  A sequence that produced
 * eos_token_id is finished: its later tokens are eos_token_id. */
typedef struct smelt_generator smelt_generator;

typedef struct smelt_generator_options {
  size_t struct_size;   /* sizeof(smelt_generator_options): set by smelt_generator_options_default */
  int batch;            /* sequences generated at once (default 1) */
  int64_t max_length;   /* prompt + generated tokens at most; 0 = no limit */
  float temperature;    /* 0 (default): greedy; > 0: sampling at this temperature */
  int top_k;            /* sampling: keep the k most likely tokens (0 = all) */
  float top_p;          /* sampling: keep the fewest tokens whose probability reaches top_p (1 = all) */
  uint64_t seed;        /* sampling: seed of the random generator */
  int64_t eos_token_id; /* -1 (default): none */
} smelt_generator_options;

smelt_generator_options smelt_generator_options_default(void);
/* Checks the session's model for the signature above (an error names what
 * does not fit).  The session must outlive the generator; opts NULL = defaults. */
smelt_status smelt_generator_create(smelt_session *s, const smelt_generator_options *opts,
                                    smelt_generator **out);
/* Starts sequences over: runs the prompt, ids[b * n + i] the i-th token of
 * sequence b (batch rows of n tokens), and keeps the last position's logits. */
smelt_status smelt_generator_prefill(smelt_generator *g, const int64_t *ids, size_t n);
/* Picks the next token of each sequence (tokens[batch]) from the last logits. */
smelt_status smelt_generator_sample(smelt_generator *g, int64_t *tokens);
/* Runs one decode step: tokens[batch], one per sequence, appended to the cache. */
smelt_status smelt_generator_step(smelt_generator *g, const int64_t *tokens);
/* The next token of each sequence: feeds the tokens the previous call
 * returned (a step), then samples.  After prefill, the first call only samples. */
smelt_status smelt_generator_next(smelt_generator *g, int64_t *tokens);
/* 1 when every sequence has produced eos_token_id or max_length is reached. */
int smelt_generator_done(const smelt_generator *g);
/* The last position's logits: batch rows of *vocab floats, owned by g (valid until its next call). */
const float *smelt_generator_logits(const smelt_generator *g, int64_t *vocab);
/* Tokens in the cache per sequence (prompt + steps run). */
int64_t smelt_generator_length(const smelt_generator *g);
/* Bytes the KV cache holds now (every layer's key and value). */
size_t smelt_generator_kv_bytes(const smelt_generator *g);
/* Drops the cache and the logits: the next call is a prefill.  Reset and
 * prefill restart the sampler from the seed (the same prompt and seed give
 * the same tokens again). */
void smelt_generator_reset(smelt_generator *g);
void smelt_generator_free(smelt_generator *g);

#ifdef __cplusplus
}
#endif
#endif
