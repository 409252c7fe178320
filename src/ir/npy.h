/* NumPy .npy files: the format every Python tool can write (np.save).
 *
 * Reads format versions 1.0, 2.0 and 3.0 (3.0 = utf-8 header), C order only.
 * Types: float16/32/64, int8/16/32/64, uint8/16/32/64, bool, complex64/128,
 * little- or big-endian (big-endian data is byte-swapped on load).  numpy has
 * no bfloat16, so bfloat16 tensors can be neither read nor written here.
 *
 * Every length and offset comes from the file and is checked; a malformed file
 * gives SMELT_ERR_INVALID_ARGUMENT (or UNSUPPORTED for valid numpy that smelt
 * does not handle) with a message naming the byte offset or header key. */
#ifndef SMELT_IR_NPY_H
#define SMELT_IR_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "ir/tensor.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6

/* Decodes a whole .npy file held in buf[0..len).  On success *out is an owning
 * tensor (free with tensor_release) holding a copy of the data in native byte
 * order; on failure *out is left zeroed.  buf need not be aligned. */
smelt_status npy_decode(const void *buf, size_t len, tensor *out);

/* Encodes t (a dense tensor, any rank) as a .npy file, byte for byte what
 * np.save writes: version 1.0, little-endian descr, header padded with spaces
 * so that the data starts at a multiple of 64 (version 2.0 only if the header
 * would exceed 65535 bytes).  *buf is malloc'd; the caller frees it. */
smelt_status npy_encode(const tensor *t, uint8_t **buf, size_t *len);

#endif
