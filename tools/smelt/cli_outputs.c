/* smelt run -o DIR: every output to DIR/NAME.npy, all of them or none. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util/file_name.h"
#include "util/file_set.h"
#include "ir/npy.h"
#include "util/quote.h"

int cli_write_outputs(const ir_graph *g, const tensor *outputs, const char *dir) {
  int n = g->n_outputs, rc = 1;
  const char **names = calloc((size_t)n + 1, sizeof *names);
  char(*files)[FILE_NAME_MAX + 1] = calloc((size_t)n + 1, sizeof *files);
  char **paths = calloc((size_t)n + 1, sizeof *paths);
  uint8_t **bufs = calloc((size_t)n + 1, sizeof *bufs);
  size_t *lens = calloc((size_t)n + 1, sizeof *lens);
  bool *renamed = calloc((size_t)n + 1, sizeof *renamed);
  if (!names || !files || !paths || !bufs || !lens || !renamed) {
    fprintf(stderr, "smelt: out of memory\n");
    goto done;
  }
  for (int k = 0; k < n; k++) names[k] = g->values[g->outputs[k]].name;
  if (file_names_safe(n, names, files, renamed)) {
    rc = cli_fail(NULL);
    goto done;
  }
  for (int k = 0; k < n; k++) {
    size_t pn = strlen(dir) + strlen(files[k]) + 8;
    if (!(paths[k] = malloc(pn))) {
      fprintf(stderr, "smelt: out of memory\n");
      goto done;
    }
    snprintf(paths[k], pn, "%s/%s.npy", dir, files[k]);
    if (npy_encode(&outputs[k], &bufs[k], &lens[k])) {
      fprintf(stderr, "smelt: output %s: %s\n", q(names[k]), smelt_last_error());
      goto done;
    }
  }
  if (file_set_write(n, (const char *const *)paths, (const void *const *)bufs, lens)) {
    fprintf(stderr, "smelt: %s; no output was written\n", smelt_last_error());
    goto done;
  }
  for (int k = 0; k < n; k++) {
    char sh[256];
    printf("%s: %s %s -> %s\n", q_ident(names[k]), dtype_name(outputs[k].dtype),
           shape_str(sh, sizeof sh, outputs[k].rank, outputs[k].dims, NULL), paths[k]);
  }
  for (int k = 0; k < n; k++) {
    if (!renamed[k]) continue;
    /* the output that kept the name: its file is this one's without the "_N" */
    const char *other = "";
    size_t base = (size_t)(strrchr(files[k], '_') - files[k]);
    for (int j = 0; j < n; j++)
      if (j != k && strlen(files[j]) == base && !strncmp(files[j], files[k], base)) other = names[j];
    fprintf(stderr, "smelt: note: outputs %s and %s have the same file name %.*s.npy; %s went to %s\n", q(other),
            q(names[k]), (int)base, files[k], q(names[k]), q_path(paths[k]));
  }
  rc = 0;
done:
  for (int k = 0; k < n && paths && bufs; k++) {
    free(paths[k]);
    free(bufs[k]);
  }
  free(names);
  free(files);
  free(paths);
  free(bufs);
  free(lens);
  free(renamed);
  return rc;
}
