/* smelt generate MODEL --prompt-ids 1,2,3 | --prompt TEXT [--tokenizer FILE]
 *   [--max-new-tokens N] [--temperature T --top-k K --top-p P --seed S]
 *   [--batch N] [--eos ID] [--warmup N] [--json] [--mode M] [--threads N]
 * Prefill, then decode steps with the KV cache fed back (src/generate/);
 * tokens are streamed to stdout as they are produced. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "generate/gen_static.h"
#include "runtime/profile.h"
#include "session/session.h"
#include "util/json.h"
#include "util/stats.h"

#if defined(__has_include)
#if __has_include("tokenizer/tokenizer.h")
#include "tokenizer/tokenizer.h"
#define GEN_HAVE_TOKENIZER 1
#endif
#endif

static int usage(int code) {
  printf("usage: smelt generate MODEL (--prompt-ids 1,2,3 | --prompt TEXT [--tokenizer FILE])\n"
         "                      [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P]\n"
         "                      [--seed S] [--eos ID] [--batch N] [--warmup N] [--json] [--threads N]\n"
         "                      [--mode M] [--no-static-cache] [--profile]\n\n"
         "Generates text with a decoder-only language model exported with its KV cache\n"
         "(input_ids, optional attention_mask and position_ids, past.N.key/value or\n"
         "past_key_values.N.key/value in, logits and present.N.key/value out): one prefill\n"
         "run over the prompt, then one decode step per new token.  The KV cache is static:\n"
         "allocated once for prompt + --max-new-tokens positions, each step's keys and values\n"
         "written in place and read there by the fused attention, decode run by one plan made\n"
         "once (no per-step allocation, copy or re-plan, in every mode); a model whose\n"
         "past -> Concat -> present does not match runs as written (a log line says why).  Tokens are written to stdout as they are produced: ids separated\n"
         "by spaces (one line per sequence at the end when --batch > 1), or text when a\n"
         "tokenizer is used.\n"
         "  --prompt-ids L     the prompt as comma-separated token ids\n"
         "  --prompt TEXT      the prompt as text, encoded with tokenizer.json (beside MODEL,\n"
         "                     or --tokenizer FILE)\n"
         "  --max-new-tokens N tokens to generate per sequence (default 32)\n"
         "  --temperature T    0 (default): greedy; > 0: sample at this temperature\n"
         "  --top-k K          sampling: only the K most likely tokens (default 0: all)\n"
         "  --top-p P          sampling: the fewest tokens whose probability reaches P (default 1)\n"
         "  --seed S           sampling: seed (default 0): the same seed gives the same tokens\n"
         "  --eos ID           stop a sequence at this token (default: the tokenizer's EOS, or\n"
         "                     eos_token_id from config.json beside MODEL; -1: never)\n"
         "  --batch N          generate N sequences of the same prompt at once (default 1)\n"
         "  --warmup N         run the prompt N times first (untimed, then dropped): one-time work\n"
         "                     (weight packing, compiling) out of the time to first token\n"
         "  --json             print a JSON report instead of streaming: the tokens, time to\n"
         "                     first token, prefill and decode tokens/s, ms/token p50/p99,\n"
         "                     KV-cache bytes, peak RSS, static_cache, and the resident set\n"
         "                     (rss_at_token) after tokens 10, 100, 500 and 1000\n"
         "  --profile          time every node of the decode steps (static cache): a table of\n"
         "                     op, calls and ms per step on stderr (with --json: decode_step_ops)\n"
         "  --no-static-cache  feed each present output back as the next past (the model as\n"
         "                     written: a copy of the cache per step; compiled modes re-plan\n"
         "                     each new length)\n"
         "  --threads N        worker threads (default: the machine's cores)\n"
         "Compiled modes compile the prompt's plan (--dynamic kernels); with the static cache\n"
         "decode steps replay the generator's own plan.  Without it a new cache length\n"
         "re-plans, and past 64 lengths the session runs eagerly.\n\n%s",
         cli_mode_help());
  return code;
}

/* "1,2,3" -> ids (malloc'd). */
static bool parse_ids(const char *s, int64_t **ids, size_t *n) {
  size_t cap = 16;
  *n = 0;
  *ids = malloc(cap * sizeof **ids);
  if (!*ids) return false;
  const char *p = s;
  while (*p) {
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (end == p || errno || v < 0 || (*end && *end != ',')) {
      fprintf(stderr, "smelt generate: --prompt-ids: '%s' is not a comma-separated list of token ids >= 0\n", s);
      free(*ids);
      *ids = NULL;
      return false;
    }
    if (*n == cap) {
      int64_t *g = realloc(*ids, 2 * cap * sizeof *g);
      if (!g) {
        free(*ids);
        *ids = NULL;
        return false;
      }
      *ids = g;
      cap *= 2;
    }
    (*ids)[(*n)++] = v;
    p = *end ? end + 1 : end;
  }
  if (!*n) {
    fprintf(stderr, "smelt generate: --prompt-ids is empty\n");
    free(*ids);
    *ids = NULL;
    return false;
  }
  return true;
}

/* eos_token_id from config.json (or generation_config.json) beside the model: -1 if none. */
static int64_t eos_from_config(const char *model) {
  const char *files[] = {"generation_config.json", "config.json"};
  const char *slash = strrchr(model, '/');
  int dir_len = slash ? (int)(slash - model) : 1;
  const char *dir = slash ? model : ".";
  for (int k = 0; k < 2; k++) {
    char path[4096];
    if (!cli_path(path, sizeof path, "%.*s/%s", dir_len, dir, files[k])) continue;
    FILE *f = fopen(path, "r");
    if (!f) continue;
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strstr(buf, "\"eos_token_id\"");
    if (!p) continue;
    p = strchr(p, ':');
    if (!p) continue;
    p++;
    while (*p == ' ' || *p == '\n' || *p == '[') p++;
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end != p && v >= 0) return v;
  }
  return -1;
}

typedef struct gen_args {
  const char *model, *prompt_ids, *prompt, *tokenizer;
  int64_t max_new, top_k, seed, batch, threads, eos, warmup;
  double temperature, top_p;
  bool json, eos_given, no_static, profile;
  cli_mode_opts mo;
} gen_args;

static int parse_args(int argc, char **argv, gen_args *a) {
  const char *v;
  bool bad = false;
  memset(a, 0, sizeof *a);
  a->max_new = 32;
  a->batch = 1;
  a->top_p = 1;
  cli_mode_init(&a->mo);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(0) - 1;
    if (cli_mode_flag(argc, argv, &i, &a->mo, &bad)) {
      if (bad) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--prompt-ids", &v)) {
      if (!(a->prompt_ids = v)) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--prompt", &v)) {
      if (!(a->prompt = v)) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--tokenizer", &v)) {
      if (!(a->tokenizer = v)) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--max-new-tokens", &v)) {
      if (!v || !cli_int("--max-new-tokens", v, 1, 1 << 24, &a->max_new)) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--top-k", &v)) {
      if (!v || !cli_int("--top-k", v, 0, 1 << 30, &a->top_k)) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--seed", &v)) {
      if (!v || !cli_int("--seed", v, 0, INT64_MAX, &a->seed)) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--batch", &v)) {
      if (!v || !cli_int("--batch", v, 1, 65536, &a->batch)) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--threads", &v)) {
      if (!v || !cli_int("--threads", v, 0, 1024, &a->threads)) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--warmup", &v)) {
      if (!v || !cli_int("--warmup", v, 0, 1000, &a->warmup)) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--eos", &v)) {
      if (!v || !cli_int("--eos", v, -1, INT64_MAX, &a->eos)) return 2;
      a->eos_given = true;
    } else if (cli_flag_arg(argc, argv, &i, "--temperature", &v)) {
      if (!v || !cli_double("--temperature", v, &a->temperature)) return 2;
      if (!(a->temperature >= 0)) {
        fprintf(stderr, "smelt generate: --temperature must be >= 0\n");
        return 2;
      }
    } else if (cli_flag_arg(argc, argv, &i, "--top-p", &v)) {
      if (!v || !cli_double("--top-p", v, &a->top_p)) return 2;
      if (!(a->top_p > 0 && a->top_p <= 1)) {
        fprintf(stderr, "smelt generate: --top-p must be in (0, 1]\n");
        return 2;
      }
    } else if (!strcmp(argv[i], "--json")) {
      a->json = true;
    } else if (!strcmp(argv[i], "--no-static-cache")) {
      a->no_static = true;
    } else if (!strcmp(argv[i], "--profile")) {
      a->profile = true;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "smelt generate: unknown option '%s'\n", argv[i]);
      return usage(2);
    } else if (!a->model) {
      a->model = argv[i];
    } else {
      fprintf(stderr, "smelt generate: more than one model given ('%s', '%s')\n", a->model, argv[i]);
      return 2;
    }
  }
  if (!a->model) {
    fprintf(stderr, "smelt generate: no model given\n");
    return usage(2);
  }
  if (!a->prompt_ids == !a->prompt) {
    fprintf(stderr, "smelt generate: give the prompt with --prompt-ids or with --prompt (one of them)\n");
    return 2;
  }
  return 0;
}

typedef struct gen_text {
#ifdef GEN_HAVE_TOKENIZER
  tokenizer *tok;
  tokenizer_stream *stream;
#endif
  int unused;
} gen_text;

static void text_free(gen_text *t) {
#ifdef GEN_HAVE_TOKENIZER
  tokenizer_stream_free(t->stream);
  tokenizer_free(t->tok);
#endif
  (void)t;
}

/* Encodes --prompt with the tokenizer (and opens its stream decoder); fills *eos when not given. */
static int text_prompt(gen_args *a, gen_text *t, int64_t **ids, size_t *n) {
#ifdef GEN_HAVE_TOKENIZER
  char path[4096];
  const char *file = a->tokenizer;
  if (!file) {
    const char *slash = strrchr(a->model, '/');
    if (!cli_path(path, sizeof path, "%.*s/tokenizer.json", slash ? (int)(slash - a->model) : 1,
                  slash ? a->model : "."))
      return 2;
    file = path;
  }
  if (tokenizer_load(file, &t->tok)) return cli_fail("generate: --prompt");
  int32_t *ids32 = NULL;
  if (tokenizer_encode(t->tok, a->prompt, strlen(a->prompt), &ids32, n)) return cli_fail("generate: --prompt");
  *ids = malloc((*n ? *n : 1) * sizeof **ids);
  if (!*ids) {
    free(ids32);
    fprintf(stderr, "smelt generate: out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < *n; i++) (*ids)[i] = ids32[i];
  free(ids32);
  if (!*n) {
    fprintf(stderr, "smelt generate: --prompt encodes to no tokens\n");
    return 2;
  }
  if (!a->eos_given && tokenizer_eos_id(t->tok) >= 0) {
    a->eos = tokenizer_eos_id(t->tok);
    a->eos_given = true;
  }
  if (tokenizer_stream_new(t->tok, 0, &t->stream)) return cli_fail("generate: tokenizer");
  return 0;
#else
  (void)a, (void)t, (void)ids, (void)n;
  fprintf(stderr, "smelt generate: --prompt needs the tokenizer, which this build of smelt does not have; "
                  "give the prompt as token ids with --prompt-ids\n");
  return 2;
#endif
}

/* Streams token id (sequence 0 of a batch of 1): as text with a tokenizer, else the id. */
static void emit_token(gen_text *t, int64_t id, bool first) {
#ifdef GEN_HAVE_TOKENIZER
  if (t->stream) {
    const char *s;
    size_t len;
    if (!tokenizer_stream_step(t->stream, (int32_t)id, &s, &len)) fwrite(s, 1, len, stdout);
    fflush(stdout);
    return;
  }
#endif
  (void)t;
  printf("%s%lld", first ? "" : " ", (long long)id);
  fflush(stdout);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int cmd_generate(int argc, char **argv) {
  gen_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc) return rc < 0 ? 0 : rc;
  int64_t *prompt = NULL;
  size_t n_prompt = 0;
  gen_text text;
  memset(&text, 0, sizeof text);
  if (a.prompt_ids && !parse_ids(a.prompt_ids, &prompt, &n_prompt)) return 2;
  if (a.prompt && (rc = text_prompt(&a, &text, &prompt, &n_prompt))) {
    free(prompt);
    text_free(&text);
    return rc;
  }
  if (!a.eos_given) a.eos = eos_from_config(a.model);

  smelt_model *m = NULL;
  smelt_session *s = NULL;
  smelt_generator *g = NULL;
  int64_t *batch_ids = NULL, *tokens = NULL, **out_tok = NULL;
  double *step_ms = NULL;
  profiler *prof = NULL;
  profile_summary psum;
  memset(&psum, 0, sizeof psum);
  bool have_psum = false;
  smelt_session_options so = a.mo.opts;
  so.threads = (int)a.threads;
  if (so.mode != SMELT_MODE_EAGER) {
    so.dynamic = 1; /* each cache length is a new shape: re-plan, no C compile */
    if (so.recompile_limit <= 0) so.recompile_limit = 1 << 20;
  }
  rc = 1;
  if (smelt_model_load(a.model, &m)) {
    cli_fail("generate: loading the model");
    goto done;
  }
  if (smelt_session_create(m, &so, &s)) {
    cli_fail("generate: creating the session");
    goto done;
  }
  smelt_generator_options go = smelt_generator_options_default();
  go.batch = (int)a.batch;
  go.max_length = (int64_t)n_prompt + a.max_new;
  go.temperature = (float)a.temperature;
  go.top_k = (int)a.top_k;
  go.top_p = (float)a.top_p;
  go.seed = (uint64_t)a.seed;
  go.eos_token_id = a.eos;
  go.static_cache = !a.no_static;
  if (smelt_generator_create(s, &go, &g)) {
    cli_fail(NULL);
    goto done;
  }
  size_t B = (size_t)a.batch;
  batch_ids = malloc(B * n_prompt * sizeof *batch_ids);
  tokens = malloc(B * sizeof *tokens);
  out_tok = calloc(B, sizeof *out_tok);
  step_ms = malloc((size_t)a.max_new * sizeof *step_ms);
  bool oom = !batch_ids || !tokens || !out_tok || !step_ms;
  for (size_t b = 0; b < B && !oom; b++) oom = !(out_tok[b] = malloc((size_t)a.max_new * sizeof **out_tok));
  if (oom) {
    fprintf(stderr, "smelt generate: out of memory\n");
    goto done;
  }
  for (size_t b = 0; b < B; b++) memcpy(batch_ids + b * n_prompt, prompt, n_prompt * sizeof *prompt);

  for (int64_t w = 0; w < a.warmup; w++) {
    /* a prefill and one decode step (when there is room for one) */
    if (smelt_generator_prefill(g, batch_ids, n_prompt) || smelt_generator_next(g, tokens) ||
        (a.max_new > 1 && smelt_generator_next(g, tokens))) {
      cli_fail("--warmup");
      goto done;
    }
  }
  if (a.profile && !prof) {
    if (profiler_create(&prof)) {
      cli_fail("--profile");
      goto done;
    }
    profiler_attach_pool(prof, s->pool);
  }
  double t0 = cli_now_s() * 1e3;
  if (smelt_generator_prefill(g, batch_ids, n_prompt)) {
    cli_fail(NULL);
    goto done;
  }
  double t_prefill = cli_now_s() * 1e3;
  int64_t produced = 0;
  bool stream = !a.json;
  double ttft = 0, kv_bytes = 0;
  static const int64_t rss_marks[4] = {10, 100, 500, 1000};
  double rss_mb[4] = {-1, -1, -1, -1};
  while (produced < a.max_new && !(produced && smelt_generator_done(g))) {
    bool profiled = prof && produced > 0; /* decode steps: the first call only samples */
    if (profiled) {
      gen_generator_set_hook(g, profiler_hook(prof));
      profiler_run_begin(prof);
    }
    double ts = cli_now_s() * 1e3;
    smelt_status next_st = smelt_generator_next(g, tokens);
    if (profiled) {
      profiler_run_end(prof);
      gen_generator_set_hook(g, NULL);
    }
    if (next_st) {
      if (stream) printf("\n");
      cli_fail(NULL);
      goto done;
    }
    double te = cli_now_s() * 1e3;
    step_ms[produced] = te - ts;
    if (!produced) ttft = te - t0;
    for (size_t b = 0; b < B; b++) out_tok[b][produced] = tokens[b];
    if (stream && B == 1) emit_token(&text, tokens[0], produced == 0);
    if (stream && B > 1) {
      for (size_t b = 0; b < B; b++) printf("%s%lld", b ? " " : "", (long long)tokens[b]);
      printf("\n");
      fflush(stdout);
    }
    produced++;
    for (int k = 0; k < 4; k++)
      if (produced == rss_marks[k]) rss_mb[k] = cli_proc_status_mb("VmRSS:");
  }
  double t_end = cli_now_s() * 1e3;
  kv_bytes = (double)smelt_generator_kv_bytes(g);
  if (stream && B == 1) printf("\n");
  if (prof && !profiler_summarize(prof, false, &psum)) {
    have_psum = true;
    if (!smelt_generator_static_cache(g))
      fprintf(stderr, "smelt generate: --profile: no static KV cache, the decode steps were not observed\n");
    else if (!a.json) {
      fprintf(stderr, "decode step profile (%d steps, static KV cache): op, calls/step, ms/step\n", psum.runs);
      for (int r = 0; r < psum.n_rows; r++)
        fprintf(stderr, "  %-24s %8.1f %10.4f\n", psum.rows[r].label, (double)psum.rows[r].calls / psum.runs,
                (double)psum.rows[r].total_ns / 1e6 / psum.runs);
    }
  }
  if (a.json) {
    /* step 0 is prefill + the first sample; decode steps are the rest */
    int64_t nd = produced - 1;
    double decode_ms = 0;
    for (int64_t i = 1; i < produced; i++) decode_ms += step_ms[i];
    double p50 = 0, p99 = 0;
    if (nd > 0) {
      qsort(step_ms + 1, (size_t)nd, sizeof *step_ms, cmp_double);
      p50 = stats_percentile_sorted(step_ms + 1, (size_t)nd, 50);
      p99 = stats_percentile_sorted(step_ms + 1, (size_t)nd, 99);
    }
    smelt_session_stats st;
    smelt_session_get_stats(s, &st);
    json_writer w;
    json_init(&w, true);
    json_object_begin(&w);
    json_kv_string(&w, "model", a.model);
    json_kv_string(&w, "mode", smelt_mode_name(so.mode));
    json_kv_int(&w, "threads", a.threads);
    json_kv_int(&w, "batch", a.batch);
    json_kv_int(&w, "prompt_tokens", (int64_t)n_prompt);
    json_kv_int(&w, "warmup", a.warmup);
    json_kv_int(&w, "new_tokens", produced);
    json_key(&w, "tokens");
    json_array_begin(&w);
    for (size_t b = 0; b < B; b++) {
      json_array_begin(&w);
      for (int64_t i = 0; i < produced; i++) json_int(&w, out_tok[b][i]);
      json_array_end(&w);
    }
    json_array_end(&w);
    json_kv_number(&w, "time_to_first_token_ms", ttft);
    json_kv_number(&w, "prefill_ms", t_prefill - t0);
    json_kv_number(&w, "prefill_tokens_per_s", (double)(B * n_prompt) / ((t_prefill - t0) / 1e3));
    json_kv_number(&w, "decode_tokens_per_s", nd > 0 ? (double)B * (double)nd / (decode_ms / 1e3) : 0);
    json_kv_number(&w, "ms_per_token_p50", p50);
    json_kv_number(&w, "ms_per_token_p99", p99);
    json_kv_number(&w, "total_ms", t_end - t0);
    json_kv_int(&w, "kv_cache_bytes", (int64_t)kv_bytes);
    double peak_mb = cli_proc_status_mb("VmHWM:");
    json_kv_int(&w, "peak_rss_bytes", peak_mb < 0 ? -1 : (int64_t)(peak_mb * 1048576.0));
    json_kv_int(&w, "compiles", st.compiles);
    json_kv_bool(&w, "eager_fallback", st.eager_fallback != 0);
    json_kv_bool(&w, "static_cache", smelt_generator_static_cache(g) != 0);
    if (have_psum && psum.runs > 0) { /* per decode step: what ran (no Concat or copy of the cache) */
      json_key(&w, "decode_step_ops");
      json_array_begin(&w);
      for (int r = 0; r < psum.n_rows; r++) {
        json_object_begin(&w);
        json_kv_string(&w, "op", psum.rows[r].label);
        json_kv_number(&w, "calls_per_step", (double)psum.rows[r].calls / psum.runs);
        json_kv_number(&w, "ms_per_step", (double)psum.rows[r].total_ns / 1e6 / psum.runs);
        json_object_end(&w);
      }
      json_array_end(&w);
    }
    json_key(&w, "rss_at_token"); /* resident bytes after token N (flat: nothing allocated per step) */
    json_object_begin(&w);
    for (int k = 0; k < 4; k++) {
      char key[24];
      snprintf(key, sizeof key, "%lld", (long long)rss_marks[k]);
      if (rss_mb[k] >= 0) json_kv_int(&w, key, (int64_t)(rss_mb[k] * 1048576.0));
    }
    json_object_end(&w);
    json_object_end(&w);
    const char *txt;
    size_t len;
    if (json_finish(&w, &txt, &len)) {
      json_free(&w);
      fprintf(stderr, "smelt generate: writing the JSON report failed\n");
      goto done;
    }
    printf("%s\n", txt);
    json_free(&w);
  }
  rc = 0;
done:
  if (have_psum) profile_summary_free(&psum);
  profiler_free(prof);
  for (size_t b = 0; out_tok && b < (size_t)a.batch; b++) free(out_tok[b]);
  free(out_tok);
  free(step_ms);
  free(tokens);
  free(batch_ids);
  free(prompt);
  smelt_generator_free(g);
  smelt_session_free(s);
  smelt_model_free(m);
  text_free(&text);
  return rc;
}
