#include "util/build_info.h"

/* Set for this file only by CMakeLists.txt, so changing them rebuilds one file. */
#ifndef SMELT_BUILD_CFLAGS
#define SMELT_BUILD_CFLAGS ""
#endif
#ifndef SMELT_BUILD_TYPE
#define SMELT_BUILD_TYPE ""
#endif
#ifndef SMELT_BUILD_COMPILER
#define SMELT_BUILD_COMPILER ""
#endif

const char *build_info_cflags(void) { return SMELT_BUILD_CFLAGS; }
const char *build_info_type(void) { return SMELT_BUILD_TYPE; }
const char *build_info_compiler(void) { return SMELT_BUILD_COMPILER; }
