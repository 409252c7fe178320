#include "smelt.h"

const char *smelt_version(void) { return SMELT_VERSION; }
