/* Inputs to cache keys (see cache.h for the hasher). */
#ifndef SMELT_CACHE_KEYS_H
#define SMELT_CACHE_KEYS_H

#include "cache/cache.h"
#include "ir/ir.h"

#define KEY_CONST_BYTES 4096

/* CPU identification and feature words (-march=native code depends on them). */
void key_add_machine(key_hasher *h);
/* The compiler command, its --version line, the flags, smelt's version. */
void key_add_toolchain(key_hasher *h, const char *cc_cmd, const char *cc_identity, const char *flags);
/* Structure of a graph: ops, attributes, wiring, types and shapes, and the
 * contents of constants up to KEY_CONST_BYTES (larger: shape only).  Without
 * shapes (dynamic compiles): dims and constant contents are left out. */
void key_add_graph(key_hasher *h, const ir_graph *g, bool with_shapes);

#endif
