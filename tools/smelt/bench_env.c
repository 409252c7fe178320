/* The environment every figure is printed with: versions, compiler, CPU, OS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "bench.h"
#include "kernels/isa.h"
#include "parallel/pool.h"
#include "util/build_info.h"

static void copy(char *dst, size_t n, const char *src) {
  snprintf(dst, n, "%s", src ? src : "");
}

static void chomp(char *s) {
  size_t n = strlen(s);
  while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ')) s[--n] = 0;
}

/* The compiler smelt's code generator would call: $CC, else cc.  The command
 * line comes from the user's own environment, as it would for the compiler. */
static void cc_identity(bench_env *e) {
  const char *cc = getenv("CC");
  copy(e->cc_cmd, sizeof e->cc_cmd, cc && *cc ? cc : "cc");
  copy(e->cc, sizeof e->cc, "unknown (could not run it)");
  char cmd[256];
  if (snprintf(cmd, sizeof cmd, "%s --version 2>/dev/null", e->cc_cmd) >= (int)sizeof cmd) return;
  FILE *f = popen(cmd, "r");
  if (!f) return;
  char line[256];
  if (fgets(line, sizeof line, f)) {
    chomp(line);
    if (*line) copy(e->cc, sizeof e->cc, line);
  }
  while (fgets(line, sizeof line, f)) {
  } /* drain, so the child does not block on a full pipe */
  pclose(f);
}

static void cpu_model(bench_env *e) {
  copy(e->cpu, sizeof e->cpu, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10)) continue;
    char *colon = strchr(line, ':');
    if (!colon) continue;
    colon++;
    while (*colon == ' ' || *colon == '\t') colon++;
    chomp(colon);
    copy(e->cpu, sizeof e->cpu, colon);
    break;
  }
  fclose(f);
}

void bench_env_collect(bench_env *e) {
  memset(e, 0, sizeof *e);
  copy(e->version, sizeof e->version, smelt_version());
  cc_identity(e);
  copy(e->cflags, sizeof e->cflags, build_info_cflags());
  snprintf(e->build, sizeof e->build, "%s%s%s", build_info_compiler(), *build_info_type() ? ", " : "",
           build_info_type());
  cpu_model(e);
  isa_choice ic = isa_choose();
  if (ic.active == ic.detected) snprintf(e->isa, sizeof e->isa, "%s", isa_name(ic.active));
  else snprintf(e->isa, sizeof e->isa, "%s (cpu has %s)", isa_name(ic.active), isa_name(ic.detected));
  struct utsname u;
  if (uname(&u) == 0) snprintf(e->os, sizeof e->os, "%s %s %s", u.sysname, u.release, u.machine);
  else copy(e->os, sizeof e->os, "unknown");
  e->cores = pool_machine_cores();
}

void bench_env_print(const bench_env *e, int threads) {
  printf("smelt %s (built by %s with '%s')\n", e->version, e->build, e->cflags);
  printf("cc: %s [%s]\n", e->cc, e->cc_cmd);
  printf("cpu: %s, %d cores; isa: %s; threads: %d\n", e->cpu, e->cores, e->isa, threads);
  printf("os: %s\n", e->os);
}

void bench_env_json(const bench_env *e, json_writer *w) {
  json_object_begin(w);
  json_kv_string(w, "smelt_version", e->version);
  json_kv_string(w, "cc", e->cc);
  json_kv_string(w, "cc_command", e->cc_cmd);
  json_kv_string(w, "cflags", e->cflags);
  json_kv_string(w, "built_with", e->build);
  json_kv_string(w, "cpu", e->cpu);
  json_kv_int(w, "cores", e->cores);
  json_kv_string(w, "isa", e->isa);
  json_kv_string(w, "os", e->os);
  json_object_end(w);
}
