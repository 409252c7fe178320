/* util/hash_memo.h: only listed, exact ranges are answered, and only after a
 * hash was set for them under the same seed. */
#include <stdlib.h>

#include "check.h"
#include "util/hash_memo.h"

int main(void) {
  static unsigned char a[256], b[512], c[64];
  hash_memo *m = hash_memo_new();
  CHECK(m != NULL);
  if (!m) return test_report("test_hash_memo");
  CHECK(hash_memo_add(m, b, sizeof b));
  CHECK(hash_memo_add(m, a, sizeof a));
  CHECK(hash_memo_add(m, a, 16)); /* a shorter range at the same start */
  CHECK(!hash_memo_add(m, NULL, 8) && !hash_memo_add(m, c, 0));
  uint64_t h = 0;
  hash_memo_set(m, a, sizeof a, 1, 42); /* not sealed yet: ignored */
  CHECK(!hash_memo_get(m, a, sizeof a, 1, &h));
  hash_memo_seal(m);
  CHECK(!hash_memo_get(m, a, sizeof a, 1, &h)); /* nothing set */
  hash_memo_set(m, a, sizeof a, 1, 42);
  CHECK(hash_memo_get(m, a, sizeof a, 1, &h) && h == 42);
  CHECK(!hash_memo_get(m, a, sizeof a, 2, &h));  /* another hash function */
  CHECK(!hash_memo_get(m, a, 16, 1, &h));        /* the shorter range: its own entry, unset */
  hash_memo_set(m, a, 16, 1, 7);
  CHECK(hash_memo_get(m, a, 16, 1, &h) && h == 7);
  CHECK(hash_memo_get(m, a, sizeof a, 1, &h) && h == 42);
  hash_memo_set(m, a, sizeof a, 1, 43); /* the first value stays */
  CHECK(hash_memo_get(m, a, sizeof a, 1, &h) && h == 42);
  /* ranges never listed are never answered, even when set */
  hash_memo_set(m, c, sizeof c, 1, 5);
  CHECK(!hash_memo_get(m, c, sizeof c, 1, &h));
  hash_memo_set(m, a + 1, sizeof a - 1, 1, 5);
  CHECK(!hash_memo_get(m, a + 1, sizeof a - 1, 1, &h));
  hash_memo_set(m, b, sizeof b - 4, 1, 5); /* a prefix of a listed range */
  CHECK(!hash_memo_get(m, b, sizeof b - 4, 1, &h) && !hash_memo_get(m, b, sizeof b, 1, &h));
  CHECK(hash_memo_hits(m) == 4);
  CHECK(!hash_memo_get(NULL, a, sizeof a, 1, &h));
  hash_memo_set(NULL, a, sizeof a, 1, 5);
  hash_memo_free(m);
  hash_memo_free(NULL);
  return test_report("test_hash_memo");
}
