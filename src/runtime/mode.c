/* The execution modes by name (smelt.h: smelt_mode_parse, smelt_mode_name). */
#include "util/err.h"
#include "util/names.h"

static const char *const mode_names[] = {"eager", "default", "reduce-overhead", "max-autotune"};

const char *smelt_mode_name(smelt_mode m) {
  return names_name(mode_names, (int)(sizeof mode_names / sizeof *mode_names), (int)m);
}

smelt_status smelt_mode_parse(const char *name, smelt_mode *out) {
  int v = 0;
  TRY(names_parse(mode_names, (int)(sizeof mode_names / sizeof *mode_names), "mode", name, &v));
  *out = (smelt_mode)v;
  return SMELT_OK;
}
