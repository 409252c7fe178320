/* File reading, atomic writing, tensor files and the public tensor file API. */
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "onnx/onnx.h"
#include "runtime/tensor_convert.h"
#include "runtime/tensor_file.h"
#include "util/err.h"
#include "util/file.h"

static char dir[256];

static const char *in_dir(char *buf, const char *name) {
  snprintf(buf, 512, "%s/%s", dir, name);
  return buf;
}

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

static int count_entries(const char *d) {
  DIR *dp = opendir(d);
  if (!dp) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(dp)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(dp);
  return n;
}

static bool file_is(const char *path, const char *text) {
  uint8_t *b = NULL;
  size_t n = 0;
  if (file_read_all(path, &b, &n, 0)) return false;
  bool same = n == strlen(text) && !memcmp(b, text, n);
  free(b);
  return same;
}

static void test_read_all(void) {
  char p[512];
  uint8_t *b = (uint8_t *)"junk";
  size_t n = 99;
  put(in_dir(p, "hello.txt"), "hello");
  CHECK_OK(file_read_all(p, &b, &n, 0));
  CHECK(n == 5 && b && !memcmp(b, "hello", 6)); /* NUL-terminated */
  free(b);
  CHECK_OK(file_read_all(p, &b, &n, 5)); /* exactly the cap */
  CHECK(n == 5);
  free(b);
  CHECK(file_read_all(p, &b, &n, 4) == SMELT_ERR_IO && b == NULL);
  CHECK(strstr(err_message(), "limit of 4 bytes") && strstr(err_message(), "hello.txt"));

  put(in_dir(p, "empty"), "");
  CHECK_OK(file_read_all(p, &b, &n, 0));
  CHECK(n == 0 && b && b[0] == 0);
  free(b);

  CHECK(file_read_all(in_dir(p, "missing"), &b, &n, 0) == SMELT_ERR_IO && !b);
  CHECK(strstr(err_message(), "missing") && strstr(err_message(), "No such file"));
  CHECK(file_read_all(dir, &b, &n, 0) == SMELT_ERR_IO && !b);
  CHECK(strstr(err_message(), "directory"));
  CHECK(file_read_all("", &b, &n, 0) == SMELT_ERR_INVALID_ARGUMENT);

  /* /proc files report size 0: the reader must not trust st_size */
  CHECK_OK(file_read_all("/proc/self/status", &b, &n, 0));
  CHECK(n > 0 && b && strstr((char *)b, "Name:"));
  free(b);
  CHECK(file_read_all("/proc/self/status", &b, &n, 16) == SMELT_ERR_IO && !b);
}

static void test_write_atomic(void) {
  char p[512], q[512];
  int before = count_entries(dir);
  CHECK_OK(file_write_atomic(in_dir(p, "out.bin"), "new contents", 12));
  CHECK(file_is(p, "new contents"));
  CHECK(count_entries(dir) == before + 1); /* no temp file left */
  CHECK_OK(file_write_atomic(p, "v2", 2)); /* replaces */
  CHECK(file_is(p, "v2"));
  CHECK_OK(file_write_atomic(p, NULL, 0));
  CHECK(file_is(p, ""));
  put(p, "old");

  /* missing directory: an error naming the path; nothing is created */
  snprintf(q, sizeof q, "%s/no_such_dir/x.npy", dir);
  CHECK(file_write_atomic(q, "x", 1) == SMELT_ERR_IO);
  CHECK(strstr(err_message(), "no_such_dir/x.npy") && strstr(err_message(), "No such file"));
  snprintf(q, sizeof q, "%s/no_such_dir", dir);
  CHECK(access(q, F_OK) != 0);

  /* the destination is a directory: rename fails, temp file removed */
  snprintf(q, sizeof q, "%s/adir", dir);
  CHECK(mkdir(q, 0755) == 0);
  int n0 = count_entries(dir);
  CHECK(file_write_atomic(q, "x", 1) == SMELT_ERR_IO);
  CHECK(strstr(err_message(), "adir") && strstr(err_message(), "renaming"));
  CHECK(count_entries(dir) == n0 && count_entries(q) == 0);

  /* a full disk, simulated by a file size limit: the write fails part way, the
   * old file stays as it was and the temp file is removed */
  struct rlimit old_lim, lim;
  getrlimit(RLIMIT_FSIZE, &old_lim);
  void (*old_sig)(int) = signal(SIGXFSZ, SIG_IGN);
  lim = old_lim;
  lim.rlim_cur = 4096;
  CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
  size_t big_n = 100000;
  char *big = malloc(big_n);
  memset(big, 'z', big_n);
  smelt_status s = file_write_atomic(p, big, big_n);
  setrlimit(RLIMIT_FSIZE, &old_lim);
  signal(SIGXFSZ, old_sig);
  CHECK(s == SMELT_ERR_IO && strstr(err_message(), "out.bin") && strstr(err_message(), "writing"));
  CHECK(file_is(p, "old"));
  CHECK(count_entries(dir) == n0);
  free(big);
}

static void fill(tensor *t) {
  for (size_t i = 0; i < t->nbytes; i++) ((uint8_t *)t->data)[i] = (uint8_t)(i * 7 + 1);
}

static void test_tensor_files(void) {
  char p[512];
  int64_t dims[3] = {2, 1, 3};
  tensor t, u;
  CHECK_OK(tensor_alloc(&t, SMELT_I16, 3, dims));
  fill(&t);
  CHECK_OK(tensor_file_save(in_dir(p, "t.npy"), &t));
  CHECK_OK(tensor_file_load(p, &u));
  CHECK(u.dtype == SMELT_I16 && u.rank == 3 && u.dims[2] == 3 && u.nbytes == 12);
  CHECK(u.data && !memcmp(u.data, t.data, 12));
  tensor_release(&u);
  CHECK_OK(tensor_file_save(in_dir(p, "T.NPY"), &t)); /* extension in any case */
  char *name = (char *)"junk";
  CHECK_OK(tensor_file_load_named(p, &u, &name));
  CHECK(name == NULL && u.nbytes == 12);
  tensor_release(&u);

  CHECK(tensor_file_save(in_dir(p, "t.bin"), &t) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err_message(), "t.bin") && strstr(err_message(), ".npy or .pb"));
  CHECK(access(p, F_OK) != 0);

  /* errors start with the path */
  put(in_dir(p, "trunc.npy"), "\x93NUMPY\x01");
  CHECK(tensor_file_load(p, &u) == SMELT_ERR_INVALID_ARGUMENT && !u.data);
  CHECK(strncmp(err_message(), p, strlen(p)) == 0);
  CHECK(tensor_file_load(in_dir(p, "nope.npy"), &u) == SMELT_ERR_IO);
  CHECK(strstr(err_message(), "nope.npy"));

  /* TensorProto (.pb) goes through the ONNX reader; loading looks at the bytes */
  CHECK_OK(tensor_file_save_named(in_dir(p, "t.pb"), &t, "x"));
  name = NULL;
  CHECK_OK(tensor_file_load_named(p, &u, &name));
  CHECK(u.dtype == SMELT_I16 && u.rank == 3 && u.dims[0] == 2 && u.dims[2] == 3);
  CHECK(u.nbytes == 12 && u.data && !memcmp(u.data, t.data, 12));
  CHECK(name && !strcmp(name, "x"));
  free(name);
  tensor_release(&u);
  char q[512];
  CHECK(rename(p, in_dir(q, "pb_named.npy")) == 0); /* content, not extension, decides */
  CHECK_OK(tensor_file_load(q, &u));
  CHECK(u.dtype == SMELT_I16 && u.nbytes == 12);
  tensor_release(&u);
  CHECK_OK(tensor_file_save(in_dir(p, "npy_named.pb"), &t));
  CHECK(rename(p, in_dir(q, "really_pb.npy")) == 0);
  CHECK_OK(tensor_file_load(q, &u)); /* a TensorProto with an .npy name */
  CHECK(u.dtype == SMELT_I16 && u.nbytes == 12);
  tensor_release(&u);
  put(in_dir(p, "junk.pb"), "\xff\xff\xff");
  CHECK(tensor_file_load(p, &u) != SMELT_OK && u.data == NULL);
  CHECK(strstr(err_message(), "junk.pb") && strstr(err_message(), "TensorProto"));
  CHECK(strstr(err_message(), "no .npy magic") == NULL); /* named .pb: no need to explain */
  char j[512];
  CHECK(rename(p, in_dir(j, "junk.npy")) == 0);
  CHECK(tensor_file_load(j, &u) != SMELT_OK &&
        strstr(err_message(), "no .npy magic, so read as an ONNX TensorProto"));
  printf("junk .npy: %s\n", err_message());
  smelt_tensor pub;
  CHECK_OK(smelt_tensor_load(q, &pub)); /* the public API reads TensorProto too */
  CHECK(pub.dtype == SMELT_I16 && pub.nbytes == 12 && pub.name == NULL);
  smelt_tensor_release(&pub);
  tensor_release(&t);
}

static void test_public_api(void) {
  char p[512];
  float v[6] = {1, -2, 3.5f, 0, -0.25f, 1e30f};
  smelt_tensor in = {.name = "v", .dtype = SMELT_F32, .rank = 2, .dims = {3, 2}, .data = v,
                     .nbytes = sizeof v};
  smelt_tensor out;
  CHECK_OK(smelt_tensor_save_npy(in_dir(p, "pub.npy"), &in));
  CHECK_OK(smelt_tensor_load(p, &out));
  CHECK(out.name == NULL && out.dtype == SMELT_F32 && out.rank == 2 && out.dims[0] == 3 &&
        out.dims[1] == 2 && out.nbytes == sizeof v && out.data && !memcmp(out.data, v, sizeof v));
  smelt_tensor_release(&out);
  CHECK(out.data == NULL && out.nbytes == 0 && out.rank == 0);
  smelt_tensor_release(NULL);

  /* an empty tensor may come with data NULL */
  smelt_tensor e = {.dtype = SMELT_I64, .rank = 1, .dims = {0}};
  CHECK_OK(smelt_tensor_save_npy(in_dir(p, "empty.npy"), &e));
  CHECK_OK(smelt_tensor_load(p, &out));
  CHECK(out.dtype == SMELT_I64 && out.rank == 1 && out.dims[0] == 0 && out.nbytes == 0 && out.data);
  smelt_tensor_release(&out);

  /* bad descriptors are refused with the tensor's name, and nothing is written */
  smelt_tensor bad = in;
  bad.nbytes = 20;
  CHECK(smelt_tensor_save_npy(in_dir(p, "bad.npy"), &bad) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err_message(), "'v'") && strstr(err_message(), "nbytes is 20"));
  CHECK(access(p, F_OK) != 0);
  bad = in;
  bad.data = NULL;
  CHECK(smelt_tensor_save_npy(p, &bad) == SMELT_ERR_INVALID_ARGUMENT);
  bad = in;
  bad.dtype = SMELT_STRING;
  CHECK(smelt_tensor_save_npy(p, &bad) == SMELT_ERR_INVALID_ARGUMENT);
  bad = in;
  bad.rank = 13;
  CHECK(smelt_tensor_save_npy(p, &bad) == SMELT_ERR_INVALID_ARGUMENT);
  bad = in;
  bad.dims[0] = -3;
  CHECK(smelt_tensor_save_npy(p, &bad) == SMELT_ERR_INVALID_ARGUMENT);
  bad = in;
  bad.dtype = SMELT_F8E4M3FN; /* numpy has no such type */
  bad.nbytes = 6;
  CHECK(smelt_tensor_save_npy(p, &bad) == SMELT_ERR_UNSUPPORTED);
  CHECK(access(p, F_OK) != 0);
  /* bfloat16 (numpy has none either) is written as float32, the same values */
  uint16_t bf[6] = {0x3f80, 0xc000, 0x4060, 0x0000, 0xbe80, 0x7149}; /* 1 -2 3.5 0 -0.25 ~1e30 */
  smelt_tensor h = {.dtype = SMELT_BF16, .rank = 2, .dims = {3, 2}, .data = bf, .nbytes = sizeof bf};
  CHECK_OK(smelt_tensor_save_npy(p, &h));
  CHECK_OK(smelt_tensor_load(p, &out));
  CHECK(out.dtype == SMELT_F32 && out.rank == 2 && out.nbytes == 6 * sizeof(float) && out.data &&
        !memcmp(out.data, v, 5 * sizeof(float)));
  smelt_tensor_release(&out);
  remove(p);
  CHECK(smelt_tensor_save_npy(NULL, &in) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(smelt_tensor_load(in_dir(p, "none.npy"), &out) == SMELT_ERR_IO && out.data == NULL);
  CHECK(strstr(smelt_last_error(), "none.npy"));
}

static void test_convert(void) {
  int64_t d[2] = {2, 2};
  tensor t, v;
  smelt_tensor pub;
  CHECK_OK(tensor_alloc(&t, SMELT_U8, 2, d));
  fill(&t);
  void *data = t.data;
  CHECK_OK(tensor_to_public(&t, &pub)); /* moves: same buffer */
  CHECK(pub.data == data && pub.nbytes == 4 && t.data == NULL && pub.name == NULL);
  CHECK_OK(tensor_from_public(&pub, &v)); /* a view */
  CHECK(v.data == data && !v.owns_data && v.nbytes == 4 && v.dims[1] == 2);
  smelt_tensor copy;
  CHECK_OK(tensor_to_public(&v, &copy)); /* a view is copied */
  CHECK(copy.data != data && copy.data && !memcmp(copy.data, data, 4));
  smelt_tensor_release(&copy);
  smelt_tensor_release(&pub);
  tensor seq = {.kind = TENSOR_KIND_SEQUENCE, .dtype = SMELT_F32};
  CHECK(tensor_to_public(&seq, &pub) == SMELT_ERR_UNSUPPORTED);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/smelt_test_tensor_file_XXXXXX");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_read_all();
  test_write_atomic();
  test_tensor_files();
  test_public_api();
  test_convert();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
  return test_report("tensor_file");
}
