/* Running the C compiler (see cc.h).  Processes are started with
 * posix_spawnp (safe in a threaded process) and waited for by pid, so other
 * children of the process are never reaped here.
 *
 * Complexity: one compiler process per translation unit, at most `jobs` at
 * once; kernels.c makes at most `jobs` units per variant, so the process
 * count does not grow with the graph, only the units' sizes do. */
#include "codegen/cc.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/isa.h"
#include "util/err.h"
#include "util/quote.h"

extern char **environ;

/* -fopenmp-simd honours the `#pragma omp simd` the emitter puts on its
 * element loops (no OpenMP runtime): without it gcc 13 leaves a loop whose
 * math functions hold selects (erf, tanh, log: GELU, Tanh, Log) scalar,
 * "control flow in loop" -- GELU ran 15x slower than under gcc 12 or clang,
 * measured on an Intel Xeon with gcc 13.3. */
#define BASE_FLAGS                                                                          \
  "-std=c11 -O3 -march=native -fPIC -ffp-contract=fast -fno-math-errno -fno-trapping-math " \
  "-fopenmp-simd -fvisibility=hidden -w"

/* Generated code follows the ISA the library's own kernels use (SMELT_ISA,
 * clamped to what the CPU reports): below AVX-512 the compiler is told not to
 * use it, below AVX2 not to use AVX at all.  -march=native alone would use
 * every extension of the CPU the compiler runs on, which is not what a
 * process under valgrind (no AVX-512: SIGILL) or asked for SMELT_ISA=avx2 can
 * run.  The flags are part of the kernel cache key. */
static const char *base_flags(void) {
#if defined(__x86_64__) || defined(__i386__)
  isa_level l = isa_active();
  if (l == ISA_SCALAR) return BASE_FLAGS " -mno-avx";
  if (l == ISA_AVX2) return BASE_FLAGS " -mno-avx512f";
#endif
  return BASE_FLAGS;
}

static smelt_status split_cc(cc_toolchain *tc) {
  const char *env = getenv("CC");
  if (!env || !*env) env = "cc";
  if (strlen(env) >= sizeof tc->cmd)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "CC is longer than %zu characters", sizeof tc->cmd - 1);
  snprintf(tc->cmd, sizeof tc->cmd, "%s", env);
  snprintf(tc->words, sizeof tc->words, "%s", env);
  tc->argc = 0;
  char *save = NULL;
  for (char *w = strtok_r(tc->words, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
    if (tc->argc == CC_MAX_ARGS - 1) return err_set(SMELT_ERR_INVALID_ARGUMENT, "CC has more than %d words", CC_MAX_ARGS - 1);
    tc->argv[tc->argc++] = w;
  }
  if (!tc->argc) return err_set(SMELT_ERR_INVALID_ARGUMENT, "CC is blank");
  tc->flags = base_flags();
  return SMELT_OK;
}

/* Starts argv with stdout and stderr going to out_fd (or the file at
 * out_path); stdin is /dev/null. */
static smelt_status spawn(const cc_toolchain *tc, char **argv, int out_fd, const char *out_path, pid_t *pid) {
  posix_spawn_file_actions_t fa;
  if (posix_spawn_file_actions_init(&fa)) return err_set(SMELT_ERR_NOMEM, "cannot start the C compiler");
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (out_path) posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  else posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  int rc = posix_spawnp(pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc)
    return err_set(SMELT_ERR_UNSUPPORTED,
                   "no C compiler: CC=%s cannot be run (%s); install one or set CC to a C compiler",
                   q(tc->cmd), strerror(rc));
  return SMELT_OK;
}

static int wait_exit(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

smelt_status cc_probe(cc_toolchain *tc) {
  memset(tc, 0, sizeof *tc);
  TRY(split_cc(tc));
  char *argv[CC_MAX_ARGS + 2];
  int n = 0;
  for (int i = 0; i < tc->argc; i++) argv[n++] = tc->argv[i];
  argv[n++] = "--version";
  argv[n] = NULL;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC)) return err_set(SMELT_ERR_IO, "cannot create a pipe: %s", strerror(errno));
  pid_t pid;
  smelt_status s = spawn(tc, argv, fds[1], NULL, &pid);
  close(fds[1]);
  if (s) {
    close(fds[0]);
    return s;
  }
  size_t len = 0;
  char buf[4096];
  ssize_t r;
  while ((r = read(fds[0], buf + len, sizeof buf - 1 - len)) > 0 || (r < 0 && errno == EINTR))
    if (r > 0) len += (size_t)r;
  close(fds[0]);
  buf[len] = 0;
  int rc = wait_exit(pid);
  if (rc)
    return err_set(SMELT_ERR_UNSUPPORTED, "no C compiler: 'CC=%s --version' exited with status %d",
                   tc->cmd, rc);
  char *nl = strchr(buf, '\n');
  if (nl) *nl = 0;
  snprintf(tc->identity, sizeof tc->identity, "%.500s", buf);
  return SMELT_OK;
}

/* Appends the command line and its output file to the log. */
static void log_cmd(strbuf *log, char **argv, const char *out_path) {
  if (!log) return;
  sb_printf(log, "$");
  for (int i = 0; argv[i]; i++) sb_printf(log, " %s", argv[i]);
  sb_printf(log, "\n");
  FILE *f = out_path ? fopen(out_path, "r") : NULL;
  char line[512];
  while (f && fgets(line, sizeof line, f)) sb_printf(log, "%s", line);
  if (f) fclose(f);
}

/* First lines of a compiler's messages, for an error. */
static void first_lines(const char *path, char *out, size_t n) {
  out[0] = 0;
  FILE *f = fopen(path, "r");
  if (!f) return;
  size_t used = 0;
  char line[256];
  for (int k = 0; k < 4 && fgets(line, sizeof line, f) && used + 1 < n; k++) {
    size_t l = strlen(line);
    if (l && line[l - 1] == '\n') line[l - 1] = ' ';
    used += (size_t)snprintf(out + used, n - used, "%s", line);
  }
  fclose(f);
}

typedef struct job {
  pid_t pid;
  int unit;
  char *argv[CC_MAX_ARGS + 64];
  char src[4096], obj[4096], out[4096];
} job;

static smelt_status write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return err_set(SMELT_ERR_IO, "cannot write %s: %s", q_path(path), strerror(errno));
  size_t n = strlen(text);
  bool ok = fwrite(text, 1, n, f) == n;
  ok = !fclose(f) && ok;
  if (!ok) return err_set(SMELT_ERR_IO, "cannot write %s: %s", q_path(path), strerror(errno));
  return SMELT_OK;
}

/* Splits flag strings into argv words (in place, in a copy kept by the job). */
static int add_words(char **argv, int n, int max, char *copy) {
  char *save = NULL;
  for (char *w = strtok_r(copy, " \t", &save); w && n < max; w = strtok_r(NULL, " \t", &save)) argv[n++] = w;
  return n;
}

static smelt_status start_unit(const cc_toolchain *tc, const cc_unit *u, int idx, const char *dir,
                               job *j, char *flagbuf, size_t flagcap) {
  j->unit = idx;
  snprintf(j->src, sizeof j->src, "%s/k%d.c", dir, idx);
  snprintf(j->obj, sizeof j->obj, "%s/k%d.o", dir, idx);
  snprintf(j->out, sizeof j->out, "%s/k%d.log", dir, idx);
  TRY(write_file(j->src, u->src));
  snprintf(flagbuf, flagcap, "%s %s", tc->flags, u->flags ? u->flags : "");
  int n = 0;
  for (int i = 0; i < tc->argc; i++) j->argv[n++] = tc->argv[i];
  n = add_words(j->argv, n, CC_MAX_ARGS + 56, flagbuf);
  j->argv[n++] = "-c";
  j->argv[n++] = j->src;
  j->argv[n++] = "-o";
  j->argv[n++] = j->obj;
  j->argv[n] = NULL;
  return spawn(tc, j->argv, -1, j->out, &j->pid);
}

static smelt_status finish_unit(job *j, strbuf *log) {
  int rc = wait_exit(j->pid);
  j->pid = 0;
  log_cmd(log, j->argv, j->out);
  if (!rc) return SMELT_OK;
  char msg[768];
  first_lines(j->out, msg, sizeof msg);
  return err_set(SMELT_ERR_INTERNAL, "the C compiler failed on generated unit %d (status %d): %s", j->unit,
                 rc, msg);
}

static smelt_status link_units(const cc_toolchain *tc, int n, const char *dir, const char *so_path,
                               strbuf *log) {
  size_t cap = (size_t)n + CC_MAX_ARGS + 8;
  char **argv = calloc(cap, sizeof *argv);
  char (*objs)[4096] = calloc((size_t)n + 1, sizeof *objs);
  char out[4096];
  if (!argv || !objs) {
    free(argv);
    free(objs);
    return err_nomem("link command", cap * sizeof *argv);
  }
  int k = 0;
  for (int i = 0; i < tc->argc; i++) argv[k++] = tc->argv[i];
  argv[k++] = "-shared";
  argv[k++] = "-o";
  argv[k++] = (char *)so_path;
  for (int i = 0; i < n; i++) {
    snprintf(objs[i], sizeof objs[i], "%s/k%d.o", dir, i);
    argv[k++] = objs[i];
  }
  argv[k++] = "-lm";
  argv[k] = NULL;
  snprintf(out, sizeof out, "%s/link.log", dir);
  pid_t pid;
  smelt_status s = spawn(tc, argv, -1, out, &pid);
  if (!s) {
    int rc = wait_exit(pid);
    log_cmd(log, argv, out);
    if (rc) {
      char msg[768];
      first_lines(out, msg, sizeof msg);
      s = err_set(SMELT_ERR_INTERNAL, "linking the generated kernels failed (status %d): %s", rc, msg);
    }
  }
  free(argv);
  free(objs);
  return s;
}

smelt_status cc_build(const cc_toolchain *tc, const cc_unit *units, int n, const char *workdir,
                      int jobs, const char *so_path, strbuf *log) {
  if (jobs < 1) jobs = 1;
  if (jobs > 16) jobs = 16;
  job *run = calloc((size_t)jobs, sizeof *run);
  char(*flags)[1024] = calloc((size_t)jobs, sizeof *flags);
  if (!run || !flags) {
    free(run);
    free(flags);
    return err_nomem("compiler jobs", sizeof *run * (size_t)jobs);
  }
  smelt_status st = SMELT_OK;
  int next = 0, oldest = 0, active = 0;
  /* FIFO: start up to `jobs`, then wait for the oldest before starting more */
  while (!st && (next < n || active > 0)) {
    if (next < n && active < jobs) {
      job *j = &run[next % jobs];
      st = start_unit(tc, &units[next], next, workdir, j, flags[next % jobs], sizeof flags[0]);
      if (!st) active++;
      next++;
      continue;
    }
    st = finish_unit(&run[oldest % jobs], log);
    oldest++;
    active--;
  }
  for (; active > 0; active--, oldest++) /* after a failure: reap the rest */
    if (run[oldest % jobs].pid) wait_exit(run[oldest % jobs].pid);
  free(run);
  free(flags);
  if (st) return st;
  return link_units(tc, n, workdir, so_path, log);
}
