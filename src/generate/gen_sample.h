/* Picking the next token from a row of logits (gen_sample.c): greedy, or
 * sampled with temperature, top-k and top-p from a seeded generator. */
#ifndef SMELT_GENERATE_GEN_SAMPLE_H
#define SMELT_GENERATE_GEN_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

typedef struct gen_sampler {
  float temperature; /* <= 0: greedy (argmax, the first of equal maxima) */
  int top_k;         /* > 0: keep the k most likely tokens */
  float top_p;       /* in (0, 1): keep the fewest tokens whose probability reaches top_p */
  uint64_t state;    /* splitmix64 state */
  /* scratch for sampling: vocab entries, grown as needed */
  struct gen_cand *cand;
  size_t cap;
} gen_sampler;

void gen_sampler_init(gen_sampler *s, float temperature, int top_k, float top_p, uint64_t seed);
void gen_sampler_free(gen_sampler *s);
/* The next token from logits[0..vocab); -1 when the scratch cannot be allocated. */
int64_t gen_sample(gen_sampler *s, const float *logits, int64_t vocab);
/* argmax of logits (the first of equal maxima; NaN never wins). */
int64_t gen_argmax(const float *logits, int64_t vocab);

#endif
