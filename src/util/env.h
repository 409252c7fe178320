/* Switches read from the environment. */
#ifndef SMELT_UTIL_ENV_H
#define SMELT_UTIL_ENV_H

#include <stdbool.h>

/* Unset, empty or anything but 0/off/no: on. */
bool env_flag_on(const char *name);

#endif
