/* TEMPORARY (see tmp_shim.c). */
#ifndef SMELT_COMPILE_TMP_SHIM_H
#define SMELT_COMPILE_TMP_SHIM_H
#include "ir/ir.h"
#include "passes/pass.h"
smelt_status ir_graph_clone(const ir_graph *src, ir_graph **out);
#endif
