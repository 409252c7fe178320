/* Shape bucketing (see bucket.c). */
#ifndef SMELT_SESSION_BUCKET_H
#define SMELT_SESSION_BUCKET_H

#include "session/session_compile.h"

/* Parses "NAME:AXIS=S1,S2,...[;...]" against g's inputs. */
smelt_status bucket_parse(const ir_graph *g, const char *spec, bucket_spec **out, int *n_out);
void bucket_free(bucket_spec *b, int n);
/* Pads inputs whose bucketed axis is below a bucket size.  *pp is NULL when
 * nothing needed padding; else pp[k] is the input to use (padded[k] owned). */
smelt_status bucket_pad(const bucket_spec *b, int n, const ir_graph *g, tensor *const *inputs,
                        tensor **padded, tensor ***pp);
void bucket_pad_free(tensor *padded, tensor **pp, int n);
/* Cuts outputs computed on padded inputs back to the real inputs' shapes. */
smelt_status bucket_trim(struct smelt_session *s, tensor *const *real_inputs, tensor *outputs);

#endif
