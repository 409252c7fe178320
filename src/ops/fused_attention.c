/* smelt.Attention: scaled dot-product attention, made by fuse_attention from
 * MatMul(Q, K^T) -> scale -> (+ mask) -> Softmax(-1) -> MatMul(., V).
 *
 * Inputs: Q, K, V, mask (optional); float32 (mask: float32, added to the
 * scores, or bool, where false replaces the score by mask_fill).
 * Q, K, V have one rank r (3 or 4).  Attribute X_perm (ints, length r,
 * default identity) says how input X is viewed in the canonical order
 * [batch..., S, D]: canonical axis i is X's axis X_perm[i] (the view is
 * Transpose(X, X_perm)), so a Q laid out [B, S, H, D] is given with
 * q_perm = [0, 2, 1, 3] and never copied.  Batch dims broadcast (equal or 1).
 *   scores = scale * Q K^T [batch..., Sq, Sk] (+ mask, broadcast to that)
 *   O = softmax(scores, last axis) V          [batch..., Sq, Dv]
 *   Y = Transpose(O, out_perm)
 * Attributes: scale (default 1/sqrt(D)), causal (0/1: key j visible to query
 * i iff j <= i + Sk - Sq), mask_fill (bool masks; default -inf), q_perm,
 * k_perm, v_perm, out_perm, zero_empty_rows (0/1: a row whose every key is
 * masked gives zeros instead of NaN), kv_group (0/1: K and V have H / g
 * heads, each shared by g consecutive query heads -- what repeat_kv's
 * Reshape(Expand(Unsqueeze(KV, 2))) made; inputs 4..7 are then the K and V
 * repeats' Expand and Reshape shapes, checked at run time to be exactly that).
 * X_view (ints [offset, d_0..d_{r-1}, s_0..s_{r-1}]) with X_view_src (ints,
 * X's dims): X is read as the strided view of its memory with those dims
 * and strides (elements) from that offset -- what the layout ops between a
 * packed projection and the attention made (passes/view_chain.h) -- and
 * X_perm then applies to the view; X must have exactly X_view_src's dims.
 * Kernel: kernels/attention.h. */
#include <math.h>
#include <string.h>

#include "kernels/attention.h"
#include "ops/nn_util.h"
#include "util/err.h"

typedef struct attn_view {
  int rank;
  bool has_view[3];                         /* Q, K, V read through X_view */
  int vrank[3];
  int64_t vdims[3][4], vstr[3][4], voff[3]; /* ... its dims, strides and offset */
  int64_t q[4], k[4], v[4]; /* canonical dims */
  int64_t batch[2];         /* broadcast batch dims (r - 2 of them) */
  int64_t out[4];           /* canonical output dims */
} attn_view;

static smelt_status read_perm(op_ctx *c, const char *name, int r, int64_t *perm) {
  int n;
  const int64_t *p = ir_attr_ints(c->node, name, &n);
  for (int i = 0; i < r; i++) perm[i] = i;
  if (!p) return SMELT_OK;
  if (n != r) return err_set(SMELT_ERR_INVALID_MODEL, "%s has %d entries for rank %d", name, n, r);
  bool seen[4] = {false};
  for (int i = 0; i < r; i++) {
    if (p[i] < 0 || p[i] >= r || seen[p[i]])
      return err_set(SMELT_ERR_INVALID_MODEL, "%s is not a permutation of 0..%d", name, r - 1);
    seen[p[i]] = true;
    perm[i] = p[i];
  }
  return SMELT_OK;
}

static smelt_status merge_dim(int64_t a, int64_t b, const char *what, int64_t *out) {
  if (a == b || b == 1) *out = a;
  else if (a == 1) *out = b;
  else if (!dim_known(a) || !dim_known(b)) *out = dim_known(a) ? a : b;
  else return err_set(SMELT_ERR_INVALID_ARGUMENT, "%s: %lld and %lld do not broadcast", what, (long long)a, (long long)b);
  return SMELT_OK;
}

/* Input i's X_view, if it has one: checked against the input's dims (when
 * known) and its memory; av->has_view[i] says whether it had one. */
static smelt_status read_view(op_ctx *c, int i, attn_view *av) {
  static const char *const names[3][2] = {{"q_view", "q_view_src"}, {"k_view", "k_view_src"},
                                          {"v_view", "v_view_src"}};
  int n, ns;
  const int64_t *a = ir_attr_ints(c->node, names[i][0], &n);
  av->has_view[i] = a != NULL;
  if (!a) return SMELT_OK;
  const int64_t *src = ir_attr_ints(c->node, names[i][1], &ns);
  if ((n != 7 && n != 9) || !src || ns < 0 || ns > SMELT_MAX_RANK)
    return err_set(SMELT_ERR_INVALID_MODEL, "%s has %d entries (7 or 9 expected) or %s is missing", names[i][0], n,
                   names[i][1]);
  int r = (n - 1) / 2;
  int64_t numel = 1, last = a[0];
  for (int d = 0; d < ns; d++) {
    if (src[d] <= 0) return err_set(SMELT_ERR_INVALID_MODEL, "%s has a dim %lld", names[i][1], (long long)src[d]);
    numel *= src[d];
  }
  for (int d = 0; d < r; d++) {
    if (a[1 + d] <= 0 || a[1 + r + d] < 0)
      return err_set(SMELT_ERR_INVALID_MODEL, "%s: dim %d is %lld with stride %lld", names[i][0], d,
                     (long long)a[1 + d], (long long)a[1 + r + d]);
    last += (a[1 + d] - 1) * a[1 + r + d];
    av->vdims[i][d] = a[1 + d];
    av->vstr[i][d] = a[1 + r + d];
  }
  av->vrank[i] = r;
  if (a[0] < 0 || last >= numel)
    return err_set(SMELT_ERR_INVALID_MODEL, "%s reaches element %lld of %s's %lld", names[i][0], (long long)last,
                   names[i][1], (long long)numel);
  av->voff[i] = a[0];
  const tensor *t = c->in[i];
  if (t->rank >= 0) {
    bool same = t->rank == ns;
    for (int d = 0; same && d < ns; d++) same = !dim_known(t->dims[d]) || t->dims[d] == src[d];
    if (!same) return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %d does not have the dims of %s", i, names[i][1]);
  }
  return SMELT_OK;
}

static smelt_status attn_view_plan(op_ctx *c, attn_view *av) {
  static const smelt_dtype f32_only[] = {SMELT_F32, SMELT_UNDEFINED};
  static const char *const perm_names[3] = {"q_perm", "k_perm", "v_perm"};
  int r = -1, rk[3];
  for (int i = 0; i < 3; i++) {
    if (!(c->static_infer && c->in[i]->dtype == SMELT_UNDEFINED)) TRY(op_check_dtype(c, i, f32_only));
    TRY(read_view(c, i, av));
    rk[i] = av->has_view[i] ? av->vrank[i] : c->in[i]->rank;
    if (r < 0) r = rk[i];
  }
  for (int i = 0; i < 3; i++)
    if (rk[i] >= 0 && r >= 0 && rk[i] != r)
      return err_set(SMELT_ERR_INVALID_MODEL, "input %d has rank %d, input 0 rank %d", i, rk[i], r);
  if (r >= 0 && r != 3 && r != 4) return err_set(SMELT_ERR_INVALID_MODEL, "Q has rank %d, expected 3 or 4", r);
  av->rank = r;
  for (int i = 0; i < 3 && r >= 0; i++) {
    int64_t perm[4], *dst = i == 0 ? av->q : i == 1 ? av->k : av->v;
    TRY(read_perm(c, perm_names[i], r, perm));
    if (!av->has_view[i] && c->in[i]->rank < 0) return SMELT_OK;
    for (int d = 0; d < r; d++) dst[d] = av->has_view[i] ? av->vdims[i][perm[d]] : c->in[i]->dims[perm[d]];
  }
  if (r < 0) return SMELT_OK;
  int nb = r - 2;
  bool grouped = r == 4 && op_attr_int(c, "kv_group", 0) != 0;
  for (int d = 0; d < nb; d++) {
    int64_t m = 1;
    if (grouped && d == 1) { /* heads: K and V share theirs */
      if (dim_known(av->k[1]) && dim_known(av->v[1]) && av->k[1] != av->v[1])
        return err_set(SMELT_ERR_INVALID_ARGUMENT, "K has %lld heads, V %lld", (long long)av->k[1], (long long)av->v[1]);
      if (dim_known(av->q[1]) && dim_known(av->k[1]) && (av->k[1] == 0 || av->q[1] % av->k[1]))
        return err_set(SMELT_ERR_INVALID_ARGUMENT, "%lld query heads do not share %lld KV heads evenly",
                       (long long)av->q[1], (long long)av->k[1]);
      av->batch[1] = av->q[1];
      continue;
    }
    TRY(merge_dim(av->q[d], av->k[d], "batch dims of Q and K", &m));
    TRY(merge_dim(m, av->v[d], "batch dims of Q and V", &av->batch[d]));
  }
  int64_t D = av->q[r - 1], Dk = av->k[r - 1], Sk = av->k[r - 2], Sv = av->v[r - 2];
  if (dim_known(D) && dim_known(Dk) && D != Dk)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "Q's head size %lld differs from K's %lld", (long long)D, (long long)Dk);
  if (dim_known(Sk) && dim_known(Sv) && Sk != Sv)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "K has %lld keys, V %lld", (long long)Sk, (long long)Sv);
  memcpy(av->out, av->batch, sizeof(int64_t) * (size_t)nb);
  av->out[r - 2] = av->q[r - 2];
  av->out[r - 1] = av->v[r - 1];
  return SMELT_OK;
}

static smelt_status check_mask(op_ctx *c, const attn_view *av) {
  const tensor *m = op_in(c, 3);
  if (!m) return SMELT_OK;
  if (m->dtype != SMELT_F32 && m->dtype != SMELT_BOOL && m->dtype != SMELT_UNDEFINED)
    return err_set(SMELT_ERR_UNSUPPORTED, "the mask has type %s; float32 or bool expected", dtype_name(m->dtype));
  if (m->rank < 0 || av->rank < 0) return SMELT_OK;
  if (m->rank > av->rank) return err_set(SMELT_ERR_INVALID_ARGUMENT, "the mask has rank %d above %d", m->rank, av->rank);
  int64_t full[4];
  memcpy(full, av->out, sizeof full);
  full[av->rank - 1] = av->k[av->rank - 2];
  for (int d = 0; d < m->rank; d++) {
    int64_t md = m->dims[d], fd = full[av->rank - m->rank + d];
    if (dim_known(md) && dim_known(fd) && md != 1 && md != fd)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "mask dim %d is %lld, scores have %lld there", d,
                     (long long)md, (long long)fd);
  }
  return SMELT_OK;
}

static smelt_status attn_infer(op_ctx *c) {
  attn_view av;
  TRY(attn_view_plan(c, &av));
  TRY(check_mask(c, &av));
  if (av.rank < 0 || (!av.has_view[1] && c->in[1]->rank < 0) || (!av.has_view[2] && c->in[2]->rank < 0)) {
    nn_out_unknown(c, 0, SMELT_F32);
    return SMELT_OK;
  }
  int64_t perm[4], dims[4];
  TRY(read_perm(c, "out_perm", av.rank, perm));
  for (int i = 0; i < av.rank; i++) dims[i] = av.out[perm[i]];
  op_set_out(c, 0, SMELT_F32, av.rank, dims);
  return SMELT_OK;
}

/* Strides of input i -- contiguous, or its X_view -- viewed through perm,
 * spread onto the kernel's 4 axes [B, H, S, D] (rank 3 has no H), with
 * broadcast dims 0. */
static void canon_strides(const tensor *t, const attn_view *av, int in, const int64_t *perm, int r,
                          const int64_t *full, int64_t *out) {
  int64_t st[SMELT_MAX_RANK], dims[SMELT_MAX_RANK], acc = 1;
  if (av->has_view[in]) {
    memcpy(st, av->vstr[in], sizeof(int64_t) * (size_t)r);
    memcpy(dims, av->vdims[in], sizeof(int64_t) * (size_t)r);
  } else {
    for (int d = t->rank - 1; d >= 0; d--) {
      st[d] = acc;
      dims[d] = t->dims[d];
      acc *= t->dims[d];
    }
  }
  int64_t cs[4], cd[4];
  for (int i = 0; i < r; i++) {
    cs[i] = st[perm[i]];
    cd[i] = dims[perm[i]];
    if (cd[i] == 1 && full[i] != 1) cs[i] = 0;
  }
  if (r == 4) memcpy(out, cs, sizeof cs);
  else out[0] = cs[0], out[1] = 0, out[2] = cs[1], out[3] = cs[2];
}

/* The mask's strides on [B, H, Sq, Sk]: dims aligned right, 1s broadcast. */
static void mask_strides(const tensor *m, int r, int64_t *out) {
  int64_t st[4] = {0, 0, 0, 0}, acc = 1;
  for (int d = m->rank - 1; d >= 0; d--) {
    int ax = r - m->rank + d; /* axis in the rank-r score view */
    st[ax] = m->dims[d] == 1 ? 0 : acc;
    acc *= m->dims[d];
  }
  if (r == 4) memcpy(out, st, sizeof st);
  else out[0] = st[0], out[1] = 0, out[2] = st[1], out[3] = st[2];
}

/* Input `ei` is the Expand shape and `ei + 1` the Reshape shape of a repeat
 * of X (canonical dims x [B, Hkv, S, D]) to g = Hq / Hkv heads each:
 * Expand(Unsqueeze(X, 2), e) must be [B, Hkv, g, S, D] and the Reshape
 * (allowzero 0) must make it [B, Hkv * g, S, D]. */
static smelt_status check_repeat(op_ctx *c, int ei, const int64_t *x, int64_t hq, const char *what) {
  const tensor *e = op_in(c, ei), *sh = op_in(c, ei + 1);
  if (!e || !sh || e->dtype != SMELT_I64 || sh->dtype != SMELT_I64 || tensor_numel(e) != 5 || tensor_numel(sh) != 4)
    return err_set(SMELT_ERR_INVALID_MODEL, "%s's repeat: the Expand (5 dims) and Reshape (4 dims) shapes, int64, "
                   "are missing or have other sizes", what);
  int64_t g = x[1] ? hq / x[1] : 0, want5[5] = {x[0], x[1], g, x[2], x[3]}, in5[5] = {x[0], x[1], 1, x[2], x[3]};
  const int64_t *ev = e->data, *sv = sh->data;
  for (int i = 0; i < 5; i++) /* broadcasting [B, Hkv, 1, S, D] with e gives want5 */
    if (!((ev[i] == want5[i] || ev[i] == 1) && (in5[i] == want5[i] || (in5[i] == 1 && ev[i] == want5[i]))))
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "%s's repeat: Expand to dim %d = %lld does not repeat %lld KV "
                     "heads for %lld query heads", what, i, (long long)ev[i], (long long)x[1], (long long)hq);
  int64_t out[4] = {x[0], hq, x[2], x[3]}, known = 1, total = x[0] * hq * x[2] * x[3];
  int minus = -1;
  for (int i = 0; i < 4; i++) {
    int64_t d = sv[i] == 0 ? want5[i] : sv[i];
    if (sv[i] == -1) minus = i;
    else known *= d;
    if (sv[i] != -1 && d != out[i])
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "%s's repeat: Reshape dim %d is %lld, not %lld", what, i,
                     (long long)d, (long long)out[i]);
  }
  if (minus >= 0 && (known == 0 || total / known != out[minus]))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "%s's repeat: the Reshape's -1 does not make [B, %lld, S, D]", what,
                   (long long)hq);
  return SMELT_OK;
}

static smelt_status attn_run(op_ctx *c) {
  attn_view av;
  TRY(attn_view_plan(c, &av));
  TRY(check_mask(c, &av));
  int r = av.rank;
  const tensor *m = op_in(c, 3);
  tensor *y = c->out[0];
  int64_t perms[4][4];
  static const char *const names[4] = {"q_perm", "k_perm", "v_perm", "out_perm"};
  for (int i = 0; i < 4; i++) TRY(read_perm(c, names[i], r, perms[i]));
  attn_params p = {0};
  p.B = av.out[0];
  p.H = r == 4 ? av.out[1] : 1;
  p.Sq = av.q[r - 2];
  p.Sk = av.k[r - 2];
  p.D = av.q[r - 1];
  p.Dv = av.v[r - 1];
  int64_t fq[4], fk[4];
  memcpy(fq, av.out, sizeof fq);
  fq[r - 1] = p.D;
  memcpy(fk, av.out, sizeof fk);
  fk[r - 2] = p.Sk;
  fk[r - 1] = p.D;
  canon_strides(c->in[0], &av, 0, perms[0], r, fq, p.q_str);
  canon_strides(c->in[1], &av, 1, perms[1], r, fk, p.k_str);
  fk[r - 1] = p.Dv;
  canon_strides(c->in[2], &av, 2, perms[2], r, fk, p.v_str);
  /* Y = Transpose(O, out_perm): O's axis out_perm[i] walks Y's axis i */
  int64_t ys[4], acc = 1, os[4];
  for (int d = r - 1; d >= 0; d--) {
    ys[d] = acc;
    acc *= y->dims[d];
  }
  for (int i = 0; i < r; i++) os[perms[3][i]] = ys[i];
  if (r == 4) memcpy(p.o_str, os, sizeof os);
  else p.o_str[0] = os[0], p.o_str[1] = 0, p.o_str[2] = os[1], p.o_str[3] = os[2];
  p.q = (const float *)c->in[0]->data + (av.has_view[0] ? av.voff[0] : 0);
  p.k = (const float *)c->in[1]->data + (av.has_view[1] ? av.voff[1] : 0);
  p.v = (const float *)c->in[2]->data + (av.has_view[2] ? av.voff[2] : 0);
  p.o = y->data;
  p.scale = op_attr_float(c, "scale", p.D > 0 ? 1.f / sqrtf((float)p.D) : 1.f);
  p.causal = op_attr_int(c, "causal", 0) != 0;
  p.zero_empty_rows = op_attr_int(c, "zero_empty_rows", 0) != 0;
  if (r == 4 && op_attr_int(c, "kv_group", 0) != 0) {
    TRY(check_repeat(c, 4, av.k, av.q[1], "K"));
    TRY(check_repeat(c, 6, av.v, av.q[1], "V"));
    p.kv_group = av.k[1] > 0 ? av.q[1] / av.k[1] : 1;
  }
  if (m) {
    p.mask_kind = m->dtype == SMELT_BOOL ? ATTN_MASK_BOOL : ATTN_MASK_ADD;
    p.mask = m->data;
    mask_strides(m, r, p.mask_str);
    p.mask_fill = op_attr_float(c, "mask_fill", -INFINITY);
  }
  /* autocast's bf16 mark: the products in bf16 where the CPU has AVX512_BF16 */
  p.bf16 = c->node && !strcmp(ir_attr_string(c->node, "precision", "fp32"), "bf16");
  return attention_f32(c->pool, &p);
}

const op_def op_family_fused_attention[] = {
    {"Attention", "smelt", 3, 8, 1, 1, attn_infer, attn_run, false},
    {0}};
