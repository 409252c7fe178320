/* Session buffer cache (util/bufcache.h): large blocks come back for
 * requests they fit closely, small ones and requests with no cache current
 * go to malloc, the byte cap holds by dropping the oldest blocks, and huge
 * blocks keep their size (they must be reusable too). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util/bufcache.h"

int main(void) {
  setenv("SMELT_BUFCACHE_MB", "16", 1);
  bufcache *c = NULL;
  CHECK_OK(bufcache_create(&c));
  CHECK(bufcache_current() == NULL);
  /* no cache current: plain allocation; released, the block goes to the
   * hand-back cache, which serves the next close request under a cache */
  void *p = bufcache_alloc(1 << 20);
  CHECK(p && ((uintptr_t)p & 63) == 0);
  bufcache_release(p);
  CHECK(bufcache_held(c) == 0 && bufcache_handback_held() >= (1 << 20));
  void *small = bufcache_alloc(1000);
  bufcache_release(small); /* under BUFCACHE_MIN: freed */
  CHECK(bufcache_handback_held() < (1 << 20) + 4096);
  CHECK(bufcache_enter(c) == NULL);
  void *other = bufcache_alloc(1 << 18);
  CHECK(other && other != p); /* not close: the block stays there */
  free(other);
  void *q = bufcache_alloc(1 << 20);
  CHECK(q == p && bufcache_handback_held() == 0);
  CHECK(bufcache_enter(NULL) == c);
  bufcache_release(q);
  CHECK(bufcache_handback_held() >= (1 << 20));
  bufcache_handback_drain();
  CHECK(bufcache_handback_held() == 0);

  CHECK(bufcache_enter(c) == NULL && bufcache_current() == c);
  void *a = bufcache_alloc(1 << 20);
  memset(a, 1, 1 << 20);
  bufcache_release(a);
  CHECK(bufcache_held(c) >= (1 << 20));
  CHECK(bufcache_alloc(1 << 20) == a); /* the same block again */
  bufcache_release(a);
  CHECK(bufcache_alloc((1 << 20) - 4096) == a); /* close enough */
  bufcache_release(a);
  void *b = bufcache_alloc(1 << 19); /* a 2x block would waste half: a new one */
  CHECK(b && b != a);
  bufcache_release(b);
  /* small blocks are not kept */
  size_t before = bufcache_held(c);
  void *s = bufcache_alloc(1000);
  bufcache_release(s);
  CHECK(bufcache_held(c) == before);
  /* a huge block (>= 4 MiB) keeps its size and is reused */
  void *h = bufcache_alloc(5u << 20);
  CHECK(h && ((uintptr_t)h & ((2u << 20) - 1)) == 0);
  bufcache_release(h);
  CHECK(bufcache_alloc(5u << 20) == h);
  bufcache_release(h);
  /* the 16 MB cap: the oldest blocks go */
  void *big[6];
  for (int i = 0; i < 6; i++) big[i] = bufcache_alloc((size_t)(3 + i) << 20);
  for (int i = 0; i < 6; i++) bufcache_release(big[i]);
  CHECK(bufcache_held(c) <= (size_t)16 << 20);
  CHECK(bufcache_alloc((size_t)8 << 20) == big[5]); /* the newest stayed */
  bufcache_release(big[5]);
  /* a block over the cap is never kept */
  void *huge = bufcache_alloc((size_t)20 << 20);
  bufcache_release(huge);
  CHECK(bufcache_held(c) <= (size_t)16 << 20);
  /* small pages: always fresh (the cached blocks of that size are left
   * alone), page-aligned, all of it writable; released, a block is cached
   * as any other and served to the next close request */
  void *cached = bufcache_alloc((size_t)6 << 20);
  bufcache_release(cached);
  size_t held = bufcache_held(c);
  unsigned char *sp = bufcache_alloc_small_pages(((size_t)6 << 20) - 100);
  CHECK(sp && sp != cached && ((uintptr_t)sp & 4095) == 0 && bufcache_held(c) == held);
  memset(sp, 0x5a, ((size_t)6 << 20) - 100);
  CHECK(sp[0] == 0x5a && sp[((size_t)6 << 20) - 101] == 0x5a);
  bufcache_release(sp);
  void *x = bufcache_alloc(((size_t)6 << 20) - 200), *y = bufcache_alloc(((size_t)6 << 20) - 200);
  CHECK((x == sp && y == cached) || (x == cached && y == sp));
  bufcache_release(x);
  bufcache_release(y);
  void *again = bufcache_alloc_small_pages(10);
  CHECK(again && ((uintptr_t)again & 4095) == 0);
  bufcache_release(again);
  CHECK(bufcache_enter(NULL) == c);
  bufcache_free_all(c);
  /* cap 0: off */
  setenv("SMELT_BUFCACHE_MB", "0", 1);
  CHECK_OK(bufcache_create(&c));
  bufcache_enter(c);
  a = bufcache_alloc(1 << 20);
  bufcache_release(a);
  CHECK(bufcache_held(c) == 0);
  bufcache_enter(NULL);
  bufcache_free_all(c);
  return test_report("test_bufcache");
}
