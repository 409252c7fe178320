/* Shared pieces of the smelt command-line tool. */
#ifndef SMELT_CLI_H
#define SMELT_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/tensor.h"
#include "onnx/model_internal.h"

typedef int (*cli_command_fn)(int argc, char **argv);

int cmd_info(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_test(int argc, char **argv);
int cmd_compile(int argc, char **argv);

/* Compile options given on the command line (--mode, --fullgraph, --dynamic, --bucket). */
typedef struct cli_mode_opts {
  smelt_session_options opts;
  char buckets[4096];
} cli_mode_opts;
/* smelt_session_options_default() with smelt_log_stderr as the log callback:
 * every verb shows the library's warnings and progress on stderr. */
smelt_session_options cli_session_options(void);
void cli_mode_init(cli_mode_opts *m);
/* True if argv[*i] is one of those flags (consumed); *bad on a bad value. */
bool cli_mode_flag(int argc, char **argv, int *i, cli_mode_opts *m, bool *bad);
const char *cli_mode_help(void);
int cmd_bench(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_bench_kernels(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);

/* Prints "smelt: <msg>" with the library's last error to stderr; returns 1. */
int cli_fail(const char *what);
/* Parses a positive int / a double flag value; prints an error and returns false if bad. */
bool cli_int(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out);
bool cli_double(const char *flag, const char *s, double *out);
/* A byte count: plain bytes or with a K/M/G/T suffix (powers of 1024: 512M, 8G). */
bool cli_bytes(const char *flag, const char *s, size_t *out);
#define CLI_MAX_MEMORY_HELP \
  "  --max-memory B   memory budget of the session: bytes, or with K/M/G/T (512M, 8G);\n" \
  "                   a node that would go past it fails with a message (default: four\n" \
  "                   fifths of the smallest of available memory, the cgroup limit\n" \
  "                   and ulimit -v)\n"
#define CLI_PRECISION_HELP \
  "  --precision P    fp32 (default), int8 (constant-weight MatMul/Gemm as dynamically\n" \
  "                   quantized int8 GEMMs; the rest fp32), bf16 (those weights stored in\n" \
  "                   bf16, activations and sums fp32; with AVX512_BF16 the activations too,\n" \
  "                   and the 1-group convolutions on AMX, or on AMD's AVX512_BF16 where\n" \
  "                   bf16 is the cheaper kernel), fp16 (likewise in IEEE fp16; a weight\n" \
  "                   past fp16's range stays fp32), int4 (those weights in int4 groups\n" \
  "                   of 32 with an fp32 scale; decode activations int8 per group of 32)\n"
/* A device name (--device): true if this library has it; else prints why not. */
bool cli_device(const char *flag, const char *name);
#define CLI_DEVICE_HELP \
  "  --device NAME    the device: cpu (default), or cpu-ref (test-only: the reference\n" \
  "                   kernels through the device seam, eager mode only)\n"
/* True if argv[i] is flag (and takes the next argument, which must exist). */
bool cli_flag_arg(int argc, char **argv, int *i, const char *flag, const char **val);

/* --timeout S (seconds > 0): true if argv[*i] is that flag (consumed); *bad on a bad value. */
bool cli_timeout_flag(int argc, char **argv, int *i, double *timeout_s, bool *bad);
#define CLI_TIMEOUT_HELP \
  "  --timeout S      stop a run that takes longer than S seconds (an error naming the timeout)\n"
/* session_run_tensors with a deadline of timeout_s seconds (0 = none): past
 * it the run stops with SMELT_TIMEOUT (parallel/run_ctl.h). */
struct eager_stats;
smelt_status cli_session_run(smelt_session *s, tensor *const *inputs, tensor *outputs,
                             struct eager_stats *stats, double timeout_s);

/* snprintf for paths and messages; false if the result was cut short. */
bool cli_path(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* CLOCK_MONOTONIC in seconds (for timing runs). */
double cli_now_s(void);
/* A "VmHWM:" / "VmRSS:" line of /proc/self/status in MB; -1 if unreadable. */
double cli_proc_status_mb(const char *field);

/* A NAME=VALUE pair list (for -i and --dim). */
typedef struct cli_kv {
  const char *key, *val;
} cli_kv;
/* Splits arg (an argv string, modified in place) at its first '='. */
bool cli_split_kv(const char *flag, char *arg, cli_kv *out);

/* Builds inputs for every graph input: from the files named in kv (-i NAME=FILE),
 * else generated (seeded random) from the declared shape with symbolic dims from
 * dims (--dim NAME=V, default 1), unless strict.  inputs[k] owning. */
int cli_make_inputs(const ir_graph *g, const cli_kv *files, int n_files, const cli_kv *dims,
                    int n_dims, bool strict, uint64_t seed, tensor *inputs);

/* Writes every output k of g to DIR/NAME.npy (util/file_name.h makes NAME
 * safe and distinct; a note on stderr for each output whose file name had to
 * be told apart), all of them or none (util/file_set.h), and lists them on
 * stdout.  Returns 0, or 1 after printing the error. */
int cli_write_outputs(const ir_graph *g, const tensor *outputs, const char *dir);

/* Generates graph input k with the given shape (replacing nothing: *out is new). */
int cli_make_input_shaped(const ir_graph *g, int k, int rank, const int64_t *dims, uint64_t seed,
                          tensor *out);

#endif
