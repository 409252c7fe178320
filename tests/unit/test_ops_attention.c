/* Attention and RotaryEmbedding against naive loops written here. */
#include "nn_test_util.h"

typedef struct att_case {
  bool is3d;
  int64_t B, Hq, Hkv, Sq, Skv, Spast, D, Dv;
  bool causal, bool_mask, float_mask, nonpad;
  int64_t mask_len; /* last dim of the mask (<= total) */
  float softcap, scale;
  int mode, n_out;
} att_case;

static double q_at(const att_case *a, const tensor *q, int64_t b, int64_t h, int64_t i, int64_t d) {
  return a->is3d ? tensor_get_f64(q, (b * a->Sq + i) * a->Hq * a->D + h * a->D + d)
                 : tensor_get_f64(q, ((b * a->Hq + h) * a->Sq + i) * a->D + d);
}
/* key/value t of kv head h: past first, then the new ones */
static double kv_at(const att_case *a, const tensor *past, const tensor *cur, int64_t dd, int64_t b,
                    int64_t h, int64_t t, int64_t d) {
  if (t < a->Spast) return tensor_get_f64(past, ((b * a->Hkv + h) * a->Spast + t) * dd + d);
  t -= a->Spast;
  return a->is3d ? tensor_get_f64(cur, (b * a->Skv + t) * a->Hkv * dd + h * dd + d)
                 : tensor_get_f64(cur, ((b * a->Hkv + h) * a->Skv + t) * dd + d);
}

static void check_attention(smelt_pool *pool, att_case a) {
  int64_t St = a.Spast + a.Skv;
  tensor q = {0}, k = {0}, v = {0}, m = {0}, pk = {0}, pv = {0}, np = {0};
  if (a.is3d) {
    nt_rand(&q, SMELT_F32, 3, (int64_t[]){a.B, a.Sq, a.Hq * a.D});
    nt_rand(&k, SMELT_F32, 3, (int64_t[]){a.B, a.Skv, a.Hkv * a.D});
    nt_rand(&v, SMELT_F32, 3, (int64_t[]){a.B, a.Skv, a.Hkv * a.Dv});
  } else {
    nt_rand(&q, SMELT_F32, 4, (int64_t[]){a.B, a.Hq, a.Sq, a.D});
    nt_rand(&k, SMELT_F32, 4, (int64_t[]){a.B, a.Hkv, a.Skv, a.D});
    nt_rand(&v, SMELT_F32, 4, (int64_t[]){a.B, a.Hkv, a.Skv, a.Dv});
  }
  for (int64_t i = 0; i < tensor_numel(&q); i++) tensor_set_f64(&q, i, 3 * tensor_get_f64(&q, i));
  if (a.Spast) {
    nt_rand(&pk, SMELT_F32, 4, (int64_t[]){a.B, a.Hkv, a.Spast, a.D});
    nt_rand(&pv, SMELT_F32, 4, (int64_t[]){a.B, a.Hkv, a.Spast, a.Dv});
  }
  int64_t ml = a.mask_len ? a.mask_len : St;
  if (a.bool_mask) { /* [Sq, ml]; row 0 fully masked */
    tensor_alloc(&m, SMELT_BOOL, 2, (int64_t[]){a.Sq, ml});
    for (int64_t i = 0; i < a.Sq * ml; i++) ((uint8_t *)m.data)[i] = i >= ml && (i * 7) % 3 != 0;
  } else if (a.float_mask) { /* [B, 1, Sq, ml] */
    nt_rand(&m, SMELT_F32, 4, (int64_t[]){a.B, 1, a.Sq, ml});
    ((float *)m.data)[1] = -INFINITY;
  }
  if (a.nonpad) {
    tensor_alloc(&np, SMELT_I64, 1, &a.B);
    for (int64_t b = 0; b < a.B; b++) ((int64_t *)np.data)[b] = St - b % 2;
  }
  ir_attr at[8];
  int na = 0;
  if (a.is3d) at[na++] = nt_int("q_num_heads", a.Hq), at[na++] = nt_int("kv_num_heads", a.Hkv);
  at[na++] = nt_int("is_causal", a.causal);
  at[na++] = nt_int("qk_matmul_output_mode", a.mode);
  if (a.softcap > 0) at[na++] = nt_float("softcap", a.softcap);
  if (a.scale > 0) at[na++] = nt_float("scale", a.scale);
  tensor y = {0}, prk = {0}, prv = {0}, qk = {0};
  tensor *in[] = {&q, &k, &v, (a.bool_mask || a.float_mask) ? &m : NULL, a.Spast ? &pk : NULL,
                  a.Spast ? &pv : NULL, a.nonpad ? &np : NULL};
  tensor *out[] = {&y, &prk, &prv, &qk};
  CHECK_OK(nt_run_pool(pool, "Attention", 24, at, na, in, 7, out, a.n_out));
  double scale = a.scale > 0 ? a.scale : 1 / sqrt((double)a.D);
  int64_t ny = a.B * a.Hq * a.Sq * a.Dv;
  double *wy = calloc((size_t)ny, sizeof(double)), *wqk = calloc((size_t)(a.B * a.Hq * a.Sq * St), sizeof(double));
  double *s = malloc(sizeof(double) * (size_t)St), *bias = malloc(sizeof(double) * (size_t)St);
  for (int64_t b = 0; b < a.B; b++)
    for (int64_t h = 0; h < a.Hq; h++)
      for (int64_t i = 0; i < a.Sq; i++) {
        int64_t hk = h / (a.Hq / a.Hkv), off = a.nonpad ? ((int64_t *)np.data)[b] - a.Sq : a.Spast;
        double bmax = -INFINITY, mx = -INFINITY, sum = 0;
        double *qrow = wqk + ((b * a.Hq + h) * a.Sq + i) * St;
        for (int64_t t = 0; t < St; t++) {
          double acc = 0;
          for (int64_t d = 0; d < a.D; d++) acc += q_at(&a, &q, b, h, i, d) * kv_at(&a, &pk, &k, a.D, b, hk, t, d);
          acc *= scale;
          if (a.softcap > 0) acc = a.softcap * tanh(acc / a.softcap);
          double bv = 0;
          if (a.bool_mask) bv = t < ml && ((uint8_t *)m.data)[i * ml + t] ? 0 : -INFINITY;
          if (a.float_mask) bv = t < ml ? tensor_get_f64(&m, (b * a.Sq + i) * ml + t) : -INFINITY;
          if (a.causal && t > i + off) bv = -INFINITY;
          if (a.nonpad && t >= ((int64_t *)np.data)[b]) bv = -INFINITY;
          if (a.mode <= 1) qrow[t] = acc;
          s[t] = acc + bv;
          bias[t] = bv;
          if (a.mode == 2) qrow[t] = s[t];
          bmax = fmax(bmax, bv);
          mx = fmax(mx, s[t]);
        }
        for (int64_t t = 0; t < St; t++) sum += exp(s[t] - mx);
        for (int64_t t = 0; t < St; t++) {
          s[t] = bmax == -INFINITY ? 0 : exp(s[t] - mx) / sum;
          if (a.mode == 3) qrow[t] = s[t];
        }
        for (int64_t d = 0; d < a.Dv; d++) {
          double acc = 0;
          for (int64_t t = 0; t < St; t++) acc += s[t] * kv_at(&a, &pv, &v, a.Dv, b, hk, t, d);
          int64_t yi = a.is3d ? (b * a.Sq + i) * a.Hq * a.Dv + h * a.Dv + d : ((b * a.Hq + h) * a.Sq + i) * a.Dv + d;
          wy[yi] = acc;
        }
      }
  CHECK(y.rank == (a.is3d ? 3 : 4));
  CHECK(nt_close(&y, wy, ny, 1e-5, 1e-4, "Attention Y"));
  if (a.n_out > 1) {
    double *wk = malloc(sizeof(double) * (size_t)(a.B * a.Hkv * St * a.D));
    for (int64_t b = 0; b < a.B; b++)
      for (int64_t h = 0; h < a.Hkv; h++)
        for (int64_t t = 0; t < St; t++)
          for (int64_t d = 0; d < a.D; d++)
            wk[((b * a.Hkv + h) * St + t) * a.D + d] = kv_at(&a, &pk, &k, a.D, b, h, t, d);
    CHECK(prk.rank == 4 && prk.dims[2] == St);
    CHECK(nt_close(&prk, wk, a.B * a.Hkv * St * a.D, 0, 0, "present_key"));
    free(wk);
  }
  if (a.n_out > 3) CHECK(nt_close(&qk, wqk, a.B * a.Hq * a.Sq * St, 1e-5, 1e-4, "qk_matmul_output"));
  free(wy);
  free(wqk);
  free(s);
  free(bias);
  tensor *all[] = {&q, &k, &v, &m, &pk, &pv, &np, &y, &prk, &prv, &qk};
  for (int i = 0; i < 11; i++) tensor_release(all[i]);
}

static void test_attention(smelt_pool *pool) {
  check_attention(pool, (att_case){.B = 2, .Hq = 3, .Hkv = 3, .Sq = 5, .Skv = 7, .D = 8, .Dv = 8, .n_out = 1});
  check_attention(pool, (att_case){.B = 2, .Hq = 6, .Hkv = 2, .Sq = 4, .Skv = 9, .D = 5, .Dv = 3, .n_out = 4});
  check_attention(pool, (att_case){.is3d = true, .B = 2, .Hq = 4, .Hkv = 2, .Sq = 3, .Skv = 6, .D = 4, .Dv = 5, .n_out = 3});
  check_attention(pool, (att_case){.B = 1, .Hq = 2, .Hkv = 1, .Sq = 6, .Skv = 6, .D = 4, .Dv = 4, .causal = true, .n_out = 1});
  check_attention(pool, (att_case){.B = 2, .Hq = 2, .Hkv = 2, .Sq = 3, .Skv = 4, .Spast = 5, .D = 4, .Dv = 6, .causal = true, .n_out = 3});
  check_attention(pool, (att_case){.B = 2, .Hq = 2, .Hkv = 2, .Sq = 3, .Skv = 4, .Spast = 2, .D = 4, .Dv = 4, .bool_mask = true, .mask_len = 4, .n_out = 4, .mode = 3});
  check_attention(pool, (att_case){.B = 2, .Hq = 2, .Hkv = 1, .Sq = 3, .Skv = 5, .D = 4, .Dv = 4, .float_mask = true, .n_out = 4, .mode = 2});
  check_attention(pool, (att_case){.B = 2, .Hq = 2, .Hkv = 2, .Sq = 3, .Skv = 5, .D = 4, .Dv = 4, .float_mask = true, .causal = true, .softcap = 2.f, .n_out = 4, .mode = 1});
  check_attention(pool, (att_case){.B = 3, .Hq = 4, .Hkv = 2, .Sq = 2, .Skv = 7, .D = 4, .Dv = 4, .causal = true, .nonpad = true, .scale = 0.3f, .n_out = 4});
  check_attention(pool, (att_case){.is3d = true, .B = 1, .Hq = 3, .Hkv = 3, .Sq = 1, .Skv = 1, .Spast = 9, .D = 16, .Dv = 16, .causal = true, .n_out = 3});
}

static void test_attention_errors(void) {
  tensor q = {0}, k = {0}, v = {0}, y = {0};
  nt_rand(&q, SMELT_F32, 4, (int64_t[]){1, 3, 2, 4});
  nt_rand(&k, SMELT_F32, 4, (int64_t[]){1, 2, 5, 4});
  nt_rand(&v, SMELT_F32, 4, (int64_t[]){1, 2, 5, 4});
  tensor *in[] = {&q, &k, &v}, *out[] = {&y};
  CHECK(nt_run("Attention", 23, NULL, 0, in, 3, out, 1) != SMELT_OK);
  CHECK(nt_err_has("not a multiple of 2 kv heads"));
  tensor_release(&y);
  tensor_release(&k);
  nt_rand(&k, SMELT_F32, 4, (int64_t[]){1, 3, 5, 6});
  tensor_release(&v);
  nt_rand(&v, SMELT_F32, 4, (int64_t[]){1, 3, 5, 4});
  CHECK(nt_run("Attention", 23, NULL, 0, in, 3, out, 1) != SMELT_OK);
  CHECK(nt_err_has("K's head size does not match Q's"));
  tensor_release(&y);
  tensor_release(&q);
  tensor_release(&k);
  tensor_release(&v);
}

/* ---- RotaryEmbedding ---- */

static void check_rope(bool is3d, bool interleaved, bool with_pos, int64_t rd) {
  int64_t B = 2, H = 3, S = 4, D = 8, P = 10, half = (rd ? rd : D) / 2;
  tensor x = {0}, cs = {0}, sn = {0}, pos = {0}, y = {0};
  nt_rand(&x, SMELT_F32, is3d ? 3 : 4, is3d ? (int64_t[]){B, S, H * D} : (int64_t[]){B, H, S, D});
  if (with_pos) {
    nt_rand(&cs, SMELT_F32, 2, (int64_t[]){P, half});
    nt_rand(&sn, SMELT_F32, 2, (int64_t[]){P, half});
    tensor_alloc(&pos, SMELT_I64, 2, (int64_t[]){B, S});
    for (int64_t i = 0; i < B * S; i++) ((int64_t *)pos.data)[i] = (i * 3) % P;
  } else {
    nt_rand(&cs, SMELT_F32, 3, (int64_t[]){B, S, half});
    nt_rand(&sn, SMELT_F32, 3, (int64_t[]){B, S, half});
  }
  ir_attr at[] = {nt_int("interleaved", interleaved), nt_int("rotary_embedding_dim", rd),
                  nt_int("num_heads", H)};
  tensor *in[] = {&x, &cs, &sn, with_pos ? &pos : NULL}, *out[] = {&y};
  CHECK_OK(nt_run("RotaryEmbedding", 23, at, is3d ? 3 : 2, in, 4, out, 1));
  double want[2 * 3 * 4 * 8];
  for (int64_t b = 0; b < B; b++)
    for (int64_t s = 0; s < S; s++)
      for (int64_t h = 0; h < H; h++) {
        int64_t base = is3d ? ((b * S + s) * H + h) * D : ((b * H + h) * S + s) * D;
        int64_t row = with_pos ? ((int64_t *)pos.data)[b * S + s] : b * S + s;
        for (int64_t d = 0; d < D; d++) want[base + d] = tensor_get_f64(&x, base + d);
        for (int64_t kk = 0; kk < half; kk++) {
          int64_t i1 = interleaved ? 2 * kk : kk, i2 = interleaved ? 2 * kk + 1 : kk + half;
          double c = tensor_get_f64(&cs, row * half + kk), sv = tensor_get_f64(&sn, row * half + kk);
          double x1 = tensor_get_f64(&x, base + i1), x2 = tensor_get_f64(&x, base + i2);
          want[base + i1] = c * x1 - sv * x2;
          want[base + i2] = sv * x1 + c * x2;
        }
      }
  CHECK(nt_close(&y, want, B * H * S * D, 1e-6, 1e-5, "RotaryEmbedding"));
  tensor *all[] = {&x, &cs, &sn, &pos, &y};
  for (int i = 0; i < 5; i++) tensor_release(all[i]);
}

int main(void) {
  smelt_pool *pool = NULL;
  CHECK_OK(pool_create(3, &pool));
  test_attention(NULL);
  test_attention(pool);
  test_attention_errors();
  for (int i = 0; i < 16; i++) check_rope(i & 1, i & 2, i & 4, i & 8 ? 4 : 0);
  pool_free(pool);
  return test_report("test_ops_attention");
}
