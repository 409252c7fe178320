/* smelt run MODEL [-i NAME=FILE]... [-o DIR] [--threads N] [--timeout S] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "session/session.h"
#include "runtime/tensor_file.h"
#include "util/quote.h"

#define MAX_KV 256

static int usage(int code) {
  printf("usage: smelt run MODEL [-i NAME=FILE]... [-o DIR] [--threads N] [--dim NAME=V]...\n"
         "                 [--seed S] [--strict-inputs] [--mode M] [--fullgraph] [--dynamic]\n"
         "                 [--bucket NAME:AXIS=S1,S2,...] [--timeout S] [--max-memory B]\n"
         "                 [--precision P] [--device NAME]\n\n"
         "Runs the model once and writes each output to DIR/NAME.npy (default DIR: .): NAME made\n"
         "safe ([A-Za-z0-9._-], others become _) and distinct (_1, _2... with a note on stderr);\n"
         "all outputs are written or none.\n"
         "  -i NAME=FILE     input from a .npy or ONNX TensorProto .pb file\n"
         "  -o DIR           where outputs go (created if missing)\n"
         "  --threads N      worker threads (default: the machine's cores)\n"
         "  --dim NAME=V     value of a symbolic dimension for generated inputs (default 1)\n"
         "  --seed S         seed for generated inputs (default 0)\n"
         "  --strict-inputs  every input must be given with -i\n"
         CLI_TIMEOUT_HELP "\n"
         "Inputs not given are generated: floats uniform in [-1,1), integers uniform in\n"
         "[0,100) (or [0,V) when the input indexes an embedding of V rows), bools 0/1;\n"
         "input k draws from a PRNG seeded with (S, k), so runs are reproducible.\n\n%s",
         cli_mode_help());
  return code;
}

int cmd_run(int argc, char **argv) {
  const char *model = NULL, *outdir = ".", *v;
  cli_kv files[MAX_KV], dims[MAX_KV];
  int n_files = 0, n_dims = 0;
  int64_t threads = 0, seed = 0;
  bool strict = false, bad_mode = false, bad_timeout = false;
  double timeout_s = 0;
  cli_mode_opts mo;
  cli_mode_init(&mo);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(0);
    if (cli_mode_flag(argc, argv, &i, &mo, &bad_mode)) {
      if (bad_mode) return 2;
      continue;
    }
    if (cli_timeout_flag(argc, argv, &i, &timeout_s, &bad_timeout)) {
      if (bad_timeout) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "-i", &v)) {
      if (!v || n_files == MAX_KV || !cli_split_kv("-i", argv[i], &files[n_files++])) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--dim", &v)) {
      if (!v || n_dims == MAX_KV || !cli_split_kv("--dim", argv[i], &dims[n_dims++])) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "-o", &v)) {
      if (!(outdir = v)) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--threads", &v)) {
      if (!v || !cli_int("--threads", v, 0, 1024, &threads)) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--seed", &v)) {
      if (!v || !cli_int("--seed", v, 0, INT64_MAX, &seed)) return 2;
    } else if (!strcmp(argv[i], "--strict-inputs")) {
      strict = true;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "smelt run: unknown option '%s'\n", argv[i]);
      return usage(2);
    } else if (!model) {
      model = argv[i];
    } else {
      fprintf(stderr, "smelt run: more than one model given ('%s', '%s')\n", model, argv[i]);
      return 2;
    }
  }
  if (!model) return usage(2);

  smelt_model *m = NULL;
  smelt_session *s = NULL;
  if (smelt_model_load(model, &m)) return cli_fail(NULL);
  const ir_graph *g = m->onnx->graph;
  smelt_session_options o = mo.opts;
  o.threads = (int)threads;
  int rc = 1;
  tensor *inputs = calloc((size_t)g->n_inputs + 1, sizeof *inputs);
  tensor **ptrs = calloc((size_t)g->n_inputs + 1, sizeof *ptrs);
  tensor *outputs = calloc((size_t)g->n_outputs + 1, sizeof *outputs);
  if (!inputs || !ptrs || !outputs) {
    fprintf(stderr, "smelt: out of memory\n");
    goto done;
  }
  if (smelt_session_create(m, &o, &s)) {
    rc = cli_fail(NULL);
    goto done;
  }
  if (cli_make_inputs(g, files, n_files, dims, n_dims, strict, (uint64_t)seed, inputs)) goto done;
  for (int k = 0; k < g->n_inputs; k++) ptrs[k] = &inputs[k];
  double t0 = cli_now_s() * 1e3;
  if (cli_session_run(s, ptrs, outputs, NULL, timeout_s)) {
    rc = cli_fail(NULL);
    goto done;
  }
  double t1 = cli_now_s() * 1e3;
  if (mkdir(outdir, 0777) && errno != EEXIST) {
    fprintf(stderr, "smelt: cannot create output folder %s: %s\n", q_path(outdir), strerror(errno));
    goto done;
  }
  if (cli_write_outputs(g, outputs, outdir)) goto done;
  printf("ran in %.3f ms (%d threads, %s)\n", t1 - t0, pool_threads(s->pool), smelt_mode_name(o.mode));
  rc = 0;
done:
  for (int k = 0; inputs && k < g->n_inputs; k++) tensor_release(&inputs[k]);
  for (int k = 0; outputs && k < g->n_outputs; k++) tensor_release(&outputs[k]);
  free(inputs);
  free(ptrs);
  free(outputs);
  smelt_session_free(s);
  smelt_model_free(m);
  return rc;
}
