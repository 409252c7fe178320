/* smelt.KVAppend (ops/kv_cache.c): new rows [B, H, n, D] written at
 * position T of a time-major cache [T, B, H, D] in place, the output a view
 * of the cache's buffer; a buffer too small for T + n positions, or shapes
 * that disagree, are errors that leave the cache as it was. */
#include "check.h"
#include "op_harness.h"

static smelt_status run_append(tensor *cache, tensor *nw, tensor *out) {
  ir_graph *g = NULL;
  tensor *in[2] = {cache, nw}, *outs[1] = {out};
  TRY(harness_graph(&g, "KVAppend", 1, NULL, 0, in, 2, 1));
  g->nodes[0].op = ops_find("smelt", "KVAppend");
  smelt_status s = g->nodes[0].op ? node_run(g, 0, in, outs, NULL, NULL, NULL)
                                  : err_set(SMELT_ERR_UNSUPPORTED, "no smelt.KVAppend");
  harness_graph_free(g);
  return s;
}

int main(void) {
  enum { B = 2, H = 3, D = 4, CAP = 5 };
  float buf[CAP * B * H * D];
  for (int i = 0; i < CAP * B * H * D; i++) buf[i] = -1.f;
  tensor cache = {.dtype = SMELT_F32, .rank = 4, .dims = {2, B, H, D}, .data = buf, .nbytes = sizeof buf};
  tensor nw;
  float vals[B * H * 2 * D];
  for (int i = 0; i < B * H * 2 * D; i++) vals[i] = (float)i;
  harness_f32(&nw, 4, (int64_t[]){B, H, 2, D}, vals); /* n = 2 new positions */
  tensor out = {0};
  CHECK_OK(run_append(&cache, &nw, &out));
  CHECK(out.rank == 4 && out.dims[0] == 4 && out.dims[1] == B && out.dims[2] == H && out.dims[3] == D);
  CHECK(out.data == buf && !out.owns_data); /* a view: nothing allocated */
  /* new[b, h, i, d] is at cache[2 + i, b, h, d]; the first two positions untouched */
  int bad = 0;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      for (int i = 0; i < 2; i++)
        for (int d = 0; d < D; d++) {
          bad += buf[(((2 + i) * B + b) * H + h) * D + d] != vals[((b * H + h) * 2 + i) * D + d];
          bad += buf[((i * B + b) * H + h) * D + d] != -1.f;
        }
  CHECK(bad == 0);
  tensor_release(&out);
  /* 4 + 2 positions do not fit in 5: an error, the cache unchanged */
  cache.dims[0] = 4;
  float before = buf[4 * B * H * D];
  CHECK(run_append(&cache, &nw, &out) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(smelt_last_error(), "max_length") != NULL);
  CHECK(buf[4 * B * H * D] == before);
  /* heads that disagree */
  cache.dims[0] = 1;
  cache.dims[2] = 2;
  CHECK(run_append(&cache, &nw, &out) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&nw);
  return test_report("test_ops_kv_cache");
}
