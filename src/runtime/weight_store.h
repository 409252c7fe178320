/* The store of prepared weights as ops reach it (op_prep_store, through
 * op_cache.store in their context; ops/op_cache.h), backed by the on-disk
 * prep store (cache/prep_store.h).  The runtime owns the seam: ops never
 * include cache/. */
#ifndef SMELT_RUNTIME_WEIGHT_STORE_H
#define SMELT_RUNTIME_WEIGHT_STORE_H

#include "cache/prep_store.h"
#include "ops/op_cache.h"

/* The interface over ps (borrowed: it must outlive every use of the result;
 * NULL gives a store that never holds anything). */
op_prep_store weight_store_over(prep_store *ps);

#endif
