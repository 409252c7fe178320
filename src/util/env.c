#include "util/env.h"

#include <stdlib.h>
#include <string.h>

bool env_flag_on(const char *name) {
  const char *v = getenv(name);
  return !v || !*v || (strcmp(v, "0") && strcmp(v, "off") && strcmp(v, "no"));
}
