/* The device registry: lookup by name (backend/backend.h). */
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "util/err.h"
#include "util/quote.h"

static const backend *const registry[] = {&backend_cpu, &backend_cpu_ref};
#define N_REGISTERED ((int)(sizeof registry / sizeof registry[0]))

const backend *backend_at(int i) { return i >= 0 && i < N_REGISTERED ? registry[i] : NULL; }

const char *backend_names(char *buf, size_t n) {
  size_t o = 0;
  if (n) buf[0] = '\0';
  for (int i = 0; i < N_REGISTERED && o < n; i++)
    o += (size_t)snprintf(buf + o, n - o, "%s%s", i ? ", " : "", registry[i]->name);
  return buf;
}

/* "cuda" or "cuda:" followed by a device number. */
static bool is_cuda_name(const char *name) {
  if (strncmp(name, "cuda", 4)) return false;
  if (!name[4]) return true;
  if (name[4] != ':' || !name[5]) return false;
  for (const char *p = name + 5; *p; p++)
    if (*p < '0' || *p > '9') return false;
  return true;
}

smelt_status backend_lookup(const char *name, const backend **out) {
  *out = NULL;
  if (!name || !*name) name = "cpu";
  for (int i = 0; i < N_REGISTERED; i++) {
    const backend *b = registry[i];
    if (strcmp(b->name, name)) continue;
    if (b->abi_version != BACKEND_ABI_VERSION)
      return err_set(SMELT_ERR_INTERNAL, "device %s: its table is version %d, this library expects %d",
                     q(name), b->abi_version, BACKEND_ABI_VERSION);
    *out = b;
    return SMELT_OK;
  }
  char list[256];
  if (is_cuda_name(name))
    return err_set(SMELT_ERR_UNSUPPORTED, "device %s: not built into this library (it has no CUDA back end; "
                   "its devices: %s)", q(name), backend_names(list, sizeof list));
  return err_set(SMELT_ERR_INVALID_ARGUMENT, "unknown device %s; this library has: %s", q(name),
                 backend_names(list, sizeof list));
}
