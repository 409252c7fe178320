/* util/file_name.h: output file names safe and distinct. */
#include <string.h>

#include "check.h"
#include "util/file_name.h"

static char out[16][FILE_NAME_MAX + 1];
static bool ren[16];

static void names(int n, const char *const *in) { CHECK_OK(file_names_safe(n, in, out, ren)); }

int main(void) {
  names(2, (const char *[]){"a/b", "a_b"});
  CHECK(!strcmp(out[0], "a_b_1") && !strcmp(out[1], "a_b") && ren[0] && !ren[1]);
  names(3, (const char *[]){"a/b", "a:b", "a_b_1"});
  CHECK(!strcmp(out[0], "a_b") && !strcmp(out[1], "a_b_2") && !strcmp(out[2], "a_b_1"));
  CHECK(!ren[0] && ren[1] && !ren[2]);
  names(5, (const char *[]){"", ".", "..", ".hidden", "x\x1b[2J\n"});
  CHECK(!strcmp(out[0], "_") && !strcmp(out[1], "__1") && !strcmp(out[2], "_."));
  CHECK(!strcmp(out[3], "_hidden") && !strcmp(out[4], "x__2J_"));
  names(2, (const char *[]){"", NULL});
  CHECK(!strcmp(out[0], "_") && !strcmp(out[1], "__1"));
  /* long names: cut, with a hash of the whole name, so two long names that
   * differ only at the end stay apart without a suffix */
  char a[400], b[400];
  memset(a, 'x', sizeof a - 1);
  a[sizeof a - 1] = 0;
  memcpy(b, a, sizeof a);
  b[sizeof b - 2] = 'y';
  names(2, (const char *[]){a, b});
  CHECK(strlen(out[0]) <= FILE_NAME_MAX && strlen(out[1]) <= FILE_NAME_MAX);
  CHECK(strcmp(out[0], out[1]) && !ren[0] && !ren[1]);
  /* the same input gives the same names */
  char again[FILE_NAME_MAX + 1];
  memcpy(again, out[0], sizeof again);
  names(1, (const char *[]){a});
  CHECK(!strcmp(again, out[0]));
  names(2, (const char *[]){"logits", "probs"});
  CHECK(!strcmp(out[0], "logits") && !strcmp(out[1], "probs") && !ren[0] && !ren[1]);
  return test_report("test_file_name");
}
