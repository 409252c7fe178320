/* libFuzzer target: the .npy reader must reject any malformed file with an
 * error, never crash, hang or over-allocate; what it accepts must re-encode. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tensor t;
  if (npy_decode(data, size, &t) == SMELT_OK) {
    /* An accepted file round-trips: encode, decode, same bytes. */
    uint8_t *buf;
    size_t len;
    if (npy_encode(&t, &buf, &len) == SMELT_OK) {
      tensor u;
      if (npy_decode(buf, len, &u) != SMELT_OK || u.nbytes != t.nbytes || u.dtype != t.dtype ||
          u.rank != t.rank || (t.nbytes && memcmp(u.data, t.data, t.nbytes)))
        abort();
      tensor_release(&u);
      free(buf);
    }
  }
  tensor_release(&t);
  return 0;
}
