/* smelt compile MODEL [--mode M] [--shape NAME=D0xD1...]... [--explain] —
 * compiles ahead of time (filling the cache) and optionally explains what the
 * compiler did. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "session/session_compile.h"
#include "session/session.h"

#define MAX_KV 256

static int usage(int code) {
  printf("usage: smelt compile MODEL [--mode M] [--shape NAME=D0xD1x...]... [--dim NAME=V]...\n"
         "                     [--explain] [--threads N] [--fullgraph] [--dynamic]\n"
         "                     [--bucket NAME:AXIS=S1,S2,...] [--max-memory B]\n"
         "                     [--precision P] [--device NAME]\n\n"
         "Compiles the model for the given input shapes (declared shapes, symbolic dims from\n"
         "--dim, default 1) and stores the result in the compile cache, so that a later run\n"
         "with the same shapes and options starts at once.\n"
         "  --mode M         default (the default here), reduce-overhead or max-autotune\n"
         "  --shape NAME=S   the shape of input NAME, dims joined by 'x' (e.g. 1x3x224x224)\n"
         "  --explain        print graph breaks, every fusion, the kernels generated, the\n"
         "                   arena size and the time each stage took\n"
         "  --fullgraph, --dynamic, --bucket, --max-memory, --precision, --device: as for smelt run\n");
  return code;
}

static bool parse_shape(const char *s, int *rank, int64_t *dims) {
  *rank = 0;
  if (!*s || !strcmp(s, "scalar")) return !strcmp(s, "scalar");
  const char *p = s;
  while (*p) {
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p || v < 0 || *rank == SMELT_MAX_RANK) return false;
    dims[(*rank)++] = v;
    if (*end == 'x') end++;
    else if (*end) return false;
    p = end;
  }
  return true;
}

/* --shape NAME=S overrides the generated input NAME. */
static int apply_shapes(const ir_graph *g, const cli_kv *shapes, int n, tensor *inputs) {
  for (int i = 0; i < n; i++) {
    int k = -1, rank;
    int64_t dims[SMELT_MAX_RANK];
    for (int j = 0; j < g->n_inputs; j++)
      if (!strcmp(g->values[g->inputs[j]].name, shapes[i].key)) k = j;
    if (k < 0) {
      fprintf(stderr, "smelt compile: the model has no input named '%s'\n", shapes[i].key);
      return 2;
    }
    if (!parse_shape(shapes[i].val, &rank, dims)) {
      fprintf(stderr, "smelt compile: --shape %s=%s: expected dims joined by 'x', like 1x3x224x224\n",
              shapes[i].key, shapes[i].val);
      return 2;
    }
    tensor t;
    if (cli_make_input_shaped(g, k, rank, dims, 0, &t)) return 1;
    tensor_release(&inputs[k]);
    inputs[k] = t;
  }
  return 0;
}

static void print_report(const smelt_session *s, const compile_report *r) {
  if (r->explain.s) fputs(r->explain.s, stdout);
  printf("time: %.1f ms total (front %.1f, passes %.1f, fusion %.1f, plan %.1f, emit %.1f, cc %.1f, "
         "load %.1f, tune %.1f)\n",
         r->seconds * 1e3, r->t_front * 1e3, r->t_passes * 1e3, r->t_fuse * 1e3, r->t_plan * 1e3,
         r->t_emit * 1e3, r->t_cc * 1e3, r->t_load * 1e3, r->t_tune * 1e3);
  const session_compiler *sc = s->sc;
  if (sc->cache.enabled) {
    uint64_t bytes;
    int64_t entries;
    cache_usage(&sc->cache, &bytes, &entries);
    char cap[48] = "no cap";
    if (sc->cache.max_bytes) snprintf(cap, sizeof cap, "cap %" PRIu64 " MB", sc->cache.max_bytes >> 20);
    printf("cache: %s (%s: %" PRId64 " entries, %.2f MB, %s)\n", r->cache_hit ? "hit" : "miss, entry written",
           sc->cache.dir, entries, (double)bytes / (1 << 20), cap);
  } else {
    printf("cache: off (%s)\n", sc->cache.why_off);
  }
  /* the model file's image (session/model_image.c) */
  const onnx_model *o = s->model->onnx;
  double copied = 0;
  for (int i = 0; i < o->n_copies; i++) copied += (double)o->copies[i].nbytes;
  if (o->image)
    printf("model image: %d misaligned weights viewed in the cache's image of this file, initializer hashes "
           "taken from it\n", o->n_imaged);
  else if (s->model->on_free)
    printf("model image: none yet; %d misaligned weights copied (%.2f MB); one is being written for the next load\n",
           o->n_copies > 0 ? o->n_copies : 0, copied / (1 << 20));
  else
    printf("model image: not kept (cache off, SMELT_CACHE_WEIGHTS=off, or a model not loaded from a file)\n");
}

int cmd_compile(int argc, char **argv) {
  const char *model = NULL, *v;
  cli_kv shapes[MAX_KV], dims[MAX_KV];
  int n_shapes = 0, n_dims = 0;
  int64_t threads = 0;
  bool explain = false, bad = false;
  cli_mode_opts mo;
  cli_mode_init(&mo);
  mo.opts.mode = SMELT_MODE_DEFAULT;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(0);
    if (cli_mode_flag(argc, argv, &i, &mo, &bad)) {
      if (bad) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--shape", &v)) {
      if (!v || n_shapes == MAX_KV || !cli_split_kv("--shape", argv[i], &shapes[n_shapes++])) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--dim", &v)) {
      if (!v || n_dims == MAX_KV || !cli_split_kv("--dim", argv[i], &dims[n_dims++])) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--threads", &v)) {
      if (!v || !cli_int("--threads", v, 0, 1024, &threads)) return 2;
    } else if (!strcmp(argv[i], "--explain")) {
      explain = true;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "smelt compile: unknown option '%s'\n", argv[i]);
      return usage(2);
    } else if (!model) {
      model = argv[i];
    } else {
      fprintf(stderr, "smelt compile: more than one model given ('%s', '%s')\n", model, argv[i]);
      return 2;
    }
  }
  if (!model) return usage(2);
  if (mo.opts.mode == SMELT_MODE_EAGER) {
    fprintf(stderr, "smelt compile: eager mode compiles nothing; use --mode default, reduce-overhead or max-autotune\n");
    return 2;
  }
  smelt_model *m = NULL;
  smelt_session *s = NULL;
  if (smelt_model_load(model, &m)) return cli_fail(NULL);
  const ir_graph *g = m->onnx->graph;
  mo.opts.threads = (int)threads;
  int rc = 1;
  tensor *inputs = calloc((size_t)g->n_inputs + 1, sizeof *inputs);
  tensor **ptrs = calloc((size_t)g->n_inputs + 1, sizeof *ptrs);
  compile_report rep;
  memset(&rep, 0, sizeof rep);
  if (!inputs || !ptrs) {
    fprintf(stderr, "smelt: out of memory\n");
    goto done;
  }
  if (session_create(m, &mo.opts, false, &s)) { /* compiled below, with its report */
    rc = cli_fail(NULL);
    goto done;
  }
  if (cli_make_inputs(g, NULL, 0, dims, n_dims, false, 0, inputs)) goto done;
  if ((rc = apply_shapes(g, shapes, n_shapes, inputs))) goto done;
  rc = 1;
  for (int k = 0; k < g->n_inputs; k++) ptrs[k] = &inputs[k];
  if (session_compile(s, ptrs, &rep)) {
    rc = cli_fail("compile");
    goto done;
  }
  if (explain) print_report(s, &rep);
  else printf("compiled %s (%s): %d kernels, %d graph breaks, arena %.2f MB, %.2f s%s\n", model,
              smelt_mode_name(mo.opts.mode), rep.kernels, rep.graph_breaks, (double)rep.arena_bytes / 1e6,
              rep.seconds, rep.cache_hit ? " (from the cache)" : "");
  rc = 0;
done:
  compile_report_free(&rep);
  for (int k = 0; inputs && k < g->n_inputs; k++) tensor_release(&inputs[k]);
  free(inputs);
  free(ptrs);
  smelt_session_free(s);
  smelt_model_free(m);
  return rc;
}
