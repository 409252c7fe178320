/* Building and reading sequence values (TENSOR_KIND_SEQUENCE) for the
 * sequence, optional and control-flow families.
 *
 * A sequence owns its elements: seq[i] are malloc'd headers owning their data,
 * freed by tensor_release of the sequence.  Inputs may be views of someone
 * else's sequence, so ops never move elements out of an input: they clone. */
#ifndef SMELT_OPS_SEQ_UTIL_H
#define SMELT_OPS_SEQ_UTIL_H

#include "ops/op.h"

/* Makes *out an empty owning sequence of element type dt. */
void seq_init(tensor *out, smelt_dtype dt);
/* Appends e, taking over what it owns (*e is zeroed).  The sequence's dtype is
 * set from the first tensor; a later tensor of another dtype is an error. */
smelt_status seq_append_move(tensor *seq, tensor *e);
/* Appends a deep copy of t. */
smelt_status seq_append_clone(tensor *seq, const tensor *t);
/* Error unless t is a sequence; what names it ("input 0"). */
smelt_status seq_check(const tensor *t, const char *what);
/* Reads a position input (int32/int64 scalar) and normalizes it into [0, n)
 * (or [0, n] when allow_end, for insertion).  what names it in errors. */
smelt_status seq_position(const tensor *pos, int n, bool allow_end, const char *what, int *out);

#endif
