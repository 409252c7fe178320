/* util/env.h's env_get: a remembered answer must follow every change to the
 * environment the way getenv does -- setenv of a present and of a new name,
 * unsetenv before and after the name, putenv, clearenv-like emptying, names
 * asked from another buffer, more names than it remembers, other threads. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util/env.h"

static int same(const char *name) {
  const char *a = env_get(name), *b = getenv(name);
  if (!a || !b) return a == b;
  return !strcmp(a, b);
}

static void check_all(const char *const *names, int n) {
  for (int r = 0; r < 2; r++) /* once to remember, once from the memo */
    for (int i = 0; i < n; i++) {
      if (!same(names[i])) fprintf(stderr, "env_get(%s) differs from getenv\n", names[i]);
      CHECK(same(names[i]));
    }
}

static void *other_thread(void *arg) {
  (void)arg;
  CHECK(env_get("SMELT_T_A") && !strcmp(env_get("SMELT_T_A"), "thread"));
  CHECK(!env_get("SMELT_T_ABSENT"));
  return NULL;
}

int main(void) {
  static const char *const names[] = {"SMELT_T_A", "SMELT_T_B", "SMELT_T_C", "SMELT_T_ABSENT", "PATH"};
  int n = (int)(sizeof names / sizeof names[0]);
  unsetenv("SMELT_T_A"), unsetenv("SMELT_T_B"), unsetenv("SMELT_T_C");
  check_all(names, n);
  setenv("SMELT_T_A", "1", 1); /* a new name, appended */
  check_all(names, n);
  setenv("SMELT_T_B", "two", 1);
  setenv("SMELT_T_C", "three", 1);
  check_all(names, n);
  setenv("SMELT_T_B", "2", 1); /* a present name, its slot replaced */
  check_all(names, n);
  unsetenv("SMELT_T_A"); /* later entries shift down */
  check_all(names, n);
  setenv("SMELT_T_A", "again", 1);
  check_all(names, n);
  unsetenv("SMELT_T_C"), setenv("SMELT_T_ABSENT", "now", 1); /* one removed, one added, same count */
  check_all(names, n);
  unsetenv("SMELT_T_ABSENT");
  static char put[] = "SMELT_T_B=put";
  putenv(put);
  check_all(names, n);
  setenv("SMELT_T_B", "", 1); /* empty: set, not absent */
  CHECK(env_get("SMELT_T_B") && !*env_get("SMELT_T_B"));
  CHECK(!env_flag_on("SMELT_T_NO") || !getenv("SMELT_T_NO"));
  setenv("SMELT_T_NO", "off", 1);
  CHECK(!env_flag_on("SMELT_T_NO"));
  setenv("SMELT_T_NO", "1", 1);
  CHECK(env_flag_on("SMELT_T_NO"));
  /* the name from a buffer that changes: answered by its text, not its address */
  char buf[32];
  strcpy(buf, "SMELT_T_A");
  CHECK(!strcmp(env_get(buf), "again"));
  strcpy(buf, "SMELT_T_B");
  CHECK(!strcmp(env_get(buf), ""));
  /* more names than it remembers: every answer still right */
  char many[80][24];
  for (int i = 0; i < 80; i++) {
    snprintf(many[i], sizeof many[i], "SMELT_T_M%d", i);
    if (i % 3 == 0) setenv(many[i], many[i] + 8, 1);
  }
  for (int r = 0; r < 3; r++)
    for (int i = 0; i < 80; i++) CHECK(same(many[i]));
  for (int i = 0; i < 80; i += 3) unsetenv(many[i]);
  for (int i = 0; i < 80; i++) CHECK(same(many[i]) && !env_get(many[i]));
  /* a name too long to remember, and odd names, go straight to getenv */
  char longname[80];
  memset(longname, 'X', sizeof longname - 1), longname[sizeof longname - 1] = 0;
  setenv(longname, "long", 1);
  CHECK(!strcmp(env_get(longname), "long"));
  CHECK(!env_get("") && !env_get(NULL));
  /* another thread has its own memo and sees the same environment */
  setenv("SMELT_T_A", "thread", 1);
  pthread_t t;
  CHECK(!pthread_create(&t, NULL, other_thread, NULL));
  pthread_join(t, NULL);
  check_all(names, n);
  /* emptied (clearenv): nothing is set */
  clearenv();
  for (int i = 0; i < n; i++) CHECK(!env_get(names[i]));
  setenv("SMELT_T_C", "after", 1);
  CHECK(!strcmp(env_get("SMELT_T_C"), "after"));
  check_all(names, n);
  return test_report("test_env_memo");
}
