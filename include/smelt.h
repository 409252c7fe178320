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

/* The library's version.  These three lines are the one place it is written:
 * CMakeLists.txt (project VERSION, the shared library's SOVERSION, smelt.pc)
 * and python/pyproject.toml read them from here.  smelt_version() returns
 * SMELT_VERSION as the library was built, so a program can compare the header
 * it was compiled with against the library it runs with. */
#define SMELT_VERSION_MAJOR 0
#define SMELT_VERSION_MINOR 2
#define SMELT_VERSION_PATCH 0
#define SMELT_VERSION_STR_(x) #x
#define SMELT_VERSION_XSTR_(x) SMELT_VERSION_STR_(x)
/* "MAJOR.MINOR.PATCH" */
#define SMELT_VERSION                                                              \
  SMELT_VERSION_XSTR_(SMELT_VERSION_MAJOR) "." SMELT_VERSION_XSTR_(SMELT_VERSION_MINOR) "." \
  SMELT_VERSION_XSTR_(SMELT_VERSION_PATCH)
/* One number for #if: MAJOR * 10000 + MINOR * 100 + PATCH. */
#define SMELT_VERSION_NUMBER (SMELT_VERSION_MAJOR * 10000 + SMELT_VERSION_MINOR * 100 + SMELT_VERSION_PATCH)

/* Marks the public functions: the shared library is built with hidden
 * visibility, so these are the only symbols it exports. */
#if defined(__GNUC__) || defined(__clang__)
#define SMELT_API __attribute__((visibility("default")))
#else
#define SMELT_API
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

/* Who owns a tensor's data. */
typedef enum smelt_owner {
  SMELT_OWNER_CALLER = 0, /* the caller's memory: smelt never frees it (what {0} gives) */
  SMELT_OWNER_SMELT = 1   /* allocated by smelt (an output, smelt_tensor_load): free with smelt_tensor_release */
} smelt_owner;

/* A tensor view: a plain descriptor.  Data is dense, row-major (C order).
 * name is optional (NULL = by position).  owner says whose data it is: set
 * SMELT_OWNER_CALLER (0) for data you give; smelt sets SMELT_OWNER_SMELT on
 * every descriptor whose data it allocates. */
typedef struct smelt_tensor {
  const char *name;
  smelt_dtype dtype;
  int rank;
  int64_t dims[SMELT_MAX_RANK];
  void *data;
  size_t nbytes;
  smelt_owner owner;
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

/* ---- logging ----
 * The library writes nothing to stderr (or anywhere) on its own: what it has
 * to say -- a warning (no C compiler, compile cache off, recompile limit
 * reached, prepared weights not cached), progress (max-autotune timing its
 * variants) -- goes to the log callback of the session's options, if any.
 * A message is one line without a trailing newline and without a "smelt:"
 * prefix; it is valid during the call only.  The callback may be called from
 * any thread that calls into the session (and from the session's worker
 * threads), concurrently: it must be thread-safe and must not call back into
 * the session. */
typedef enum smelt_log_level {
  SMELT_LOG_ERROR = 0,   /* something failed that the call itself does not report */
  SMELT_LOG_WARNING = 1, /* the session goes on, but not as asked (slower, uncached...) */
  SMELT_LOG_INFO = 2,    /* progress of long work (max-autotune) */
  SMELT_LOG_DEBUG = 3    /* detail for smelt's developers */
} smelt_log_level;

typedef void (*smelt_log_fn)(smelt_log_level level, const char *message, void *user);

/* The arithmetic precision a session runs its heavy nodes in (session
 * option `precision`).  FP32 (the default) is exact as without the option.
 * INT8: MatMul / Gemm / fused GEMM nodes whose weight is a constant run as
 * dynamically quantized int8 GEMMs (per-output-channel symmetric int8
 * weights, activations quantized per row at run time, fp32 accumulation of
 * the dequantized result); everything else stays fp32 (README: Precision).
 * BF16: the same nodes with the weight stored in bf16 (activations fp32).
 * INT4: the same nodes with the weight in int4 groups of 32 along K, an
 * fp32 scale each (few rows: activations quantized to int8 per group of 32
 * at run time).  FP16: as BF16 with the weight in IEEE fp16 (a weight past
 * fp16's range, |w| > 65504, stays fp32). */
typedef enum smelt_precision {
  SMELT_PRECISION_FP32 = 0,
  SMELT_PRECISION_BF16,
  SMELT_PRECISION_FP16,
  SMELT_PRECISION_INT8,
  SMELT_PRECISION_INT4
} smelt_precision;

typedef struct smelt_session_options {
  /* sizeof(smelt_session_options), set by smelt_session_options_default():
   * start from it.  A size below the first released layout (0.2.0: this
   * one) is refused with SMELT_ERR_INVALID_ARGUMENT; a bigger one (a caller
   * built against a later header) is read up to the fields this library
   * knows. */
  size_t struct_size;
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
  /* Where the session's messages go (see smelt_log_level).  NULL (the
   * default): nowhere.  smelt_log_stderr prints them as the CLI does.
   * It may be called from a thread of the session's own (the warning that
   * prepared weights could not be saved comes from the cache's writer
   * thread), never after smelt_session_free returns. */
  smelt_log_fn log;
  void *log_user; /* passed to log unchanged */
  /* Messages of this level and more severe are passed to log (default
   * SMELT_LOG_INFO).  $SMELT_LOG_LEVEL (error, warning, info or debug), when
   * set, overrides it; another value is refused by smelt_session_create. */
  smelt_log_level log_level;
  /* Precision of the heavy nodes (smelt_precision above); 0 = FP32. */
  smelt_precision precision;
  /* The device the session runs on: "cpu" (NULL or "": the default), or
   * "cpu-ref" (test-only: the reference kernels through the device seam,
   * eager mode only).  "cuda" / "cuda:N" are reserved and fail with
   * SMELT_ERR_UNSUPPORTED (not built into this library); other names with
   * SMELT_ERR_INVALID_ARGUMENT.  Read when the session is created.  Added
   * after the first released layout: a caller whose struct_size ends before
   * it gets "cpu". */
  const char *device;
} smelt_session_options;

/* What a session has done so far (for benchmarks and diagnostics). */
typedef struct smelt_session_stats {
  /* Set by the caller to sizeof(smelt_session_stats) before
   * smelt_session_get_stats (smelt_session_stats st = {.struct_size = sizeof st};).  The
   * library writes no byte past it: an older caller's smaller struct gets the
   * fields it has, a newer caller's bigger one gets the fields this library
   * knows and zeros after them.  Below the first released layout (0.2.0:
   * this one): SMELT_ERR_INVALID_ARGUMENT. */
  size_t struct_size;
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
SMELT_API const char *smelt_version(void);
/* The message of the calling thread's last failure ("" if none).  Valid until
 * the thread's next smelt call that fails. */
SMELT_API const char *smelt_last_error(void);
SMELT_API const char *smelt_status_name(smelt_status s);
SMELT_API const char *smelt_dtype_name(smelt_dtype t);
/* Bytes per element, 0 for string and sub-byte types.  Sub-byte types (int4,
 * uint4, float4e2m1: two per byte; int2, uint2: four per byte) are packed, the
 * first element in the low bits, as ONNX stores them: a tensor of n elements
 * takes ceil(n * bits / 8) bytes (smelt_tensor.nbytes). */
SMELT_API size_t smelt_dtype_size(smelt_dtype t);

/* ---- models ---- */
/* Loads an ONNX model.  The file is memory-mapped; weights are viewed in place.
 * Misaligned weights (inline in the protobuf) are copied -- or, when the
 * cache holds an image of this file from an earlier load, viewed in it; a
 * load without one writes one on a thread of its own at idle priority,
 * which smelt_model_free waits for (README: the cache).
 * On success *out is owned by the caller: free with smelt_model_free. */
SMELT_API smelt_status smelt_model_load(const char *path, smelt_model **out);
/* Loads an ONNX model from memory (len bytes at data).  The model keeps its own
 * copy, so data may be freed after the call.  External data is not allowed
 * (there is no folder to resolve it in).  Free with smelt_model_free. */
SMELT_API smelt_status smelt_model_load_bytes(const void *data, size_t len, smelt_model **out);
/* smelt_model_load_bytes, with some graph inputs given values: each of
 * consts[0..n_consts) names (by name) an input of the main graph and becomes
 * a constant of the model, as an initializer would -- it is no longer an
 * input.  Its dtype must be the input's declared type and its dims the
 * declared concrete dims; data aligned to its element size.  The data is NOT
 * copied: it must stay valid and unchanged until the model and every session
 * made from it are freed.  This is how a caller that holds the weights in
 * memory (the torch.compile back end) hands them over without serializing
 * them into the ONNX bytes.  An unknown or repeated name is an error. */
SMELT_API smelt_status smelt_model_load_bytes_with(const void *data, size_t len, const smelt_tensor *consts,
                                                   size_t n_consts, smelt_model **out);
SMELT_API void smelt_model_free(smelt_model *m);
SMELT_API int smelt_model_num_inputs(const smelt_model *m);
SMELT_API int smelt_model_num_outputs(const smelt_model *m);
/* Fills *info for input/output i.  Strings in *info are owned by the model. */
SMELT_API smelt_status smelt_model_input(const smelt_model *m, int i, smelt_value_info *info);
SMELT_API smelt_status smelt_model_output(const smelt_model *m, int i, smelt_value_info *info);

/* ---- sessions ---- */
/* struct_size set, threads 0, eager, recompile_limit 8, no log callback,
 * log_level SMELT_LOG_INFO, everything else zero/NULL. */
SMELT_API smelt_session_options smelt_session_options_default(void);
/* A ready-made smelt_log_fn: writes "smelt: warning: MESSAGE" (warnings),
 * "smelt: error: MESSAGE" (errors) or "smelt: MESSAGE" (info, debug) and a
 * newline to stderr, one line per write.  user is ignored. */
SMELT_API void smelt_log_stderr(smelt_log_level level, const char *message, void *user);
/* Creates a session (thread pool, prepared plan) for a model.  opts may be NULL
 * for defaults.  The model must outlive the session. */
SMELT_API smelt_status smelt_session_create(const smelt_model *m, const smelt_session_options *opts,
                                            smelt_session **out);
SMELT_API void smelt_session_free(smelt_session *s);
/* Fills *out up to out->struct_size (set it first: see smelt_session_stats). */
SMELT_API smelt_status smelt_session_get_stats(const smelt_session *s, smelt_session_stats *out);
/* Parses "eager", "default", "reduce-overhead", "max-autotune". */
SMELT_API smelt_status smelt_mode_parse(const char *name, smelt_mode *out);
SMELT_API const char *smelt_mode_name(smelt_mode m);
/* Parses "fp32", "bf16", "fp16", "int8", "int4". */
SMELT_API smelt_status smelt_precision_parse(const char *name, smelt_precision *out);
SMELT_API const char *smelt_precision_name(smelt_precision p);

/* Runs the model.  inputs: n_inputs tensors, matched by name when name is set,
 * else by position among the model's inputs; every input must be given.
 * outputs: n_outputs descriptors, matched the same way (n_outputs may be fewer
 * than the model has).  For each output whose data is NULL, smelt allocates the
 * data and fills the descriptor (owner SMELT_OWNER_SMELT); the caller frees it
 * with smelt_tensor_release.  An output whose data is set must have the right
 * dtype and nbytes; smelt writes into it (its owner is left as it is).
 * All or none: when the run fails at any point, no output descriptor is
 * filled and whatever smelt allocated for them is freed (a caller-owned
 * buffer holds unspecified bytes).  Thread-safe: concurrent calls on one
 * session are allowed. */
SMELT_API smelt_status smelt_session_run(smelt_session *s, const smelt_tensor *inputs, size_t n_inputs,
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

SMELT_API smelt_run_options smelt_run_options_default(void);
/* smelt_session_run with options (NULL = none: the same as smelt_session_run). */
SMELT_API smelt_status smelt_session_run_with(smelt_session *s, const smelt_tensor *inputs, size_t n_inputs,
                                              smelt_tensor *outputs, size_t n_outputs,
                                              const smelt_run_options *options);

/* Frees the data if smelt owns it (owner SMELT_OWNER_SMELT; the caller's
 * data is never freed) and clears the descriptor (all zero).  NULL: nothing. */
SMELT_API void smelt_tensor_release(smelt_tensor *t);

/* ---- tensor files ---- */
/* Reads a tensor from a .npy (v1-v3, C order) or ONNX TensorProto .pb file,
 * chosen by the file's contents.  out->name is set to NULL, out->owner to
 * SMELT_OWNER_SMELT.  The caller frees the data with smelt_tensor_release. */
SMELT_API smelt_status smelt_tensor_load(const char *path, smelt_tensor *out);
/* Writes a tensor as .npy (v1).  Atomic: written to a temporary file, then renamed.
 * bfloat16 (which numpy lacks) is written as float32, the same values. */
SMELT_API smelt_status smelt_tensor_save_npy(const char *path, const smelt_tensor *t);

/* ---- tokenizer ----
 * Hugging Face tokenizer.json files with a BPE model: byte-level BPE (GPT-2,
 * Llama-3, Qwen2 style) and SentencePiece-style BPE with byte fallback
 * (Llama-2 style).  Ids and text are the same as the `tokenizers` library's
 * (encode(text, add_special_tokens), decode(ids, skip_special_tokens)).  A
 * tokenizer may be used from several threads at once. */
typedef struct smelt_tokenizer smelt_tokenizer;
typedef struct smelt_tokenizer_stream smelt_tokenizer_stream;

/* Loads tokenizer.json.  Errors name the file, line:column and JSON path;
 * parts smelt does not implement (another model type, an unknown split
 * regex...) give SMELT_ERR_UNSUPPORTED naming them.  Free with smelt_tokenizer_free. */
SMELT_API smelt_status smelt_tokenizer_load(const char *tokenizer_json_path, smelt_tokenizer **out);
SMELT_API smelt_status smelt_tokenizer_load_bytes(const char *json, size_t len, smelt_tokenizer **out);
SMELT_API void smelt_tokenizer_free(smelt_tokenizer *t);
/* Encodes len bytes of UTF-8 text.  add_special_tokens: the post-processor's
 * tokens (BOS...) too.  *ids is freed with smelt_free. */
SMELT_API smelt_status smelt_tokenizer_encode(const smelt_tokenizer *t, const char *text, size_t len, int add_special_tokens,
                                    int32_t **ids, size_t *n);
/* Decodes n ids; *text is NUL-terminated (*len bytes), freed with smelt_free.
 * An id outside the vocabulary is SMELT_ERR_INVALID_ARGUMENT. */
SMELT_API smelt_status smelt_tokenizer_decode(const smelt_tokenizer *t, const int32_t *ids, size_t n, int skip_special_tokens,
                                    char **text, size_t *len);
/* Streaming decode for generation: each step gives the text the new id
 * completes ("" while a character's UTF-8 bytes are split across tokens);
 * *text stays valid until the next call on the stream. */
SMELT_API smelt_status smelt_tokenizer_stream_new(const smelt_tokenizer *t, int skip_special_tokens, smelt_tokenizer_stream **out);
SMELT_API smelt_status smelt_tokenizer_stream_step(smelt_tokenizer_stream *s, int32_t id, const char **text, size_t *len);
SMELT_API void smelt_tokenizer_stream_free(smelt_tokenizer_stream *s);
/* The id of a token by its text ("</s>", "<|endoftext|>"). */
SMELT_API smelt_status smelt_tokenizer_token_id(const smelt_tokenizer *t, const char *token, int32_t *id);
/* The text of an id as the vocabulary holds it (owned by t), NULL if none. */
SMELT_API const char *smelt_tokenizer_id_token(const smelt_tokenizer *t, int32_t id);
/* One more than the largest id. */
SMELT_API int32_t smelt_tokenizer_vocab_size(const smelt_tokenizer *t);
/* The BOS / EOS ids found by their usual names (<|begin_of_text|>, <s>,
 * <|endoftext|>...; <|end_of_text|>, </s>, <|endoftext|>...), -1 if none. */
SMELT_API int32_t smelt_tokenizer_bos_id(const smelt_tokenizer *t);
SMELT_API int32_t smelt_tokenizer_eos_id(const smelt_tokenizer *t);
/* Frees memory smelt allocated for the caller (token ids, decoded text). */
SMELT_API void smelt_free(void *p);

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
  /* sizeof(smelt_generator_options), set by smelt_generator_options_default():
   * start from it.  Smaller than this first layout: refused; bigger (a later
   * header): read up to the fields this library knows. */
  size_t struct_size;
  int batch;            /* sequences generated at once (default 1) */
  int64_t max_length;   /* prompt + generated tokens at most; 0 = no limit */
  float temperature;    /* 0 (default): greedy; > 0: sampling at this temperature */
  int top_k;            /* sampling: keep the k most likely tokens (0 = all) */
  float top_p;          /* sampling: keep the fewest tokens whose probability reaches top_p (1 = all) */
  uint64_t seed;        /* sampling: seed of the random generator */
  int64_t eos_token_id; /* -1 (default): none */
  /* 1 (default): a static KV cache -- caches allocated once (max_length
   * positions; 0: 256, doubled as needed), each step's keys and values
   * written in place and read there by the fused attention, decode run by a
   * plan made once (no per-step allocation, copy or re-plan).  Used when the
   * model's past -> Concat -> present pattern matches (else one log line says
   * why, and the model runs as written).  0: the model as written, each
   * present fed back as the next past.  (Added after the first layout: a
   * smaller struct gets 1.) */
  int static_cache;
} smelt_generator_options;

SMELT_API smelt_generator_options smelt_generator_options_default(void);
/* Checks the session's model for the signature above (an error names what
 * does not fit).  The session must outlive the generator; opts NULL = defaults. */
SMELT_API smelt_status smelt_generator_create(smelt_session *s, const smelt_generator_options *opts,
                                    smelt_generator **out);
/* Starts sequences over: runs the prompt, ids[b * n + i] the i-th token of
 * sequence b (batch rows of n tokens), and keeps the last position's logits. */
SMELT_API smelt_status smelt_generator_prefill(smelt_generator *g, const int64_t *ids, size_t n);
/* Picks the next token of each sequence (tokens[batch]) from the last logits. */
SMELT_API smelt_status smelt_generator_sample(smelt_generator *g, int64_t *tokens);
/* Runs one decode step: tokens[batch], one per sequence, appended to the cache. */
SMELT_API smelt_status smelt_generator_step(smelt_generator *g, const int64_t *tokens);
/* The next token of each sequence: feeds the tokens the previous call
 * returned (a step), then samples.  After prefill, the first call only samples. */
SMELT_API smelt_status smelt_generator_next(smelt_generator *g, int64_t *tokens);
/* 1 when every sequence has produced eos_token_id or max_length is reached. */
SMELT_API int smelt_generator_done(const smelt_generator *g);
/* The last position's logits: batch rows of *vocab floats, owned by g (valid until its next call). */
SMELT_API const float *smelt_generator_logits(const smelt_generator *g, int64_t *vocab);
/* Tokens in the cache per sequence (prompt + steps run). */
SMELT_API int64_t smelt_generator_length(const smelt_generator *g);
/* 1 when g runs with the static KV cache (see smelt_generator_options.static_cache). */
SMELT_API int smelt_generator_static_cache(const smelt_generator *g);
/* Bytes the KV cache holds now (every layer's key and value, the positions
 * in use; the static cache's buffers hold max_length positions). */
SMELT_API size_t smelt_generator_kv_bytes(const smelt_generator *g);
/* Drops the cache and the logits: the next call is a prefill.  Reset and
 * prefill restart the sampler from the seed (the same prompt and seed give
 * the same tokens again). */
SMELT_API void smelt_generator_reset(smelt_generator *g);
SMELT_API void smelt_generator_free(smelt_generator *g);

#ifdef __cplusplus
}
#endif
#endif
