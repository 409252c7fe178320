/* Greedy and sampled decoding over one row of logits.  Sampling keeps the
 * candidates (top-k, then top-p of the softmax at the temperature) in
 * descending order and draws with splitmix64: the same seed gives the same
 * tokens on every machine. */
#include "generate/gen_sample.h"

#include <math.h>
#include <stdlib.h>

typedef struct gen_cand {
  float logit;
  int64_t id;
} gen_cand;

void gen_sampler_init(gen_sampler *s, float temperature, int top_k, float top_p, uint64_t seed) {
  s->temperature = temperature;
  s->top_k = top_k;
  s->top_p = top_p;
  s->state = seed;
  s->cand = NULL;
  s->cap = 0;
}

void gen_sampler_free(gen_sampler *s) {
  free(s->cand);
  s->cand = NULL;
  s->cap = 0;
}

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int64_t gen_argmax(const float *logits, int64_t vocab) {
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; i++)
    if (logits[i] > logits[best] || (isnan(logits[best]) && !isnan(logits[i]))) best = i;
  return best;
}

static int by_logit_desc(const void *a, const void *b) {
  const gen_cand *x = a, *y = b;
  if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

int64_t gen_sample(gen_sampler *s, const float *logits, int64_t vocab) {
  if (s->temperature <= 0 || vocab <= 1) return gen_argmax(logits, vocab);
  if ((size_t)vocab > s->cap) {
    gen_cand *c = realloc(s->cand, (size_t)vocab * sizeof *c);
    if (!c) return -1;
    s->cand = c;
    s->cap = (size_t)vocab;
  }
  gen_cand *c = s->cand;
  int64_t n = 0;
  for (int64_t i = 0; i < vocab; i++)
    if (!isnan(logits[i])) c[n++] = (gen_cand){logits[i] / s->temperature, i};
  if (n == 0) return 0;
  qsort(c, (size_t)n, sizeof *c, by_logit_desc);
  if (s->top_k > 0 && s->top_k < n) n = s->top_k;
  /* softmax over the kept candidates, in double; then the top-p prefix */
  double max = c[0].logit, sum = 0;
  for (int64_t i = 0; i < n; i++) sum += exp((double)c[i].logit - max);
  if (s->top_p > 0 && s->top_p < 1) {
    double acc = 0, kept = 0;
    int64_t m = 0;
    while (m < n) {
      double p = exp((double)c[m].logit - max) / sum;
      acc += p;
      kept += exp((double)c[m].logit - max);
      m++;
      if (acc >= s->top_p) break;
    }
    n = m;
    sum = kept;
  }
  double u = (double)(splitmix64(&s->state) >> 11) * 0x1.0p-53 * sum, acc = 0;
  for (int64_t i = 0; i < n; i++) {
    acc += exp((double)c[i].logit - max);
    if (u < acc) return c[i].id;
  }
  return c[n - 1].id;
}
