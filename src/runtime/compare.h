/* Output checking: is an actual tensor close enough to the expected one?  Used
 * by `smelt test`, `smelt bench` (against eager) and the test suites. */
#ifndef SMELT_RUNTIME_COMPARE_H
#define SMELT_RUNTIME_COMPARE_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/tensor.h"

typedef struct compare_result {
  bool ok;               /* every element within tolerance, dtype and shape equal */
  int64_t count;         /* elements compared */
  int64_t mismatches;    /* elements out of tolerance */
  /* Largest |a-e| and |a-e|/|e| over all elements (passing ones too).  The
   * relative error skips e == 0.  A NaN or infinity where the other side has
   * something else counts as infinite error.  Equal NaNs/infinities count 0. */
  double max_abs;
  double max_rel;
  /* The element furthest out of tolerance, measured by |a-e| / (atol+rtol|e|)
   * (first such on ties; the largest |a-e| if all pass); -1 if no elements. */
  int64_t worst_index;   /* flat row-major index within its tensor */
  int worst_seq;         /* its position in a sequence, else -1 */
  double worst_actual, worst_expected;
  char message[512];     /* "" if ok; else what differs and where */
} compare_result;

/* Compares actual to expected.  Floats (f16, bf16, f32, f64) pass element-wise
 * iff |a-e| <= atol + rtol*|e|, where NaN matches NaN and an infinity matches
 * only the same infinity; integers and bool must be equal (bools as truth
 * values).  dtype, kind and shape must match; sequences compare element by
 * element; two missing optionals are equal.
 * A difference is reported in *r (r->ok false, r->message), not as an error:
 * the status is SMELT_OK whenever the comparison could be made, and an error
 * only for unusable input (a dtype smelt cannot compare, nbytes that disagree
 * with the shape, negative tolerances); then too r->ok is false and r->message
 * holds the error. */
smelt_status tensor_compare(const tensor *actual, const tensor *expected, double rtol, double atol,
                            compare_result *r);

#endif
