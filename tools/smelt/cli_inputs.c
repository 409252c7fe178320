/* Inputs for run/test/bench: read from files or generated from declared shapes. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "runtime/inputs_gen.h"
#include "session/session.h"
#include "runtime/tensor_file.h"

/* Integer inputs that index an embedding (Gather data[...] by this input) are
 * generated below the table's size, so that generated token ids are valid. */
static int64_t int_input_high(const ir_graph *g, int value_id) {
  int64_t high = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *nd = &g->nodes[i];
    if (strcmp(nd->op_type, "Gather") || nd->n_inputs < 2 || nd->inputs[1] != value_id) continue;
    const ir_value *data = &g->values[nd->inputs[0]];
    int64_t axis = ir_attr_int(nd, "axis", 0);
    if (data->rank > 0 && axis < 0) axis += data->rank;
    if (data->rank > 0 && axis >= 0 && axis < data->rank && dim_known(data->dims[axis])) {
      int64_t d = data->dims[axis];
      if (!high || d < high) high = d;
    }
  }
  return high > 0 ? high : 100;
}

static int64_t dim_value(const ir_graph *g, int64_t d, const cli_kv *dims, int n_dims) {
  if (dim_known(d)) return d;
  if (d <= DIM_SYM_BASE) {
    const char *sym = g->syms[dim_sym_index(d)];
    for (int i = 0; i < n_dims; i++)
      if (!strcmp(dims[i].key, sym)) {
        int64_t v;
        if (cli_int("--dim", dims[i].val, 0, INT32_MAX, &v)) return v;
        return -1;
      }
  }
  return 1; /* documented default for symbolic and unknown dims */
}

int cli_make_inputs(const ir_graph *g, const cli_kv *files, int n_files, const cli_kv *dims,
                    int n_dims, bool strict, uint64_t seed, tensor *inputs) {
  for (int f = 0; f < n_files; f++) {
    bool found = false;
    for (int k = 0; k < g->n_inputs; k++) found |= !strcmp(g->values[g->inputs[k]].name, files[f].key);
    if (!found) {
      fprintf(stderr, "smelt: the model has no input named '%s'; it expects:\n", files[f].key);
      for (int k = 0; k < g->n_inputs; k++) {
        const ir_value *v = &g->values[g->inputs[k]];
        char sh[256];
        fprintf(stderr, "  %s %s %s\n", v->name, dtype_name(v->dtype), shape_str(sh, sizeof sh, v->rank, v->dims, g->syms));
      }
      return 1;
    }
  }
  for (int k = 0; k < g->n_inputs; k++) {
    const ir_value *v = &g->values[g->inputs[k]];
    const char *path = NULL;
    for (int f = 0; f < n_files; f++)
      if (!strcmp(files[f].key, v->name)) path = files[f].val;
    if (path) {
      if (tensor_file_load(path, &inputs[k])) {
        char what[512];
        snprintf(what, sizeof what, "input '%s'", v->name);
        return cli_fail(what);
      }
      continue;
    }
    char sh[256];
    shape_str(sh, sizeof sh, v->rank, v->dims, g->syms);
    if (strict) {
      fprintf(stderr, "smelt: input '%s' (%s %s) is not given and --strict-inputs is set\n", v->name,
              dtype_name(v->dtype), sh);
      return 1;
    }
    if (v->rank < 0 || v->dtype == SMELT_UNDEFINED || v->kind != TENSOR_KIND_TENSOR) {
      fprintf(stderr, "smelt: input '%s' has no declared tensor type and shape (%s %s); give it with -i %s=FILE\n",
              v->name, dtype_name(v->dtype), sh, v->name);
      return 1;
    }
    int64_t d[SMELT_MAX_RANK];
    for (int i = 0; i < v->rank; i++)
      if ((d[i] = dim_value(g, v->dims[i], dims, n_dims)) < 0) return 1;
    int64_t high = dtype_is_int(v->dtype) ? int_input_high(g, g->inputs[k]) : 0;
    if (inputs_generate(&inputs[k], v->dtype, v->rank, d, seed, k, high)) {
      char what[512];
      snprintf(what, sizeof what, "generating input '%s'", v->name);
      return cli_fail(what);
    }
  }
  return 0;
}

int cli_make_input_shaped(const ir_graph *g, int k, int rank, const int64_t *dims, uint64_t seed,
                          tensor *out) {
  const ir_value *v = &g->values[g->inputs[k]];
  int64_t high = dtype_is_int(v->dtype) ? int_input_high(g, g->inputs[k]) : 0;
  if (inputs_generate(out, v->dtype, rank, dims, seed, k, high)) {
    char what[512];
    snprintf(what, sizeof what, "generating input '%s'", v->name);
    return cli_fail(what);
  }
  return 0;
}
