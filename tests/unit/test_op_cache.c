/* ops/op_cache.h: every key published is found again and only under its own
 * bytes (keys of several lengths, keys differing in one byte, many more keys
 * than buckets, as a session's shared cache holds), a second add of a key
 * keeps the first data and frees the second, threads adding at once agree,
 * and op_cache_free_all frees every entry's data once. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ops/op_cache.h"

static int freed;
static void count_free(void *p) {
  __atomic_fetch_add(&freed, 1, __ATOMIC_RELAXED);
  free(p);
}

typedef struct key {
  const void *w;
  int64_t a, b;
  char tail[5]; /* an odd length: the hash's byte tail */
} key;

static key key_of(int i) {
  key k;
  memset(&k, 0, sizeof k);
  k.w = (const void *)(uintptr_t)(0x1000 + 64 * (i / 7)); /* several keys share an address */
  k.a = i % 7, k.b = i;
  k.tail[4] = (char)i;
  return k;
}

static op_cache shared;

static void *adder(void *arg) {
  int base = (int)(intptr_t)arg;
  for (int i = 0; i < 400; i++) {
    key k = key_of(i);
    int *d = malloc(sizeof *d);
    *d = i;
    int *kept = op_cache_add(&shared, &k, sizeof k, d, count_free);
    CHECK(kept && *kept == i);
    (void)base;
  }
  return NULL;
}

int main(void) {
  op_cache c;
  memset(&c, 0, sizeof c);
  key k0 = key_of(0);
  CHECK(!op_cache_find(&c, &k0, sizeof k0)); /* empty: no buckets yet */
  CHECK(!op_cache_find(NULL, &k0, sizeof k0));
  enum { N = 1000 };
  for (int i = 0; i < N; i++) {
    key k = key_of(i);
    int *d = malloc(sizeof *d);
    *d = i;
    CHECK(op_cache_add(&c, &k, sizeof k, d, count_free) == d);
  }
  for (int i = 0; i < N; i++) {
    key k = key_of(i);
    int *d = op_cache_find(&c, &k, sizeof k);
    CHECK(d && *d == i);
    k.tail[0] = 1; /* one byte off: not there */
    CHECK(!op_cache_find(&c, &k, sizeof k));
    CHECK(!op_cache_find(&c, &k, sizeof k - 1)); /* a shorter key is another key */
  }
  /* a second add of a key: the first data stays, the second is freed */
  key k5 = key_of(5);
  int *dup = malloc(sizeof *dup);
  *dup = -1;
  freed = 0;
  int *kept = op_cache_add(&c, &k5, sizeof k5, dup, count_free);
  CHECK(kept && *kept == 5 && freed == 1);
  /* keys of other lengths beside them */
  for (int len = 1; len <= 40; len++) {
    unsigned char kb[40];
    for (int j = 0; j < len; j++) kb[j] = (unsigned char)(j * 7 + len);
    int *d = malloc(sizeof *d);
    *d = 10000 + len;
    CHECK(op_cache_add(&c, kb, (size_t)len, d, count_free) == d);
  }
  for (int len = 1; len <= 40; len++) {
    unsigned char kb[40];
    for (int j = 0; j < len; j++) kb[j] = (unsigned char)(j * 7 + len);
    int *d = op_cache_find(&c, kb, (size_t)len);
    CHECK(d && *d == 10000 + len);
  }
  freed = 0;
  op_cache_free_all(&c, 1);
  CHECK(freed == N + 40);
  CHECK(!op_cache_find(&c, &k0, sizeof k0));
  /* four threads adding the same 400 keys at once: one entry per key */
  pthread_t t[4];
  for (int i = 0; i < 4; i++) CHECK(!pthread_create(&t[i], NULL, adder, (void *)(intptr_t)i));
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 400; i++) {
    key k = key_of(i);
    int *d = op_cache_find(&shared, &k, sizeof k);
    CHECK(d && *d == i);
  }
  freed = 0;
  op_cache_free_all(&shared, 1);
  CHECK(freed == 400);
  return test_report("test_op_cache");
}
