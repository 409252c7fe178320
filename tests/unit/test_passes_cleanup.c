/* The cleanup passes one by one (fold, dce, cse, noop, simplify) on small
 * graphs: what they change, and that eager gives the same results after. */
#include "check.h"
#include "passes_util.h"

/* Runs one pass and checks equivalence; returns the rewritten graph (owned by e). */
static const ir_graph *run_one(ir_graph *g, pass_fn fn, tensor *const *in, passes_equiv *e) {
  CHECK_OK(gb_finish(g));
  check_opts co = {.pass = fn};
  CHECK_OK(check_rewrite(g, in, &co, e));
  CHECK(e->ok);
  return e->rewritten;
}

/* ---- fold ---- */

static void test_fold_shape_arith(void) {
  ir_graph *g = gb_new();
  int64_t sym;
  ir_graph_sym(g, "batch", &sym);
  gb_input(g, "x", SMELT_F32, 2, (int64_t[]){sym, 6});
  gb_ints(g, "zero", 1, (int64_t[]){0});
  gb_const_t(g, "idx", SMELT_I64, 0, NULL, (int64_t[]){0}, 0);
  gb_ints(g, "rest", 2, (int64_t[]){-1, 2});
  gb_node(g, "Shape", "x", "s", 0);
  int ga = gb_node(g, "Gather", "s,idx", "b", 1);
  gb_attr_int(g, ga, 0, "axis", 0);
  gb_node(g, "Unsqueeze", "b,zero", "u", 0);
  int cat = gb_node(g, "Concat", "u,rest", "shape", 1);
  gb_attr_int(g, cat, 0, "axis", 0);
  gb_node(g, "Reshape", "x,shape", "y", 0);
  gb_output(g, "y");
  tensor x = {0}, *in[] = {&x};
  inputs_generate(&x, SMELT_F32, 2, (int64_t[]){3, 6}, 1, 0, 0);
  passes_equiv e;
  const ir_graph *r = run_one(g, pass_fold, in, &e);
  /* Shape of a specialized input is a constant even though x is not */
  CHECK(e.changes == 4);
  CHECK(r && r->n_nodes == 1 && count_op(r, "Reshape") == 1);
  if (r && r->n_nodes == 1) {
    int sv = r->nodes[0].inputs[1];
    const tensor *t = r->values[sv].constant;
    CHECK(t && tensor_numel(t) == 3 && tensor_get_i64(t, 0) == 3 && tensor_get_i64(t, 1) == -1);
    int y = r->outputs[0];
    CHECK(r->values[y].rank == 3 && r->values[y].dims[0] == 3 && r->values[y].dims[1] == 3);
  }
  passes_equiv_free(&e);
  tensor_release(&x);
  ir_graph_free(g);
}

/* x's first two dims as exporters compute them: s = Shape(x), d0 / d1 =
 * Gather(s, 0 / 1) (scalars), u0 / u1 = Unsqueeze(d0 / d1, [0]); the graph
 * must hold the constants zero ([0]), i0 and i1 (scalars 0 and 1). */
static void leading_dims(ir_graph *g) {
  gb_node(g, "Shape", "x", "s", 0);
  int g0 = gb_node(g, "Gather", "s,i0", "d0", 1);
  int g1 = gb_node(g, "Gather", "s,i1", "d1", 1);
  gb_attr_int(g, g0, 0, "axis", 0);
  gb_attr_int(g, g1, 0, "axis", 0);
  gb_node(g, "Unsqueeze", "d0,zero", "u0", 0);
  gb_node(g, "Unsqueeze", "d1,zero", "u1", 0);
}

/* A graph over x [batch, seq, last] (and m [batch, 1, seq] when with_m),
 * the symbols in *b and *q, with the constants leading_dims reads. */
static ir_graph *sym_graph(int64_t *b, int64_t *q, int64_t last, bool with_m) {
  ir_graph *g = gb_new();
  ir_graph_sym(g, "batch", b);
  ir_graph_sym(g, "seq", q);
  gb_input(g, "x", SMELT_F32, 3, (int64_t[]){*b, *q, last});
  if (with_m) gb_input(g, "m", SMELT_F32, 3, (int64_t[]){*b, 1, *q});
  gb_ints(g, "zero", 1, (int64_t[]){0});
  gb_const_t(g, "i0", SMELT_I64, 0, NULL, (int64_t[]){0}, 0);
  gb_const_t(g, "i1", SMELT_I64, 0, NULL, (int64_t[]){1}, 0);
  return g;
}

/* The whole pipeline on sym_graph's g left generic, checked against eager on
 * x [2, 5, last] (and m [2, 1, 5]); the inputs are released. */
static const ir_graph *run_generic(ir_graph *g, int64_t last, bool with_m, passes_equiv *e) {
  tensor x = {0}, m = {0}, *in[] = {&x, &m};
  inputs_generate(&x, SMELT_F32, 3, (int64_t[]){2, 5, last}, 1, 0, 0);
  if (with_m) inputs_generate(&m, SMELT_F32, 3, (int64_t[]){2, 1, 5}, 2, 1, 0);
  CHECK_OK(gb_finish(g));
  check_opts co = {.generic = true};
  CHECK_OK(check_rewrite(g, in, &co, e));
  CHECK(e->ok);
  tensor_release(&x);
  tensor_release(&m);
  return e->rewritten;
}

/* Gather and Slice of a Shape whose picked dims are concrete fold although
 * others stay symbolic (x [batch, 6, seq]): Gather(s, 1) and Gather(s, -2)
 * give 6, Slice(s, 1, 2) gives [6], Slice(s, -2, 99) picks seq too and
 * stays, as does Gather(s, 0); the result feeds an output computed from
 * all of them, checked against eager on an input of [3, 6, 5]. */
static void test_fold_shape_pieces(void) {
  ir_graph *g = gb_new();
  int64_t b, q;
  ir_graph_sym(g, "batch", &b);
  ir_graph_sym(g, "seq", &q);
  gb_input(g, "x", SMELT_F32, 3, (int64_t[]){b, 6, q});
  gb_ints(g, "zero", 1, (int64_t[]){0});
  gb_const_t(g, "i0", SMELT_I64, 0, NULL, (int64_t[]){0}, 0);
  gb_const_t(g, "i1", SMELT_I64, 0, NULL, (int64_t[]){1}, 0);
  gb_ints(g, "im2", 1, (int64_t[]){-2});
  gb_ints(g, "s1", 1, (int64_t[]){1});
  gb_ints(g, "e2", 1, (int64_t[]){2});
  gb_ints(g, "sm2", 1, (int64_t[]){-2});
  gb_ints(g, "e99", 1, (int64_t[]){99});
  gb_node(g, "Shape", "x", "s", 0);
  const char *gathers[][2] = {{"s,i0", "g0"}, {"s,i1", "g1"}, {"s,im2", "g2"}};
  for (int k = 0; k < 3; k++) {
    int ga = gb_node(g, "Gather", gathers[k][0], gathers[k][1], 1);
    gb_attr_int(g, ga, 0, "axis", 0);
  }
  gb_node(g, "Slice", "s,s1,e2", "sl", 0);
  gb_node(g, "Slice", "s,sm2,e99", "sl2", 0);
  gb_node(g, "Unsqueeze", "g0,zero", "u0", 0);
  gb_node(g, "Unsqueeze", "g1,zero", "u1", 0);
  int cat = gb_node(g, "Concat", "u0,u1,g2,sl,sl2", "y", 1);
  gb_attr_int(g, cat, 0, "axis", 0);
  gb_output(g, "y");
  tensor x = {0}, *in[] = {&x};
  inputs_generate(&x, SMELT_F32, 3, (int64_t[]){3, 6, 5}, 1, 0, 0);
  passes_equiv e;
  CHECK_OK(gb_finish(g));
  check_opts co = {.pass = pass_fold, .generic = true};
  CHECK_OK(check_rewrite(g, in, &co, &e));
  CHECK(e.ok);
  const ir_graph *r = e.rewritten;
  CHECK(r && count_op(r, "Gather") == 1 && count_op(r, "Slice") == 1 && count_op(r, "Concat") == 1);
  CHECK(e.changes == 4); /* g1, g2, sl, and u1 behind g1 */
  passes_equiv_free(&e);
  tensor_release(&x);
  ir_graph_free(g);
}

/* Shape arithmetic over symbolic dims (x [batch, seq, 24]), the whole
 * pipeline on the generic graph: Reshape(x, [b, s, 2, 12]) from Shape ->
 * Gather -> Unsqueeze -> Concat gets a constant target [0, 0, 2, 12] and the
 * computation dies; Expand(m [batch, 1, seq], [b, 3, s]) gets [1, 3, 1];
 * Reshape(x, [s, b, 24]) (dims swapped: two unknowns for a constant target)
 * keeps its computed one; Range(0, seq, 1) has seq elements.  Outputs
 * against eager on batch 2, seq 5. */
static void test_fold_symbolic_targets(void) {
  int64_t b, q;
  ir_graph *g = sym_graph(&b, &q, 24, true);
  gb_ints(g, "heads", 2, (int64_t[]){2, 12});
  gb_ints(g, "three", 1, (int64_t[]){3});
  gb_ints(g, "width", 1, (int64_t[]){24});
  leading_dims(g);
  int c1 = gb_node(g, "Concat", "u0,u1,heads", "t1", 1);
  int c2 = gb_node(g, "Concat", "u0,three,u1", "t2", 1);
  int c3 = gb_node(g, "Concat", "u1,u0,width", "t3", 1);
  gb_attr_int(g, c1, 0, "axis", 0);
  gb_attr_int(g, c2, 0, "axis", 0);
  gb_attr_int(g, c3, 0, "axis", 0);
  gb_node(g, "Reshape", "x,t1", "r", 0);
  gb_node(g, "Relu", "r", "y1", 0);
  gb_node(g, "Expand", "m,t2", "y2", 0);
  gb_node(g, "Reshape", "x,t3", "y3", 0);
  gb_const_t(g, "r0", SMELT_I64, 0, NULL, (int64_t[]){0}, 0);
  gb_const_t(g, "r1", SMELT_I64, 0, NULL, (int64_t[]){1}, 0);
  gb_node(g, "Range", "r0,d1,r1", "pos", 0); /* torch.arange(seq): [seq] */
  gb_output(g, "y1");
  gb_output(g, "y2");
  gb_output(g, "y3");
  gb_output(g, "pos");
  passes_equiv e;
  const ir_graph *r = run_generic(g, 24, true, &e);
  CHECK(r && count_op(r, "Reshape") == 2 && count_op(r, "Expand") == 1);
  const ir_value *pos = r ? &r->values[r->outputs[3]] : NULL;
  CHECK(pos && pos->rank == 1 && pos->dims[0] == q);
  CHECK(r && count_op(r, "Concat") == 1); /* y3's target only */
  for (int i = 0; r && i < r->n_nodes; i++) {
    const ir_node *nd = &r->nodes[i];
    const ir_value *y = &r->values[nd->outputs[0]];
    const tensor *t = nd->n_inputs > 1 ? r->values[nd->inputs[1]].constant : NULL;
    if (!strcmp(nd->op_type, "Expand")) {
      CHECK(t && tensor_numel(t) == 3 && tensor_get_i64(t, 0) == 1 && tensor_get_i64(t, 1) == 3 &&
            tensor_get_i64(t, 2) == 1);
      CHECK(y->rank == 3 && y->dims[0] == b && y->dims[1] == 3 && y->dims[2] == q);
    } else if (!strcmp(nd->op_type, "Reshape") && t) {
      CHECK(tensor_numel(t) == 4 && tensor_get_i64(t, 0) == 0 && tensor_get_i64(t, 1) == 0 &&
            tensor_get_i64(t, 2) == 2 && tensor_get_i64(t, 3) == 12);
      CHECK(y->rank == 4 && y->dims[0] == b && y->dims[1] == q && y->dims[3] == 12);
    } else if (!strcmp(nd->op_type, "Reshape")) {
      CHECK(y->rank == 3 && y->dims[0] == q && y->dims[1] == b && y->dims[2] == 24);
    }
  }
  passes_equiv_free(&e);
  ir_graph_free(g);
}

/* torch's expand(-1) as exported: t = Reshape(Concat(b, [-1], s), [-1]),
 * Expand(m, Where(Equal(t, ConstantOfShape(Shape(t), 1) * -1),
 * ConstantOfShape(Shape(t), 1), t)) with m [batch, 1, seq]: the shape
 * values see through it (a dim is never -1), the output is [batch, 1, seq]
 * and the whole computation dies. */
static void test_fold_expand_idiom(void) {
  int64_t b, q;
  ir_graph *g = sym_graph(&b, &q, 4, true);
  gb_ints(g, "neg1", 1, (int64_t[]){-1});
  gb_const_t(g, "mone", SMELT_I64, 0, NULL, (int64_t[]){-1}, 0);
  leading_dims(g);
  int c = gb_node(g, "Concat", "u0,neg1,u1", "cat", 1);
  gb_attr_int(g, c, 0, "axis", 0);
  gb_node(g, "Reshape", "cat,neg1", "t", 0);
  gb_node(g, "Shape", "t", "ts", 0);
  int cos = gb_node(g, "ConstantOfShape", "ts", "ones", 1);
  tensor *one = NULL;
  tensor_new(&one, SMELT_I64, 1, (int64_t[]){1});
  ((int64_t *)one->data)[0] = 1;
  gb_attr_tensor(g, cos, 0, "value", one);
  gb_node(g, "Mul", "ones,mone", "negs", 0);
  gb_node(g, "Equal", "t,negs", "eq", 0);
  gb_node(g, "Where", "eq,ones,t", "target", 0);
  gb_node(g, "Expand", "m,target", "y", 0);
  gb_output(g, "y");
  passes_equiv e;
  const ir_graph *r = run_generic(g, 4, true, &e);
  CHECK(r && count_op(r, "Where") == 0 && count_op(r, "Equal") == 0 && count_op(r, "Shape") == 0);
  const ir_value *y = r ? &r->values[r->outputs[0]] : NULL;
  CHECK(y && y->rank == 3 && y->dims[0] == b && y->dims[1] == 1 && y->dims[2] == q);
  passes_equiv_free(&e);
  ir_graph_free(g);
}

/* A linear layer on flattened rows (GPT-2's Conv1D): Reshape(x, [-1, 8]) ->
 * Gemm(W, b) -> Reshape(x's leading dims + [5]) on x [batch, seq, 8]
 * becomes one smelt.Gemm on x, with W as given (transB 0) and transposed
 * (transB 1), and with x a Reshape of a [batch, seq, 2, 4] result (the
 * flattening Reshape keeps reading it, not the rank-4 value); against eager on
 * batch 2, seq 5. */
static void test_flat_gemm(void) {
  for (int tb = 0; tb < 3; tb++) {
    int64_t b, q;
    ir_graph *g = sym_graph(&b, &q, 8, false);
    gb_const(g, "w", 2, tb == 1 ? (int64_t[]){5, 8} : (int64_t[]){8, 5}, 3);
    gb_const(g, "bias", 1, (int64_t[]){5}, 4);
    gb_ints(g, "flat", 2, (int64_t[]){-1, 8});
    gb_ints(g, "n", 1, (int64_t[]){5});
    gb_ints(g, "split", 4, (int64_t[]){0, 0, 2, 4});
    gb_ints(g, "join", 3, (int64_t[]){0, 0, 8});
    if (tb == 2) { /* x through a view chain first: the flattening Reshape must keep reading [b, s, 8] */
      gb_node(g, "Reshape", "x,split", "x4r", 0);
      gb_node(g, "Relu", "x4r", "x4", 0); /* as attention's [b, s, heads, d] output */
      gb_node(g, "Reshape", "x4,join", "xv", 0);
    }
    gb_node(g, "Reshape", tb == 2 ? "xv,flat" : "x,flat", "a", 0);
    int gm = gb_node(g, "Gemm", "a,w,bias", "h", 1);
    gb_attr_int(g, gm, 0, "transB", tb == 1);
    leading_dims(g);
    int c = gb_node(g, "Concat", "u0,u1,n", "t", 1);
    gb_attr_int(g, c, 0, "axis", 0);
    gb_node(g, "Reshape", "h,t", "y", 0);
    gb_output(g, "y");
    passes_equiv e;
    const ir_graph *r = run_generic(g, 8, false, &e);
    CHECK(r && count_op(r, "smelt.Gemm") == 1 && count_op(r, "Gemm") == 0 && count_op(r, "Concat") == 0);
    CHECK(r && (tb == 2 || r->n_nodes == 1));
    passes_equiv_free(&e);
    ir_graph_free(g);
  }
}

/* A chain of blocks as transformers exporters write them: each block reshapes
 * by a shape computed from the previous block's output (Shape -> Gather ->
 * Unsqueeze -> Concat -> Reshape).  One fold run must carry the concrete dims
 * through every block, not one block per run (a 12-layer GPT-2 export was
 * left with run-time shapes from its fourth layer on: 470 graph breaks). */
static void test_fold_shape_chain(void) {
  enum { BLOCKS = 12 };
  ir_graph *g = gb_new();
  int64_t sym;
  ir_graph_sym(g, "batch", &sym);
  gb_input(g, "x0", SMELT_F32, 2, (int64_t[]){sym, 6});
  gb_ints(g, "zero", 1, (int64_t[]){0});
  gb_const_t(g, "idx", SMELT_I64, 0, NULL, (int64_t[]){0}, 0);
  gb_ints(g, "rest3", 2, (int64_t[]){-1, 2});
  gb_ints(g, "rest2", 1, (int64_t[]){-1});
  char nm[8][32];
  for (int b = 0; b < BLOCKS; b++) {
    snprintf(nm[0], 32, "x%d", b);
    snprintf(nm[1], 32, "s%d", b);
    snprintf(nm[2], 32, "b%d", b);
    snprintf(nm[3], 32, "u%d", b);
    snprintf(nm[4], 32, "shape%d", b);
    snprintf(nm[5], 32, "r%d", b);
    snprintf(nm[6], 32, "x%d", b + 1);
    char io[96];
    gb_node(g, "Shape", nm[0], nm[1], 0);
    snprintf(io, sizeof io, "%s,idx", nm[1]);
    int ga = gb_node(g, "Gather", io, nm[2], 1);
    gb_attr_int(g, ga, 0, "axis", 0);
    snprintf(io, sizeof io, "%s,zero", nm[2]);
    gb_node(g, "Unsqueeze", io, nm[3], 0);
    snprintf(io, sizeof io, "%s,%s", nm[3], b % 2 ? "rest2" : "rest3");
    int cat = gb_node(g, "Concat", io, nm[4], 1);
    gb_attr_int(g, cat, 0, "axis", 0);
    snprintf(io, sizeof io, "%s,%s", nm[0], nm[4]);
    gb_node(g, "Reshape", io, nm[5], 0);
    gb_node(g, "Relu", nm[5], nm[6], 0);
  }
  snprintf(nm[0], 32, "x%d", BLOCKS);
  gb_output(g, nm[0]);
  tensor x = {0}, *in[] = {&x};
  inputs_generate(&x, SMELT_F32, 2, (int64_t[]){3, 6}, 1, 0, 0);
  passes_equiv e;
  const ir_graph *r = run_one(g, pass_fold, in, &e);
  /* every Reshape and Relu output has concrete dims after this one run */
  int known = 0, reshapes = 0;
  for (int i = 0; r && i < r->n_nodes; i++) {
    const ir_node *nd = &r->nodes[i];
    if (!nd->op_type || (strcmp(nd->op_type, "Reshape") && strcmp(nd->op_type, "Relu"))) continue;
    const ir_value *v = &r->values[nd->outputs[0]];
    bool all = v->rank > 0;
    for (int d = 0; d < v->rank; d++) all = all && v->dims[d] >= 0;
    reshapes++;
    known += all;
  }
  CHECK(reshapes == 2 * BLOCKS);
  CHECK(known == 2 * BLOCKS);
  passes_equiv_free(&e);
  tensor_release(&x);
  ir_graph_free(g);
}

static void test_fold_caps(void) {
  ir_graph *g = gb_new();
  int64_t d2[2] = {2, 3};
  gb_input(g, "x", SMELT_F32, 2, d2);
  gb_ints(g, "big", 2, (int64_t[]){2048, 1024});
  gb_ints(g, "small", 2, (int64_t[]){2, 3});
  int c1 = gb_node(g, "ConstantOfShape", "big", "zeros", 0);
  (void)c1;
  gb_node(g, "ConstantOfShape", "small", "z2", 0);
  gb_node(g, "ReduceSum", "zeros", "s", 0);          /* a scalar: keeps the big one alive */
  gb_const(g, "w", 2, (int64_t[]){1024, 768}, 4);    /* 3 MB: transposing it does not grow */
  int t = gb_node(g, "Transpose", "w", "wt", 1);
  gb_attr_ints(g, t, 0, "perm", 2, (int64_t[]){1, 0});
  gb_node(g, "ReduceMean", "wt", "m", 0);
  gb_node(g, "Add", "x,z2", "a", 0);
  gb_node(g, "Add", "a,s", "b", 0);
  gb_node(g, "Add", "b,m", "y", 0);
  gb_output(g, "y");
  passes_equiv e;
  const ir_graph *r = run_one(g, pass_fold, NULL, &e);
  /* the 8 MB ConstantOfShape (from a 16-byte input) stays; the rest folds */
  CHECK(r && count_op(r, "ConstantOfShape") == 1 && count_op(r, "ReduceSum") == 1);
  CHECK(r && count_op(r, "Transpose") == 0 && count_op(r, "ReduceMean") == 0);
  passes_equiv_free(&e);
  ir_graph_free(g);
}

static void test_fold_constant_nodes(void) {
  ir_graph *g = gb_new();
  int64_t d = 4;
  gb_input(g, "x", SMELT_F32, 1, &d);
  int k = gb_node(g, "Constant", "", "c", 1);
  tensor *t = NULL;
  tensor_new(&t, SMELT_F32, 1, &d);
  for (int i = 0; i < 4; i++) ((float *)t->data)[i] = (float)i;
  gb_attr_tensor(g, k, 0, "value", t);
  gb_node(g, "Exp", "c", "e", 0);
  gb_node(g, "Mul", "x,e", "y", 0);
  gb_output(g, "y");
  passes_equiv e;
  const ir_graph *r = run_one(g, pass_fold, NULL, &e);
  CHECK(e.changes == 2 && r && r->n_nodes == 1 && count_op(r, "Mul") == 1);
  passes_equiv_free(&e);
  ir_graph_free(g);
}

/* A node nothing reads (as fuse_epilogue leaves a weight's Transpose once
 * smelt.Gemm reads the weight with transB) is not evaluated: dce removes it;
 * folding it would copy the weight for nothing. */
static void test_fold_skips_unread(void) {
  ir_graph *g = gb_new();
  int64_t d = 4;
  gb_input(g, "x", SMELT_F32, 1, &d);
  gb_const(g, "w", 2, (int64_t[]){1024, 768}, 5); /* 3 MB: past what inference evaluates */
  int t = gb_node(g, "Transpose", "w", "wt", 1);
  gb_attr_ints(g, t, 0, "perm", 2, (int64_t[]){1, 0});
  gb_node(g, "Exp", "wt", "ewt", 0); /* read only by a node nothing reads */
  gb_node(g, "Add", "x,x", "y", 0);
  gb_output(g, "y");
  passes_equiv e;
  const ir_graph *r = run_one(g, pass_fold, NULL, &e);
  CHECK(e.changes == 0 && r && count_op(r, "Transpose") == 1 && count_op(r, "Exp") == 1);
  passes_equiv_free(&e);
  ir_graph_free(g);
}

/* ---- dce ---- */

static void test_dce(void) {
  ir_graph *g = gb_new();
  int64_t d = 5;
  gb_input(g, "x", SMELT_F32, 1, &d);
  gb_input(g, "unused_input", SMELT_F32, 1, &d);
  gb_const(g, "c", 1, &d, 1);
  gb_const(g, "orphan", 1, &d, 2);
  gb_node(g, "Add", "x,c", "a", 0);
  gb_node(g, "Exp", "a", "dead1", 0);
  gb_node(g, "Neg", "dead1", "dead2", 0);
  gb_node(g, "Relu", "a", "y", 0);
  gb_output(g, "y");
  passes_equiv e;
  const ir_graph *r = run_one(g, pass_dce, NULL, &e);
  CHECK(e.changes == 3); /* two nodes, one initializer */
  CHECK(r && r->n_nodes == 2 && ir_graph_find_value(r, "orphan") < 0 && ir_graph_find_value(r, "dead1") < 0);
  CHECK(r && r->n_inputs == 2 && ir_graph_find_value(r, "unused_input") >= 0);
  passes_equiv_free(&e);
  ir_graph_free(g);
}

/* ---- cse ---- */

static void test_cse(void) {
  ir_graph *g = gb_new();
  int64_t d[2] = {3, 4};
  gb_input(g, "x", SMELT_F32, 2, d);
  float vals[4] = {1, 2, 3, 4};
  int64_t d4 = 4;
  gb_const_t(g, "c1", SMELT_F32, 1, &d4, vals, 0);
  gb_const_t(g, "c2", SMELT_F32, 1, &d4, vals, 0); /* same bytes: one constant */
  gb_node(g, "Add", "x,c1", "a1", 0);
  gb_node(g, "Add", "x,c2", "a2", 0);  /* same as a1 once c2 is c1 */
  int t1 = gb_node(g, "Transpose", "a1", "t1", 1);
  int t2 = gb_node(g, "Transpose", "a2", "t2", 1);
  int t3 = gb_node(g, "Transpose", "a2", "t3", 1);
  gb_attr_ints(g, t1, 0, "perm", 2, (int64_t[]){1, 0});
  gb_attr_ints(g, t2, 0, "perm", 2, (int64_t[]){1, 0});
  gb_attr_ints(g, t3, 0, "perm", 2, (int64_t[]){0, 1}); /* other attribute: stays */
  gb_node(g, "Mul", "t1,t2", "m", 0);
  gb_output(g, "m");
  gb_output(g, "t3");
  passes_equiv e;
  const ir_graph *r = run_one(g, pass_cse, NULL, &e);
  CHECK(e.changes == 3); /* c2, a2, t2 */
  CHECK(r && count_op(r, "Add") == 1 && count_op(r, "Transpose") == 2);
  passes_equiv_free(&e);
  ir_graph_free(g);
}

/* ---- noop ---- */

static void test_noop_ops(void) {
  ir_graph *g = gb_new();
  int64_t d[3] = {2, 3, 4};
  gb_input(g, "x", SMELT_F32, 3, d);
  gb_ints(g, "same_shape", 3, (int64_t[]){2, 3, 4});
  gb_ints(g, "ones", 3, (int64_t[]){1, 1, 4});
  gb_ints(g, "zero_pads", 6, (int64_t[]){0, 0, 0, 0, 0, 0});
  gb_ints(g, "starts", 1, (int64_t[]){0});
  gb_ints(g, "ends", 1, (int64_t[]){100});
  gb_ints(g, "axes", 1, (int64_t[]){1});
  gb_node(g, "Identity", "x", "a", 0);
  gb_node(g, "Dropout", "a", "b,mask", 0); /* mask unused */
  int cast = gb_node(g, "Cast", "b", "c", 1);
  gb_attr_int(g, cast, 0, "to", SMELT_F32);
  gb_node(g, "Reshape", "c,same_shape", "r", 0);
  gb_node(g, "Expand", "r,ones", "e", 0);
  int tr = gb_node(g, "Transpose", "e", "t", 1);
  gb_attr_ints(g, tr, 0, "perm", 3, (int64_t[]){0, 1, 2});
  gb_node(g, "Pad", "t,zero_pads", "p", 0);
  gb_node(g, "Slice", "p,starts,ends,axes", "s", 0);
  int cat = gb_node(g, "Concat", "s", "k", 1);
  gb_attr_int(g, cat, 0, "axis", 0);
  gb_node(g, "Relu", "k", "y", 0);
  gb_output(g, "y");
  passes_equiv e;
  const ir_graph *r = run_one(g, pass_noop, NULL, &e);
  CHECK(e.changes == 9);
  CHECK(r && r->n_nodes == 1 && count_op(r, "Relu") == 1);
  if (r && r->n_nodes == 1) CHECK(r->nodes[0].inputs[0] == r->inputs[0]);
  passes_equiv_free(&e);
  ir_graph_free(g);
}

/* simplify: a Transpose that moves only dims of size 1 is a Reshape (no
 * copy); one that moves a larger dim stays. */
static void test_transpose_unit_dims(void) {
  for (int big = 0; big < 2; big++) {
    ir_graph *g = gb_new();
    gb_input(g, "x", SMELT_F32, 4, (int64_t[]){big ? 2 : 1, 5, 1, 3});
    int t = gb_node(g, "Transpose", "x", "t", 1);
    gb_attr_ints(g, t, 0, "perm", 4, (int64_t[]){2, 1, 0, 3}); /* [1,5,1,3] -> [1,5,1,3]; [2,5,1,3] -> [1,5,2,3] */
    gb_node(g, "Relu", "t", "y", 0);
    gb_output(g, "y");
    passes_equiv e;
    const ir_graph *r = run_one(g, pass_simplify, NULL, &e);
    CHECK(r && count_op(r, "Transpose") == big && count_op(r, "Reshape") == !big);
    passes_equiv_free(&e);
    ir_graph_free(g);
  }
}

static void test_noop_keeps_real_work(void) {
  ir_graph *g = gb_new();
  gb_input(g, "x", SMELT_F32, 2, (int64_t[]){3, 4});
  gb_ints(g, "starts", 1, (int64_t[]){0});
  gb_ints(g, "ends", 1, (int64_t[]){100});
  gb_ints(g, "axes", 1, (int64_t[]){1});
  gb_ints(g, "back", 1, (int64_t[]){-1});
  gb_ints(g, "pads", 4, (int64_t[]){0, 1, 0, 0});
  int cast = gb_node(g, "Cast", "x", "h", 1);
  gb_attr_int(g, cast, 0, "to", SMELT_F16);
  int cast2 = gb_node(g, "Cast", "h", "f", 1);
  gb_attr_int(g, cast2, 0, "to", SMELT_F32);
  gb_node(g, "Slice", "f,starts,ends,axes,back", "rev", 0); /* same shape, reversed */
  gb_node(g, "Pad", "rev,pads", "p", 0);
  gb_node(g, "Identity", "x", "id_out", 0); /* input -> output: must stay */
  gb_output(g, "p");
  gb_output(g, "id_out");
  passes_equiv e;
  const ir_graph *r = run_one(g, pass_noop, NULL, &e);
  CHECK(e.changes == 0 && r && r->n_nodes == 5);
  passes_equiv_free(&e);
  ir_graph_free(g);
}

/* A no-op writing a graph output: its producer takes the output's name over. */
static void test_noop_output_name(void) {
  ir_graph *g = gb_new();
  gb_input(g, "x", SMELT_F32, 1, (int64_t[]){6});
  gb_node(g, "Exp", "x", "e", 0);
  gb_node(g, "Identity", "e", "out", 0);
  gb_node(g, "Neg", "e", "other", 0);
  gb_output(g, "out");
  gb_output(g, "other");
  passes_equiv e;
  const ir_graph *r = run_one(g, pass_noop, NULL, &e);
  CHECK(e.changes == 1 && r && r->n_nodes == 2);
  if (r) {
    int out = r->outputs[0];
    CHECK(!strcmp(r->values[out].name, "out") && r->values[out].producer >= 0);
    CHECK(ir_graph_find_value(r, "e") < 0);
    int neg = -1;
    for (int i = 0; i < r->n_nodes; i++)
      if (!strcmp(r->nodes[i].op_type, "Neg")) neg = i;
    CHECK(neg >= 0 && r->nodes[neg].inputs[0] == out);
  }
  passes_equiv_free(&e);
  ir_graph_free(g);
}

/* ---- simplify ---- */

static void test_simplify_arith(void) {
  ir_graph *g = gb_new();
  int64_t d[2] = {4, 8};
  gb_input(g, "x", SMELT_F32, 2, d);
  gb_scalar(g, "four", 4.f);
  gb_scalar(g, "three", 3.f);
  gb_scalar(g, "one", 1.f);
  gb_scalar(g, "two", 2.f);
  gb_const_t(g, "zeros_wide", SMELT_F32, 3, (int64_t[]){2, 4, 8}, (float[64]){0}, 0);
  gb_node(g, "Div", "x,four", "a", 0);     /* -> Mul by 0.25, exact */
  gb_node(g, "Div", "a,three", "b", 0);    /* -> Mul by 1/3, within an ulp */
  gb_node(g, "Mul", "one,b", "c", 0);      /* removed */
  gb_node(g, "Pow", "c,two", "p", 0);      /* -> Mul(c, c) */
  gb_node(g, "Add", "p,zeros_wide", "y", 0); /* broadcasts up: stays */
  gb_output(g, "y");
  passes_equiv e;
  const ir_graph *r = run_one(g, pass_simplify, NULL, &e);
  CHECK(e.changes == 4);
  CHECK(r && count_op(r, "Div") == 0 && count_op(r, "Pow") == 0 && count_op(r, "Mul") == 3 &&
        count_op(r, "Add") == 1);
  passes_equiv_free(&e);
  ir_graph_free(g);
}

static void test_simplify_layout(void) {
  ir_graph *g = gb_new();
  gb_input(g, "x", SMELT_F32, 3, (int64_t[]){2, 3, 4});
  gb_ints(g, "s1", 2, (int64_t[]){6, 4});
  gb_ints(g, "s2", 3, (int64_t[]){4, 3, 2});
  int t1 = gb_node(g, "Transpose", "x", "t1", 1);
  int t2 = gb_node(g, "Transpose", "t1", "t2", 1);  /* composes to [2,0,1] */
  int t3 = gb_node(g, "Transpose", "x", "t3", 1);
  int t4 = gb_node(g, "Transpose", "t3", "t4", 1);  /* cancels */
  gb_attr_ints(g, t1, 0, "perm", 3, (int64_t[]){1, 0, 2});
  gb_attr_ints(g, t2, 0, "perm", 3, (int64_t[]){2, 1, 0});
  gb_attr_ints(g, t3, 0, "perm", 3, (int64_t[]){2, 0, 1});
  gb_attr_ints(g, t4, 0, "perm", 3, (int64_t[]){1, 2, 0});
  gb_node(g, "Neg", "t4", "n4", 0);
  gb_node(g, "Reshape", "x,s1", "r1", 0);
  gb_node(g, "Reshape", "r1,s2", "r2", 0);
  gb_output(g, "t2");
  gb_output(g, "n4");
  gb_output(g, "r2");
  passes_equiv e;
  const ir_graph *r = run_one(g, pass_simplify, NULL, &e);
  CHECK(e.changes == 3);
  passes_equiv_free(&e);
  /* with the dead producers gone (dce), one Transpose and one Reshape are left */
  CHECK_OK(check_passes(g, NULL, &e));
  CHECK(e.ok);
  r = e.rewritten;
  CHECK(r && count_op(r, "Reshape") == 1 && count_op(r, "Transpose") == 1 && r->n_nodes == 3);
  passes_equiv_free(&e);
  ir_graph_free(g);
}

int main(void) {
  test_transpose_unit_dims();
  test_fold_shape_arith();
  test_fold_shape_pieces();
  test_fold_symbolic_targets();
  test_fold_expand_idiom();
  test_flat_gemm();
  test_fold_shape_chain();
  test_fold_caps();
  test_fold_constant_nodes();
  test_fold_skips_unread();
  test_dce();
  test_cse();
  test_noop_ops();
  test_noop_keeps_real_work();
  test_noop_output_name();
  test_simplify_arith();
  test_simplify_layout();
  return test_report("test_passes_cleanup");
}
