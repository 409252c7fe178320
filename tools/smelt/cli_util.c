#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "util/membudget.h"

int cli_fail(const char *what) {
  fprintf(stderr, "smelt: %s%s%s\n", what ? what : "", what && *smelt_last_error() ? ": " : "",
          smelt_last_error());
  return 1;
}

bool cli_int(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) {
    fprintf(stderr, "smelt: %s expects an integer in %lld..%lld, got '%s'\n", flag, (long long)lo,
            (long long)hi, s);
    return false;
  }
  *out = v;
  return true;
}

bool cli_double(const char *flag, const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= 0)) {
    fprintf(stderr, "smelt: %s expects a non-negative number, got '%s'\n", flag, s);
    return false;
  }
  *out = v;
  return true;
}

bool cli_bytes(const char *flag, const char *s, size_t *out) {
  if (!membudget_parse(s, out)) {
    fprintf(stderr, "smelt: %s expects a size in bytes, optionally with K, M, G or T (512M, 8G), got '%s'\n",
            flag, s);
    return false;
  }
  return true;
}

bool cli_flag_arg(int argc, char **argv, int *i, const char *flag, const char **val) {
  if (strcmp(argv[*i], flag)) return false;
  if (*i + 1 >= argc) {
    fprintf(stderr, "smelt: %s needs a value\n", flag);
    *val = NULL;
    return true;
  }
  *val = argv[++*i];
  return true;
}

bool cli_split_kv(const char *flag, char *arg, cli_kv *out) {
  char *eq = strchr(arg, '=');
  if (!eq || eq == arg || !eq[1]) {
    fprintf(stderr, "smelt: %s expects NAME=VALUE, got '%s'\n", flag, arg);
    return false;
  }
  *eq = 0; /* argv strings are writable: split in place */
  out->key = arg;
  out->val = eq + 1;
  return true;
}

bool cli_path(char *buf, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf, n, fmt, ap);
  va_end(ap);
  return k >= 0 && (size_t)k < n;
}

double cli_now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

double cli_proc_status_mb(const char *field) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  size_t n = strlen(field);
  double mb = -1;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, field, n)) {
      long long kb = strtoll(line + n, NULL, 10);
      mb = (double)kb / 1024.0;
      break;
    }
  fclose(f);
  return mb;
}
