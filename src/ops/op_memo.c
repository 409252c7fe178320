#include "ops/op_memo.h"

#include <stdlib.h>

void *op_memo_get(const op_ctx *c) {
  return c->memo ? atomic_load_explicit(&c->memo->data, memory_order_acquire) : NULL;
}

bool op_memo_open(const op_ctx *c) {
  return c->memo && !atomic_load_explicit(&c->memo->data, memory_order_relaxed);
}

void op_memo_put(op_ctx *c, void *data) {
  void *none = NULL;
  if (!c->memo || !atomic_compare_exchange_strong_explicit(&c->memo->data, &none, data, memory_order_release,
                                                           memory_order_relaxed))
    free(data);
}

void op_memo_clear(op_memo *m) {
  free(atomic_load_explicit(&m->data, memory_order_acquire));
  atomic_store_explicit(&m->data, NULL, memory_order_relaxed);
}
