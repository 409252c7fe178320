/* Between the public smelt_tensor (a plain descriptor in the C API) and the
 * internal tensor. */
#ifndef SMELT_RUNTIME_TENSOR_CONVERT_H
#define SMELT_RUNTIME_TENSOR_CONVERT_H

#include "ir/tensor.h"

/* Makes *out a non-owning view of in's data, after checking that in is a dense
 * tensor smelt can hold: known fixed-size dtype, rank 0..SMELT_MAX_RANK, dims
 * >= 0, nbytes == elements x element size, data set unless empty.  The view is
 * valid while in->data is.  Errors name the tensor (in->name) when it has one. */
smelt_status tensor_from_public(const smelt_tensor *in, tensor *out);

/* Moves t's data into *out (copying it first if t does not own it), so that
 * smelt_tensor_release frees it; t is left empty.  out->name is set to NULL.
 * Only plain tensors: a sequence or optional is an error (t untouched). */
smelt_status tensor_to_public(tensor *t, smelt_tensor *out);

#endif
