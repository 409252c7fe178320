/* Switches read from the environment. */
#ifndef SMELT_UTIL_ENV_H
#define SMELT_UTIL_ENV_H

#include <stdbool.h>

/* getenv(name), remembered per thread: run paths ask their switches on every
 * run, and getenv walks the whole environment each time.  A remembered
 * answer is checked against where it was found (the environment array, the
 * entry's slot, or for an absent name the array's end) before it is used,
 * so setenv, unsetenv and putenv between two calls are seen as with getenv. */
const char *env_get(const char *name);

/* Unset, empty or anything but 0/off/no: on. */
bool env_flag_on(const char *name);

#endif
