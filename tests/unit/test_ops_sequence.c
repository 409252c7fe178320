/* Sequence and optional ops: negative positions, defaults, uneven splits,
 * keepdims, ConcatFromSequence with new_axis, errors; optionals without a
 * value. */
#include "ops/seq_util.h"
#include "shape_test_util.h"

/* A sequence of n rank-1 f32 tensors of lengths lens[i], values start..; */
static tensor mkseq(int n, const int64_t *lens, double start) {
  tensor s;
  seq_init(&s, SMELT_F32);
  for (int i = 0; i < n; i++) {
    tensor e = mk(SMELT_F32, 1, &lens[i], NULL);
    for (int64_t k = 0; k < lens[i]; k++) tensor_set_f64(&e, k, start++);
    seq_append_move(&s, &e);
  }
  return s;
}

static void test_insert_erase_at(void) {
  tensor s = mkseq(3, DIMS(1, 1, 1), 0), x = mk(SMELT_F32, 1, DIMS(1), VALS(9)), y;
  tensor pos = mk(SMELT_I32, 0, NULL, VALS(-1)), big = mk(SMELT_I64, 0, NULL, VALS(4));
  tensor *ins[] = {&s, &x, &pos};
  CHECK_OK(run1("SequenceInsert", 11, NULL, 0, ins, 3, &y)); /* before the last element */
  CHECK(y.kind == TENSOR_KIND_SEQUENCE && y.seq_len == 4);
  if (y.seq_len == 4) CHECK(tensor_get_f64(y.seq[2], 0) == 9 && tensor_get_f64(y.seq[3], 0) == 2);
  tensor_release(&y);
  tensor *ins2[] = {&s, &x};
  CHECK_OK(run1("SequenceInsert", 11, NULL, 0, ins2, 2, &y)); /* default: at the end */
  if (y.seq_len == 4) CHECK(tensor_get_f64(y.seq[3], 0) == 9);
  tensor_release(&y);
  tensor *ins3[] = {&s, &x, &big};
  CHECK(run1("SequenceInsert", 11, NULL, 0, ins3, 3, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor xi = mk(SMELT_I64, 1, DIMS(1), VALS(1));
  tensor *ins4[] = {&s, &xi};
  CHECK(run1("SequenceInsert", 11, NULL, 0, ins4, 2, &y) == SMELT_ERR_INVALID_ARGUMENT); /* dtype */
  /* erase: default last, negative position */
  tensor *e1[] = {&s};
  CHECK_OK(run1("SequenceErase", 11, NULL, 0, e1, 1, &y));
  CHECK(y.seq_len == 2 && tensor_get_f64(y.seq[1], 0) == 1);
  tensor_release(&y);
  tensor m3 = mk(SMELT_I64, 0, NULL, VALS(-3));
  tensor *e2[] = {&s, &m3};
  CHECK_OK(run1("SequenceErase", 11, NULL, 0, e2, 2, &y));
  CHECK(y.seq_len == 2 && tensor_get_f64(y.seq[0], 0) == 1);
  tensor_release(&y);
  /* at: negative, out of range */
  tensor *a1[] = {&s, &pos};
  CHECK_OK(run1("SequenceAt", 11, NULL, 0, a1, 2, &y));
  CHECK(same(&y, 1, DIMS(1), VALS(2)));
  tensor_release(&y);
  tensor m4 = mk(SMELT_I64, 0, NULL, VALS(-4));
  tensor *a2[] = {&s, &m4};
  CHECK(run1("SequenceAt", 11, NULL, 0, a2, 2, &y) == SMELT_ERR_INVALID_ARGUMENT);
  /* length; a tensor where a sequence belongs is an error */
  tensor *l1[] = {&s};
  CHECK_OK(run1("SequenceLength", 11, NULL, 0, l1, 1, &y));
  CHECK(y.dtype == SMELT_I64 && same(&y, 0, NULL, VALS(3)));
  tensor_release(&y);
  tensor *l2[] = {&x};
  CHECK(run1("SequenceLength", 11, NULL, 0, l2, 1, &y) == SMELT_ERR_INVALID_ARGUMENT);
  /* the input sequence is untouched */
  CHECK(s.seq_len == 3 && tensor_get_f64(s.seq[2], 0) == 2);
  tensor_release(&s), tensor_release(&x), tensor_release(&xi), tensor_release(&pos);
  tensor_release(&big), tensor_release(&m3), tensor_release(&m4);
}

static void test_split(void) {
  tensor x = mk(SMELT_F32, 2, DIMS(2, 5), VALS(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)), y;
  tensor two = mk(SMELT_I64, 0, NULL, VALS(2)), lens = mk(SMELT_I32, 1, DIMS(2), VALS(4, 1));
  tensor bad = mk(SMELT_I64, 1, DIMS(2), VALS(2, 2));
  ir_attr ax[] = {attr_i("axis", -1)}, kd[] = {attr_i("axis", 1), attr_i("keepdims", 0)};
  tensor *in1[] = {&x, &two};
  CHECK_OK(run1("SplitToSequence", 11, ax, 1, in1, 2, &y)); /* scalar split: 2, 2, 1 */
  CHECK(y.seq_len == 3);
  if (y.seq_len == 3) {
    CHECK(same(y.seq[0], 2, DIMS(2, 2), VALS(0, 1, 5, 6)));
    CHECK(same(y.seq[2], 2, DIMS(2, 1), VALS(4, 9)));
  }
  tensor_release(&y);
  tensor *in2[] = {&x, &lens};
  CHECK_OK(run1("SplitToSequence", 11, ax, 1, in2, 2, &y));
  CHECK(y.seq_len == 2 && same(y.seq[1], 2, DIMS(2, 1), VALS(4, 9)));
  tensor_release(&y);
  tensor *in3[] = {&x};
  CHECK_OK(run1("SplitToSequence", 11, kd, 2, in3, 1, &y)); /* chunks of 1, squeezed */
  CHECK(y.seq_len == 5 && same(y.seq[3], 1, DIMS(2), VALS(3, 8)));
  tensor_release(&y);
  tensor *in4[] = {&x, &bad};
  CHECK(run1("SplitToSequence", 11, ax, 1, in4, 2, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&x), tensor_release(&two), tensor_release(&lens), tensor_release(&bad);
}

static void test_concat(void) {
  tensor s = mkseq(2, DIMS(3, 3), 0), y;
  tensor *in[] = {&s};
  ir_attr a0[] = {attr_i("axis", 0)}, stack[] = {attr_i("axis", -1), attr_i("new_axis", 1)};
  CHECK_OK(run1("ConcatFromSequence", 11, a0, 1, in, 1, &y));
  CHECK(same(&y, 1, DIMS(6), VALS(0, 1, 2, 3, 4, 5)));
  tensor_release(&y);
  CHECK_OK(run1("ConcatFromSequence", 11, stack, 2, in, 1, &y)); /* a new last axis */
  CHECK(same(&y, 2, DIMS(3, 2), VALS(0, 3, 1, 4, 2, 5)));
  tensor_release(&y);
  tensor u = mkseq(2, DIMS(3, 2), 0), empty;
  seq_init(&empty, SMELT_F32);
  tensor *in2[] = {&u}, *in3[] = {&empty};
  CHECK_OK(run1("ConcatFromSequence", 11, a0, 1, in2, 1, &y)); /* lengths may differ on the axis */
  CHECK(same(&y, 1, DIMS(5), VALS(0, 1, 2, 3, 4)));
  tensor_release(&y);
  CHECK(run1("ConcatFromSequence", 11, stack, 2, in2, 1, &y) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(run1("ConcatFromSequence", 11, a0, 1, in3, 1, &y) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(run1("ConcatFromSequence", 11, NULL, 0, in, 1, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&s), tensor_release(&u), tensor_release(&empty);
}

static void test_construct_empty(void) {
  tensor a = mk(SMELT_F32, 1, DIMS(1), VALS(1)), b = mk(SMELT_I32, 1, DIMS(1), VALS(1)), y;
  tensor *in[] = {&a, &b};
  CHECK(run1("SequenceConstruct", 11, NULL, 0, in, 2, &y) == SMELT_ERR_INVALID_ARGUMENT);
  ir_attr dt[] = {attr_i("dtype", SMELT_I64)};
  CHECK_OK(run1("SequenceEmpty", 11, dt, 1, NULL, 0, &y));
  CHECK(y.kind == TENSOR_KIND_SEQUENCE && y.seq_len == 0 && y.dtype == SMELT_I64);
  tensor_release(&y);
  tensor_release(&a), tensor_release(&b);
}

static void test_optional(void) {
  tensor none = {.kind = TENSOR_KIND_OPTIONAL_NONE}, x = mk(SMELT_F32, 1, DIMS(2), VALS(1, 2)), y;
  tensor *in_none[] = {&none}, *in_x[] = {&x}, *absent[] = {NULL};
  CHECK_OK(run1("OptionalHasElement", 18, NULL, 0, in_none, 1, &y));
  CHECK(same(&y, 0, NULL, VALS(0)));
  tensor_release(&y);
  CHECK_OK(run1("OptionalHasElement", 18, NULL, 0, absent, 1, &y));
  CHECK(same(&y, 0, NULL, VALS(0)));
  tensor_release(&y);
  CHECK_OK(run1("OptionalHasElement", 18, NULL, 0, in_x, 1, &y));
  CHECK(same(&y, 0, NULL, VALS(1)));
  tensor_release(&y);
  CHECK(run1("OptionalGetElement", 18, NULL, 0, in_none, 1, &y) == SMELT_ERR_RUNTIME);
  CHECK_OK(run1("OptionalGetElement", 18, NULL, 0, in_x, 1, &y));
  CHECK(same(&y, 1, DIMS(2), VALS(1, 2)));
  tensor_release(&y);
  ir_attr ty[] = {{.name = "type", .type = IR_ATTR_TYPE_PROTO}};
  CHECK_OK(run1("Optional", 15, ty, 1, absent, 1, &y));
  CHECK(y.kind == TENSOR_KIND_OPTIONAL_NONE);
  tensor_release(&y);
  CHECK(run1("Optional", 15, NULL, 0, absent, 1, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&x);
}

int main(void) {
  test_insert_erase_at();
  test_split();
  test_concat();
  test_construct_empty();
  test_optional();
  return test_report("ops_sequence");
}
