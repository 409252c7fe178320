/* See membudget.h. */
#include "util/membudget.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* "Key:   123 kB" from /proc/meminfo, in bytes; 0 if absent. */
static size_t meminfo_bytes(const char *key) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  size_t klen = strlen(key), v = 0;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, key, klen) && line[klen] == ':') {
      unsigned long long kb = strtoull(line + klen + 1, NULL, 10);
      v = kb > SIZE_MAX / 1024 ? SIZE_MAX : (size_t)kb * 1024;
      break;
    }
  fclose(f);
  return v;
}

/* A cgroup limit file: a number of bytes, or "max" (0: none). */
static size_t limit_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char buf[64] = "";
  size_t v = 0;
  if (fgets(buf, sizeof buf, f) && isdigit((unsigned char)buf[0])) {
    unsigned long long x = strtoull(buf, NULL, 10);
    /* v1 reports "no limit" as a huge page-rounded number */
    v = x >= ((unsigned long long)1 << 60) || x > SIZE_MAX ? 0 : (size_t)x;
  }
  fclose(f);
  return v;
}

/* The limit of this process's cgroup: v2 ("0::/path" in /proc/self/cgroup),
 * else v1's memory controller; 0 where none is set. */
static size_t cgroup_limit(void) {
  FILE *f = fopen("/proc/self/cgroup", "r");
  char line[1024], path[1200];
  size_t lim = 0;
  while (f && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    if (!strncmp(line, "0::", 3)) {
      snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", line + 3);
      lim = limit_file(path);
    } else {
      char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
      if (c2 && strstr(c1, "memory") && c2 > c1) {
        snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", c2 + 1);
        lim = limit_file(path);
      }
    }
    if (lim) break;
  }
  if (f) fclose(f);
  if (!lim) lim = limit_file("/sys/fs/cgroup/memory.max"); /* inside a container's namespace */
  if (!lim) lim = limit_file("/sys/fs/cgroup/memory/memory.limit_in_bytes");
  return lim;
}

size_t membudget_from(size_t mem_available, size_t mem_total, size_t cgroup_limit_bytes) {
  size_t base = mem_available ? mem_available : mem_total;
  if (cgroup_limit_bytes && (!base || cgroup_limit_bytes < base)) base = cgroup_limit_bytes;
  if (!base) return SIZE_MAX;
  return base / 5 * 4;
}

/* The address-space limit (ulimit -v), 0 where none is set. */
static size_t rlimit_as(void) {
  struct rlimit r;
  if (getrlimit(RLIMIT_AS, &r) || r.rlim_cur == RLIM_INFINITY || r.rlim_cur > SIZE_MAX) return 0;
  return (size_t)r.rlim_cur;
}

size_t membudget_default(void) {
  size_t lim = cgroup_limit(), as = rlimit_as();
  if (as && (!lim || as < lim)) lim = as;
  return membudget_from(meminfo_bytes("MemAvailable"), meminfo_bytes("MemTotal"), lim);
}

bool membudget_parse(const char *s, size_t *out) {
  if (!s || !isdigit((unsigned char)*s)) return false;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno) return false;
  int shift = 0;
  switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    case 'T': shift = 40; end++; break;
    default: break;
  }
  if (shift && (*end == 'i' || *end == 'I')) end++;
  if (*end == 'B' || *end == 'b') end++;
  if (*end || v == 0 || v > (SIZE_MAX >> shift)) return false;
  *out = (size_t)v << shift;
  return true;
}

const char *membudget_fmt(char *buf, size_t n, size_t bytes) {
  static const char *unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) {
    snprintf(buf, n, "%zu bytes", bytes);
    return buf;
  }
  double v = (double)bytes / 1024;
  int u = 0;
  while (v >= 1023.95 && u < 4) v /= 1024, u++;
  snprintf(buf, n, "%.1f %s", v, unit[u]);
  return buf;
}
