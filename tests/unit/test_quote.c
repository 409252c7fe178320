/* Model strings in messages (util/quote.h): quoted, control characters escaped,
 * long ones cut; err_set and err_prefix never store a raw control character
 * but the library's own newlines. */
#include <string.h>

#include "check.h"
#include "graph_builder.h"
#include "util/err.h"
#include "util/quote.h"

static bool has_ctl(const char *s) {
  for (; *s; s++)
    if (((unsigned char)*s < 0x20 && *s != '\n') || *s == 0x7f) return true;
  return false;
}

static void test_quote(void) {
  CHECK(!strcmp(q("conv1"), "'conv1'"));
  CHECK(!strcmp(q(NULL), "''"));
  CHECK(!strcmp(q("\x1b[2J\n"), "'\\x1b[2J\\n'"));
  CHECK(!strcmp(q("a\tb\rc\x7f"), "'a\\tb\\rc\\x7f'"));
  CHECK(!strcmp(q("it's a\\b"), "'it\\'s a\\\\b'"));
  CHECK(!strcmp(q_n("a\0b", 3), "'a\\x00b'"));
  /* UTF-8 text is kept; C1 controls, bidi overrides and broken bytes are not */
  CHECK(!strcmp(q("caf\xc3\xa9 \xe6\x97\xa5"), "'caf\xc3\xa9 \xe6\x97\xa5'"));
  CHECK(!strcmp(q("x\xc2\x9b" "2J"), "'x\\xc2\\x9b2J'"));
  CHECK(!strcmp(q("\xe2\x80\xae" "abc"), "'\\xe2\\x80\\xaeabc'"));
  CHECK(!strcmp(q("\xff\xc3"), "'\\xff\\xc3'"));
  /* cut at QUOTE_MAX source bytes, then "..." */
  char long_name[300];
  memset(long_name, 'n', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = 0;
  const char *l = q(long_name);
  CHECK(strlen(l) == QUOTE_MAX + 2 + 3 && !strcmp(l + QUOTE_MAX + 2, "..."));
  CHECK(strlen(q_path(long_name)) == sizeof long_name - 1 + 2);
  memset(long_name, '\x1b', sizeof long_name - 1);
  l = q(long_name);
  CHECK(strlen(l) == 4 * QUOTE_MAX + 2 + 3 && !has_ctl(l));
  /* a multi-byte character is never split by the cut */
  char utf[QUOTE_MAX + 4];
  memset(utf, 'a', QUOTE_MAX - 1);
  memcpy(utf + QUOTE_MAX - 1, "\xc3\xa9", 3);
  l = q(utf);
  CHECK(strlen(l) == QUOTE_MAX - 1 + 2 + 3 && !strcmp(l + QUOTE_MAX, "'..."));
  /* 8 results stay valid at once */
  const char *r[8];
  for (int i = 0; i < 8; i++) r[i] = q(i % 2 ? "odd" : "even");
  for (int i = 0; i < 8; i++) CHECK(!strcmp(r[i], i % 2 ? "'odd'" : "'even'"));
  CHECK(!strcmp(q_ident("Conv"), "Conv") && !strcmp(q_ident("com.microsoft"), "com.microsoft"));
  CHECK(!strcmp(q_ident("Re\x1bLU"), "'Re\\x1bLU'") && !strcmp(q_ident(""), ""));
  CHECK(!strcmp(q_ident("/model/a:0"), "/model/a:0") && !strcmp(q_ident("a b"), "'a b'"));
}

static void test_err_net(void) {
  /* a model string passed unquoted still cannot put ESC on the terminal */
  err_set(SMELT_ERR_INVALID_MODEL, "bad %s\nsecond line", "x\x1b[2J\ty");
  CHECK(!strcmp(smelt_last_error(), "bad x\\x1b[2J\\ty\nsecond line"));
  err_prefix(SMELT_ERR_INVALID_MODEL, "node %s: ", "\x1b]0;title\x07");
  CHECK(!has_ctl(smelt_last_error()));
  CHECK(strstr(smelt_last_error(), "node \\x1b]0;title\\x07: bad x") != NULL);
}

static void test_node_label(void) {
  /* a failing node whose name and attribute hold ESC [2J and a newline */
  gb b;
  gb_init(&b, 20);
  int x = gb_input(&b, "x", SMELT_F32, 1, (int64_t[]){4});
  ir_attr a = {.name = "approximate", .type = IR_ATTR_STRING, .s = "\x1b[2J\n", .s_len = 5};
  int y = gb_node(&b, "Gelu", 1, (int[]){x}, &a, 1);
  b.g->nodes[b.g->n_nodes - 1].name = "evil\x1b[2J\n";
  gb_output(&b, y);
  smelt_status s = gb_finish(&b); /* shape inference checks the attribute */
  CHECK(s != SMELT_OK);
  const char *m = smelt_last_error();
  CHECK(strstr(m, "node 'evil\\x1b[2J\\n' (Gelu)") != NULL);
  CHECK(strstr(m, "approximate is '\\x1b[2J\\n'") != NULL);
  CHECK(!strchr(m, '\x1b') && !strchr(m, '\n'));
  printf("message: %s\n", m);
  gb_free(&b);
}

int main(void) {
  test_quote();
  test_err_net();
  test_node_label();
  return test_report("test_quote");
}
