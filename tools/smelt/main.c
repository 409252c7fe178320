#include <stdio.h>
#include "smelt.h"
int main(void) { printf("smelt %s\n", "dev"); return 0; }
