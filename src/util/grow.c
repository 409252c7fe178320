/* Growing arrays (see grow.h). */
#include "util/grow.h"

#include <stdint.h>
#include <stdlib.h>

#include "util/err.h"

void *grow_array(void *v, size_t *cap, size_t need, size_t elem, size_t first, const char *what) {
  if (need <= *cap) return v;
  size_t c = *cap ? *cap : first;
  while (c < need) {
    if (c > SIZE_MAX / 2) c = SIZE_MAX;
    else c *= 2;
  }
  if (!elem || c > SIZE_MAX / elem) {
    err_nomem(what, SIZE_MAX);
    return NULL;
  }
  void *p = realloc(v, c * elem);
  if (!p) {
    err_nomem(what, c * elem);
    return NULL;
  }
  *cap = c;
  return p;
}
