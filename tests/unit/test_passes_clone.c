/* ir_graph_clone, ir_graph_compact and ir_graph_print. */
#include "check.h"
#include "passes_util.h"

static char *listing(const ir_graph *g) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ir_graph_print(f, g);
  fclose(f);
  return text;
}

/* A subgraph of g (for an attribute) reading outer value `name` twice. */
static ir_graph *branch(ir_graph *g, const char *outer, const char *op, const char *out) {
  ir_graph *sg = ir_graph_new(g);
  sg->name = "branch";
  int a = ir_graph_resolve_value(sg, outer), y, id;
  ir_graph_add_value(sg, out, &y);
  ir_graph_add_node(sg, "b", op, "", 2, 1, 0, &id);
  sg->nodes[id].inputs[0] = sg->nodes[id].inputs[1] = a;
  sg->nodes[id].outputs[0] = y;
  sg->nodes[id].op = ops_find("", op);
  sg->values[y].producer = id;
  ir_graph_add_output(sg, y);
  return sg;
}

/* x, c -> early dead Sub; a = Add(x, c); If(cond) { a*a } else { a+a } -> y; z = Relu(a) */
static ir_graph *build(void) {
  ir_graph *g = gb_new();
  int64_t d4 = 4;
  gb_input(g, "x", SMELT_F32, 1, &d4);
  gb_input(g, "cond", SMELT_BOOL, 0, NULL);
  gb_const(g, "c", 1, &d4, 3);
  gb_node(g, "Sub", "x,c", "dead", 0);
  gb_node(g, "Add", "x,c", "a", 0);
  int iff = gb_node(g, "If", "cond", "y", 2);
  ir_attr *at = g->nodes[iff].attrs;
  at[0] = (ir_attr){.name = "then_branch", .type = IR_ATTR_GRAPH, .g = branch(g, "a", "Mul", "t")};
  at[1] = (ir_attr){.name = "else_branch", .type = IR_ATTR_GRAPH, .g = branch(g, "a", "Add", "e")};
  gb_node(g, "Relu", "a", "z", 0);
  gb_output(g, "y");
  gb_output(g, "z");
  return g;
}

static void test_clone(void) {
  ir_graph *g = build(), *c = NULL;
  CHECK_OK(gb_finish(g));
  CHECK_OK(ir_graph_clone(g, &c));
  if (!c) return;
  char *a = listing(g), *b = listing(c);
  CHECK(!strcmp(a, b));
  CHECK(strstr(a, "%a:f32[4] = Add(%x, %c)") != NULL);
  CHECK(strstr(a, "graph 'branch'") != NULL);
  free(a);
  free(b);
  CHECK(c->n_nodes == g->n_nodes && c->n_values == g->n_values && c->n_syms == g->n_syms);
  int cv = ir_graph_find_value(c, "c");
  CHECK(cv >= 0 && c->values[cv].constant != g->values[cv].constant);
  CHECK(c->values[cv].constant->data == g->values[cv].constant->data); /* a view */
  CHECK(!c->values[cv].constant->owns_data);
  const ir_node *cif = &c->nodes[2], *gif = &g->nodes[2];
  CHECK(cif->attrs[0].g != gif->attrs[0].g && cif->attrs[0].g->parent == c);
  CHECK(cif->attrs[1].g->parent == c);
  int outer = cif->attrs[0].g->values[0].outer_id;
  CHECK(cif->attrs[0].g->values[0].flags & IR_VALUE_OUTER);
  CHECK(outer == ir_graph_find_value(c, "a"));
  CHECK(!strcmp(cif->attrs[0].name, "then_branch") && cif->attrs[0].name != gif->attrs[0].name);
  CHECK_OK(ir_graph_validate(c));
  ir_graph_free(c);
  /* the source is untouched by the clone's lifetime */
  CHECK(g->values[cv].constant->data != NULL && ir_graph_find_value(g, "dead") >= 0);
  ir_graph_free(g);
}

static void test_compact(void) {
  ir_graph *g = build(), *c = NULL;
  CHECK_OK(ir_graph_clone(g, &c));
  if (!c) return;
  bool dead[8] = {false};
  dead[0] = true; /* the Sub: its output value goes too, shifting every later id */
  int a_before = ir_graph_find_value(c, "a");
  ir_graph *then_g = c->nodes[2].attrs[0].g;
  CHECK_OK(ir_graph_compact(c, dead));
  CHECK(c->n_nodes == 3);
  CHECK(ir_graph_find_value(c, "dead") < 0);
  int a = ir_graph_find_value(c, "a");
  CHECK(a >= 0 && a < a_before);
  CHECK(!strcmp(c->nodes[0].op_type, "Add") && c->nodes[0].outputs[0] == a);
  CHECK(c->values[a].producer == 0);
  /* the subgraphs moved with their node, re-parented and re-pointed */
  CHECK(c->nodes[1].attrs[0].g == then_g && then_g->parent == c);
  CHECK(then_g->values[0].outer_id == a);
  CHECK(c->nodes[1].attrs[1].g->values[0].outer_id == a);
  int cv = ir_graph_find_value(c, "c");
  CHECK(cv >= 0 && c->values[cv].constant && c->values[cv].constant->data == g->values[cv].constant->data);
  CHECK_OK(ir_graph_validate(c));
  /* an unused initializer is dropped even with no node removed */
  int64_t d1 = 1;
  gb_const(c, "unused", 1, &d1, 5);
  int n_values = c->n_values;
  CHECK_OK(ir_graph_compact(c, NULL));
  CHECK(c->n_values == n_values - 1 && ir_graph_find_value(c, "unused") < 0);
  CHECK(ir_graph_find_value(c, "x") >= 0 && ir_graph_find_value(c, "cond") >= 0);
  ir_graph_free(c);
  ir_graph_free(g);
}

/* Clone + compact keep a runnable graph: same results as the source. */
static void test_runs(void) {
  ir_graph *g = gb_new();
  int64_t d[2] = {3, 5};
  gb_input(g, "x", SMELT_F32, 2, d);
  gb_const(g, "w", 2, (int64_t[]){5, 4}, 2);
  gb_node(g, "MatMul", "x,w", "m", 0);
  gb_node(g, "Identity", "m", "y", 0);
  gb_node(g, "Neg", "x", "unused", 0);
  gb_output(g, "y");
  CHECK_OK(gb_finish(g));
  passes_equiv e;
  CHECK_OK(check_pass(g, pass_dce, &e));
  CHECK(e.ok && e.changes == 1 && e.nodes_after == 2);
  passes_equiv_free(&e);
  CHECK_OK(check_pass(g, pass_noop, &e));
  /* the Identity writes the graph output: the MatMul now writes 'y' instead */
  CHECK(e.ok && e.changes == 1 && count_op(e.rewritten, "Identity") == 0);
  int y = e.rewritten->outputs[0];
  CHECK(!strcmp(e.rewritten->values[y].name, "y"));
  CHECK(e.rewritten->values[y].producer >= 0 &&
        !strcmp(e.rewritten->nodes[e.rewritten->values[y].producer].op_type, "MatMul"));
  passes_equiv_free(&e);
  ir_graph_free(g);
}

int main(void) {
  test_clone();
  test_compact();
  test_runs();
  return test_report("test_passes_clone");
}
