/* Loading models: the zoo and the conformance suite against what the onnx
 * package reads (tests/data/onnx_manifest.txt), bad files, and hand-built
 * models for each import rule (scoping, duplicates, attributes, types). */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "onnx/model_internal.h"
#include "onnx_test_util.h"
#include "util/err.h"

/* ---- helpers ---- */

static smelt_status load_pb(pb_buf *model, const char *base_dir, onnx_model **m,
                            uint8_t **keep) {
  uint8_t *data;
  size_t len;
  *keep = NULL;
  *m = NULL;
  TRY(pb_buf_finish(model, &data, &len));
  *keep = data; /* initializers may view the buffer: free after the model */
  return onnx_model_load_buffer(data, len, base_dir, m);
}

/* Builds model(graph) and loads it; returns the status.  *m is NULL on failure. */
static smelt_status load_graph(pb_buf *graph, int64_t ir, onnx_model **m, uint8_t **keep) {
  pb_buf model = {0};
  b_model(&model, ir, 17, graph);
  return load_pb(&model, NULL, m, keep);
}

static void expect_fail(pb_buf *graph, smelt_status code, const char *text) {
  onnx_model *m;
  uint8_t *keep;
  smelt_status s = load_graph(graph, 8, &m, &keep);
  CHECK(s == code);
  if (s != code || !strstr(smelt_last_error(), text))
    fprintf(stderr, "  got %s '%s', wanted '%s'\n", smelt_status_name(s), smelt_last_error(), text);
  CHECK(!s || strstr(smelt_last_error(), text));
  CHECK(!s || m == NULL);
  onnx_model_free(m);
  free(keep);
}

static int value_id(const ir_graph *g, const char *name) { return ir_graph_find_value(g, name); }

/* "name:type:shape" as tests/data/make_onnx_manifest.py writes it. */
static void render_value(const ir_graph *g, int vid, char *out, size_t n) {
  const ir_value *v = &g->values[vid];
  char type[80], shape[512] = "";
  if (v->kind == TENSOR_KIND_SEQUENCE)
    snprintf(type, sizeof type, "seq(%d)", (int)v->dtype);
  else
    snprintf(type, sizeof type, "%d", (int)v->dtype);
  if (v->flags & IR_VALUE_OPTIONAL) {
    char t2[96];
    snprintf(t2, sizeof t2, "opt(%s)", type);
    strcpy(type, t2);
  }
  if (v->rank < 0) {
    strcpy(shape, "*");
  } else {
    size_t o = 0;
    for (int i = 0; i < v->rank && o < sizeof shape; i++) {
      const char *sep = i ? "," : "";
      int64_t d = v->dims[i];
      if (d >= 0)
        o += (size_t)snprintf(shape + o, sizeof shape - o, "%s%lld", sep, (long long)d);
      else if (d <= DIM_SYM_BASE)
        o += (size_t)snprintf(shape + o, sizeof shape - o, "%s%s", sep, g->syms[dim_sym_index(d)]);
      else
        o += (size_t)snprintf(shape + o, sizeof shape - o, "%s?", sep);
    }
  }
  snprintf(out, n, "%s:%s:%s", v->name, type, shape);
}

static void render_model(const onnx_model *m, char *out, size_t n) {
  const ir_graph *g = m->graph;
  int inits = 0;
  for (int i = 0; i < g->n_values; i++) inits += !!(g->values[i].flags & IR_VALUE_INITIALIZER);
  size_t o = (size_t)snprintf(out, n, "ir=%lld opset=%lld nodes=%d inits=%d in=",
                              (long long)m->ir_version, (long long)ir_graph_opset(g, ""),
                              g->n_nodes, inits);
  char v[1024];
  for (int i = 0; i < g->n_inputs && o < n; i++) {
    render_value(g, g->inputs[i], v, sizeof v);
    o += (size_t)snprintf(out + o, n - o, "%s%s", i ? ";" : "", v);
  }
  if (o < n) o += (size_t)snprintf(out + o, n - o, " out=");
  for (int i = 0; i < g->n_outputs && o < n; i++) {
    render_value(g, g->outputs[i], v, sizeof v);
    o += (size_t)snprintf(out + o, n - o, "%s%s", i ? ";" : "", v);
  }
}

/* ---- the shared models ---- */

static void test_manifest(const char *shared, const char *manifest) {
  FILE *f = fopen(manifest, "r");
  CHECK(f != NULL);
  if (!f) return;
  static char line[65536], got[65536];
  int models = 0, unsupported = 0, mismatches = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    char *sp = strchr(line, ' ');
    if (!sp) continue;
    *sp = 0;
    const char *want = sp + 1;
    char path[4096 + 256];
    if (strlen(line) > 256) continue;
    snprintf(path, sizeof path, "%s/%.256s/model.onnx", shared, line);
    onnx_model *m;
    smelt_status s = onnx_model_load(path, &m);
    models++;
    if (!strcmp(want, "unsupported")) {
      unsupported++;
      CHECK(s == SMELT_ERR_UNSUPPORTED);
      CHECK(!s || strstr(smelt_last_error(), path));
      if (!s) onnx_model_free(m);
      continue;
    }
    CHECK_OK(s);
    if (s) continue;
    render_model(m, got, sizeof got);
    if (strcmp(got, want)) {
      mismatches++;
      fprintf(stderr, "%s:\n  want %s\n  got  %s\n", line, want, got);
    }
    onnx_model_free(m);
  }
  fclose(f);
  CHECK(mismatches == 0);
  CHECK(models > 1800);
  printf("manifest: %d models, %d rejected as unsupported, %d mismatches\n", models, unsupported,
         mismatches);
}

static void test_zoo(const char *shared) {
  char path[8192];
  snprintf(path, sizeof path, "%s/models/resnet18/model.onnx", shared);
  onnx_model *m;
  CHECK_OK(onnx_model_load(path, &m));
  if (m) {
    CHECK(m->ir_version == 8 && !strcmp(m->producer_name, "pytorch"));
    CHECK(m->weight_count == 11680872 && m->weight_bytes == 11680872 * 4);
    CHECK(m->n_viewed + m->n_copied == 26);
    /* a viewed initializer points into the mapping, a copied one owns its data */
    int viewed = 0;
    for (int i = 0; i < m->graph->n_values; i++) {
      const tensor *t = m->graph->values[i].constant;
      if (!t) continue;
      bool inside = (const char *)t->data >= (const char *)m->map &&
                    (const char *)t->data < (const char *)m->map + m->map_len;
      CHECK(inside == !t->owns_data);
      viewed += inside;
    }
    CHECK(viewed == m->n_viewed);
    ir_graph *g = m->graph;
    int conv = 0;
    for (int i = 0; i < g->n_nodes; i++) {
      if (strcmp(g->nodes[i].op_type, "Conv")) continue;
      conv++;
      CHECK(g->nodes[i].opset == 17);
      int nk;
      const int64_t *k = ir_attr_ints(&g->nodes[i], "kernel_shape", &nk);
      CHECK(k && nk == 2 && (k[0] == 1 || k[0] == 3 || k[0] == 7));
    }
    CHECK(conv == 20);
    onnx_model_free(m);
  }
  /* the public API */
  smelt_model *sm;
  CHECK_OK(smelt_model_load(path, &sm));
  if (sm) {
    smelt_value_info vi;
    CHECK(smelt_model_num_inputs(sm) == 1 && smelt_model_num_outputs(sm) == 1);
    CHECK_OK(smelt_model_input(sm, 0, &vi));
    CHECK(!strcmp(vi.name, "image") && vi.dtype == SMELT_F32 && vi.rank == 4);
    CHECK(vi.dims[0] < 0 && vi.dim_names[0] && !strcmp(vi.dim_names[0], "batch"));
    CHECK(vi.dims[1] == 3 && vi.dims[2] == 224 && vi.dims[3] == 224 && !vi.dim_names[1]);
    CHECK_OK(smelt_model_output(sm, 0, &vi));
    CHECK(!strcmp(vi.name, "logits") && vi.dtype == SMELT_F32 && vi.rank == 2 && vi.dims[1] == 1000);
    CHECK(smelt_model_input(sm, 1, &vi) == SMELT_ERR_INVALID_ARGUMENT);
    CHECK(smelt_model_output(sm, -1, &vi) == SMELT_ERR_INVALID_ARGUMENT);
    smelt_model_free(sm);
  }
  snprintf(path, sizeof path, "%s/models/gpt_tiny_kv/model.onnx", shared);
  CHECK_OK(smelt_model_load(path, &sm));
  if (sm) {
    smelt_value_info vi;
    CHECK(smelt_model_num_inputs(sm) == 9 && smelt_model_num_outputs(sm) == 9);
    CHECK_OK(smelt_model_input(sm, 1, &vi));
    CHECK(!strcmp(vi.name, "past.0.key") && vi.rank == 4 && vi.dims[1] == 4 && vi.dims[3] == 64);
    CHECK(!strcmp(vi.dim_names[0], "batch") && !strcmp(vi.dim_names[2], "past_seq"));
    CHECK_OK(smelt_model_output(sm, 1, &vi));
    CHECK(!strcmp(vi.name, "present.0.key") && !strcmp(vi.dim_names[2], "total_seq"));
    smelt_model_free(sm);
  }
  snprintf(path, sizeof path, "%s/models/bert_tiny/model.onnx", shared);
  CHECK_OK(onnx_model_load(path, &m));
  if (m) {
    CHECK(m->weight_count == 5351680 && m->graph->n_inputs == 2);
    const ir_value *v = &m->graph->values[m->graph->inputs[1]];
    CHECK(!strcmp(v->name, "attention_mask") && v->dtype == SMELT_I64);
    onnx_model_free(m);
  }
  /* a TYPE_PROTO attribute inside a subgraph (Optional's type) */
  snprintf(path, sizeof path, "%s/conformance/onnx-node/test_if_opt/model.onnx", shared);
  CHECK_OK(onnx_model_load(path, &m));
  if (m) {
    const ir_attr *tb = ir_attr_find(&m->graph->nodes[0], "then_branch");
    const ir_graph *sub = tb ? tb->g : NULL;
    const ir_attr *ty = sub && sub->n_nodes ? ir_attr_find(&sub->nodes[0], "type") : NULL;
    CHECK(ty && ty->type == IR_ATTR_TYPE_PROTO && ty->i == SMELT_F32 && !strcmp(ty->s, "sequence"));
    const ir_value *out = &m->graph->values[m->graph->outputs[0]];
    CHECK(out->kind == TENSOR_KIND_SEQUENCE && (out->flags & IR_VALUE_OPTIONAL));
    onnx_model_free(m);
  }
  CHECK(smelt_model_load("/nonexistent/model.onnx", &sm) == SMELT_ERR_IO);
  CHECK(strstr(smelt_last_error(), "/nonexistent/model.onnx: cannot open"));
}

/* Every strict prefix of a real model must fail cleanly. */
static void test_truncation(const char *shared, const char *test, bool every) {
  char path[8192];
  snprintf(path, sizeof path, "%s/conformance/onnx-node/%s/model.onnx", shared, test);
  size_t len;
  uint8_t *buf = test_read_file(path, &len);
  CHECK(buf != NULL);
  if (!buf) return;
  int failures = 0, tried = 0;
  size_t step = every ? 1 : len / 97 + 1;
  for (size_t n = 0; n < len; n += step) {
    uint8_t *copy = malloc(n ? n : 1); /* exact size, so ASan sees any overread */
    memcpy(copy, buf, n);
    onnx_model *m;
    smelt_status s = onnx_model_load_buffer(copy, n, NULL, &m);
    tried++;
    if (s == SMELT_OK) {
      fprintf(stderr, "  %s: prefix of %zu bytes loaded\n", test, n);
      onnx_model_free(m);
    } else {
      failures += smelt_last_error()[0] != 0;
    }
    free(copy);
  }
  CHECK(failures == tried);
  onnx_model *m;
  CHECK_OK(onnx_model_load_buffer(buf, len, NULL, &m));
  onnx_model_free(m);
  free(buf);
}

/* ---- bad files ---- */

static void test_bad_files(const char *tmp) {
  char path[4200];
  onnx_model *m;
  /* a directory */
  CHECK(onnx_model_load(tmp, &m) == SMELT_ERR_IO);
  CHECK(strstr(smelt_last_error(), "is a directory"));
  /* an empty file */
  snprintf(path, sizeof path, "%s/empty.onnx", tmp);
  CHECK(test_write_file(path, "", 0) == 0);
  CHECK(onnx_model_load(path, &m) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "empty.onnx: empty file"));
  /* text */
  snprintf(path, sizeof path, "%s/text.onnx", tmp);
  const char *text = "hello, this is not a model\n";
  CHECK(test_write_file(path, text, strlen(text)) == 0);
  CHECK(onnx_model_load(path, &m) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "text.onnx: not a valid ONNX model"));
  CHECK(!strchr(smelt_last_error(), '\n'));
  /* valid protobuf, but not a model */
  const uint8_t pb[] = {0x98, 0x06, 0x01}; /* field 99 = 1 */
  CHECK(onnx_model_load_buffer(pb, sizeof pb, NULL, &m) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "not an ONNX model"));
  /* a truncated file on disk names the path and the byte */
  pb_buf g = {0}, model = {0};
  b_input(&g, "x", 1, "2");
  b_node(&g, "relu", "Relu", NULL, "x", "y", NULL);
  b_output(&g, "y", 1, "2");
  b_model(&model, 8, 17, &g);
  uint8_t *data;
  size_t len;
  CHECK_OK(pb_buf_finish(&model, &data, &len));
  snprintf(path, sizeof path, "%s/cut.onnx", tmp);
  CHECK(test_write_file(path, data, len - 9) == 0);
  CHECK(onnx_model_load(path, &m) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "cut.onnx: not a valid ONNX model: truncated at byte"));
  snprintf(path, sizeof path, "%s/ok.onnx", tmp);
  CHECK(test_write_file(path, data, len) == 0);
  CHECK_OK(onnx_model_load(path, &m));
  onnx_model_free(m);
  free(data);
  CHECK(onnx_model_load_buffer(pb, 0, NULL, &m) == SMELT_ERR_INVALID_MODEL);
}

static void test_header(void) {
  struct { int64_t ir; smelt_status want; const char *text; } cases[] = {
      {2, SMELT_ERR_UNSUPPORTED, "ir_version 2 is too old"},
      {3, SMELT_OK, ""},
      {14, SMELT_OK, ""},
      {15, SMELT_ERR_UNSUPPORTED, "ir_version 15 is newer"},
      {-1, SMELT_ERR_UNSUPPORTED, "ir_version -1"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    pb_buf g = {0};
    b_input(&g, "x", 1, "2");
    b_node(&g, "n", "Relu", NULL, "x", "y", NULL);
    b_output(&g, "y", 1, "2");
    onnx_model *m;
    uint8_t *keep;
    smelt_status s = load_graph(&g, cases[i].ir, &m, &keep);
    CHECK(s == cases[i].want);
    CHECK(strstr(smelt_last_error(), cases[i].text));
    onnx_model_free(m);
    free(keep);
  }
  /* no graph, no opset_import, two opsets for one domain */
  pb_buf model = {0}, op = {0}, g = {0};
  pb_put_varint_field(&model, 1, 8);
  onnx_model *m;
  uint8_t *keep;
  CHECK(load_pb(&model, NULL, &m, &keep) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "model has no graph"));
  free(keep);
  pb_put_varint_field(&model, 1, 8);
  b_msg(&model, 7, &g);
  CHECK(load_pb(&model, NULL, &m, &keep) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "no opset_import"));
  free(keep);
  pb_put_varint_field(&model, 1, 8);
  b_msg(&model, 7, &g);
  for (int v = 17; v <= 18; v++) {
    pb_put_str_field(&op, 1, v == 17 ? "" : "ai.onnx");
    pb_put_varint_field(&op, 2, (uint64_t)v);
    b_msg(&model, 8, &op);
  }
  CHECK(load_pb(&model, NULL, &m, &keep) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "lists domain 'ai.onnx' twice"));
  free(keep);
}

/* ---- graph rules ---- */

static void test_out_of_order(void) {
  pb_buf g = {0};
  b_input(&g, "x", 1, "N,4");
  b_node(&g, "second", "Add", NULL, "a,x", "b", NULL); /* uses a before its producer */
  b_node(&g, "first", "Relu", NULL, "x", "a", NULL);
  b_node(&g, "opt", "Clip", NULL, "b,,", "c,", NULL); /* absent optional inputs/outputs */
  b_output(&g, "c", 1, "N,4");
  b_value_info(&g, 13, "a", 1, "N,?");
  b_value_info(&g, 13, "unused", 1, "1"); /* names no value: ignored */
  onnx_model *m;
  uint8_t *keep;
  CHECK_OK(load_graph(&g, 8, &m, &keep));
  if (m) {
    ir_graph *gr = m->graph;
    int a = value_id(gr, "a"), x = value_id(gr, "x"), b = value_id(gr, "b");
    CHECK(gr->n_nodes == 3 && a >= 0 && x >= 0);
    CHECK(gr->nodes[0].inputs[0] == a && gr->nodes[0].inputs[1] == x);
    CHECK(gr->values[a].producer == 1 && gr->values[b].producer == 0);
    CHECK(gr->nodes[2].n_inputs == 3 && gr->nodes[2].inputs[0] == b);
    CHECK(gr->nodes[2].inputs[1] == -1 && gr->nodes[2].inputs[2] == -1);
    CHECK(gr->nodes[2].n_outputs == 2 && gr->nodes[2].outputs[1] == -1);
    CHECK(gr->values[a].dtype == SMELT_F32 && gr->values[a].rank == 2);
    CHECK(gr->values[a].dims[0] == gr->values[x].dims[0] && gr->values[a].dims[1] == DIM_UNKNOWN);
    CHECK(gr->values[value_id(gr, "c")].flags & IR_VALUE_OUTPUT);
    CHECK(gr->nodes[0].opset == 17 && !strcmp(gr->nodes[0].name, "second"));
    CHECK(value_id(gr, "unused") < 0);
    onnx_model_free(m);
  }
  free(keep);
}

static void test_definition_errors(void) {
  pb_buf g = {0};
  b_input(&g, "x", 1, "2");
  b_node(&g, "add_7", "Add", NULL, "x,ghost", "y", NULL);
  b_output(&g, "y", 1, "2");
  expect_fail(&g, SMELT_ERR_INVALID_MODEL, "node 'add_7' (Add): input 1 'ghost' is not defined");
  b_input(&g, "x", 1, "2");
  b_node(&g, "one", "Relu", NULL, "x", "y", NULL);
  b_node(&g, "two", "Neg", NULL, "x", "y", NULL);
  b_output(&g, "y", 1, "2");
  expect_fail(&g, SMELT_ERR_INVALID_MODEL,
              "node 'two' (Neg): output 'y' is also produced by node 'one' (Relu)");
  b_input(&g, "x", 1, "2");
  b_node(&g, "n", "Relu", NULL, "x", "x", NULL);
  expect_fail(&g, SMELT_ERR_INVALID_MODEL, "output 'x' is also produced by a graph input");
  float w[2] = {1, 2};
  int64_t d[1] = {2};
  b_init_f32(&g, "w", 1, d, w, 2);
  b_init_f32(&g, "w", 1, d, w, 2);
  expect_fail(&g, SMELT_ERR_INVALID_MODEL, "initializer 'w' is defined more than once");
  b_init_f32(&g, "w", 1, d, w, 2);
  b_node(&g, "n", "Relu", NULL, "w", "w", NULL);
  expect_fail(&g, SMELT_ERR_INVALID_MODEL, "output 'w' is also produced by an initializer");
  b_input(&g, "x", 1, "2");
  b_input(&g, "x", 1, "2");
  expect_fail(&g, SMELT_ERR_INVALID_MODEL, "graph input 'x' is listed more than once");
  b_output(&g, "nowhere", 1, "2");
  expect_fail(&g, SMELT_ERR_INVALID_MODEL, "graph output 'nowhere' is not produced");
  b_node(&g, "n", "", NULL, NULL, "y", NULL);
  expect_fail(&g, SMELT_ERR_INVALID_MODEL, "node[0] 'n': node has no op_type");
  pb_buf sp = {0};
  pb_put_varint_field(&sp, 1, 1);
  b_msg(&g, 15, &sp);
  expect_fail(&g, SMELT_ERR_UNSUPPORTED, "sparse initializers are not supported");
  pb_put_bytes_field(&g, 2, "a\0b", 3);
  expect_fail(&g, SMELT_ERR_INVALID_MODEL, "contains a NUL byte");
}

static void test_initializer_inputs(void) {
  pb_buf g = {0};
  float w[3] = {1, 2, 3};
  int64_t d[1] = {3};
  b_init_f32(&g, "W", 1, d, w, 3);
  b_input(&g, "x", 1, "3");
  b_input(&g, "W", 1, "3"); /* older exporters list weights as inputs too */
  b_node(&g, "add", "Add", NULL, "x,W", "y", NULL);
  b_output(&g, "y", 1, "3");
  onnx_model *m;
  uint8_t *keep;
  CHECK_OK(load_graph(&g, 3, &m, &keep));
  if (m) {
    ir_graph *gr = m->graph;
    int wid = value_id(gr, "W");
    CHECK(gr->n_inputs == 1 && gr->inputs[0] == value_id(gr, "x"));
    CHECK(wid >= 0 && (gr->values[wid].flags & IR_VALUE_INITIALIZER));
    CHECK(!(gr->values[wid].flags & IR_VALUE_INPUT));
    const tensor *t = gr->values[wid].constant;
    CHECK(t && t->dtype == SMELT_F32 && t->rank == 1 && t->dims[0] == 3);
    CHECK(t && ((float *)t->data)[2] == 3.0f);
    CHECK(m->weight_count == 3 && m->weight_bytes == 12 && m->n_viewed + m->n_copied == 1);
    smelt_model sm = {.onnx = m};
    CHECK(smelt_model_num_inputs(&sm) == 1);
    onnx_model_free(m);
  }
  free(keep);
}

/* ---- attributes ---- */

static void test_attributes(void) {
  pb_buf g = {0}, attrs = {0}, t = {0};
  int64_t ints[4] = {1, -2, 1ll << 40, 0};
  float floats[2] = {0.5f, -1.25f};
  int64_t dims[2] = {2, 2};
  int32_t tv[4] = {1, 2, 3, 4};
  b_attr_int(&attrs, "i_typed", 7, 1);
  b_attr_int(&attrs, "i_old", -3, 0); /* no type field: inferred */
  b_attr_float(&attrs, "f_typed", 2.5f, 1);
  b_attr_float(&attrs, "f_old", -0.75f, 0);
  b_attr_string(&attrs, "s", "a\0b", 3, 1);
  b_attr_string(&attrs, "s_old", "mode", 4, 0);
  b_attr_ints(&attrs, "ints_packed", ints, 4, 1);
  b_attr_ints(&attrs, "ints_unpacked", ints, 3, 0);
  b_attr_ints(&attrs, "ints_empty", ints, 0, 1);
  b_attr_floats(&attrs, "floats", floats, 2);
  b_attr_strings(&attrs, "strings", "x,,yz");
  b_tensor_raw(&t, "tv", SMELT_I32, 2, dims, tv, sizeof tv);
  b_attr_msg(&attrs, "t", 4, 5, &t);
  pb_buf ts = {0};
  pb_put_str_field(&ts, 1, "ts"); /* TENSORS, type inferred */
  for (int k = 0; k < 2; k++) {
    b_tensor_raw(&t, NULL, SMELT_I32, 1, dims, tv + 2 * k, 8);
    b_msg(&ts, 10, &t);
  }
  b_msg(&attrs, 5, &ts);
  b_input(&g, "x", 1, "2");
  b_node(&g, "n", "Custom", "com.example", "x", "y", &attrs);
  b_output(&g, "y", 1, "2");
  onnx_model *m;
  uint8_t *keep;
  CHECK_OK(load_graph(&g, 8, &m, &keep));
  if (m) {
    const ir_node *n = &m->graph->nodes[0];
    CHECK(n->n_attrs == 13 && !strcmp(n->domain, "com.example") && n->op == NULL);
    CHECK(n->opset == 1); /* no opset_import for com.example */
    CHECK(ir_attr_int(n, "i_typed", 0) == 7 && ir_attr_int(n, "i_old", 0) == -3);
    CHECK(ir_attr_float(n, "f_typed", 0) == 2.5f && ir_attr_float(n, "f_old", 0) == -0.75f);
    const ir_attr *s = ir_attr_find(n, "s");
    CHECK(s && s->type == IR_ATTR_STRING && s->s_len == 3 && !memcmp(s->s, "a\0b", 4));
    CHECK(!strcmp(ir_attr_string(n, "s_old", ""), "mode"));
    int cnt;
    const int64_t *iv = ir_attr_ints(n, "ints_packed", &cnt);
    CHECK(iv && cnt == 4 && iv[1] == -2 && iv[2] == 1ll << 40 && iv[3] == 0);
    iv = ir_attr_ints(n, "ints_unpacked", &cnt);
    CHECK(iv && cnt == 3 && iv[2] == 1ll << 40);
    const ir_attr *e = ir_attr_find(n, "ints_empty");
    CHECK(e && e->type == IR_ATTR_INTS && e->n == 0);
    const float *fv = ir_attr_floats(n, "floats", &cnt);
    CHECK(fv && cnt == 2 && fv[1] == -1.25f);
    const ir_attr *ss = ir_attr_find(n, "strings");
    CHECK(ss && ss->n == 3 && !strcmp(ss->strings[0], "x") && !strcmp(ss->strings[1], "") &&
          !strcmp(ss->strings[2], "yz"));
    const ir_attr *ta = ir_attr_find(n, "t");
    CHECK(ta && ta->t && ta->t->dtype == SMELT_I32 && ta->t->rank == 2 &&
          ((int32_t *)ta->t->data)[3] == 4);
    const ir_attr *tl = ir_attr_find(n, "ts");
    CHECK(tl && tl->type == IR_ATTR_TENSORS && tl->n == 2 && ((int32_t *)tl->tensors[1]->data)[1] == 4);
    onnx_model_free(m);
  }
  free(keep);
  /* errors */
  pb_buf a = {0};
  pb_put_str_field(&a, 1, "alpha");
  pb_put_str_field(&a, 21, "outer_alpha");
  pb_put_varint_field(&a, 20, 1);
  b_msg(&attrs, 5, &a);
  b_node(&g, "n", "Elu", NULL, NULL, "y", &attrs);
  expect_fail(&g, SMELT_ERR_INVALID_MODEL, "node 'n' (Elu): attribute 'alpha': ref_attr_name");
  b_attr_int(&attrs, "axis", 1, 1);
  b_attr_int(&attrs, "axis", 2, 1);
  b_node(&g, "n", "Concat", NULL, NULL, "y", &attrs);
  expect_fail(&g, SMELT_ERR_INVALID_MODEL, "attribute 'axis' is given more than once");
  pb_put_str_field(&a, 1, "nothing");
  b_msg(&attrs, 5, &a);
  b_node(&g, "n", "X", NULL, NULL, "y", &attrs);
  expect_fail(&g, SMELT_ERR_INVALID_MODEL, "attribute 'nothing': attribute has no type and no value");
  pb_put_varint_field(&a, 3, 1);
  b_msg(&attrs, 5, &a);
  b_node(&g, "n", "X", NULL, NULL, "y", &attrs);
  expect_fail(&g, SMELT_ERR_INVALID_MODEL, "attribute has no name");
  b_tensor_raw(&t, NULL, SMELT_F32, 1, dims, tv, 4); /* 4 bytes for 2 floats */
  b_attr_msg(&attrs, "value", 4, 5, &t);
  b_node(&g, "c", "Constant", NULL, NULL, "y", &attrs);
  expect_fail(&g, SMELT_ERR_INVALID_MODEL,
              "node 'c' (Constant): attribute 'value': raw_data has 4 bytes, expected 8");
}

/* ---- subgraphs ---- */

/* An If whose branches read x (outer) and late (made by a later outer node). */
static void test_subgraphs(void) {
  pb_buf g = {0}, attrs = {0}, then_g = {0}, else_g = {0};
  pb_put_str_field(&then_g, 2, "then_body");
  b_node(&then_g, "t_add", "Add", NULL, "x,late", "t_out", NULL);
  b_output(&then_g, "t_out", 1, "2");
  pb_put_str_field(&else_g, 2, "else_body");
  b_output(&else_g, "x", 1, "2"); /* an outer value straight through */
  b_attr_msg(&attrs, "then_branch", 5, 6, &then_g);
  b_attr_msg(&attrs, "else_branch", 5, 6, &else_g);
  b_input(&g, "cond", 9, "");
  b_input(&g, "x", 1, "2");
  b_node(&g, "if", "If", NULL, "cond", "y", &attrs);
  b_node(&g, "make_late", "Neg", NULL, "x", "late", NULL);
  b_output(&g, "y", 1, "2");
  onnx_model *m;
  uint8_t *keep;
  CHECK_OK(load_graph(&g, 8, &m, &keep));
  if (m) {
    ir_graph *gr = m->graph;
    const ir_attr *ta = ir_attr_find(&gr->nodes[0], "then_branch");
    const ir_attr *ea = ir_attr_find(&gr->nodes[0], "else_branch");
    CHECK(ta && ta->g && ea && ea->g);
    if (ta && ta->g && ea && ea->g) {
      ir_graph *tg = ta->g, *eg = ea->g;
      CHECK(tg->parent == gr && !strcmp(tg->name, "then_body") && tg->n_nodes == 1);
      int lx = value_id(tg, "x"), ll = value_id(tg, "late");
      CHECK(lx >= 0 && (tg->values[lx].flags & IR_VALUE_OUTER));
      CHECK(tg->values[lx].outer_id == value_id(gr, "x") && tg->values[lx].dtype == SMELT_F32);
      CHECK(ll >= 0 && tg->values[ll].outer_id == value_id(gr, "late"));
      CHECK(tg->nodes[0].inputs[0] == lx && tg->nodes[0].inputs[1] == ll);
      CHECK(tg->nodes[0].opset == 17); /* from the enclosing model */
      CHECK(eg->n_outputs == 1 && (eg->values[eg->outputs[0]].flags & IR_VALUE_OUTER));
    }
    onnx_model_free(m);
  }
  free(keep);
  /* an undefined name inside a subgraph names the path */
  b_node(&then_g, "bad", "Relu", NULL, "nowhere", "o", NULL);
  b_output(&then_g, "o", 1, "2");
  pb_put_str_field(&then_g, 2, "body");
  b_attr_msg(&attrs, "then_branch", 5, 6, &then_g);
  b_input(&g, "c", 9, "");
  b_node(&g, "if_3", "If", NULL, "c", "y", &attrs);
  expect_fail(&g, SMELT_ERR_INVALID_MODEL,
              "node 'if_3' (If): attribute 'then_branch': graph 'body': node 'bad' (Relu): input 0 "
              "'nowhere' is not defined");
  /* GRAPHS attribute */
  pb_buf g1 = {0}, g2 = {0}, a = {0};
  b_output(&g1, "x", 1, NULL);
  b_output(&g2, "x", 1, NULL);
  pb_put_str_field(&a, 1, "bodies");
  b_msg(&a, 11, &g1);
  b_msg(&a, 11, &g2);
  b_msg(&attrs, 5, &a);
  b_input(&g, "x", 1, "2");
  b_node(&g, "n", "Multi", "x.y", "x", "y", &attrs);
  b_output(&g, "y", 1, "2");
  CHECK_OK(load_graph(&g, 8, &m, &keep));
  if (m) {
    const ir_attr *at = ir_attr_find(&m->graph->nodes[0], "bodies");
    CHECK(at && at->type == IR_ATTR_GRAPHS && at->n == 2 && at->graphs[1]->parent == m->graph);
    onnx_model_free(m);
  }
  free(keep);
}

/* depth nested If graphs, each level's then_branch holding the next. */
static void nested(pb_buf *g, int depth) {
  b_input(g, "x", 1, "1");
  if (depth > 0) {
    pb_buf attrs = {0}, sub = {0};
    nested(&sub, depth - 1);
    b_attr_msg(&attrs, "then_branch", 5, 6, &sub);
    b_node(g, "if", "If", NULL, "x", "y", &attrs);
  }
  b_output(g, "x", 1, "1");
}

static void test_nesting(void) {
  for (int depth = 63; depth <= 66; depth++) {
    pb_buf g = {0};
    /* the outermost graph is the model's; depth counts subgraphs below it */
    pb_buf attrs = {0}, sub = {0};
    nested(&sub, depth - 1);
    b_attr_msg(&attrs, "then_branch", 5, 6, &sub);
    b_input(&g, "x", 1, "1");
    b_node(&g, "if", "If", NULL, "x", "y", &attrs);
    b_output(&g, "y", 1, "1");
    onnx_model *m;
    uint8_t *keep;
    smelt_status s = load_graph(&g, 8, &m, &keep);
    CHECK(depth <= 64 ? s == SMELT_OK : s == SMELT_ERR_UNSUPPORTED);
    CHECK(depth <= 64 || strstr(smelt_last_error(), "nest deeper than 64"));
    onnx_model_free(m);
    free(keep);
  }
}

/* ---- types ---- */

static void put_type_wrap(pb_buf *type, uint32_t field, pb_buf *inner) {
  pb_buf w = {0};
  b_msg(&w, 1, inner);
  b_msg(type, field, &w);
}

static void test_types(void) {
  pb_buf g = {0}, vi = {0}, type = {0}, inner = {0}, inner2 = {0};
  /* seq(float) */
  b_tensor_type(&inner, 1, "3");
  pb_put_str_field(&vi, 1, "s");
  put_type_wrap(&type, 4, &inner);
  b_msg(&vi, 2, &type);
  b_msg(&g, 11, &vi);
  /* optional(tensor(int64)[N]) */
  b_tensor_type(&inner, 7, "N");
  pb_put_str_field(&vi, 1, "o");
  put_type_wrap(&type, 9, &inner);
  b_msg(&vi, 2, &type);
  b_msg(&g, 11, &vi);
  /* optional(seq(f16)) */
  b_tensor_type(&inner2, 10, NULL);
  put_type_wrap(&inner, 4, &inner2);
  pb_put_str_field(&vi, 1, "os");
  put_type_wrap(&type, 9, &inner);
  b_msg(&vi, 2, &type);
  b_msg(&g, 11, &vi);
  b_input(&g, "untyped", -1, NULL);
  b_input(&g, "noshape", 6, NULL);
  b_input(&g, "scalar", 11, "");
  b_input(&g, "dims", 1, "N,?,7,M");
  b_node(&g, "n", "Identity", NULL, "s", "out", NULL);
  b_output(&g, "out", 1, NULL);
  onnx_model *m;
  uint8_t *keep;
  CHECK_OK(load_graph(&g, 8, &m, &keep));
  if (m) {
    ir_graph *gr = m->graph;
    const ir_value *s = &gr->values[value_id(gr, "s")], *o = &gr->values[value_id(gr, "o")];
    const ir_value *os = &gr->values[value_id(gr, "os")], *u = &gr->values[value_id(gr, "untyped")];
    CHECK(s->kind == TENSOR_KIND_SEQUENCE && s->dtype == SMELT_F32 && !(s->flags & IR_VALUE_OPTIONAL));
    CHECK(o->kind == TENSOR_KIND_TENSOR && o->dtype == SMELT_I64 && (o->flags & IR_VALUE_OPTIONAL));
    CHECK(o->rank == 1 && o->dims[0] <= DIM_SYM_BASE);
    CHECK(os->kind == TENSOR_KIND_SEQUENCE && os->dtype == SMELT_F16 && (os->flags & IR_VALUE_OPTIONAL));
    CHECK(u->dtype == SMELT_UNDEFINED && u->rank == -1);
    const ir_value *ns = &gr->values[value_id(gr, "noshape")];
    const ir_value *sc = &gr->values[value_id(gr, "scalar")];
    const ir_value *d = &gr->values[value_id(gr, "dims")];
    CHECK(ns->dtype == SMELT_I32 && ns->rank == -1 && sc->dtype == SMELT_F64 && sc->rank == 0);
    CHECK(d->rank == 4 && d->dims[0] == o->dims[0] && d->dims[1] == DIM_UNKNOWN && d->dims[2] == 7);
    CHECK(d->dims[3] <= DIM_SYM_BASE && d->dims[3] != d->dims[0]);
    CHECK(gr->n_syms == 2 && !strcmp(gr->syms[dim_sym_index(d->dims[3])], "M"));
    onnx_model_free(m);
  }
  free(keep);
  /* map types, too many dims, bad element type */
  pb_buf mp = {0};
  pb_put_varint_field(&mp, 1, 8);
  pb_put_str_field(&vi, 1, "m");
  b_msg(&type, 5, &mp);
  b_msg(&vi, 2, &type);
  b_msg(&g, 11, &vi);
  expect_fail(&g, SMELT_ERR_UNSUPPORTED, "graph input[0]: map types are not supported");
  b_input(&g, "big", 1, "1,1,1,1,1,1,1,1,1,1,1,1,1");
  expect_fail(&g, SMELT_ERR_UNSUPPORTED, "more than 12 dims");
  b_input(&g, "e", 27, "1");
  expect_fail(&g, SMELT_ERR_UNSUPPORTED, "element type 27 (float6e2m3) is not supported");
  /* sequences nested past the limit */
  b_tensor_type(&inner, 1, NULL);
  for (int i = 0; i < 40; i++) {
    pb_buf w = {0};
    put_type_wrap(&w, 4, &inner);
    inner = w;
  }
  pb_put_str_field(&vi, 1, "deep");
  b_msg(&vi, 2, &inner);
  b_msg(&g, 11, &vi);
  expect_fail(&g, SMELT_ERR_INVALID_MODEL, "types nest deeper than");
}

/* ---- external data ---- */

static void ext_tensor(pb_buf *g, const char *name, const char *loc, const char *off,
                       const char *length, int64_t n) {
  pb_buf t = {0}, e = {0};
  pb_put_varint_field(&t, 1, (uint64_t)n);
  pb_put_varint_field(&t, 2, SMELT_F32);
  pb_put_str_field(&t, 8, name);
  const char *kv[3][2] = {{"location", loc}, {"offset", off}, {"length", length}};
  for (int i = 0; i < 3; i++) {
    if (!kv[i][1]) continue;
    pb_put_str_field(&e, 1, kv[i][0]);
    pb_put_str_field(&e, 2, kv[i][1]);
    b_msg(&t, 13, &e);
  }
  pb_put_varint_field(&t, 14, 1);
  b_msg(g, 5, &t);
}

/* Writes dir/model.onnx holding one external initializer; returns load status. */
static smelt_status ext_load(const char *dir, const char *loc, const char *off, const char *len,
                             int64_t n, onnx_model **m) {
  pb_buf g = {0}, model = {0};
  ext_tensor(&g, "w", loc, off, len, n);
  b_node(&g, "n", "Relu", NULL, "w", "y", NULL);
  b_output(&g, "y", 1, NULL);
  b_model(&model, 8, 17, &g);
  uint8_t *data;
  size_t size;
  char path[4200];
  CHECK_OK(pb_buf_finish(&model, &data, &size));
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  CHECK(test_write_file(path, data, size) == 0);
  free(data);
  return onnx_model_load(path, m);
}

static void expect_ext(const char *dir, const char *loc, const char *off, const char *len,
                       int64_t n, smelt_status code, const char *text) {
  onnx_model *m;
  smelt_status s = ext_load(dir, loc, off, len, n, &m);
  CHECK(s == code);
  if (s != code || !strstr(smelt_last_error(), text))
    fprintf(stderr, "  %s: got '%s', wanted '%s'\n", loc, smelt_last_error(), text);
  CHECK(!s || strstr(smelt_last_error(), text));
  onnx_model_free(m);
}

static void test_external(const char *tmp) {
  char dir[4200], path[4300], outside[4300];
  snprintf(dir, sizeof dir, "%s/ext", tmp);
  mkdir(dir, 0755);
  snprintf(path, sizeof path, "%s/sub", dir);
  mkdir(path, 0755);
  float w[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  snprintf(path, sizeof path, "%s/sub/w.bin", dir);
  CHECK(test_write_file(path, w, sizeof w) == 0);
  snprintf(outside, sizeof outside, "%s/outside.bin", tmp);
  CHECK(test_write_file(outside, w, sizeof w) == 0);
  snprintf(path, sizeof path, "%s/escape.bin", dir);
  CHECK(symlink(outside, path) == 0);
  onnx_model *m;
  /* aligned offset: viewed in place; odd offset: copied */
  CHECK_OK(ext_load(dir, "sub/w.bin", "8", "16", 4, &m));
  if (m) {
    const tensor *t = m->graph->values[value_id(m->graph, "w")].constant;
    CHECK(t && !t->owns_data && ((float *)t->data)[0] == 2.0f && ((float *)t->data)[3] == 5.0f);
    CHECK(m->n_viewed == 1 && m->ext && m->weight_bytes == 16);
    onnx_model_free(m);
  }
  CHECK_OK(ext_load(dir, "./sub/w.bin", "2", NULL, 2, &m));
  if (m) {
    const tensor *t = m->graph->values[value_id(m->graph, "w")].constant;
    uint8_t want[8];
    memcpy(want, (uint8_t *)w + 2, 8);
    CHECK(t && t->owns_data && !memcmp(t->data, want, 8) && m->n_copied == 1);
    onnx_model_free(m);
  }
  snprintf(path, sizeof path, "%s/sub/w.bin", dir);
  expect_ext(dir, path, "0", NULL, 2, SMELT_ERR_INVALID_MODEL, "is an absolute path");
  expect_ext(dir, "sub/../../outside.bin", "0", NULL, 2, SMELT_ERR_INVALID_MODEL, "contains '..'");
  expect_ext(dir, "escape.bin", "0", NULL, 2, SMELT_ERR_INVALID_MODEL,
             "'escape.bin' resolves outside the model's folder");
  expect_ext(dir, "sub/w.bin", "32", NULL, 2, SMELT_ERR_INVALID_MODEL, "outside the 36-byte file");
  expect_ext(dir, "sub/w.bin", "18446744073709551615", NULL, 2, SMELT_ERR_INVALID_MODEL,
             "outside the 36-byte file");
  expect_ext(dir, "sub/w.bin", "0", "12", 2, SMELT_ERR_INVALID_MODEL,
             "length 12 does not match the tensor's 8 bytes");
  expect_ext(dir, "sub/w.bin", "x1", NULL, 2, SMELT_ERR_INVALID_MODEL, "offset 'x1' is not a number");
  expect_ext(dir, "missing.bin", "0", NULL, 2, SMELT_ERR_IO, "external data file 'missing.bin'");
  expect_ext(dir, "sub", "0", NULL, 2, SMELT_ERR_INVALID_MODEL, "is not a regular file");
  expect_ext(dir, "", "0", NULL, 2, SMELT_ERR_INVALID_MODEL, "location is empty");
  /* from a buffer: only with a folder */
  pb_buf g = {0}, model = {0};
  ext_tensor(&g, "w", "sub/w.bin", "0", NULL, 9);
  b_output(&g, "w", 1, NULL);
  b_model(&model, 8, 17, &g);
  uint8_t *data;
  size_t size;
  CHECK_OK(pb_buf_finish(&model, &data, &size));
  CHECK(onnx_model_load_buffer(data, size, NULL, &m) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "needs the model's folder"));
  CHECK_OK(onnx_model_load_buffer(data, size, dir, &m));
  if (m) {
    const tensor *t = m->graph->values[value_id(m->graph, "w")].constant;
    CHECK(t && t->nbytes == 36 && ((float *)t->data)[8] == 8.0f);
    onnx_model_free(m);
  }
  free(data);
}

static void rm_tree(const char *tmp) {
  char cmd[4300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
  CHECK(system(cmd) == 0);
}

int main(int argc, char **argv) {
  char tmp[] = "/tmp/smelt_onnx_test_XXXXXX";
  CHECK(mkdtemp(tmp) != NULL);
  test_bad_files(tmp);
  test_header();
  test_out_of_order();
  test_definition_errors();
  test_initializer_inputs();
  test_attributes();
  test_subgraphs();
  test_nesting();
  test_types();
  test_external(tmp);
  rm_tree(tmp);

  char buf[4096];
  const char *shared = test_shared_dir(argc, argv, buf, sizeof buf);
  if (shared) {
    char manifest[8192];
    snprintf(manifest, sizeof manifest, "%s", __FILE__);
    char *slash = strrchr(manifest, '/');
    if (slash) snprintf(slash, sizeof manifest - (size_t)(slash - manifest),
                        "/../data/onnx_manifest.txt");
    test_manifest(shared, manifest);
    test_zoo(shared);
    test_truncation(shared, "test_loop11", true);
    test_truncation(shared, "test_if_opt", true);
    test_truncation(shared, "test_affine_grid_2d_expanded", false);
  } else {
    test_skip("test_onnx_load", "the shared models: no shared folder (pass it as argv[1] or SMELT_SHARED)");
  }
  return test_report("onnx_load");
}
