/* Prints the version of the smelt library it runs with and checks that it is
 * the version of the header it was compiled with (SMELT_VERSION_*).
 *   cc examples/version.c $(pkg-config --cflags --libs smelt) -o smelt_version && ./smelt_version
 * Exit status 0 when they agree, 1 when the library is another version. */
#include <stdio.h>
#include <string.h>

#include "smelt.h"

int main(void) {
  const char *lib = smelt_version();
  char header[64];
  snprintf(header, sizeof header, "%d.%d.%d", SMELT_VERSION_MAJOR, SMELT_VERSION_MINOR, SMELT_VERSION_PATCH);
  printf("smelt %s\n", lib);
  if (strcmp(lib, header) || strcmp(lib, SMELT_VERSION)) {
    fprintf(stderr, "the library is smelt %s, but this program was compiled with the header of %s (%s)\n", lib,
            header, SMELT_VERSION);
    return 1;
  }
  return 0;
}
