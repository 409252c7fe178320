/* How this copy of smelt was built, for benchmark reports. */
#ifndef SMELT_UTIL_BUILD_INFO_H
#define SMELT_UTIL_BUILD_INFO_H

/* CMAKE_C_FLAGS plus the build type's flags ("-O3 -DNDEBUG" for Release), as
 * CMake passed them; "" when built without CMake's definition. */
const char *build_info_cflags(void);
/* "Release", "Debug"...; "" if unknown. */
const char *build_info_type(void);
/* Compiler that built smelt: "GNU 12.2.0"; "" if unknown. */
const char *build_info_compiler(void);

#endif
