/* smelt tokenize --tokenizer FILE (--text TEXT | --file PATH | --decode 1,2,3)
 * [--no-special] [--skip-special]
 * Exit status: 0, 1 when the tokenizer or the input is bad, 2 on a usage error. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tokenizer/tokenizer.h"
#include "util/file.h"

static void usage(FILE *f) {
  fprintf(f, "usage: smelt tokenize --tokenizer FILE (--text TEXT | --file PATH | --decode IDS) [--no-special]\n"
             "                      [--skip-special]\n\n"
             "Encodes text with a Hugging Face tokenizer.json (byte-level BPE as GPT-2 and Llama-3, or\n"
             "BPE with byte fallback as Llama-2) and prints the ids, comma-separated, on one line; or\n"
             "decodes ids and prints the text.\n\n"
             "  --tokenizer FILE  the tokenizer.json\n"
             "  --text TEXT       the text to encode\n"
             "  --file PATH       encode the whole file (UTF-8)\n"
             "  --decode IDS      decode comma-separated ids (1,2,3) instead\n"
             "  --no-special      encode without the special tokens the tokenizer adds (BOS...)\n"
             "  --skip-special    decode without special tokens\n");
}

static int parse_ids(const char *s, int32_t **ids, size_t *n) {
  size_t cap = 16;
  *ids = malloc(cap * sizeof **ids);
  *n = 0;
  if (!*ids) return 1;
  while (*s) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || errno || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
      fprintf(stderr, "smelt: --decode expects comma-separated ids (1,2,3), got '%s'\n", s);
      return 1;
    }
    if (*n == cap) {
      int32_t *p = realloc(*ids, (cap *= 2) * sizeof **ids);
      if (!p) return 1;
      *ids = p;
    }
    (*ids)[(*n)++] = (int32_t)v;
    s = *end ? end + 1 : end;
  }
  return 0;
}

int cmd_tokenize(int argc, char **argv) {
  const char *path = NULL, *text = NULL, *file = NULL, *decode = NULL;
  unsigned flags = 0;
  for (int i = 1; i < argc; i++) {
    const char *v;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else if (cli_flag_arg(argc, argv, &i, "--tokenizer", &v)) {
      if (!(path = v)) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--text", &v)) {
      if (!(text = v)) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--file", &v)) {
      if (!(file = v)) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--decode", &v)) {
      if (!(decode = v)) return 2;
    } else if (!strcmp(argv[i], "--no-special")) {
      flags |= TOKENIZER_NO_SPECIAL;
    } else if (!strcmp(argv[i], "--skip-special")) {
      flags |= TOKENIZER_SKIP_SPECIAL;
    } else {
      fprintf(stderr, "smelt tokenize: unknown argument '%s' (smelt tokenize --help)\n", argv[i]);
      return 2;
    }
  }
  if (!path || (!!text + !!file + !!decode) != 1) {
    fprintf(stderr, "smelt tokenize: needs --tokenizer FILE and one of --text, --file, --decode (smelt tokenize --help)\n");
    return 2;
  }
  tokenizer *t;
  if (tokenizer_load(path, &t)) return cli_fail(NULL);
  int rc = 0;
  if (decode) {
    int32_t *ids;
    size_t n;
    char *out;
    size_t len;
    if (parse_ids(decode, &ids, &n)) rc = 2;
    else if (tokenizer_decode_ex(t, ids, n, flags, &out, &len)) rc = cli_fail(NULL);
    else {
      fwrite(out, 1, len, stdout);
      putchar('\n');
      free(out);
    }
    free(ids);
  } else {
    uint8_t *buf = NULL;
    size_t len = text ? strlen(text) : 0;
    if (file && file_read_all(file, &buf, &len, 0)) rc = cli_fail(NULL);
    int32_t *ids;
    size_t n;
    if (!rc && tokenizer_encode_ex(t, text ? text : (const char *)buf, len, flags, &ids, &n)) rc = cli_fail(NULL);
    else if (!rc) {
      for (size_t i = 0; i < n; i++) printf(i ? ",%d" : "%d", ids[i]);
      putchar('\n');
      free(ids);
    }
    free(buf);
  }
  tokenizer_free(t);
  return rc;
}
