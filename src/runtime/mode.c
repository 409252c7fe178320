#include <string.h>

#include "util/err.h"
#include "util/quote.h"

static const char *const mode_names[] = {"eager", "default", "reduce-overhead", "max-autotune"};

const char *smelt_mode_name(smelt_mode m) {
  return (unsigned)m < sizeof mode_names / sizeof *mode_names ? mode_names[m] : "unknown";
}

smelt_status smelt_mode_parse(const char *name, smelt_mode *out) {
  for (unsigned i = 0; name && i < sizeof mode_names / sizeof *mode_names; i++)
    if (!strcmp(name, mode_names[i])) {
      *out = (smelt_mode)i;
      return SMELT_OK;
    }
  return err_set(SMELT_ERR_INVALID_ARGUMENT,
                 "unknown mode %s: expected eager, default, reduce-overhead or max-autotune",
                 q(name ? name : "(null)"));
}
