/* smelt — the command-line tool: one verb per file (cmd_*.c). */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct {
  const char *name;
  cli_command_fn fn;
  const char *summary;
} commands[] = {
    {"info", cmd_info, "inputs, outputs, opsets, op histogram and parameters of a model"},
    {"run", cmd_run, "run a model once and write its outputs as .npy"},
    {"test", cmd_test, "run ONNX backend-test folders and compare with expected outputs"},
    {"compile", cmd_compile, "compile a model ahead of time (fills the cache); --explain shows how"},
    {"bench", cmd_bench, "measure latency, memory and parity per mode (with a confidence interval)"},
    {"profile", cmd_profile, "per-kernel timings as a Chrome trace and a top-N table"},
    {"generate", cmd_generate, "generate tokens with a decoder-only language model and its KV cache"},
    {"bench-kernels", cmd_bench_kernels, "machine ceilings and each fast kernel's GFLOP/s on fixed shapes"},
    {"tokenize", cmd_tokenize, "encode text to token ids (or decode ids) with a Hugging Face tokenizer.json"},
};

static void usage(FILE *f) {
  fprintf(f, "smelt %s — fast neural-network inference for ONNX models\n\n"
             "usage: smelt <command> [options]   (smelt <command> --help for details)\n\ncommands:\n",
          smelt_version());
  for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
    fprintf(f, "  %-13s %s\n", commands[i].name, commands[i].summary);
  fprintf(f, "  %-13s %s\n  %-13s %s\n", "help", "this message", "version", "print the version");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *verb = argv[1];
  if (!strcmp(verb, "help") || !strcmp(verb, "--help") || !strcmp(verb, "-h")) {
    if (argc > 2)
      for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[2], commands[i].name)) {
          char *args[] = {argv[2], "--help", NULL};
          return commands[i].fn(2, args);
        }
    usage(stdout);
    return 0;
  }
  if (!strcmp(verb, "version") || !strcmp(verb, "--version")) {
    printf("smelt %s\n", smelt_version());
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
    if (!strcmp(verb, commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "smelt: unknown command '%s'\n\n", verb);
  usage(stderr);
  return 2;
}
