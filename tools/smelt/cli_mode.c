/* The session options shared by run, test and compile: --mode, --fullgraph,
 * --dynamic, --bucket NAME:AXIS=S1,S2,... (repeatable), --max-memory B. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

bool cli_mode_flag(int argc, char **argv, int *i, cli_mode_opts *m, bool *bad) {
  const char *v;
  *bad = false;
  if (cli_flag_arg(argc, argv, i, "--mode", &v)) {
    if (!v || smelt_mode_parse(v, &m->opts.mode)) {
      if (v) fprintf(stderr, "smelt: %s\n", smelt_last_error());
      *bad = true;
    }
    return true;
  }
  if (cli_flag_arg(argc, argv, i, "--max-memory", &v)) {
    *bad = !v || !cli_bytes("--max-memory", v, &m->opts.max_memory);
    return true;
  }
  if (!strcmp(argv[*i], "--fullgraph")) {
    m->opts.fullgraph = 1;
    return true;
  }
  if (!strcmp(argv[*i], "--dynamic")) {
    m->opts.dynamic = 1;
    return true;
  }
  if (cli_flag_arg(argc, argv, i, "--bucket", &v)) {
    size_t used = strlen(m->buckets), n = v ? strlen(v) : 0;
    if (!v || !n || used + n + 2 > sizeof m->buckets) {
      if (v) fprintf(stderr, "smelt: --bucket: too long\n");
      *bad = true;
      return true;
    }
    snprintf(m->buckets + used, sizeof m->buckets - used, "%s%s", used ? ";" : "", v);
    m->opts.buckets = m->buckets;
    return true;
  }
  return false;
}

smelt_session_options cli_session_options(void) {
  smelt_session_options o = smelt_session_options_default();
  o.log = smelt_log_stderr; /* the library's warnings and progress, as "smelt: warning: ..." */
  return o;
}

void cli_mode_init(cli_mode_opts *m) {
  memset(m, 0, sizeof *m);
  m->opts = cli_session_options();
}

const char *cli_mode_help(void) {
  return "  --mode M         eager (default), default, reduce-overhead or max-autotune\n"
         "  --fullgraph      compiled modes: a graph break is an error\n"
         "  --dynamic        compiled modes: kernels generic over sizes (new shapes: no C compile)\n"
         "  --bucket NAME:AXIS=S1,S2,...  pad input NAME's AXIS up to the next size (repeatable)\n"
         CLI_MAX_MEMORY_HELP;
}
