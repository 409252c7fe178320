/* External tensor data: files next to the model, named by a relative location.
 *
 * A model file is untrusted input, so the location may only name a file inside
 * the model's own folder: no absolute paths, no "..", and after resolving
 * symlinks (realpath) the file must still lie under the folder.  Each file is
 * mmapped once, read-only, and unmapped with the model. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/import_internal.h"
#include "util/err.h"
#include "util/quote.h"
#include "util/ro_map.h"

static smelt_status check_location(pb_str loc) {
  if (!loc.n) return err_set(SMELT_ERR_INVALID_MODEL, "external data location is empty");
  if (loc.s[0] == '/')
    return err_set(SMELT_ERR_INVALID_MODEL,
                   "external data location %s is an absolute path; it must be relative to "
                   "the model's folder", q_n(loc.s, loc.n));
  for (size_t i = 0; i < loc.n;) {
    size_t j = i;
    while (j < loc.n && loc.s[j] != '/') j++;
    if (j - i == 2 && loc.s[i] == '.' && loc.s[i + 1] == '.')
      return err_set(SMELT_ERR_INVALID_MODEL,
                     "external data location %s contains '..'; it must stay inside the "
                     "model's folder", q_n(loc.s, loc.n));
    i = j + 1;
  }
  return SMELT_OK;
}

/* realpath of base_dir/loc; checks it lies under the model's folder. */
static smelt_status resolve(onnx_imp *c, pb_str loc, char **real) {
  if (!c->base_real) {
    c->base_real = realpath(c->base_dir, NULL);
    if (!c->base_real)
      return err_set(SMELT_ERR_IO, "cannot resolve the model's folder %s: %s", q(c->base_dir),
                     strerror(errno));
  }
  size_t bl = strlen(c->base_dir);
  if (loc.n > PATH_MAX || bl > PATH_MAX)
    return err_set(SMELT_ERR_INVALID_MODEL, "external data location is too long");
  char *path = malloc(bl + loc.n + 2);
  if (!path) return err_nomem("path", bl + loc.n + 2);
  memcpy(path, c->base_dir, bl);
  path[bl] = '/';
  memcpy(path + bl + 1, loc.s, loc.n);
  path[bl + 1 + loc.n] = 0;
  *real = realpath(path, NULL);
  int e = errno;
  free(path);
  if (!*real)
    return err_set(SMELT_ERR_IO, "external data file %s: %s", q_n(loc.s, loc.n),
                   strerror(e));
  size_t rl = strlen(c->base_real);
  bool root = !strcmp(c->base_real, "/");
  if (root ? (*real)[0] != '/'
           : strncmp(*real, c->base_real, rl) != 0 || (*real)[rl] != '/') {
    free(*real);
    *real = NULL;
    return err_set(SMELT_ERR_INVALID_MODEL,
                   "external data location %s resolves outside the model's folder",
                   q_n(loc.s, loc.n));
  }
  return SMELT_OK;
}

/* Maps real (taking ownership of the string) and adds it to the model's list. */
static smelt_status map_file(onnx_imp *c, char *real, onnx_mapping **out) {
  int fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  struct stat st;
  smelt_status s = SMELT_OK;
  if (fd < 0)
    s = err_set(SMELT_ERR_IO, "cannot open external data file %s: %s", q(real), strerror(errno));
  else if (fstat(fd, &st) != 0)
    s = err_set(SMELT_ERR_IO, "cannot stat %s: %s", q(real), strerror(errno));
  else if (!S_ISREG(st.st_mode))
    s = err_set(SMELT_ERR_INVALID_MODEL, "external data %s is not a regular file", q(real));
  onnx_mapping *mp = s ? NULL : calloc(1, sizeof *mp);
  if (!s && !mp) s = err_nomem("mapping", sizeof *mp);
  if (!s && st.st_size > 0) {
    mp->len = (size_t)st.st_size;
    mp->addr = mmap(NULL, mp->len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mp->addr == MAP_FAILED)
      s = err_set(SMELT_ERR_IO, "cannot map %s: %s", q(real), strerror(errno));
    else
      ro_map_add(mp->addr, mp->len); /* weights viewed in it may be dropped once packed */
  }
  if (fd >= 0) close(fd);
  if (!s && c->m->file_id) c->m->file_id = imp_file_id_mix(c->m->file_id, &st);
  if (s) {
    free(mp);
    free(real);
    return s;
  }
  mp->path = real;
  mp->next = c->m->ext;
  c->m->ext = mp;
  *out = mp;
  return SMELT_OK;
}

smelt_status imp_external(onnx_imp *c, pb_str loc, uint64_t offset, int64_t length,
                          size_t nbytes, const uint8_t **data) {
  if (!c->base_dir || !c->m)
    return err_set(SMELT_ERR_INVALID_MODEL,
                   "tensor data is in an external file (%s), which needs the model's folder "
                   "(load the model from its file)", q_n(loc.s, loc.n));
  TRY(check_location(loc));
  if (length >= 0 && (uint64_t)length != nbytes)
    return err_set(SMELT_ERR_INVALID_MODEL,
                   "external data length %lld does not match the tensor's %zu bytes",
                   (long long)length, nbytes);
  char *real;
  TRY(resolve(c, loc, &real));
  onnx_mapping *mp = c->m->ext;
  while (mp && strcmp(mp->path, real)) mp = mp->next;
  if (mp)
    free(real);
  else
    TRY(map_file(c, real, &mp));
  if (offset > mp->len || nbytes > mp->len - offset)
    return err_set(SMELT_ERR_INVALID_MODEL,
                   "external data %s: bytes [%llu, +%zu) lie outside the %zu-byte file",
                   q_path(mp->path), (unsigned long long)offset, nbytes, mp->len);
  *data = mp->addr ? (const uint8_t *)mp->addr + offset : (const uint8_t *)"";
  return SMELT_OK;
}

void imp_unmap_all(onnx_mapping *list) {
  while (list) {
    onnx_mapping *n = list->next;
    if (list->addr) {
      ro_map_remove(list->addr);
      munmap(list->addr, list->len);
    }
    free(list->path);
    free(list);
    list = n;
  }
}
