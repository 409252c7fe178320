/* grow_array: doubling from the first capacity until need fits, the array
 * kept on failure, overflow refused with a message. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util/err.h"
#include "util/grow.h"

int main(void) {
  size_t cap = 0;
  int *v = grow_array(NULL, &cap, 1, sizeof *v, 16, "test ints");
  CHECK(v && cap == 16);
  for (int i = 0; i < 16; i++) v[i] = i;
  int *same = grow_array(v, &cap, 16, sizeof *v, 16, "test ints");
  CHECK(same == v && cap == 16); /* fits: untouched */
  int *w = grow_array(v, &cap, 17, sizeof *w, 16, "test ints");
  CHECK(w && cap == 32);
  if (w) v = w;
  int *x = grow_array(v, &cap, 200, sizeof *x, 16, "test ints"); /* several doublings at once */
  CHECK(x && cap == 256);
  if (x) v = x;
  bool kept = true;
  for (int i = 0; i < 16; i++) kept = kept && v[i] == i;
  CHECK(kept);
  /* a size past the address space: NULL, message, array and capacity unchanged */
  size_t before = cap;
  CHECK(grow_array(v, &cap, SIZE_MAX / 2, sizeof *v, 16, "test ints") == NULL);
  CHECK(cap == before && strstr(smelt_last_error(), "test ints") != NULL);
  err_clear();
  free(v);
  return test_report("test_grow");
}
